//! Framing: `i32 length | u8 serializeType + u24 headerLength | header | body`.
//!
//! Owns: splitting a byte stream into commands and writing commands back as frames, for tokio
//! (`FrameCodec` as `Decoder`/`Encoder`) and for plain slices. Must never: allocate what a length
//! field claims — a buffer grows with the bytes that arrive, so a peer that declares 16 MiB and
//! sends 8 bytes costs 8 bytes, not 16 MiB.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::command::{RemotingCommand, SerializeType};
use crate::error::ProtocolError;

/// RocketMQ's default `com.rocketmq.remoting.frameMaxLength`: 16 MiB, length prefix included.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// The bytes of one frame, split but not yet decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    /// The high byte of the header-length word: 0 JSON, 1 ROCKETMQ, anything else invalid.
    pub serialize_type_byte: u8,
    /// The header bytes, in that serialization.
    pub header: Bytes,
    /// The bytes after the header, to the end of the frame.
    pub body: Bytes,
}

impl RawFrame {
    /// Decodes the header (the serialization type is checked here, not when splitting, so a
    /// caller can still see the opaque-less frame's size).
    pub fn into_command(self) -> Result<RemotingCommand, ProtocolError> {
        let st = SerializeType::from_code(self.serialize_type_byte)?;
        RemotingCommand::decode_header(st, &self.header, self.body)
    }
}

/// Validates the length word: at least the 4-byte header-length word, at most the limit.
fn frame_len_of(word: [u8; 4], max_frame_bytes: usize) -> Result<usize, ProtocolError> {
    let frame_len = i32::from_be_bytes(word);
    if frame_len < 4 {
        return Err(ProtocolError::FrameTooShort(frame_len.into()));
    }
    let frame_len = frame_len as usize;
    if frame_len + 4 > max_frame_bytes {
        return Err(ProtocolError::FrameTooLarge {
            frame_bytes: frame_len as u64 + 4,
            max_frame_bytes,
        });
    }
    Ok(frame_len)
}

/// Splits the header-length word into the serialization byte and a header length that fits the frame.
fn header_word_of(word: [u8; 4], frame_len: usize) -> Result<(u8, usize), ProtocolError> {
    let word = u32::from_be_bytes(word);
    let header_len = (word & 0x00FF_FFFF) as usize;
    if header_len > frame_len - 4 {
        return Err(ProtocolError::HeaderOverrun {
            header_bytes: header_len,
            available_bytes: frame_len - 4,
        });
    }
    Ok(((word >> 24) as u8, header_len))
}

/// Where one frame lies in a buffer: `Ok(None)` while more bytes are needed. The length word is
/// judged as soon as its 4 bytes are present, so a hostile length fails before anything waits on it.
fn locate_frame(buf: &[u8], max_frame_bytes: usize) -> Result<Option<(usize, u8, usize)>, ProtocolError> {
    let Some(len_word) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let frame_len = frame_len_of(*len_word, max_frame_bytes)?;
    let Some(header_word) = buf.get(4..8) else {
        return Ok(None);
    };
    let (serialize_byte, header_len) = header_word_of(header_word.try_into().expect("4 bytes"), frame_len)?;
    Ok(Some((frame_len, serialize_byte, header_len)))
}

/// Splits one frame off the front of `buf`; `Ok(None)` means more bytes are needed.
pub fn split_frame(buf: &mut BytesMut, max_frame_bytes: usize) -> Result<Option<RawFrame>, ProtocolError> {
    let Some((frame_len, serialize_type_byte, header_len)) = locate_frame(buf, max_frame_bytes)? else {
        return Ok(None);
    };
    if buf.len() < 4 + frame_len {
        return Ok(None);
    }
    let mut frame = buf.split_to(4 + frame_len);
    frame.advance(8);
    let header = frame.split_to(header_len).freeze();
    Ok(Some(RawFrame {
        serialize_type_byte,
        header,
        body: frame.freeze(),
    }))
}

/// Decodes the first frame of a byte slice. Returns the command and the bytes it used, or
/// `Ok(None)` if the slice holds only part of a frame.
pub fn decode_frame(buf: &[u8], max_frame_bytes: usize) -> Result<Option<(RemotingCommand, usize)>, ProtocolError> {
    let Some((frame_len, st_byte, header_len)) = locate_frame(buf, max_frame_bytes)? else {
        return Ok(None);
    };
    if buf.len() < 4 + frame_len {
        return Ok(None);
    }
    let st = SerializeType::from_code(st_byte)?;
    let header = &buf[8..8 + header_len];
    let body = Bytes::copy_from_slice(&buf[8 + header_len..4 + frame_len]);
    let cmd = RemotingCommand::decode_header(st, header, body)?;
    Ok(Some((cmd, 4 + frame_len)))
}

/// Writes `cmd` as one frame at the end of `dst`.
pub fn encode_frame(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), ProtocolError> {
    let header = cmd.encode_header()?;
    if header.len() > 0x00FF_FFFF {
        return Err(ProtocolError::HeaderTooLarge(header.len()));
    }
    let frame_len = 4 + header.len() + cmd.body.len();
    let frame_len_i32 = i32::try_from(frame_len).map_err(|_| ProtocolError::FrameTooLarge {
        frame_bytes: frame_len as u64 + 4,
        max_frame_bytes: i32::MAX as usize,
    })?;
    #[expect(clippy::cast_possible_truncation, reason = "checked above to fit the word's 24 bits")]
    let header_len = header.len() as u32;
    dst.reserve(4 + frame_len);
    dst.put_i32(frame_len_i32);
    dst.put_u32(((cmd.serialize_type.code() as u32) << 24) | header_len);
    dst.put_slice(&header);
    dst.put_slice(&cmd.body);
    Ok(())
}

impl RemotingCommand {
    /// The whole frame as bytes.
    pub fn to_frame(&self) -> Result<Bytes, ProtocolError> {
        let mut out = BytesMut::new();
        encode_frame(self, &mut out)?;
        Ok(out.freeze())
    }
}

/// tokio codec for RemotingCommand frames.
#[derive(Debug, Clone, Copy)]
pub struct FrameCodec {
    max_frame_bytes: usize,
}

impl FrameCodec {
    /// A codec refusing frames longer than `max_frame_bytes`, length word included.
    ///
    /// # Panics
    /// If `max_frame_bytes` is below 8, the two prefix words.
    pub fn new(max_frame_bytes: usize) -> FrameCodec {
        assert!(max_frame_bytes >= 8, "a frame needs at least its 8-byte prefix");
        FrameCodec { max_frame_bytes }
    }

    /// The longest frame accepted, in bytes, length word included.
    pub fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec::new(DEFAULT_MAX_FRAME_BYTES)
    }
}

/// Errors a codec-driven connection can see: the wire, or the socket under it.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The bytes are not a valid frame, or a command could not be encoded.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// Reading or writing the socket failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl Decoder for FrameCodec {
    type Item = RemotingCommand;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<RemotingCommand>, CodecError> {
        match split_frame(src, self.max_frame_bytes)? {
            Some(raw) => Ok(Some(raw.into_command()?)),
            None => Ok(None),
        }
    }
}

impl Encoder<RemotingCommand> for FrameCodec {
    type Error = CodecError;

    fn encode(&mut self, item: RemotingCommand, dst: &mut BytesMut) -> Result<(), CodecError> {
        encode_frame(&item, dst).map_err(Into::into)
    }
}

impl Encoder<&RemotingCommand> for FrameCodec {
    type Error = CodecError;

    fn encode(&mut self, item: &RemotingCommand, dst: &mut BytesMut) -> Result<(), CodecError> {
        encode_frame(item, dst).map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_binary_route_request() {
        // GET_ROUTEINFO_BY_TOPIC "VectorTopic2" from the 5.5.0 Java client in ROCKETMQ mode.
        let mut bytes = vec![
            0, 0, 0, 0x30, 1, 0, 0, 0x2c, 0, 0x69, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x17, 0, 5,
        ];
        bytes.extend_from_slice(b"topic");
        bytes.extend_from_slice(&[0, 0, 0, 0x0c]);
        bytes.extend_from_slice(b"VectorTopic2");
        let (cmd, used) = decode_frame(&bytes, DEFAULT_MAX_FRAME_BYTES).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(cmd.code, 105);
        assert_eq!(cmd.version, 513);
        assert_eq!(cmd.ext("topic"), Some("VectorTopic2"));
        assert_eq!(cmd.to_frame().unwrap().as_ref(), bytes.as_slice());
    }

    #[test]
    fn oversized_frame_rejected_from_length_word_alone() {
        let two_gib_claim = [0x7f, 0xff, 0xff, 0xff];
        let mut buf = BytesMut::from(&two_gib_claim[..]);
        let err = split_frame(&mut buf, DEFAULT_MAX_FRAME_BYTES).unwrap_err();
        assert!(matches!(err, ProtocolError::FrameTooLarge { .. }));
        assert!(buf.capacity() < 1024, "nothing was reserved for the claimed length");
        assert!(matches!(
            decode_frame(&two_gib_claim, DEFAULT_MAX_FRAME_BYTES),
            Err(ProtocolError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn configurable_limit() {
        let cmd = RemotingCommand::request(34, 1).with_body(vec![b'x'; 100]);
        let frame = cmd.to_frame().unwrap();
        assert!(decode_frame(&frame, 64).is_err());
        assert!(decode_frame(&frame, frame.len()).unwrap().is_some());
    }

    #[test]
    fn malformed_prefixes() {
        let negative = [0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 0];
        assert!(matches!(decode_frame(&negative, 1 << 20), Err(ProtocolError::FrameTooShort(_))));
        // header length 200 in a 10-byte frame
        let overrun = [0, 0, 0, 10, 0, 0, 0, 200, 0, 0, 0, 0, 0, 0];
        assert!(matches!(decode_frame(&overrun, 1 << 20), Err(ProtocolError::HeaderOverrun { .. })));
        let bad_type = [0, 0, 0, 6, 7, 0, 0, 2, b'{', b'}'];
        assert!(matches!(
            decode_frame(&bad_type, 1 << 20),
            Err(ProtocolError::UnknownSerializeType(7))
        ));
    }

    #[test]
    fn a_frame_claimed_large_reserves_nothing_for_what_has_not_arrived() {
        let mut buf = BytesMut::new();
        buf.put_i32(i32::try_from(DEFAULT_MAX_FRAME_BYTES).expect("16 MiB fits an i32") - 4);
        buf.put_u32(0x0000_0010);
        buf.put_slice(&[0u8; 100]);
        assert!(split_frame(&mut buf, DEFAULT_MAX_FRAME_BYTES).unwrap().is_none());
        assert!(buf.capacity() < 4096, "{} bytes reserved for 108 received", buf.capacity());
    }

    #[test]
    fn partial_frames_wait() {
        let frame = RemotingCommand::request(11, 9).to_frame().unwrap();
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::new();
        for (i, b) in frame.iter().enumerate() {
            buf.put_u8(*b);
            let got = codec.decode(&mut buf).unwrap();
            assert_eq!(got.is_some(), i + 1 == frame.len());
        }
        assert!(buf.is_empty());
    }
}
