//! Apache RocketMQ's remoting wire format, byte for byte.
//!
//! Owns: frames, `RemotingCommand` headers in both serializations, request/response codes,
//! typed headers, JSON bodies in the fastjson dialect, the stored-message record, the batch body,
//! properties and message ids. Must never: perform I/O or hold state between calls; everything
//! here is a pure function of its input, so every other crate can trust and fuzz it.

#![forbid(unsafe_code)]

pub mod batch;
pub mod body;
pub mod codes;
pub mod command;
pub mod error;
pub mod fastjson;
pub mod frame;
pub mod header;
pub mod lmq;
pub mod message;
pub mod model;
pub mod msgid;
pub mod properties;
#[cfg(feature = "proptest")]
#[doc(hidden)]
pub mod proptest_support;
pub mod topics;

pub use codes::{LanguageCode, request_code, request_code_name, response_code, response_code_name};
pub use command::{ExtFields, FLAG_ONEWAY, FLAG_RESPONSE, PETREL_VERSION, RemotingCommand, SerializeType};
pub use error::{BodyError, HeaderError, MessageError, ProtocolError};
pub use frame::{CodecError, DEFAULT_MAX_FRAME_BYTES, FrameCodec, RawFrame, decode_frame, encode_frame, split_frame};
pub use header::CommandHeader;
pub use message::{MessageExt, decode_messages};
pub use properties::Properties;
