//! Process limits: the open-file limit bounds how many connections a process can hold.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Descriptors kept for files, listeners and the store beside client connections.
const RESERVED_DESCRIPTORS: u64 = 512;

/// Raises the soft open-file limit to the hard one (as RocketMQ's start scripts do with
/// `ulimit -n`), gives connections what the store and listeners do not need (a plain one takes
/// one descriptor, a TLS one three: see `petrel_remoting::set_descriptor_budget`), and warns
/// when `max_connections` cannot fit under it.
pub fn raise_open_file_limit(max_connections: usize) {
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    let limit = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    // A small limit still leaves the store half of it.
    let room = limit.saturating_sub(RESERVED_DESCRIPTORS.min(limit / 2));
    petrel_remoting::set_descriptor_budget(usize::try_from(room).unwrap_or(usize::MAX));
    if max_connections as u64 > room {
        tracing::warn!(
            max_connections,
            open_file_limit = limit,
            "maxConnections exceeds what the open-file limit allows; connections beyond about {room} (a third of that over TLS) are refused as they arrive"
        );
    }
}
