//! RocketMQ's classic HA wire format (`DefaultHAConnection` / `DefaultHAClient`): a raw TCP
//! stream, no handshake. The slave sends only its commit log's max offset, an 8-byte
//! big-endian long, on connect, after every batch it applied and as a heartbeat. The master
//! sends frames of `[offset: i64][size: i32][size bytes of its commit log]`; a frame with size
//! 0 is its heartbeat.
//!
//! Owns: the byte layout. Must never: accept a negative offset or size, or a frame larger than
//! the reader's bound.

use crate::error::ReplicationError;

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
    /// The header's 12 bytes: the offset as a big-endian i64, then the size as a big-endian i32.
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
    pub fn decode(buf: &[u8], max_size: u32) -> Result<Option<FrameHeader>, ReplicationError> {
        let Some(head) = buf.get(..FRAME_HEADER_BYTES) else {
            return Ok(None);
        };
        let offset = i64::from_be_bytes(head[0..8].try_into().expect("8 bytes"));
        let size = i32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
        if offset < 0 || size < 0 {
            return Err(ReplicationError::Protocol(format!("frame with offset {offset} and size {size}")));
        }
        if size as u32 > max_size {
            return Err(ReplicationError::Protocol(format!(
                "frame of {size} bytes is larger than the bound of {max_size}"
            )));
        }
        Ok(Some(FrameHeader {
            offset: offset as u64,
            size: size as u32,
        }))
    }
}

/// A slave's report of its commit log's end: the offset as a big-endian i64.
#[must_use]
pub fn encode_report(max_offset: u64) -> [u8; REPORT_BYTES] {
    (max_offset as i64).to_be_bytes()
}

/// A slave's report; `Err` for a negative offset.
///
/// # Errors
/// A negative offset.
pub fn decode_report(buf: [u8; REPORT_BYTES]) -> Result<u64, ReplicationError> {
    let v = i64::from_be_bytes(buf);
    u64::try_from(v).map_err(|_| ReplicationError::Protocol(format!("a slave reported offset {v}")))
}

/// RocketMQ's controller-mode HA protocol (`AutoSwitchHAClient` / `AutoSwitchHAConnection`):
/// every message starts with the sender's state (`HAConnectionState` ordinal). The slave opens
/// with a handshake naming its broker id; the master answers with its end, its last epoch and
/// its epoch entries, from which the slave finds where to cut its log; then the slave reports
/// its end, and the master streams frames that also carry the frame's epoch, where that epoch
/// began, and the master's confirm offset. A frame never spans two epochs.
pub mod autoswitch {
    use petrel_store::EpochEntry;

    use crate::error::ReplicationError;

    /// `HAConnectionState.HANDSHAKE`.
    pub const STATE_HANDSHAKE: i32 = 1;
    /// `HAConnectionState.TRANSFER`.
    pub const STATE_TRANSFER: i32 = 2;
    /// Slave handshake: state, flags (isSyncFromLastFile, isAsyncLearner as shorts), broker id.
    pub const SLAVE_HANDSHAKE_BYTES: usize = 16;
    /// Slave report: state, max offset.
    pub const SLAVE_REPORT_BYTES: usize = 12;
    /// Master handshake header: state, body size, max offset, last epoch.
    pub const MASTER_HANDSHAKE_BYTES: usize = 20;
    /// Master transfer header: the handshake's fields plus epoch start and confirm offset.
    pub const MASTER_TRANSFER_BYTES: usize = 36;
    /// One epoch entry in the master's handshake body.
    pub const EPOCH_ENTRY_BYTES: usize = 12;

    /// What a slave sends.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SlaveMessage {
        /// The first message of a connection: who the slave is and how it wants to be served.
        Handshake {
            /// An empty slave wants only the master's newest segment (`isSyncFromLastFile`).
            sync_from_last_file: bool,
            /// The slave never joins the SyncStateSet (`isAsyncLearner`).
            async_learner: bool,
            /// The slave's broker id in its set.
            broker_id: u64,
        },
        /// The end of the slave's commit log: where the transfer starts, later an ack.
        Report {
            /// The slave's max commit-log offset.
            max_offset: u64,
        },
    }

    impl SlaveMessage {
        /// The message's bytes: the state, then its fields, big-endian.
        #[must_use]
        pub fn encode(self) -> Vec<u8> {
            let mut out = Vec::with_capacity(SLAVE_HANDSHAKE_BYTES);
            match self {
                SlaveMessage::Handshake {
                    sync_from_last_file,
                    async_learner,
                    broker_id,
                } => {
                    out.extend_from_slice(&STATE_HANDSHAKE.to_be_bytes());
                    out.extend_from_slice(&i16::from(sync_from_last_file).to_be_bytes());
                    out.extend_from_slice(&i16::from(async_learner).to_be_bytes());
                    out.extend_from_slice(&(broker_id as i64).to_be_bytes());
                }
                SlaveMessage::Report { max_offset } => {
                    out.extend_from_slice(&STATE_TRANSFER.to_be_bytes());
                    out.extend_from_slice(&(max_offset as i64).to_be_bytes());
                }
            }
            out
        }

        /// The message at the start of `buf` and its length; `Ok(None)` until it is complete.
        ///
        /// # Errors
        /// An unknown state or a negative field.
        pub fn decode(buf: &[u8]) -> Result<Option<(SlaveMessage, usize)>, ReplicationError> {
            let Some(state) = buf.get(..4) else { return Ok(None) };
            match i32::from_be_bytes(state.try_into().expect("4 bytes")) {
                STATE_HANDSHAKE => {
                    let Some(b) = buf.get(..SLAVE_HANDSHAKE_BYTES) else {
                        return Ok(None);
                    };
                    let id = i64::from_be_bytes(b[8..16].try_into().expect("8 bytes"));
                    let broker_id = u64::try_from(id).map_err(|_| ReplicationError::Protocol(format!("a slave named broker id {id}")))?;
                    Ok(Some((
                        SlaveMessage::Handshake {
                            sync_from_last_file: b[4..6] == [0, 1],
                            async_learner: b[6..8] == [0, 1],
                            broker_id,
                        },
                        SLAVE_HANDSHAKE_BYTES,
                    )))
                }
                STATE_TRANSFER => {
                    let Some(b) = buf.get(..SLAVE_REPORT_BYTES) else { return Ok(None) };
                    let v = i64::from_be_bytes(b[4..12].try_into().expect("8 bytes"));
                    let max_offset = u64::try_from(v).map_err(|_| ReplicationError::Protocol(format!("a slave reported offset {v}")))?;
                    Ok(Some((SlaveMessage::Report { max_offset }, SLAVE_REPORT_BYTES)))
                }
                other => Err(ReplicationError::Protocol(format!("a slave sent state {other}"))),
            }
        }
    }

    /// The header of what a master sends: a handshake (its end, last epoch; the body is its
    /// epoch entries) or a transfer frame (the body is log bytes at `offset`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum MasterHeader {
        /// The answer to the slave's handshake.
        Handshake {
            /// Bytes of the epoch entries that follow.
            body_bytes: u32,
            /// The master's commit-log end.
            max_offset: u64,
            /// The master's newest epoch; -1 for none.
            last_epoch: i32,
        },
        /// A frame of log bytes; with no bytes, a heartbeat.
        Transfer {
            /// Bytes of commit log that follow.
            body_bytes: u32,
            /// Commit-log offset of the first byte that follows.
            offset: u64,
            /// The epoch those bytes were written in; -1 when the master has none.
            epoch: i32,
            /// The commit-log offset that epoch begins at.
            epoch_start: u64,
            /// The master's confirm offset: what every SyncStateSet member holds.
            confirm_offset: u64,
        },
    }

    impl MasterHeader {
        /// The header's bytes: the state, the body size, the offset and the epoch, then for a
        /// transfer the epoch start and the confirm offset, big-endian.
        #[must_use]
        pub fn encode(self) -> Vec<u8> {
            let mut out = Vec::with_capacity(MASTER_TRANSFER_BYTES);
            let (state, body, offset, epoch) = match self {
                MasterHeader::Handshake {
                    body_bytes,
                    max_offset,
                    last_epoch,
                } => (STATE_HANDSHAKE, body_bytes, max_offset, last_epoch),
                MasterHeader::Transfer {
                    body_bytes, offset, epoch, ..
                } => (STATE_TRANSFER, body_bytes, offset, epoch),
            };
            out.extend_from_slice(&state.to_be_bytes());
            out.extend_from_slice(&(body as i32).to_be_bytes());
            out.extend_from_slice(&(offset as i64).to_be_bytes());
            out.extend_from_slice(&epoch.to_be_bytes());
            if let MasterHeader::Transfer {
                epoch_start,
                confirm_offset,
                ..
            } = self
            {
                out.extend_from_slice(&(epoch_start as i64).to_be_bytes());
                out.extend_from_slice(&(confirm_offset as i64).to_be_bytes());
            }
            out
        }

        /// The header at the start of `buf` and its length; `Ok(None)` until it is complete.
        ///
        /// # Errors
        /// An unknown state, a negative field, or a body above `max_body`.
        pub fn decode(buf: &[u8], max_body: u32) -> Result<Option<(MasterHeader, usize)>, ReplicationError> {
            let Some(b) = buf.get(..MASTER_HANDSHAKE_BYTES) else {
                return Ok(None);
            };
            let state = i32::from_be_bytes(b[0..4].try_into().expect("4 bytes"));
            let body = i32::from_be_bytes(b[4..8].try_into().expect("4 bytes"));
            let offset = i64::from_be_bytes(b[8..16].try_into().expect("8 bytes"));
            let epoch = i32::from_be_bytes(b[16..20].try_into().expect("4 bytes"));
            if body < 0 || body as u32 > max_body {
                return Err(ReplicationError::Protocol(format!(
                    "a master frame of {body} bytes (the bound is {max_body})"
                )));
            }
            // -1: a master with an empty log has no offset to name yet.
            let offset = u64::try_from(offset.max(0)).expect("not negative");
            match state {
                STATE_HANDSHAKE => Ok(Some((
                    MasterHeader::Handshake {
                        body_bytes: body as u32,
                        max_offset: offset,
                        last_epoch: epoch,
                    },
                    MASTER_HANDSHAKE_BYTES,
                ))),
                STATE_TRANSFER => {
                    let Some(t) = buf.get(..MASTER_TRANSFER_BYTES) else {
                        return Ok(None);
                    };
                    let start = i64::from_be_bytes(t[20..28].try_into().expect("8 bytes")).max(0);
                    let confirm = i64::from_be_bytes(t[28..36].try_into().expect("8 bytes")).max(0);
                    Ok(Some((
                        MasterHeader::Transfer {
                            body_bytes: body as u32,
                            offset,
                            epoch,
                            epoch_start: start as u64,
                            confirm_offset: confirm as u64,
                        },
                        MASTER_TRANSFER_BYTES,
                    )))
                }
                other => Err(ReplicationError::Protocol(format!("a master sent state {other}"))),
            }
        }

        /// Bytes of body that follow the header.
        #[must_use]
        pub fn body_bytes(self) -> u32 {
            match self {
                MasterHeader::Handshake { body_bytes, .. } | MasterHeader::Transfer { body_bytes, .. } => body_bytes,
            }
        }
    }

    /// The master handshake's body: each entry as its epoch (i32) and start offset (i64), big-endian.
    #[must_use]
    pub fn encode_epochs(entries: &[EpochEntry]) -> Vec<u8> {
        let mut out = Vec::with_capacity(entries.len() * EPOCH_ENTRY_BYTES);
        for e in entries {
            out.extend_from_slice(&e.epoch.to_be_bytes());
            out.extend_from_slice(&(e.start_offset as i64).to_be_bytes());
        }
        out
    }

    /// # Errors
    /// A body that is not whole entries, or a negative offset.
    pub fn decode_epochs(body: &[u8]) -> Result<Vec<EpochEntry>, ReplicationError> {
        if !body.len().is_multiple_of(EPOCH_ENTRY_BYTES) {
            return Err(ReplicationError::Protocol(format!("an epoch list of {} bytes", body.len())));
        }
        body.chunks_exact(EPOCH_ENTRY_BYTES)
            .map(|c| {
                let epoch = i32::from_be_bytes(c[0..4].try_into().expect("4 bytes"));
                let start = i64::from_be_bytes(c[4..12].try_into().expect("8 bytes"));
                let start_offset =
                    u64::try_from(start).map_err(|_| ReplicationError::Protocol(format!("epoch {epoch} starts at {start}")))?;
                Ok(EpochEntry { epoch, start_offset })
            })
            .collect()
    }
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

    #[test]
    fn autoswitch_messages_have_rocketmqs_layout() {
        use autoswitch::{MasterHeader, SlaveMessage};
        let hs = SlaveMessage::Handshake {
            sync_from_last_file: false,
            async_learner: true,
            broker_id: 3,
        };
        assert_eq!(hs.encode(), [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3]);
        assert_eq!(SlaveMessage::decode(&hs.encode()).unwrap(), Some((hs, 16)));
        let report = SlaveMessage::Report { max_offset: 0x0102 };
        assert_eq!(report.encode(), [0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(SlaveMessage::decode(&report.encode()[..11]).unwrap(), None);
        assert!(SlaveMessage::decode(&[0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        let t = MasterHeader::Transfer {
            body_bytes: 5,
            offset: 7,
            epoch: 2,
            epoch_start: 6,
            confirm_offset: 4,
        };
        let bytes = t.encode();
        assert_eq!(bytes.len(), 36);
        assert_eq!(&bytes[..8], &[0, 0, 0, 2, 0, 0, 0, 5]);
        assert_eq!(&bytes[28..], &[0, 0, 0, 0, 0, 0, 0, 4]);
        assert_eq!(MasterHeader::decode(&bytes, 5).unwrap(), Some((t, 36)));
        assert!(MasterHeader::decode(&bytes, 4).is_err(), "a body over the bound");
        assert_eq!(MasterHeader::decode(&bytes[..30], 5).unwrap(), None);
        let entries = [
            petrel_store::EpochEntry { epoch: 1, start_offset: 0 },
            petrel_store::EpochEntry { epoch: 2, start_offset: 9 },
        ];
        assert_eq!(autoswitch::decode_epochs(&autoswitch::encode_epochs(&entries)).unwrap(), entries);
    }
}
