//! A small reader for classic pcap files of Ethernet/IPv4/IPv6/TCP traffic, with per-direction
//! TCP reassembly. Test support only: the captures stay the source of truth.

use std::collections::{BTreeMap, HashMap};

/// One direction of one TCP connection, reassembled.
#[derive(Debug, Default)]
pub struct Flow {
    pub src_port: u16,
    pub dst_port: u16,
    /// Payload bytes in sequence order, retransmissions removed.
    pub bytes: Vec<u8>,
    /// For each payload segment kept: (offset in `bytes`, capture time in µs).
    pub segment_times: Vec<(usize, u64)>,
}

impl Flow {
    /// Capture time of the segment that carried byte `offset`.
    pub fn time_of(&self, offset: usize) -> u64 {
        let i = self.segment_times.partition_point(|(o, _)| *o <= offset);
        self.segment_times[i.saturating_sub(1)].1
    }
}

/// Payload segments of one direction: sequence number -> (payload, capture time in µs).
type Segments = BTreeMap<u32, (Vec<u8>, u64)>;

/// Reads every TCP flow of a pcap file, keyed by (source port, destination port).
pub fn read_flows(data: &[u8]) -> HashMap<(u16, u16), Flow> {
    assert!(data.len() >= 24, "pcap global header");
    let magic = u32::from_le_bytes(data[0..4].try_into().unwrap());
    let le = match magic {
        0xa1b2c3d4 | 0xa1b23c4d => true,
        0xd4c3b2a1 | 0x4d3cb2a1 => false,
        other => panic!("not a classic pcap file: magic {other:#x}"),
    };
    let nanos = matches!(magic, 0xa1b23c4d | 0x4d3cb2a1);
    let rd32 = |b: &[u8]| {
        let a: [u8; 4] = b.try_into().unwrap();
        if le { u32::from_le_bytes(a) } else { u32::from_be_bytes(a) }
    };
    let linktype = rd32(&data[20..24]);
    assert_eq!(linktype, 1, "Ethernet link type expected");
    let mut segments: HashMap<(u16, u16), Segments> = HashMap::new();
    let mut pos = 24;
    while pos + 16 <= data.len() {
        let ts_sec = rd32(&data[pos..pos + 4]) as u64;
        let ts_frac = rd32(&data[pos + 4..pos + 8]) as u64;
        let incl = rd32(&data[pos + 8..pos + 12]) as usize;
        let pkt = &data[pos + 16..pos + 16 + incl];
        pos += 16 + incl;
        let time_us = ts_sec * 1_000_000 + if nanos { ts_frac / 1000 } else { ts_frac };
        let ethertype = u16::from_be_bytes([pkt[12], pkt[13]]);
        let (tcp, tcp_len) = match ethertype {
            0x0800 => {
                let ip = &pkt[14..];
                let ihl = (ip[0] & 0x0f) as usize * 4;
                if ip[9] != 6 {
                    continue;
                }
                let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
                (&ip[ihl..total], total - ihl)
            }
            0x86dd => {
                let ip = &pkt[14..];
                if ip[6] != 6 {
                    continue;
                }
                let payload = u16::from_be_bytes([ip[4], ip[5]]) as usize;
                (&ip[40..40 + payload], payload)
            }
            _ => continue,
        };
        let src_port = u16::from_be_bytes([tcp[0], tcp[1]]);
        let dst_port = u16::from_be_bytes([tcp[2], tcp[3]]);
        let seq = u32::from_be_bytes(tcp[4..8].try_into().unwrap());
        let data_off = (tcp[12] >> 4) as usize * 4;
        let payload = &tcp[data_off..tcp_len];
        if payload.is_empty() {
            continue;
        }
        segments
            .entry((src_port, dst_port))
            .or_default()
            .entry(seq)
            .or_insert_with(|| (payload.to_vec(), time_us));
    }
    let mut flows = HashMap::new();
    for ((src_port, dst_port), segs) in segments {
        let mut flow = Flow {
            src_port,
            dst_port,
            ..Flow::default()
        };
        let mut next_seq: Option<u32> = None;
        for (seq, (payload, t)) in segs {
            let skip = match next_seq {
                None => 0,
                Some(n) => n.wrapping_sub(seq) as usize,
            };
            if next_seq.is_some() && seq.wrapping_sub(next_seq.unwrap()) as i32 > 0 {
                panic!("gap in TCP stream {src_port}->{dst_port} at seq {seq}");
            }
            if skip >= payload.len() {
                continue; // a retransmission of bytes already held
            }
            flow.segment_times.push((flow.bytes.len(), t));
            flow.bytes.extend_from_slice(&payload[skip..]);
            let payload_len = u32::try_from(payload.len()).expect("a captured TCP segment is far shorter than 4 GiB");
            next_seq = Some(seq.wrapping_add(payload_len));
        }
        flows.insert((src_port, dst_port), flow);
    }
    flows
}
