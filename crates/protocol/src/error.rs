//! Typed errors for everything the wire can get wrong.
//!
//! Owns: the error types of this crate. Must never: carry borrowed buffers (errors outlive frames).

use thiserror::Error;

/// A frame or command that could not be decoded or encoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("frame of {frame_bytes} bytes exceeds the limit of {max_frame_bytes} bytes")]
    FrameTooLarge { frame_bytes: u64, max_frame_bytes: usize },
    #[error("frame length {0} is negative or smaller than the 4-byte header-length word")]
    FrameTooShort(i64),
    #[error("header length {header_bytes} overruns the frame ({available_bytes} bytes after the header-length word)")]
    HeaderOverrun { header_bytes: usize, available_bytes: usize },
    #[error("unknown header serialization type {0} (expected 0 = JSON or 1 = ROCKETMQ)")]
    UnknownSerializeType(u8),
    #[error("invalid JSON header: {0}")]
    InvalidJsonHeader(String),
    #[error("truncated binary header: needed {needed} bytes for {field}, {available} left")]
    TruncatedHeader {
        field: &'static str,
        needed: usize,
        available: usize,
    },
    #[error("binary header field {field} is not valid UTF-8")]
    InvalidUtf8 { field: &'static str },
    #[error("value {value} of {field} does not fit the binary header's {width}-bit field")]
    FieldOutOfRange { field: &'static str, value: i64, width: u8 },
    #[error("header too large to encode: {0} bytes (the length word holds 24 bits)")]
    HeaderTooLarge(usize),
}

/// A typed header could not be built from a command's `extFields`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HeaderError {
    #[error("required header field `{0}` is missing")]
    Missing(&'static str),
    #[error("header field `{key}` has invalid value {value:?}: expected {expected}")]
    Invalid {
        key: &'static str,
        value: String,
        expected: &'static str,
    },
}

/// A stored message, batch body, property string or message id that could not be decoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum MessageError {
    #[error("message record truncated: {field} needs {needed} bytes at offset {offset}, {available} available")]
    Truncated {
        field: &'static str,
        offset: usize,
        needed: usize,
        available: usize,
    },
    #[error("unknown magic code {0:#010x}")]
    BadMagic(u32),
    #[error("record size field {declared} does not match the {actual} bytes its fields occupy")]
    SizeMismatch { declared: i64, actual: usize },
    #[error("negative length {value} in field {field}")]
    NegativeLength { field: &'static str, value: i64 },
    #[error("body CRC mismatch: stored {stored:#x}, computed {computed:#x}")]
    BodyCrc { stored: u32, computed: u32 },
    #[error("{0} is not valid UTF-8")]
    InvalidUtf8(&'static str),
    #[error("topic of {0} bytes is too long (at most 32767)")]
    TopicTooLong(usize),
    #[error("properties of {0} bytes are too long (at most 32767)")]
    PropertiesTooLong(usize),
    #[error("property name or value contains a separator byte (0x01 or 0x02): {0:?}")]
    PropertySeparator(String),
    #[error("invalid message id {0:?}")]
    InvalidMessageId(String),
}

/// A JSON body could not be parsed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BodyError {
    #[error("invalid JSON at byte {offset}: {reason}")]
    Syntax { offset: usize, reason: &'static str },
    #[error("JSON body does not have the expected shape: {0}")]
    Shape(String),
}
