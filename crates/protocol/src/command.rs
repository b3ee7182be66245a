//! `RemotingCommand`: the header every frame carries, in both serializations.
//!
//! Owns: the command model and the JSON / ROCKETMQ-binary header codecs. Must never: read
//! sockets, or trust a length field before checking it against the bytes actually present.

use bytes::{BufMut, Bytes};
use indexmap::IndexMap;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::fmt::Write as _;

use crate::codes::LanguageCode;
use crate::error::ProtocolError;

/// `extFields`: the string map that carries every typed header. Insertion order is kept so a
/// decoded command re-encodes byte for byte.
/// Header fields in arrival order. Hashed with foldhash: a header map is built and read for
/// every request, and SipHash's resistance to chosen keys buys nothing on a few short names.
pub type ExtFields = IndexMap<String, String, foldhash::fast::RandomState>;

/// Flag bit 0: this frame is a response.
pub const FLAG_RESPONSE: i32 = 0x1;
/// Flag bit 1: a oneway request, which must get no response.
pub const FLAG_ONEWAY: i32 = 0x2;

/// The version Petrel stamps on what it sends: `V5_5_0`, as a 5.5.0 server does.
pub const PETREL_VERSION: i32 = 513;

/// How the header bytes of a frame are serialized (the high byte of the header-length word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    /// The header is a JSON object (type byte 0).
    #[default]
    Json,
    /// The header is RocketMQ's compact binary layout (type byte 1).
    RocketMq,
}

impl SerializeType {
    /// The type byte written in the header-length word.
    pub fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    /// The serialization a type byte names; any byte but 0 and 1 is an error.
    pub fn from_code(code: u8) -> Result<SerializeType, ProtocolError> {
        match code {
            0 => Ok(SerializeType::Json),
            1 => Ok(SerializeType::RocketMq),
            other => Err(ProtocolError::UnknownSerializeType(other)),
        }
    }
}

/// One request or response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotingCommand {
    /// Request code in a request, response code in a response. Held as i32: JSON headers carry
    /// codes above `i16::MAX` (the POP family).
    pub code: i32,
    /// The sender's implementation language.
    pub language: LanguageCode,
    /// The sender's RocketMQ version code (`MQVersion`; 513 is `V5_5_0`).
    pub version: i32,
    /// The request id a response echoes, matching it to its request.
    pub opaque: i32,
    /// Bit flags: [`FLAG_RESPONSE`], [`FLAG_ONEWAY`].
    pub flag: i32,
    /// Free text; in a response, usually why it failed.
    pub remark: Option<String>,
    /// `None` when the header had no `extFields` at all; `Some(empty)` for `"extFields":{}`.
    pub ext_fields: Option<ExtFields>,
    /// The bytes after the header, to the end of the frame.
    pub body: Bytes,
    /// The serialization the header arrived in, and the one `encode` uses.
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    /// A request with Petrel's language and version, no ext fields and no body.
    pub fn request(code: i32, opaque: i32) -> RemotingCommand {
        RemotingCommand {
            code,
            language: LanguageCode::Java,
            version: PETREL_VERSION,
            opaque,
            flag: 0,
            remark: None,
            ext_fields: None,
            body: Bytes::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// A response to `request`: same opaque and serialization, response flag set.
    pub fn response_to(request: &RemotingCommand, code: i32) -> RemotingCommand {
        RemotingCommand {
            code,
            language: LanguageCode::Java,
            version: PETREL_VERSION,
            opaque: request.opaque,
            flag: FLAG_RESPONSE,
            remark: None,
            ext_fields: None,
            body: Bytes::new(),
            serialize_type: request.serialize_type,
        }
    }

    /// Sets the remark.
    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    /// Sets the body.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Replaces the `extFields` map.
    pub fn with_ext_fields(mut self, ext_fields: ExtFields) -> Self {
        self.ext_fields = Some(ext_fields);
        self
    }

    /// Whether the response flag is set.
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// Whether this is a oneway request, which gets no response.
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// Makes this a oneway request: the peer sends no response.
    pub fn mark_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// A field of `extFields`, if present.
    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.as_ref()?.get(key).map(String::as_str)
    }

    /// Inserts one `extFields` entry, creating the map if the command had none.
    pub fn put_ext(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.ext_fields
            .get_or_insert_with(ExtFields::default)
            .insert(key.into(), value.into());
    }

    /// Serializes the header alone in `self.serialize_type`.
    pub fn encode_header(&self) -> Result<Vec<u8>, ProtocolError> {
        match self.serialize_type {
            SerializeType::Json => Ok(self.encode_json_header().into_bytes()),
            SerializeType::RocketMq => self.encode_binary_header(),
        }
    }

    /// Java's JSON header: top-level keys in alphabetical order, null fields omitted. Java also
    /// writes `serializeTypeCurrentRPC`, which every reader ignores; we leave it out.
    pub fn encode_json_header(&self) -> String {
        let mut out = String::with_capacity(96 + self.ext_fields.as_ref().map_or(0, |e| e.len() * 32));
        let _ = write!(out, "{{\"code\":{}", self.code);
        if let Some(ext) = &self.ext_fields {
            out.push_str(",\"extFields\":{");
            for (i, (k, v)) in ext.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json_string(&mut out, k);
                out.push(':');
                push_json_string(&mut out, v);
            }
            out.push('}');
        }
        let _ = write!(out, ",\"flag\":{},\"language\":", self.flag);
        push_json_string(&mut out, self.language.name());
        let _ = write!(out, ",\"opaque\":{}", self.opaque);
        if let Some(remark) = &self.remark {
            out.push_str(",\"remark\":");
            push_json_string(&mut out, remark);
        }
        let _ = write!(out, ",\"version\":{}}}", self.version);
        out
    }

    /// The ROCKETMQ binary header (`RocketMQSerializable`).
    pub fn encode_binary_header(&self) -> Result<Vec<u8>, ProtocolError> {
        let code = i16::try_from(self.code).map_err(|_| ProtocolError::FieldOutOfRange {
            field: "code",
            value: self.code.into(),
            width: 16,
        })?;
        let version = i16::try_from(self.version).map_err(|_| ProtocolError::FieldOutOfRange {
            field: "version",
            value: self.version.into(),
            width: 16,
        })?;
        let ext_bytes: usize = self.ext_fields.iter().flatten().map(|(k, v)| 2 + k.len() + 4 + v.len()).sum();
        let remark = self.remark.as_deref().unwrap_or("");
        let mut out = Vec::with_capacity(21 + remark.len() + ext_bytes);
        out.put_i16(code);
        out.put_u8(self.language.code());
        out.put_i16(version);
        out.put_i32(self.opaque);
        out.put_i32(self.flag);
        out.put_i32(len_i32(remark.len(), "remark")?);
        out.put_slice(remark.as_bytes());
        out.put_i32(len_i32(ext_bytes, "extFields")?);
        for (k, v) in self.ext_fields.iter().flatten() {
            let key_len = i16::try_from(k.len()).map_err(|_| ProtocolError::FieldOutOfRange {
                field: "extFields key length",
                value: k.len() as i64,
                width: 16,
            })?;
            out.put_i16(key_len);
            out.put_slice(k.as_bytes());
            out.put_i32(len_i32(v.len(), "extFields value")?);
            out.put_slice(v.as_bytes());
        }
        Ok(out)
    }

    /// Decodes a header of the given serialization; `body` is attached as is.
    pub fn decode_header(serialize_type: SerializeType, header: &[u8], body: Bytes) -> Result<RemotingCommand, ProtocolError> {
        let mut cmd = match serialize_type {
            SerializeType::Json => decode_json_header(header)?,
            SerializeType::RocketMq => decode_binary_header(header)?,
        };
        cmd.body = body;
        Ok(cmd)
    }
}

fn len_i32(len: usize, field: &'static str) -> Result<i32, ProtocolError> {
    i32::try_from(len).map_err(|_| ProtocolError::FieldOutOfRange {
        field,
        value: len as i64,
        width: 32,
    })
}

/// Appends `s` as a JSON string literal. Control characters become `\u00XX`, as fastjson and Go
/// write the property separators 0x01 and 0x02.
pub(crate) fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    // Copy the runs that need no escape whole; only ASCII controls, quote and backslash do.
    let mut run_start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            c if c < 0x20 => "",
            _ => continue,
        };
        out.push_str(&s[run_start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escape);
        }
        run_start = i + 1;
    }
    out.push_str(&s[run_start..]);
    out.push('"');
}

/// A JSON scalar accepted where a string is expected: peers write every ext value as a string,
/// but a number or boolean there is unambiguous, so we take it rather than fail the frame.
struct LenientString(String);

impl<'de> Deserialize<'de> for LenientString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LenientString;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LenientString, E> {
                Ok(LenientString(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<LenientString, E> {
                Ok(LenientString(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LenientString, E> {
                Ok(LenientString(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LenientString, E> {
                Ok(LenientString(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LenientString, E> {
                Ok(LenientString(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<LenientString, E> {
                Ok(LenientString(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
struct JsonHeader {
    code: Option<i32>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    version: i32,
    #[serde(default)]
    opaque: i32,
    #[serde(default)]
    flag: i32,
    #[serde(default)]
    remark: Option<String>,
    #[serde(default, rename = "extFields", deserialize_with = "ext_fields_or_null")]
    ext_fields: Option<ExtFields>,
}

/// Room made for a header's fields before the first: a send's header has 13, and growing to
/// them from nothing is three reallocations per request.
const EXT_FIELDS_GUESS: usize = 16;

/// `extFields` straight into [`ExtFields`]: one map per request, not a second one to copy
/// into. A null value is what Java skips when writing; it is dropped the same way, after the
/// whole object, so that a repeated key ends as its last value says, in its first place.
fn ext_fields_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ExtFields>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<ExtFields>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object of string values, or null")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let capacity = map.size_hint().unwrap_or(EXT_FIELDS_GUESS).min(EXT_FIELDS_GUESS);
            let mut fields = ExtFields::with_capacity_and_hasher(capacity, Default::default());
            // Indices whose value is null now (rare: only a peer that writes nulls).
            let mut nulled: Vec<usize> = Vec::new();
            while let Some((k, v)) = map.next_entry::<String, Option<LenientString>>()? {
                let null = v.is_none();
                let (at, _) = fields.insert_full(k, v.map_or_else(String::new, |v| v.0));
                nulled.retain(|&i| i != at);
                if null {
                    nulled.push(at);
                }
            }
            if !nulled.is_empty() {
                let mut at = 0;
                fields.retain(|_, _| {
                    let keep = !nulled.contains(&at);
                    at += 1;
                    keep
                });
            }
            Ok(Some(fields))
        }
    }
    d.deserialize_option(V)
}

fn decode_json_header(header: &[u8]) -> Result<RemotingCommand, ProtocolError> {
    let parsed: JsonHeader = serde_json::from_slice(header).map_err(|e| ProtocolError::InvalidJsonHeader(e.to_string()))?;
    let code = parsed
        .code
        .ok_or_else(|| ProtocolError::InvalidJsonHeader("missing field `code`".into()))?;
    Ok(RemotingCommand {
        code,
        language: parsed.language.as_deref().map_or(LanguageCode::Java, LanguageCode::from_name),
        version: parsed.version,
        opaque: parsed.opaque,
        flag: parsed.flag,
        remark: parsed.remark,
        ext_fields: parsed.ext_fields,
        body: Bytes::new(),
        serialize_type: SerializeType::Json,
    })
}

/// A bounds-checked reader over a binary header.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ProtocolError> {
        let available = self.buf.len() - self.pos;
        if n > available {
            return Err(ProtocolError::TruncatedHeader {
                field,
                needed: n,
                available,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self, field: &'static str) -> Result<u8, ProtocolError> {
        Ok(self.take(1, field)?[0])
    }
    fn i16(&mut self, field: &'static str) -> Result<i16, ProtocolError> {
        let b = self.take(2, field)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self, field: &'static str) -> Result<i32, ProtocolError> {
        let b = self.take(4, field)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// A length word followed by that many UTF-8 bytes; the length is checked before use.
    fn string(&mut self, len: i64, field: &'static str) -> Result<String, ProtocolError> {
        let n = usize::try_from(len).map_err(|_| ProtocolError::TruncatedHeader {
            field,
            needed: 0,
            available: self.buf.len() - self.pos,
        })?;
        let bytes = self.take(n, field)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| ProtocolError::InvalidUtf8 { field })
    }
}

fn decode_binary_header(header: &[u8]) -> Result<RemotingCommand, ProtocolError> {
    let mut c = Cursor { buf: header, pos: 0 };
    let code = c.i16("code")?;
    let language = LanguageCode::from_code(c.u8("language")?);
    let version = c.i16("version")?;
    let opaque = c.i32("opaque")?;
    let flag = c.i32("flag")?;
    let remark_len = c.i32("remark length")?;
    let remark = if remark_len == 0 {
        None
    } else {
        Some(c.string(remark_len.into(), "remark")?)
    };
    let ext_len = c.i32("extFields length")?;
    let ext_fields = if ext_len == 0 {
        None
    } else {
        let ext_len = usize::try_from(ext_len).map_err(|_| ProtocolError::TruncatedHeader {
            field: "extFields",
            needed: 0,
            available: header.len() - c.pos,
        })?;
        let area = c.take(ext_len, "extFields")?;
        let mut e = Cursor { buf: area, pos: 0 };
        let mut map = ExtFields::default();
        while e.pos < area.len() {
            let klen = e.i16("extFields key length")?;
            let key = e.string(klen.into(), "extFields key")?;
            let vlen = e.i32("extFields value length")?;
            let value = e.string(vlen.into(), "extFields value")?;
            map.insert(key, value);
        }
        Some(map)
    };
    Ok(RemotingCommand {
        code: code.into(),
        language,
        version: version.into(),
        opaque,
        flag,
        remark,
        ext_fields,
        body: Bytes::new(),
        serialize_type: SerializeType::RocketMq,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked example of the protocol reference, §1.
    #[test]
    fn binary_worked_example() {
        let mut cmd = RemotingCommand::request(0, 7);
        cmd.flag = FLAG_RESPONSE;
        cmd.version = 479;
        cmd.serialize_type = SerializeType::RocketMq;
        cmd.put_ext("offset", "42");
        let header = cmd.encode_binary_header().unwrap();
        let expected: &[u8] = &[
            0x00, 0x00, 0x00, 0x01, 0xdf, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0e,
            0x00, 0x06, b'o', b'f', b'f', b's', b'e', b't', 0x00, 0x00, 0x00, 0x02, b'4', b'2',
        ];
        assert_eq!(header, expected);
        let back = RemotingCommand::decode_header(SerializeType::RocketMq, &header, Bytes::new()).unwrap();
        assert_eq!(back, cmd);
    }

    #[test]
    fn json_header_shape() {
        let mut cmd = RemotingCommand::request(0, 14);
        cmd.flag = 1;
        cmd.put_ext("offset", "0");
        assert_eq!(
            cmd.encode_json_header(),
            r#"{"code":0,"extFields":{"offset":"0"},"flag":1,"language":"JAVA","opaque":14,"version":513}"#
        );
    }

    #[test]
    fn json_accepts_go_header_and_scalars() {
        let h = br#"{"code":34,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"n":5,"b":true,"x":null}}"#;
        let cmd = RemotingCommand::decode_header(SerializeType::Json, h, Bytes::new()).unwrap();
        assert_eq!(cmd.language, LanguageCode::Go);
        assert_eq!(cmd.remark.as_deref(), Some(""));
        assert_eq!(cmd.ext("n"), Some("5"));
        assert_eq!(cmd.ext("b"), Some("true"));
        assert_eq!(cmd.ext("x"), None);
        assert_eq!(cmd.ext_fields.as_ref().map(ExtFields::len), Some(2), "the null value is dropped");
        for (h, fields) in [
            (&br#"{"code":1,"extFields":null}"#[..], None),
            (br#"{"code":1,"extFields":{}}"#, Some(0)),
            (br#"{"code":1}"#, None),
        ] {
            let cmd = RemotingCommand::decode_header(SerializeType::Json, h, Bytes::new()).unwrap();
            assert_eq!(cmd.ext_fields.as_ref().map(ExtFields::len), fields);
        }
        // A repeated key: its last value decides, in its first place.
        let h = br#"{"code":1,"extFields":{"a":null,"b":"x","a":"1","c":"2","c":null}}"#;
        let cmd = RemotingCommand::decode_header(SerializeType::Json, h, Bytes::new()).unwrap();
        let fields: Vec<(&str, &str)> = cmd.ext_fields.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(fields, [("a", "1"), ("b", "x")]);
    }

    #[test]
    fn json_errors_are_typed() {
        for bad in [&b"{"[..], b"[]", b"{\"flag\":1}", b"\xff"] {
            assert!(matches!(
                RemotingCommand::decode_header(SerializeType::Json, bad, Bytes::new()),
                Err(ProtocolError::InvalidJsonHeader(_))
            ));
        }
    }

    #[test]
    fn binary_truncations_are_typed() {
        let mut cmd = RemotingCommand::request(105, 3);
        cmd.remark = Some("r".into());
        cmd.put_ext("topic", "T");
        let full = cmd.encode_binary_header().unwrap();
        for cut in 0..full.len() {
            let err = decode_binary_header(&full[..cut]).unwrap_err();
            assert!(matches!(err, ProtocolError::TruncatedHeader { .. }), "cut {cut}: {err}");
        }
        // A length word claiming far more than is present is rejected, not allocated.
        let mut lying = full.clone();
        lying[13..17].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_binary_header(&lying).is_err());
        lying[13..17].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(decode_binary_header(&lying).is_err());
    }

    #[test]
    fn big_codes_need_json() {
        let mut cmd = RemotingCommand::request(200050, 1);
        cmd.serialize_type = SerializeType::RocketMq;
        assert!(matches!(
            cmd.encode_header(),
            Err(ProtocolError::FieldOutOfRange { field: "code", .. })
        ));
        cmd.serialize_type = SerializeType::Json;
        assert!(cmd.encode_header().is_ok());
    }
}
