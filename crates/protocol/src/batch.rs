//! The SEND_BATCH_MESSAGE body: items of `size | magic 0 | crc 0 | flag | body | properties`.
//!
//! Owns: that codec. Must never: decide batch rules (one topic, no delay, no retry topic); the
//! broker checks those.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::MessageError;
use crate::message::Reader;
use crate::properties::{MAX_PROPERTIES_BYTES, Properties, decode_properties, encode_properties};

/// One message inside a batch body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BatchItem {
    /// The application's flag, stored as given.
    pub flag: i32,
    /// The message body.
    pub body: Bytes,
    /// The message's properties.
    pub properties: Properties,
}

/// Encodes items back to back, as the Java and Go producers do. An item too long for its i32
/// size field is refused as a [`MessageError::SizeMismatch`] declaring -1.
pub fn encode_batch(items: &[BatchItem]) -> Result<Bytes, MessageError> {
    let mut out = BytesMut::new();
    for item in items {
        let props = encode_properties(&item.properties)?;
        if props.len() > MAX_PROPERTIES_BYTES {
            return Err(MessageError::PropertiesTooLong(props.len()));
        }
        let total = 4 + 4 + 4 + 4 + 4 + item.body.len() + 2 + props.len();
        let total_i32 = i32::try_from(total).map_err(|_| MessageError::SizeMismatch {
            declared: -1,
            actual: total,
        })?;
        #[expect(
            clippy::cast_possible_truncation,
            reason = "the body is shorter than the item's size, which fits an i32"
        )]
        let body_len = item.body.len() as i32;
        #[expect(clippy::cast_possible_truncation, reason = "longer properties were refused above")]
        let props_len = props.len() as i16;
        out.reserve(total);
        out.put_i32(total_i32);
        out.put_i32(0); // magic: ignored by brokers
        out.put_i32(0); // body CRC: the broker recomputes it
        out.put_i32(item.flag);
        out.put_i32(body_len);
        out.put_slice(&item.body);
        out.put_i16(props_len);
        out.put_slice(props.as_bytes());
    }
    Ok(out.freeze())
}

/// Decodes a batch body; every length is checked against the bytes present and the declared size.
pub fn decode_batch(buf: &[u8]) -> Result<Vec<BatchItem>, MessageError> {
    let mut items = Vec::new();
    let mut r = Reader { buf, pos: 0 };
    while r.pos < buf.len() {
        let start = r.pos;
        let total = r.len_i32("TOTALSIZE")?;
        let _magic = r.i32("MAGICCODE")?;
        let _crc = r.i32("BODYCRC")?;
        let flag = r.i32("FLAG")?;
        let body_len = r.len_i32("BODYLENGTH")?;
        let body = Bytes::copy_from_slice(r.take(body_len, "BODY")?);
        let props_len = r.len_i16("PROPERTIESLENGTH")?;
        let props = std::str::from_utf8(r.take(props_len, "PROPERTIES")?).map_err(|_| MessageError::InvalidUtf8("properties"))?;
        if r.pos - start != total {
            return Err(MessageError::SizeMismatch {
                declared: total as i64,
                actual: r.pos - start,
            });
        }
        items.push(BatchItem {
            flag,
            body,
            properties: decode_properties(props),
        });
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_sizes() {
        let mut p = Properties::default();
        p.insert("UNIQ_KEY".into(), "ABC".into());
        let items = vec![
            BatchItem {
                flag: 3,
                body: Bytes::from_static(b"one"),
                properties: p,
            },
            BatchItem::default(),
        ];
        let bytes = encode_batch(&items).unwrap();
        assert_eq!(decode_batch(&bytes).unwrap(), items);
        for cut in 1..bytes.len() {
            if decode_batch(&bytes[..cut]).is_ok() {
                // the only valid prefix is exactly the first item
                assert_eq!(cut, 4 * 5 + 3 + 2 + "UNIQ_KEY\u{1}ABC\u{2}".len());
            }
        }
        let mut wrong = bytes.to_vec();
        wrong[3] += 1;
        assert!(matches!(
            decode_batch(&wrong),
            Err(MessageError::SizeMismatch { .. }) | Err(MessageError::Truncated { .. })
        ));
    }
}
