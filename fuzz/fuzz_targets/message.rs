//! Stored-message, batch, properties and fastjson decoders: never panic, and a decoded record
//! re-encodes to one that decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petrel_protocol::batch::{decode_batch, encode_batch};
use petrel_protocol::fastjson::parse_lenient;
use petrel_protocol::message::{MessageExt, decode_messages};

fuzz_target!(|data: &[u8]| {
    if let Ok((msg, used)) = MessageExt::decode(data) {
        assert!(used <= data.len());
        let bytes = msg.to_bytes().expect("a decoded record re-encodes");
        let (again, again_used) = MessageExt::decode_verified(&bytes).expect("re-encoded record decodes with a valid CRC");
        assert_eq!(again_used, bytes.len());
        assert_eq!(again.properties, msg.properties);
        assert_eq!((again.topic, again.body), (msg.topic, msg.body));
    }
    let _ = decode_messages(data);
    if let Ok(items) = decode_batch(data) {
        let again = decode_batch(&encode_batch(&items).expect("decoded items re-encode")).expect("re-encoded batch decodes");
        assert_eq!(again, items);
    }
    let _ = parse_lenient(data);
});
