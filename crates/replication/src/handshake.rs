//! The HA port's own authentication, when the set shares a secret (`haSecret`): before a byte of
//! RocketMQ's HA protocol, master and slave prove to each other that they hold it (see
//! `petrel_auth::PeerSecret`). The slave opens with [`MAGIC`] and its nonce; the master answers
//! with [`MAGIC`], its nonce and its proof; the slave checks it and sends its own proof. A peer
//! that cannot prove it is refused before it is counted as a slave, so it can neither ack for a
//! SyncStateSet member nor take one of `haMaxSlaves` places; a slave never appends from a
//! master that cannot prove it.
//!
//! Without a secret the port speaks RocketMQ's protocols unchanged (so RocketMQ brokers can
//! join), and is unprotected. [`MAGIC`] cannot open either of them: a classic slave opens with
//! its offset (`PTRL` would make it larger than any log), an AutoSwitch slave with its state.
//!
//! Owns: the exchange's bytes and its time bound. Must never: read more than the exchange's
//! fixed sizes, or wait past [`HANDSHAKE_TIMEOUT`].

use crate::error::{ReplicationError, Step};
use std::io::{Read, Write};
use std::time::Duration;

use petrel_auth::{Exchange, NONCE_BYTES, PROOF_BYTES, PeerRole, PeerSecret, nonce};

/// What opens Petrel's HA handshake.
pub const MAGIC: &[u8; 8] = b"PTRLHA01";
/// The protocol name proofs are bound to.
const PROTOCOL: &str = "ha";
/// The whole exchange must finish within this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether `first` (the first bytes a peer sent) opens Petrel's handshake.
#[must_use]
pub fn opens_handshake(first: &[u8]) -> bool {
    first.len() >= MAGIC.len() && &first[..MAGIC.len()] == MAGIC
}

fn read_exact(stream: &mut impl Read, buf: &mut [u8], what: &'static str) -> Result<(), ReplicationError> {
    stream.read_exact(buf).step(what)
}

/// The master's side, after the connection's first 8 bytes (which must be [`MAGIC`]); `binding`
/// is the TLS session's channel binding (empty on a plain connection).
///
/// # Errors
/// Anything but a slave that proves it holds `secret`.
pub fn accept(stream: &mut (impl Read + Write), secret: &PeerSecret, first: &[u8; 8], binding: &[u8]) -> Result<(), ReplicationError> {
    if !opens_handshake(first) {
        return Err(ReplicationError::Unauthenticated(
            "the peer did not authenticate (a broker without haSecret, or not a broker)",
        ));
    }
    let mut theirs = [0u8; NONCE_BYTES];
    read_exact(stream, &mut theirs, "the slave's nonce")?;
    let ours = nonce();
    let exchange = Exchange {
        accepting: &ours,
        connecting: &theirs,
        binding,
    };
    let proof = secret.proof(PROTOCOL, PeerRole::Accepting, exchange);
    stream
        .write_all(&[&MAGIC[..], &ours, &proof].concat())
        .step("sending the master's proof")?;
    let mut answer = [0u8; PROOF_BYTES];
    read_exact(stream, &mut answer, "the slave's proof")?;
    if !secret.verify(PROTOCOL, PeerRole::Connecting, exchange, &answer) {
        return Err(ReplicationError::Unauthenticated("the slave's proof is wrong (another haSecret)"));
    }
    Ok(())
}

/// The slave's side, first thing on a new connection; `binding` as for [`accept`].
///
/// # Errors
/// Anything but a master that proves it holds `secret`.
pub fn connect(stream: &mut (impl Read + Write), secret: &PeerSecret, binding: &[u8]) -> Result<(), ReplicationError> {
    let ours = nonce();
    stream.write_all(&[&MAGIC[..], &ours].concat()).step("sending the slave's nonce")?;
    let mut reply = [0u8; 8 + NONCE_BYTES + PROOF_BYTES];
    read_exact(stream, &mut reply, "the master's answer (a master without haSecret closes instead)")?;
    if !opens_handshake(&reply) {
        return Err(ReplicationError::Unauthenticated("the master did not authenticate"));
    }
    let exchange = Exchange {
        accepting: &reply[8..8 + NONCE_BYTES],
        connecting: &ours,
        binding,
    };
    if !secret.verify(PROTOCOL, PeerRole::Accepting, exchange, &reply[8 + NONCE_BYTES..]) {
        return Err(ReplicationError::Unauthenticated(
            "the master's proof is wrong (another haSecret, or a relay between two TLS sessions)",
        ));
    }
    let proof = secret.proof(PROTOCOL, PeerRole::Connecting, exchange);
    stream.write_all(&proof).step("sending the slave's proof")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        for x in [&c, &s] {
            x.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).expect("timeout");
        }
        (c, s)
    }

    fn master(mut s: std::net::TcpStream, secret: PeerSecret) -> std::thread::JoinHandle<Result<(), ReplicationError>> {
        std::thread::spawn(move || {
            let mut first = [0u8; 8];
            s.read_exact(&mut first).step("read")?;
            accept(&mut s, &secret, &first, b"")
        })
    }

    #[test]
    fn the_same_secret_passes_both_ways_and_another_fails_both_ways() {
        let good = || PeerSecret::new("the-set's-shared-secret").expect("secret");
        let (mut c, s) = pair();
        let m = master(s, good());
        connect(&mut c, &good(), b"").expect("the master proves the secret");
        m.join().expect("master").expect("the slave proves the secret");

        let (mut c, s) = pair();
        let m = master(s, good());
        let wrong = PeerSecret::new("a-rogue's-guessed-secret").expect("secret");
        assert!(matches!(
            connect(&mut c, &wrong, b""),
            Err(ReplicationError::Unauthenticated(why)) if why.contains("master's proof is wrong")
        ));
        drop(c);
        assert!(m.join().expect("master").is_err(), "the master refuses the rogue");
    }

    #[test]
    fn a_peer_speaking_rocketmq_at_once_is_refused() {
        let (mut c, s) = pair();
        let m = master(s, PeerSecret::new("the-set's-shared-secret").expect("secret"));
        c.write_all(&0i64.to_be_bytes()).expect("a classic report");
        assert!(matches!(
            m.join().expect("master"),
            Err(ReplicationError::Unauthenticated(why)) if why.contains("did not authenticate")
        ));
    }
}
