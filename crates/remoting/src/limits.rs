//! The bounds of a remoting endpoint, named once so that every connection honours the same ones.
//!
//! Owns: the numbers. Must never: offer an unbounded default — every field here has a finite
//! value, and `validate` refuses the ones that would make a connection unable to work.

use crate::error::SetupError;
use std::sync::Arc;
use std::time::Duration;

use crate::budget::{DEFAULT_PARTIAL_FRAME_BUDGET_BYTES, FrameBudget};

/// RocketMQ closes a connection that carried nothing for this long
/// (`serverChannelMaxIdleTimeSeconds`, 120 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Requests of one connection whose answers are still being worked on (long polls, durability
/// waits); at the bound the connection stops reading until one completes.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 4096;
/// Encoded answers and pushes waiting for one connection's socket; at the bound the connection
/// stops reading and stops producing answers until the peer reads.
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 16 << 20;
/// How long a draining connection may take to finish the answers it owes.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections a server keeps at once; more are closed as they arrive.
pub const DEFAULT_MAX_CONNECTIONS: usize = 50_000;

/// Bounds of one connection, either side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Largest frame accepted from the peer, length prefix included.
    pub max_frame_bytes: usize,
    /// Close after this long without a frame either way and with nothing in flight.
    pub idle_timeout: Duration,
    /// Requests in flight: deferred answers on a server connection, calls awaiting an answer on
    /// a client connection.
    pub max_in_flight: usize,
    /// Bytes of encoded frames waiting for the socket.
    pub max_queued_bytes: usize,
    /// How long a draining connection keeps finishing what it owes.
    pub drain_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_frame_bytes: petrel_protocol::DEFAULT_MAX_FRAME_BYTES,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }
}

/// Bounds of a server: its connections, each connection's, and the unfinished frames of all
/// of them (a budget servers share when given clones of one `ServerLimits`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections open at once; one more is closed on arrival.
    pub max_connections: usize,
    /// The bounds of each connection.
    pub connection: ConnectionLimits,
    /// The budget for the bytes of unfinished frames, shared with other servers holding a clone.
    pub partial_frames: Arc<FrameBudget>,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            connection: ConnectionLimits::default(),
            partial_frames: FrameBudget::new(DEFAULT_PARTIAL_FRAME_BUDGET_BYTES),
        }
    }
}

impl ServerLimits {
    /// Why these limits cannot work, if they cannot.
    ///
    /// # Errors
    /// A connection bound that cannot work, or a budget that cannot hold one largest frame.
    pub fn validate(&self) -> Result<(), SetupError> {
        self.connection.validate()?;
        if self.partial_frames.max_bytes() < self.connection.max_frame_bytes {
            return Err(SetupError::Limit(format!(
                "the unfinished-frame budget ({} bytes) cannot hold one largest frame ({} bytes)",
                self.partial_frames.max_bytes(),
                self.connection.max_frame_bytes
            )));
        }
        Ok(())
    }
}

impl ConnectionLimits {
    /// Why these limits cannot work, if they cannot.
    ///
    /// # Errors
    /// A message naming the first field that is zero or too small.
    pub fn validate(&self) -> Result<(), SetupError> {
        if self.max_frame_bytes < 16 {
            return Err(SetupError::Limit(format!(
                "max_frame_bytes {} cannot hold a frame header",
                self.max_frame_bytes
            )));
        }
        if self.idle_timeout.is_zero() {
            return Err(SetupError::Limit("idle_timeout must be positive".into()));
        }
        if self.max_in_flight == 0 {
            return Err(SetupError::Limit("max_in_flight must be at least 1".into()));
        }
        if self.max_queued_bytes == 0 {
            return Err(SetupError::Limit("max_queued_bytes must be at least 1".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_zeroes_are_refused() {
        assert!(ConnectionLimits::default().validate().is_ok());
        let zero_in_flight = ConnectionLimits {
            max_in_flight: 0,
            ..ConnectionLimits::default()
        };
        assert!(zero_in_flight.validate().unwrap_err().to_string().contains("max_in_flight"));
        let tiny_frame = ConnectionLimits {
            max_frame_bytes: 8,
            ..ConnectionLimits::default()
        };
        assert!(tiny_frame.validate().unwrap_err().to_string().contains("max_frame_bytes"));
    }
}
