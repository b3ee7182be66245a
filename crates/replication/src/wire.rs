//! RocketMQ's classic HA wire format (`DefaultHAConnection` / `DefaultHAClient`): a raw TCP
//! stream, no handshake. The slave sends only its commit log's max offset, an 8-byte
//! big-endian long, on connect, after every batch it applied and as a heartbeat. The master
//! sends frames of `[offset: i64][size: i32][size bytes of its commit log]`; a frame with size
//! 0 is its heartbeat.
//!
//! Owns: the byte layout. Must never: accept a negative offset or size, or a frame larger than
//! the reader's bound.

/// Bytes of a master frame's header.
pub const FRAME_HEADER_BYTES: usize = 12;
/// Bytes of a slave's report.
pub const REPORT_BYTES: usize = 8;

/// A master frame's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Commit-log offset of the first byte that follows.
    pub offset: u64,
    /// Bytes that follow; 0 for a heartbeat.
    pub size: u32,
}

impl FrameHeader {
    #[must_use]
    pub fn encode(self) -> [u8; FRAME_HEADER_BYTES] {
        let mut out = [0; FRAME_HEADER_BYTES];
        out[0..8].copy_from_slice(&(self.offset as i64).to_be_bytes());
        out[8..12].copy_from_slice(&(self.size as i32).to_be_bytes());
        out
    }

    /// The header at the start of `buf`, if it is long enough and sane: `Err` names what is
    /// wrong (a negative field, or a size above `max_size`).
    ///
    /// # Errors
    /// A negative offset or size, or a size above `max_size`.
    pub fn decode(buf: &[u8], max_size: u32) -> Result<Option<FrameHeader>, String> {
        let Some(head) = buf.get(..FRAME_HEADER_BYTES) else {
            return Ok(None);
        };
        let offset = i64::from_be_bytes(head[0..8].try_into().expect("8 bytes"));
        let size = i32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
        if offset < 0 || size < 0 {
            return Err(format!("frame with offset {offset} and size {size}"));
        }
        if size as u32 > max_size {
            return Err(format!("frame of {size} bytes is larger than the bound of {max_size}"));
        }
        Ok(Some(FrameHeader {
            offset: offset as u64,
            size: size as u32,
        }))
    }
}

#[must_use]
pub fn encode_report(max_offset: u64) -> [u8; REPORT_BYTES] {
    (max_offset as i64).to_be_bytes()
}

/// A slave's report; `Err` for a negative offset.
///
/// # Errors
/// A negative offset.
pub fn decode_report(buf: [u8; REPORT_BYTES]) -> Result<u64, String> {
    let v = i64::from_be_bytes(buf);
    u64::try_from(v).map_err(|_| format!("a slave reported offset {v}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_header_is_offset_then_size_big_endian() {
        let h = FrameHeader {
            offset: 0x0102_0304_0506_0708,
            size: 0x0A0B_0C0D,
        };
        assert_eq!(h.encode(), [1, 2, 3, 4, 5, 6, 7, 8, 0x0A, 0x0B, 0x0C, 0x0D]);
        assert_eq!(FrameHeader::decode(&h.encode(), u32::MAX).unwrap(), Some(h));
        assert_eq!(FrameHeader::decode(&h.encode()[..11], u32::MAX).unwrap(), None);
    }

    #[test]
    fn negative_or_oversized_frames_are_refused() {
        let mut neg = FrameHeader { offset: 0, size: 1 }.encode();
        neg[0] = 0x80;
        assert!(FrameHeader::decode(&neg, 100).is_err());
        assert!(FrameHeader::decode(&FrameHeader { offset: 0, size: 101 }.encode(), 100).is_err());
        assert!(decode_report((-1i64).to_be_bytes()).is_err());
        assert_eq!(decode_report(encode_report(42)).unwrap(), 42);
    }
}
