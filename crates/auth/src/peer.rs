//! Mutual proof of a shared secret between two of Petrel's own processes — a master and its
//! slaves on the HA port, controllers on their Raft port — before either trusts a byte from the
//! other. Each side sends a fresh random nonce; each proves it holds the secret with an
//! HMAC-SHA256 over the protocol's name, its own role, both nonces (the accepting side's first)
//! and, over TLS, the session's channel binding. A proof answers exactly one exchange: replayed
//! on another connection it names the wrong nonces, sent back to its author it names the wrong
//! role, it cannot be carried from one protocol to the other, and over TLS it cannot be relayed
//! by a man in the middle holding two sessions (each has its own binding).
//!
//! Owns: the secret, the nonces and the proofs. Must never: show the secret (its `Debug` is
//! masked), compare proofs in variable time, or accept a secret too short to resist guessing.

use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a nonce.
pub const NONCE_BYTES: usize = 32;
/// Bytes of a proof (an HMAC-SHA256).
pub const PROOF_BYTES: usize = 32;
/// The shortest secret taken.
pub const MIN_SECRET_BYTES: usize = 16;

type HmacSha256 = Hmac<Sha256>;

/// Which end of the connection a proof is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerRole {
    /// The side that accepted the connection (a master, a controller serving Raft).
    Accepting,
    /// The side that opened it.
    Connecting,
}

/// The secret a set of processes shares.
#[derive(Clone)]
pub struct PeerSecret(Arc<[u8]>);

/// The same secret (for comparing configurations; not for checking proofs).
impl PartialEq for PeerSecret {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for PeerSecret {}

impl std::fmt::Debug for PeerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerSecret(******)")
    }
}

/// A fresh nonce from the operating system's random source.
///
/// # Panics
/// If the operating system has no random source to give (it then cannot run safely at all).
#[must_use]
pub fn nonce() -> [u8; NONCE_BYTES] {
    let mut n = [0u8; NONCE_BYTES];
    getrandom::fill(&mut n).expect("the operating system's random source");
    n
}

impl PeerSecret {
    /// # Errors
    /// A secret shorter than [`MIN_SECRET_BYTES`].
    pub fn new(text: &str) -> Result<PeerSecret, crate::AuthError> {
        if text.len() < MIN_SECRET_BYTES {
            return Err(crate::AuthError::Invalid(format!(
                "a peer secret needs at least {MIN_SECRET_BYTES} bytes"
            )));
        }
        Ok(PeerSecret(Arc::from(text.as_bytes())))
    }

    fn mac(&self, protocol: &str, role: PeerRole, exchange: Exchange<'_>) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(b"petrel-peer/");
        mac.update(protocol.as_bytes());
        mac.update(match role {
            PeerRole::Accepting => b"/accepting/",
            PeerRole::Connecting => b"/connecting/",
        });
        mac.update(exchange.accepting);
        mac.update(exchange.connecting);
        mac.update(b"/binding/");
        mac.update(exchange.binding);
        mac
    }

    /// The proof `role` sends in an exchange of `protocol`.
    #[must_use]
    pub fn proof(&self, protocol: &str, role: PeerRole, exchange: Exchange<'_>) -> [u8; PROOF_BYTES] {
        self.mac(protocol, role, exchange).finalize().into_bytes().into()
    }

    /// Whether `proof` is `role`'s proof of this exchange (compared in constant time).
    #[must_use]
    pub fn verify(&self, protocol: &str, role: PeerRole, exchange: Exchange<'_>, proof: &[u8]) -> bool {
        self.mac(protocol, role, exchange).verify_slice(proof).is_ok()
    }
}

/// What one exchange's proofs cover besides the secret, the protocol and the role.
#[derive(Debug, Clone, Copy)]
pub struct Exchange<'a> {
    /// The accepting side's nonce.
    pub accepting: &'a [u8],
    /// The connecting side's nonce.
    pub connecting: &'a [u8],
    /// The TLS session's channel binding; empty on a plain connection.
    pub binding: &'a [u8],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_answers_one_exchange_in_one_role_of_one_protocol() {
        let s = PeerSecret::new("sixteen-byte-key!").unwrap();
        let (a, c, other_nonce) = (nonce(), nonce(), nonce());
        assert_ne!(a, c, "fresh nonces");
        let x = |accepting: &'static [u8], binding: &'static [u8]| Exchange {
            accepting,
            connecting: Box::leak(Box::new(c)),
            binding,
        };
        let a: &'static [u8] = Box::leak(Box::new(a));
        let other_nonce: &'static [u8] = Box::leak(Box::new(other_nonce));
        let p = s.proof("ha", PeerRole::Connecting, x(a, b""));
        assert!(s.verify("ha", PeerRole::Connecting, x(a, b""), &p));
        assert!(!s.verify("ha", PeerRole::Accepting, x(a, b""), &p), "reflected to its author");
        assert!(
            !s.verify("raft", PeerRole::Connecting, x(a, b""), &p),
            "carried to another protocol"
        );
        assert!(
            !s.verify("ha", PeerRole::Connecting, x(other_nonce, b""), &p),
            "replayed on another connection"
        );
        assert!(
            !s.verify("ha", PeerRole::Connecting, x(a, b"another session"), &p),
            "relayed into another TLS session"
        );
        let other = PeerSecret::new("another-16-byte-key").unwrap();
        assert!(!other.verify("ha", PeerRole::Connecting, x(a, b""), &p), "another secret");
        assert!(PeerSecret::new("short").is_err());
        assert!(!format!("{s:?}").contains("sixteen"));
    }
}
