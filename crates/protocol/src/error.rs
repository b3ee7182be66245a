//! Typed errors for everything the wire can get wrong.
//!
//! Owns: the error types of this crate. Must never: carry borrowed buffers (errors outlive frames).

use thiserror::Error;

/// A frame or command that could not be decoded or encoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// A frame, length word included, is longer than the limit allows.
    #[error("frame of {frame_bytes} bytes exceeds the limit of {max_frame_bytes} bytes")]
    FrameTooLarge {
        /// The frame's size, its length word included.
        frame_bytes: u64,
        /// The largest frame accepted, length word included.
        max_frame_bytes: usize,
    },
    /// The length word is too small to hold even the header-length word.
    #[error("frame length {0} is negative or smaller than the 4-byte header-length word")]
    FrameTooShort(i64),
    /// The header-length word claims more bytes than the frame has.
    #[error("header length {header_bytes} overruns the frame ({available_bytes} bytes after the header-length word)")]
    HeaderOverrun {
        /// The header length claimed.
        header_bytes: usize,
        /// The bytes the frame has after the header-length word.
        available_bytes: usize,
    },
    /// The serialization byte is neither JSON nor ROCKETMQ.
    #[error("unknown header serialization type {0} (expected 0 = JSON or 1 = ROCKETMQ)")]
    UnknownSerializeType(u8),
    /// A JSON header that does not parse, with the parser's message.
    #[error("invalid JSON header: {0}")]
    InvalidJsonHeader(String),
    /// A binary header ends inside a field.
    #[error("truncated binary header: needed {needed} bytes for {field}, {available} left")]
    TruncatedHeader {
        /// The field being read.
        field: &'static str,
        /// The bytes the field needs (0 for a negative length).
        needed: usize,
        /// The bytes left in the header.
        available: usize,
    },
    /// A binary header's string field is not UTF-8.
    #[error("binary header field {field} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field.
        field: &'static str,
    },
    /// A value too large for its field in the binary header, so the command cannot be encoded so.
    #[error("value {value} of {field} does not fit the binary header's {width}-bit field")]
    FieldOutOfRange {
        /// The field.
        field: &'static str,
        /// The value that does not fit.
        value: i64,
        /// The field's width, in bits.
        width: u8,
    },
    /// An encoded header longer than the 24 bits of the header-length word can state, in bytes.
    #[error("header too large to encode: {0} bytes (the length word holds 24 bits)")]
    HeaderTooLarge(usize),
}

/// A typed header could not be built from a command's `extFields`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// A required field is absent; holds its key.
    #[error("required header field `{0}` is missing")]
    Missing(&'static str),
    /// A field's text does not parse as its type.
    #[error("header field `{key}` has invalid value {value:?}: expected {expected}")]
    Invalid {
        /// The field's key in `extFields`.
        key: &'static str,
        /// The text found.
        value: String,
        /// What the type accepts (e.g. "a 32-bit integer").
        expected: &'static str,
    },
}

/// A stored message, batch body, property string or message id that could not be decoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum MessageError {
    /// A field runs past the end of the bytes given.
    #[error("message record truncated: {field} needs {needed} bytes at offset {offset}, {available} available")]
    Truncated {
        /// The field being read (its name in the record layout).
        field: &'static str,
        /// Where the field starts in the bytes given.
        offset: usize,
        /// The bytes the field needs.
        needed: usize,
        /// The bytes left from `offset`.
        available: usize,
    },
    /// The record's magic code is neither V1 nor V2.
    #[error("unknown magic code {0:#010x}")]
    BadMagic(u32),
    /// The size field disagrees with the bytes the fields take (declared -1 when encoding: the
    /// record would be longer than an i32 can state).
    #[error("record size field {declared} does not match the {actual} bytes its fields occupy")]
    SizeMismatch {
        /// The size the record states.
        declared: i64,
        /// The bytes its fields take.
        actual: usize,
    },
    /// A length field is negative.
    #[error("negative length {value} in field {field}")]
    NegativeLength {
        /// The length field.
        field: &'static str,
        /// Its value.
        value: i64,
    },
    /// The stored BODYCRC is not the body's.
    #[error("body CRC mismatch: stored {stored:#x}, computed {computed:#x}")]
    BodyCrc {
        /// The CRC the record carries.
        stored: u32,
        /// The CRC of the body as read.
        computed: u32,
    },
    /// A text field (named) is not UTF-8.
    #[error("{0} is not valid UTF-8")]
    InvalidUtf8(&'static str),
    /// A topic longer than the record's 2-byte length field allows, in bytes.
    #[error("topic of {0} bytes is too long (at most 32767)")]
    TopicTooLong(usize),
    /// Encoded properties longer than their 2-byte length field allows, in bytes.
    #[error("properties of {0} bytes are too long (at most 32767)")]
    PropertiesTooLong(usize),
    /// A property name or value (held) contains a byte the encoding uses as a separator.
    #[error("property name or value contains a separator byte (0x01 or 0x02): {0:?}")]
    PropertySeparator(String),
    /// A message id (held) that is not a valid offset id.
    #[error("invalid message id {0:?}")]
    InvalidMessageId(String),
}

/// A JSON body could not be parsed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// The bytes are not JSON, even in fastjson's dialect.
    #[error("invalid JSON at byte {offset}: {reason}")]
    Syntax {
        /// Where parsing stopped, from the start of the body.
        offset: usize,
        /// What was wrong there.
        reason: &'static str,
    },
    /// Valid JSON that does not fit the body type, with the reason.
    #[error("JSON body does not have the expected shape: {0}")]
    Shape(String),
}
