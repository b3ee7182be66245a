//! The HA port's parsers: the classic frame header and report, controller mode's messages and
//! epoch list, and Petrel's handshake. Any bytes decode or fail with an error, never a panic;
//! what decodes re-encodes to bytes that decode to the same value (flags other than 0 and 1
//! read as false, as RocketMQ's `getShort() == 1` reads them, so the bytes may differ); and no
//! bytes pass the handshake without the secret.
#![no_main]

use std::io::{Read, Write};

use libfuzzer_sys::fuzz_target;
use petrel_auth::PeerSecret;
use petrel_replication::handshake;
use petrel_replication::wire::autoswitch::{MasterHeader, SlaveMessage, decode_epochs};
use petrel_replication::wire::{FrameHeader, decode_report};

/// A peer that sends the fuzzer's bytes and swallows what it is sent.
struct Peer<'a>(&'a [u8]);

impl Read for Peer<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Peer<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(h)) = FrameHeader::decode(data, 1 << 20) {
        assert_eq!(&h.encode()[..], &data[..12]);
    }
    if let Some(report) = data.first_chunk::<8>() {
        let _ = decode_report(*report);
    }
    let mut rest = data;
    while let Ok(Some((m, used))) = SlaveMessage::decode(rest) {
        assert!(used > 0 && used <= rest.len());
        let again = m.encode();
        assert_eq!(SlaveMessage::decode(&again).ok(), Some(Some((m, again.len()))), "a slave message round-trips");
        rest = &rest[used..];
    }
    if let Ok(Some((h, used))) = MasterHeader::decode(data, 1 << 20) {
        assert!(used <= data.len());
        let again = h.encode();
        assert_eq!(MasterHeader::decode(&again, 1 << 20).ok(), Some(Some((h, again.len()))), "a master header round-trips");
    }
    let _ = decode_epochs(data);
    let secret = PeerSecret::new("the fuzzer never holds this").expect("secret");
    if let Some(first) = data.first_chunk::<8>() {
        let accepted = handshake::accept(&mut Peer(&data[8..]), &secret, first, b"");
        assert!(accepted.is_err(), "bytes without the secret passed the master's handshake");
    }
    assert!(handshake::connect(&mut Peer(data), &secret, b"").is_err(), "bytes without the secret passed the slave's handshake");
});
