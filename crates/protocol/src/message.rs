//! The stored-message record: the commit-log layout that PULL, QUERY_MESSAGE and
//! VIEW_MESSAGE_BY_ID bodies carry unchanged.
//!
//! Owns: encoding and decoding one record and a run of records, the magic codes, sysFlag bits and
//! the positions of the fields a store patches in place. Must never: read past the slice it was
//! given or trust a length before checking it against the bytes present.

use bytes::{BufMut, Bytes, BytesMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::error::MessageError;
use crate::msgid::create_offset_msg_id;
use crate::properties::{Properties, decode_properties, encode_properties, keys, property};

/// Record magic with a 1-byte topic length.
pub const MAGIC_CODE_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// Record magic with a 2-byte topic length (topics longer than 127 bytes).
pub const MAGIC_CODE_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// Filler at the end of a commit-log segment; never sent to clients.
pub const BLANK_MAGIC_CODE: i32 = 0xCBD4_3194_u32 as i32;

/// Position of QUEUEOFFSET in a record.
pub const QUEUE_OFFSET_POS: usize = 20;
/// Position of PHYSICALOFFSET in a record.
pub const PHYSICAL_OFFSET_POS: usize = 28;
/// Position of SYSFLAG in a record.
pub const SYS_FLAG_POS: usize = 36;
/// Position of BORNHOST in a record.
pub const BORN_HOST_POS: usize = 48;

/// Message sysFlag bits (`MessageSysFlag`).
pub mod sys_flag {
    /// The body is compressed (the compression type bits say how).
    pub const COMPRESSED_FLAG: i32 = 0x1;
    /// The message has several tags.
    pub const MULTI_TAGS_FLAG: i32 = 0x2;
    /// Transaction type: not transactional.
    pub const TRANSACTION_NOT_TYPE: i32 = 0x0;
    /// Transaction type: a half message, awaiting commit or rollback.
    pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
    /// Transaction type: committed.
    pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
    /// Transaction type: rolled back.
    pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
    /// The bits holding the transaction type.
    pub const TRANSACTION_TYPE_MASK: i32 = 0xC;
    /// BORNHOST is IPv6 (16 address bytes instead of 4).
    pub const BORNHOST_V6_FLAG: i32 = 0x10;
    /// STOREHOSTADDRESS is IPv6 (16 address bytes instead of 4).
    pub const STOREHOSTADDRESS_V6_FLAG: i32 = 0x20;
    /// A batch record whose messages are to be unwrapped (RocketMQ's `NEED_UNWRAP_FLAG`).
    pub const NEED_UNWRAP_FLAG: i32 = 0x40;
    /// The record is an inner batch: several messages stored as one.
    pub const INNER_BATCH_FLAG: i32 = 0x80;
    /// The bits holding the compression type.
    pub const COMPRESSION_TYPE_MASK: i32 = 0x700;
    /// Compression type: LZ4.
    pub const COMPRESSION_LZ4_TYPE: i32 = 0x100;
    /// Compression type: Zstandard.
    pub const COMPRESSION_ZSTD_TYPE: i32 = 0x200;
    /// Compression type: zlib.
    pub const COMPRESSION_ZLIB_TYPE: i32 = 0x300;

    /// The transaction type bits of `flag`.
    pub fn transaction_type(flag: i32) -> i32 {
        flag & TRANSACTION_TYPE_MASK
    }
}

/// Which record magic a message is (or will be) written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MessageVersion {
    /// [`MAGIC_CODE_V1`]: a 1-byte topic length, topics of at most 127 bytes.
    #[default]
    V1,
    /// [`MAGIC_CODE_V2`]: a 2-byte topic length.
    V2,
}

/// `CRC32(body) & 0x7FFFFFFF`, the BODYCRC field.
pub fn body_crc(body: &[u8]) -> u32 {
    crc32fast::hash(body) & 0x7FFF_FFFF
}

/// Position of STORETIMESTAMP, which moves by 12 bytes when the born host is IPv6.
pub fn store_timestamp_pos(sys_flag: i32) -> usize {
    BORN_HOST_POS + host_len(sys_flag & sys_flag::BORNHOST_V6_FLAG != 0)
}

fn host_len(v6: bool) -> usize {
    if v6 { 20 } else { 8 }
}

/// Position of RECONSUMETIMES, after STORETIMESTAMP and STOREHOSTADDRESS.
pub fn reconsume_times_pos(sys_flag: i32) -> usize {
    store_timestamp_pos(sys_flag) + 8 + host_len(sys_flag & sys_flag::STOREHOSTADDRESS_V6_FLAG != 0)
}

/// Rewrites a stored record's RECONSUMETIMES in place (a copy handed out again); false if the
/// record is too short to hold it.
pub fn set_reconsume_times(record: &mut [u8], times: i32) -> bool {
    let Some(flag) = record.get(SYS_FLAG_POS..SYS_FLAG_POS + 4) else {
        return false;
    };
    let sys_flag = i32::from_be_bytes([flag[0], flag[1], flag[2], flag[3]]);
    let pos = reconsume_times_pos(sys_flag);
    match record.get_mut(pos..pos + 4) {
        Some(field) => {
            field.copy_from_slice(&times.to_be_bytes());
            true
        }
        None => false,
    }
}

/// A stored message with every field of the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageExt {
    /// The topic the message is stored under.
    pub topic: String,
    /// The queue it is stored in.
    pub queue_id: i32,
    /// The application's flag, as the producer set it.
    pub flag: i32,
    /// Its offset in the queue.
    pub queue_offset: i64,
    /// Where its record starts in the commit log.
    pub commit_log_offset: i64,
    /// As written; the IPv6 host bits are derived from the addresses when encoding.
    pub sys_flag: i32,
    /// When the producer created it, epoch milliseconds.
    pub born_timestamp: i64,
    /// The producer's address.
    pub born_host: SocketAddr,
    /// When the broker stored it, epoch milliseconds.
    pub store_timestamp: i64,
    /// The storing broker's address.
    pub store_host: SocketAddr,
    /// How many times it was redelivered for consumption.
    pub reconsume_times: i32,
    /// For a committed or rolled-back transactional message: its half message's commit-log offset.
    pub prepared_transaction_offset: i64,
    /// The body, as the producer sent it (compressed if the sysFlag says so).
    pub body: Bytes,
    /// The properties, in stored order.
    pub properties: Properties,
    /// BODYCRC as read; `encode` always writes the CRC of `body`.
    pub body_crc: u32,
    /// The record magic; topics longer than 127 bytes are written as V2 whatever this says.
    pub version: MessageVersion,
}

impl Default for MessageExt {
    fn default() -> Self {
        let unspecified = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        MessageExt {
            topic: String::new(),
            queue_id: 0,
            flag: 0,
            queue_offset: 0,
            commit_log_offset: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: unspecified,
            store_timestamp: 0,
            store_host: unspecified,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::new(),
            properties: Properties::default(),
            body_crc: 0,
            version: MessageVersion::V1,
        }
    }
}

impl MessageExt {
    /// The `TAGS` property.
    pub fn tags(&self) -> Option<&str> {
        self.properties.get(keys::TAGS).map(String::as_str)
    }

    /// The keys of the `KEYS` property, split on spaces, empty ones skipped.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.properties
            .get(keys::KEYS)
            .into_iter()
            .flat_map(|k| k.split(crate::properties::KEY_SEPARATOR).filter(|k| !k.is_empty()))
    }

    /// The producer-assigned `UNIQ_KEY`.
    pub fn uniq_key(&self) -> Option<&str> {
        self.properties.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX).map(String::as_str)
    }

    /// The broker-side id: store host + commit-log offset.
    pub fn offset_msg_id(&self) -> String {
        create_offset_msg_id(self.store_host, self.commit_log_offset)
    }

    /// What applications see as the message id: UNIQ_KEY, else the offset id.
    pub fn msg_id(&self) -> String {
        self.uniq_key().map_or_else(|| self.offset_msg_id(), str::to_owned)
    }

    /// sysFlag with the IPv6 bits matching the two addresses.
    pub fn effective_sys_flag(&self) -> i32 {
        let mut f = self.sys_flag & !(sys_flag::BORNHOST_V6_FLAG | sys_flag::STOREHOSTADDRESS_V6_FLAG);
        if self.born_host.is_ipv6() {
            f |= sys_flag::BORNHOST_V6_FLAG;
        }
        if self.store_host.is_ipv6() {
            f |= sys_flag::STOREHOSTADDRESS_V6_FLAG;
        }
        f
    }

    fn effective_version(&self) -> MessageVersion {
        if self.topic.len() > i8::MAX as usize {
            MessageVersion::V2
        } else {
            self.version
        }
    }

    /// TOTALSIZE of this message's record, or an error if a field cannot be represented.
    pub fn encoded_len(&self) -> Result<usize, MessageError> {
        let props_len = encode_properties(&self.properties)?.len();
        Ok(self.len_with(props_len))
    }

    fn len_with(&self, props_len: usize) -> usize {
        let topic_len_bytes = match self.effective_version() {
            MessageVersion::V1 => 1,
            MessageVersion::V2 => 2,
        };
        4 + 4
            + 4
            + 4
            + 4
            + 8
            + 8
            + 4
            + 8
            + host_len(self.born_host.is_ipv6())
            + 8
            + host_len(self.store_host.is_ipv6())
            + 4
            + 8
            + 4
            + self.body.len()
            + topic_len_bytes
            + self.topic.len()
            + 2
            + props_len
    }

    /// Appends the record to `out`, with BODYCRC computed from `body`.
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), MessageError> {
        let props = encode_properties(&self.properties)?;
        if props.len() > crate::properties::MAX_PROPERTIES_BYTES {
            return Err(MessageError::PropertiesTooLong(props.len()));
        }
        if self.topic.len() > i16::MAX as usize {
            return Err(MessageError::TopicTooLong(self.topic.len()));
        }
        let total = self.len_with(props.len());
        let total_i32 = i32::try_from(total).map_err(|_| MessageError::SizeMismatch {
            declared: -1,
            actual: total,
        })?;
        let start = out.len();
        out.reserve(total);
        out.put_i32(total_i32);
        let version = self.effective_version();
        out.put_i32(match version {
            MessageVersion::V1 => MAGIC_CODE_V1,
            MessageVersion::V2 => MAGIC_CODE_V2,
        });
        out.put_u32(body_crc(&self.body));
        out.put_i32(self.queue_id);
        out.put_i32(self.flag);
        out.put_i64(self.queue_offset);
        out.put_i64(self.commit_log_offset);
        out.put_i32(self.effective_sys_flag());
        out.put_i64(self.born_timestamp);
        put_host(out, self.born_host);
        out.put_i64(self.store_timestamp);
        put_host(out, self.store_host);
        out.put_i32(self.reconsume_times);
        out.put_i64(self.prepared_transaction_offset);
        #[expect(clippy::cast_possible_truncation, reason = "the body is shorter than TOTALSIZE, which fits an i32")]
        let body_len = self.body.len() as i32;
        out.put_i32(body_len);
        out.put_slice(&self.body);
        match version {
            MessageVersion::V1 => {
                #[expect(clippy::cast_possible_truncation, reason = "effective_version gives V2 to topics over 127 bytes")]
                let topic_len = self.topic.len() as u8;
                out.put_u8(topic_len);
            }
            MessageVersion::V2 => {
                #[expect(clippy::cast_possible_truncation, reason = "longer topics were refused above")]
                let topic_len = self.topic.len() as i16;
                out.put_i16(topic_len);
            }
        }
        out.put_slice(self.topic.as_bytes());
        #[expect(clippy::cast_possible_truncation, reason = "longer properties were refused above")]
        let props_len = props.len() as i16;
        out.put_i16(props_len);
        out.put_slice(props.as_bytes());
        debug_assert_eq!(out.len() - start, total, "TOTALSIZE must equal the bytes written");
        Ok(())
    }

    /// The record as bytes; see [`MessageExt::encode`].
    pub fn to_bytes(&self) -> Result<Bytes, MessageError> {
        let mut out = BytesMut::new();
        self.encode(&mut out)?;
        Ok(out.freeze())
    }

    /// Decodes the record at the start of `buf`; returns it and its size. BODYCRC is not
    /// checked (clients do not either); see [`MessageExt::decode_verified`].
    pub fn decode(buf: &[u8]) -> Result<(MessageExt, usize), MessageError> {
        Ok(MessageExt::from_view(&RecordView::parse(buf)?))
    }

    fn from_view(v: &RecordView<'_>) -> (MessageExt, usize) {
        let msg = MessageExt {
            topic: v.topic.to_owned(),
            queue_id: v.queue_id,
            flag: v.flag,
            queue_offset: v.queue_offset,
            commit_log_offset: v.commit_log_offset,
            sys_flag: v.sys_flag,
            born_timestamp: v.born_timestamp,
            born_host: v.born_host,
            store_timestamp: v.store_timestamp,
            store_host: v.store_host,
            reconsume_times: v.reconsume_times,
            prepared_transaction_offset: v.prepared_transaction_offset,
            body: Bytes::copy_from_slice(v.body),
            properties: decode_properties(v.properties),
            body_crc: v.body_crc,
            version: v.version,
        };
        (msg, v.size_bytes)
    }

    /// As [`MessageExt::decode`], and the stored BODYCRC must match the body.
    pub fn decode_verified(buf: &[u8]) -> Result<(MessageExt, usize), MessageError> {
        Ok(MessageExt::from_view(&RecordView::parse_verified(buf)?))
    }
}

/// Decodes a PULL/QUERY body: records back to back. Like Java, decoding stops at the first record
/// that does not decode, but here that is an error rather than a silent cut.
pub fn decode_messages(mut buf: &[u8]) -> Result<Vec<MessageExt>, MessageError> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let (msg, used) = MessageExt::decode(buf)?;
        out.push(msg);
        buf = &buf[used..];
    }
    Ok(out)
}

fn put_host(out: &mut BytesMut, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => out.put_slice(&ip.octets()),
        IpAddr::V6(ip) => out.put_slice(&ip.octets()),
    }
    out.put_i32(addr.port() as i32);
}

/// A record read in place, with the checks of [`MessageExt::decode`] and no copy: its fixed
/// fields, and its variable ones as slices of the buffer. For readers that need a few fields of
/// many records (the dispatcher needs topic, queue and tags of every record it indexes).
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a> {
    /// TOTALSIZE: the bytes this record takes.
    pub size_bytes: usize,
    /// Which magic the record has.
    pub version: MessageVersion,
    /// BODYCRC as stored.
    pub body_crc: u32,
    /// See [`MessageExt::queue_id`].
    pub queue_id: i32,
    /// See [`MessageExt::flag`].
    pub flag: i32,
    /// See [`MessageExt::queue_offset`].
    pub queue_offset: i64,
    /// See [`MessageExt::commit_log_offset`].
    pub commit_log_offset: i64,
    /// SYSFLAG as stored, IPv6 host bits included.
    pub sys_flag: i32,
    /// See [`MessageExt::born_timestamp`].
    pub born_timestamp: i64,
    /// See [`MessageExt::born_host`].
    pub born_host: SocketAddr,
    /// See [`MessageExt::store_timestamp`].
    pub store_timestamp: i64,
    /// See [`MessageExt::store_host`].
    pub store_host: SocketAddr,
    /// See [`MessageExt::reconsume_times`].
    pub reconsume_times: i32,
    /// See [`MessageExt::prepared_transaction_offset`].
    pub prepared_transaction_offset: i64,
    /// The body bytes.
    pub body: &'a [u8],
    /// The topic.
    pub topic: &'a str,
    /// Encoded properties (`name\u{1}value\u{2}`…).
    pub properties: &'a str,
}

impl<'a> RecordView<'a> {
    /// Whether the record ends in a zero byte where no writer puts one: the last byte of its
    /// properties (each pair ends in 0x02, and no name or value holds 0x00 in practice), or of
    /// its topic when it has none (topic names are letters, digits and `%|_-`). A record whose
    /// last bytes never reached the disk reads back with zeros there, and BODYCRC, which covers
    /// only the body, does not show it.
    #[must_use]
    pub fn ends_in_zero(&self) -> bool {
        let last = if self.properties.is_empty() { self.topic } else { self.properties };
        last.as_bytes().last() == Some(&0)
    }

    /// As [`RecordView::parse`], and the stored BODYCRC must match the body.
    ///
    /// # Errors
    /// Those of [`RecordView::parse`], and [`MessageError::BodyCrc`].
    pub fn parse_verified(buf: &'a [u8]) -> Result<RecordView<'a>, MessageError> {
        let view = RecordView::parse(buf)?;
        let computed = body_crc(view.body);
        if computed != view.body_crc {
            return Err(MessageError::BodyCrc {
                stored: view.body_crc,
                computed,
            });
        }
        Ok(view)
    }

    /// Reads the record at the start of `buf`.
    ///
    /// # Errors
    /// A bad magic, a size that disagrees with the fields, a field past the record's end, or a
    /// topic or properties that are not UTF-8.
    pub fn parse(buf: &'a [u8]) -> Result<RecordView<'a>, MessageError> {
        let mut r = Reader { buf, pos: 0 };
        let total = r.i32("TOTALSIZE")?;
        let magic = r.i32("MAGICCODE")?;
        let version = match magic {
            MAGIC_CODE_V1 => MessageVersion::V1,
            MAGIC_CODE_V2 => MessageVersion::V2,
            other => return Err(MessageError::BadMagic(other as u32)),
        };
        if total < 8 {
            return Err(MessageError::SizeMismatch {
                declared: total.into(),
                actual: 8,
            });
        }
        if total as usize > buf.len() {
            return Err(MessageError::Truncated {
                field: "record",
                offset: 0,
                needed: total as usize,
                available: buf.len(),
            });
        }
        // Everything after this reads only inside the declared record.
        let mut r = Reader {
            buf: &buf[..total as usize],
            pos: 8,
        };
        let body_crc = r.i32("BODYCRC")? as u32;
        let queue_id = r.i32("QUEUEID")?;
        let flag = r.i32("FLAG")?;
        let queue_offset = r.i64("QUEUEOFFSET")?;
        let commit_log_offset = r.i64("PHYSICALOFFSET")?;
        let sys_flag = r.i32("SYSFLAG")?;
        let born_timestamp = r.i64("BORNTIMESTAMP")?;
        let born_host = r.host(sys_flag & sys_flag::BORNHOST_V6_FLAG != 0, "BORNHOST")?;
        let store_timestamp = r.i64("STORETIMESTAMP")?;
        let store_host = r.host(sys_flag & sys_flag::STOREHOSTADDRESS_V6_FLAG != 0, "STOREHOSTADDRESS")?;
        let reconsume_times = r.i32("RECONSUMETIMES")?;
        let prepared_transaction_offset = r.i64("PREPAREDTRANSACTIONOFFSET")?;
        let body_len = r.len_i32("BODYLENGTH")?;
        let body = r.take(body_len, "BODY")?;
        let topic_len = match version {
            MessageVersion::V1 => r.take(1, "TOPICLENGTH")?[0] as usize,
            MessageVersion::V2 => r.len_i16("TOPICLENGTH")?,
        };
        let topic = std::str::from_utf8(r.take(topic_len, "TOPIC")?).map_err(|_| MessageError::InvalidUtf8("topic"))?;
        let props_len = r.len_i16("PROPERTIESLENGTH")?;
        let properties = std::str::from_utf8(r.take(props_len, "PROPERTIES")?).map_err(|_| MessageError::InvalidUtf8("properties"))?;
        if r.pos != total as usize {
            return Err(MessageError::SizeMismatch {
                declared: total.into(),
                actual: r.pos,
            });
        }
        Ok(RecordView {
            size_bytes: total as usize,
            version,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
            body,
            topic,
            properties,
        })
    }

    /// The `TAGS` property, as [`MessageExt::tags`] reads it.
    #[must_use]
    pub fn tags(&self) -> Option<&'a str> {
        property(self.properties, keys::TAGS)
    }
}

/// A bounds-checked big-endian reader.
pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], MessageError> {
        let available = self.buf.len().saturating_sub(self.pos);
        if n > available {
            return Err(MessageError::Truncated {
                field,
                offset: self.pos,
                needed: n,
                available,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub(crate) fn i16(&mut self, field: &'static str) -> Result<i16, MessageError> {
        Ok(i16::from_be_bytes(self.take(2, field)?.try_into().expect("2 bytes")))
    }
    pub(crate) fn i32(&mut self, field: &'static str) -> Result<i32, MessageError> {
        Ok(i32::from_be_bytes(self.take(4, field)?.try_into().expect("4 bytes")))
    }
    pub(crate) fn i64(&mut self, field: &'static str) -> Result<i64, MessageError> {
        Ok(i64::from_be_bytes(self.take(8, field)?.try_into().expect("8 bytes")))
    }
    pub(crate) fn len_i32(&mut self, field: &'static str) -> Result<usize, MessageError> {
        let v = self.i32(field)?;
        usize::try_from(v).map_err(|_| MessageError::NegativeLength { field, value: v.into() })
    }
    pub(crate) fn len_i16(&mut self, field: &'static str) -> Result<usize, MessageError> {
        let v = self.i16(field)?;
        usize::try_from(v).map_err(|_| MessageError::NegativeLength { field, value: v.into() })
    }
    fn host(&mut self, v6: bool, field: &'static str) -> Result<SocketAddr, MessageError> {
        let ip = if v6 {
            let b: [u8; 16] = self.take(16, field)?.try_into().expect("16 bytes");
            IpAddr::V6(Ipv6Addr::from(b))
        } else {
            let b: [u8; 4] = self.take(4, field)?.try_into().expect("4 bytes");
            IpAddr::V4(Ipv4Addr::from(b))
        };
        #[expect(
            clippy::cast_possible_truncation,
            reason = "Java writes the port as an int; only its low 16 bits are a port"
        )]
        let port = self.i32(field)? as u16;
        Ok(SocketAddr::new(ip, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_ends_in_zero_only_where_its_last_bytes_were_lost() {
        let mut props = Properties::default();
        props.insert("TAGS".into(), "A".into());
        let with_props = MessageExt {
            topic: "T".into(),
            body: Bytes::from_static(b"hi"),
            properties: props,
            ..Default::default()
        };
        let bare = MessageExt {
            properties: Properties::default(),
            ..with_props.clone()
        };
        for msg in [&with_props, &bare] {
            let whole = msg.to_bytes().unwrap().to_vec();
            assert!(!RecordView::parse(&whole).unwrap().ends_in_zero(), "as written: {msg:?}");
            // The last byte of the properties (or, without them, of the topic) lost.
            let cut = if msg.properties.is_empty() { 3 } else { 1 };
            let mut torn = whole.clone();
            torn[whole.len() - cut] = 0;
            let view = RecordView::parse(&torn).unwrap();
            assert!(view.ends_in_zero(), "last bytes zeroed: {msg:?}");
            assert_eq!(body_crc(view.body), view.body_crc, "the body CRC cannot tell");
        }
    }

    /// The 153-byte worked example of the protocol reference, §5.1.
    #[test]
    fn reference_worked_example() {
        let mut props = Properties::default();
        props.insert("TAGS".into(), "A".into());
        props.insert("WAIT".into(), "true".into());
        props.insert("UNIQ_KEY".into(), "7F00000100002A9F0000000000000000".into());
        let msg = MessageExt {
            topic: "T".into(),
            queue_offset: 5,
            commit_log_offset: 1024,
            born_timestamp: 1732270000000,
            born_host: "127.0.0.1:50000".parse().unwrap(),
            store_timestamp: 1732270000005,
            store_host: "127.0.0.1:10911".parse().unwrap(),
            body: Bytes::from_static(b"hi"),
            properties: props,
            body_crc: 0x5893_2AAC,
            ..Default::default()
        };
        let bytes = msg.to_bytes().unwrap();
        assert_eq!(bytes.len(), 153);
        assert_eq!(&bytes[..12], &[0, 0, 0, 0x99, 0xda, 0xa3, 0x20, 0xa7, 0x58, 0x93, 0x2a, 0xac]);
        assert_eq!(&bytes[0x40..0x48], &[0x7f, 0, 0, 1, 0, 0, 0x2a, 0x9f]);
        let (back, used) = MessageExt::decode_verified(&bytes).unwrap();
        assert_eq!(used, 153);
        assert_eq!(back, msg);
        assert_eq!(back.offset_msg_id(), "7F00000100002A9F0000000000000400");
    }

    #[test]
    fn reconsume_times_are_rewritten_in_place_for_v4_and_v6_hosts() {
        for (born, store) in [
            ("127.0.0.1:1", "127.0.0.1:2"),
            ("[fd00::2]:1", "[fd00::3]:2"),
            ("127.0.0.1:1", "[fd00::3]:2"),
        ] {
            let msg = MessageExt {
                topic: "T".into(),
                born_host: born.parse().unwrap(),
                store_host: store.parse().unwrap(),
                reconsume_times: 2,
                body: Bytes::from_static(b"x"),
                ..Default::default()
            };
            let mut bytes = msg.to_bytes().unwrap().to_vec();
            assert!(set_reconsume_times(&mut bytes, 7));
            let (back, _) = MessageExt::decode(&bytes).unwrap();
            assert_eq!(back.reconsume_times, 7, "{born} {store}");
            assert_eq!(
                MessageExt {
                    reconsume_times: 2,
                    body_crc: 0,
                    sys_flag: 0,
                    ..back
                },
                msg,
                "nothing else moved"
            );
        }
        assert!(!set_reconsume_times(&mut [0u8; 20], 1), "too short");
    }

    #[test]
    fn ipv6_hosts_and_v2_topics() {
        let msg = MessageExt {
            topic: "t".repeat(200),
            born_host: "[fd00::2]:5000".parse().unwrap(),
            store_host: "[::1]:10911".parse().unwrap(),
            body: Bytes::from_static(b"x"),
            ..Default::default()
        };
        let bytes = msg.to_bytes().unwrap();
        let (back, _) = MessageExt::decode(&bytes).unwrap();
        assert_eq!(back.version, MessageVersion::V2);
        assert_eq!(back.sys_flag, sys_flag::BORNHOST_V6_FLAG | sys_flag::STOREHOSTADDRESS_V6_FLAG);
        assert_eq!(back.born_host, msg.born_host);
        assert_eq!(back.topic, msg.topic);
        assert_eq!(store_timestamp_pos(back.sys_flag), 68);
    }

    #[test]
    fn every_truncation_and_corruption_is_an_error() {
        let msg = MessageExt {
            topic: "T".into(),
            body: Bytes::from_static(b"hello"),
            ..Default::default()
        };
        let bytes = msg.to_bytes().unwrap();
        for cut in 0..bytes.len() {
            assert!(MessageExt::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = bytes.to_vec();
        bad[4] ^= 1;
        assert!(matches!(MessageExt::decode(&bad), Err(MessageError::BadMagic(_))));
        let mut flipped = bytes.to_vec();
        let body_at = 84 + 4;
        flipped[body_at] ^= 0x20;
        assert!(matches!(MessageExt::decode_verified(&flipped), Err(MessageError::BodyCrc { .. })));
        // a size word smaller than the size and magic words themselves
        let mut tiny = bytes.to_vec();
        tiny[..4].copy_from_slice(&4i32.to_be_bytes());
        assert!(matches!(MessageExt::decode(&tiny), Err(MessageError::SizeMismatch { .. })));
        // a body length that runs past the record
        let mut overrun = bytes.to_vec();
        overrun[84..88].copy_from_slice(&1000i32.to_be_bytes());
        assert!(MessageExt::decode(&overrun).is_err());
        overrun[84..88].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(MessageExt::decode(&overrun), Err(MessageError::NegativeLength { .. })));
    }
}
