//! Request handling for Petrel: the name server today; the broker's processors next.
//!
//! Owns: turning RemotingCommands into answers with the codes, headers and bodies the official
//! clients expect, and the TCP serving loop. Must never: touch files directly (that is the
//! store's) or block the async runtime.

pub mod namesrv;
pub mod server;
