//! The JSON bodies requests carry, in fastjson's dialect: heartbeats, lock and POP requests, a
//! group's settings, route and registration tables, controller SyncStateSets, ACL users and
//! policies. Any bytes parse or fail with an error, never a panic, and what parses re-encodes to
//! JSON that parses to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petrel_protocol::body::{
    self, HeartbeatData, LockBatchRequestBody, QueryAssignmentRequestBody, RegisterBrokerBody, SetMessageRequestModeRequestBody,
    SyncStateSetBody, TopicConfigSerializeWrapper,
};

fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(data: &[u8]) {
    if let Ok(value) = body::from_json::<T>(data) {
        let again: T = body::from_json(body::to_json(&value).as_bytes()).expect("re-encoded JSON parses");
        assert_eq!(again, value);
    }
}

fuzz_target!(|data: &[u8]| {
    round_trip::<HeartbeatData>(data);
    round_trip::<LockBatchRequestBody>(data);
    round_trip::<QueryAssignmentRequestBody>(data);
    round_trip::<SetMessageRequestModeRequestBody>(data);
    round_trip::<SyncStateSetBody>(data);
    round_trip::<TopicConfigSerializeWrapper>(data);
    let _ = body::from_json::<RegisterBrokerBody>(data);
    #[cfg(feature = "services")]
    if let Ok(group) = body::from_json::<petrel_broker::services::groups::GroupConfig>(data) {
        let _ = group.validate();
    }
    let _ = serde_json::from_slice::<petrel_auth::UserInfo>(data);
    let _ = serde_json::from_slice::<petrel_auth::AclInfo>(data);
    let _ = serde_json::from_slice::<serde_json::Value>(data);
});
