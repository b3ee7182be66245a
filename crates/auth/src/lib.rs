//! RocketMQ ACL 2.0 for the broker and the name server: who a request comes from (its
//! `AccessKey` and an HMAC-SHA1 `Signature` over its fields and body), and whether that user may
//! do what the request does to a resource (policies of Allow / Deny entries on topics, groups,
//! clusters, by action and source address). Users and policies live in memory and are written
//! to two JSON files on every change.
//!
//! Also the proof two of Petrel's own processes give each other of a shared secret (`peer.rs`:
//! a master and its slaves on the HA port, controllers on their Raft port).
//!
//! Owns: the signature, the user and policy tables, their files and the decision. Must never:
//! log a password or a signature, accept a signature it did not compute itself (compared in
//! constant time), or let a policy change reach the files half-written. Which resource and action
//! a request code means is the broker's table, not this crate's.

#![forbid(unsafe_code)]

mod decide;
mod error;
mod grpc;
mod model;
mod peer;
mod settings;
mod sign;
mod store;

pub use decide::{AuthSettings, Check, Principal};
pub use error::AuthError;
pub use grpc::{GrpcAuthorization, MAX_AUTHORIZATION_BYTES};
pub use model::{AclInfo, Action, EntryInfo, Pattern, PolicyInfo, RETRY_PREFIX, Resource, ResourceType, SourceIp, UserInfo};
pub use peer::{Exchange, NONCE_BYTES, PROOF_BYTES, PeerRole, PeerSecret, nonce};
pub use settings::{check_strategy, is_stateful, parse_codes, parse_credentials, parse_init_user};
pub use sign::{ACCESS_KEY, MAX_SIGNED_FIELDS, SIGNATURE, sign, signature, verify};
pub use store::{AuthStore, Credentials, MAX_ACL_ENTRIES, MAX_USERS};
