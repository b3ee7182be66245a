//! Request signatures as RocketMQ's `AclClientRPCHook` makes them: HMAC-SHA1, keyed by the
//! user's secret, over the values of every ext field except `Signature` taken in the order of
//! their names, then the body; the result in standard Base64.
//!
//! The names are ordered as Java's `TreeMap<String, _>` orders them (UTF-16 code units), which is
//! byte order for the ASCII names every client sends. The MAC is fed field by field, so checking a
//! signature allocates only the list of fields it sorts.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use petrel_protocol::{ExtFields, RemotingCommand};
use sha1::Sha1;

/// The ext field naming the user.
pub const ACCESS_KEY: &str = "AccessKey";
/// The ext field holding the signature.
pub const SIGNATURE: &str = "Signature";
/// Left out of the signed content by clients up to 4.9.3 (`MixAll.UNIQUE_MSG_QUERY_FLAG`).
const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";
/// `MQVersion.Version.V4_9_3.ordinal()`.
const V4_9_3: i32 = 399;
/// Ext fields a signed request may carry; a request with more is not worth sorting.
pub const MAX_SIGNED_FIELDS: usize = 256;

type HmacSha1 = Hmac<Sha1>;

/// The signature of `fields` (minus `Signature`) and `body` under `secret`, Base64.
///
/// # Panics
/// Never: HMAC takes a key of any length.
#[must_use]
pub fn signature(fields: &ExtFields, body: &[u8], secret: &str, version: i32) -> String {
    let mut names: Vec<(&str, &str)> = fields
        .iter()
        .filter(|(k, _)| k.as_str() != SIGNATURE && !(version <= V4_9_3 && k.as_str() == UNIQUE_KEY_QUERY))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    // UTF-8 byte order is UTF-16 order unless a name holds a character beyond U+FFFF.
    if names.iter().all(|(k, _)| k.is_ascii()) {
        names.sort_unstable_by(|a, b| a.0.cmp(b.0));
    } else {
        names.sort_unstable_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    }
    #[allow(clippy::expect_used)]
    let mut mac = HmacSha1::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    for (_, value) in &names {
        mac.update(value.as_bytes());
    }
    mac.update(body);
    STANDARD.encode(mac.finalize().into_bytes())
}

/// Signs `request` as `AclClientRPCHook` does: adds `AccessKey`, then `Signature`.
pub fn sign(request: &mut RemotingCommand, access_key: &str, secret: &str) {
    let fields = request.ext_fields.get_or_insert_with(ExtFields::default);
    fields.insert(ACCESS_KEY.to_owned(), access_key.to_owned());
    fields.shift_remove(SIGNATURE);
    let sig = signature(fields, &request.body, secret, request.version);
    fields.insert(SIGNATURE.to_owned(), sig);
}

/// Whether `given` is the signature of the request under `secret`, compared in constant time.
#[must_use]
pub fn verify(request: &RemotingCommand, secret: &str, given: &str) -> bool {
    let Some(fields) = request.ext_fields.as_ref() else {
        return false;
    };
    let expected = signature(fields, &request.body, secret, request.version);
    constant_time_eq(expected.as_bytes(), given.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> ExtFields {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn the_signature_is_hmac_sha1_over_values_in_name_order_then_the_body() {
        // HMAC-SHA1(key="12345678", "rocketmq2" + "TopicA" + "hello"), computed independently
        // with `printf 'rocketmq2TopicAhello' | openssl dgst -sha1 -hmac 12345678 -binary | base64`.
        let f = fields(&[("topic", "TopicA"), ("AccessKey", "rocketmq2")]);
        assert_eq!(signature(&f, b"hello", "12345678", 513), "CLWlAOdV2SOUQYi+6SjfwmrW+O0=");
        // Order of arrival does not matter; the Signature field itself is left out.
        let g = fields(&[("AccessKey", "rocketmq2"), ("Signature", "x"), ("topic", "TopicA")]);
        assert_eq!(signature(&g, b"hello", "12345678", 513), signature(&f, b"hello", "12345678", 513));
    }

    #[test]
    fn sign_then_verify_and_any_change_breaks_it() {
        let mut r = RemotingCommand::request(10, 1).with_ext_fields(fields(&[("a", "g"), ("b", "TopicA")]));
        r.body = bytes::Bytes::from_static(b"payload");
        sign(&mut r, "alice", "secret-1");
        let sig = r.ext_fields.as_ref().and_then(|f| f.get(SIGNATURE)).cloned().unwrap_or_default();
        assert!(verify(&r, "secret-1", &sig));
        assert!(!verify(&r, "secret-2", &sig));
        let mut tampered = r.clone();
        tampered.body = bytes::Bytes::from_static(b"payloaD");
        assert!(!verify(&tampered, "secret-1", &sig));
        let mut renamed = r.clone();
        if let Some(f) = renamed.ext_fields.as_mut() {
            f.insert("b".into(), "TopicB".into());
        }
        assert!(!verify(&renamed, "secret-1", &sig));
    }

    #[test]
    fn old_clients_leave_the_unique_key_query_flag_out() {
        let f = fields(&[("AccessKey", "u"), ("_UNIQUE_KEY_QUERY", "true")]);
        let without = fields(&[("AccessKey", "u")]);
        assert_eq!(signature(&f, b"", "k", 399), signature(&without, b"", "k", 399));
        assert_ne!(signature(&f, b"", "k", 400), signature(&without, b"", "k", 400));
    }
}
