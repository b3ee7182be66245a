//! `TransactionService`: what the broker remembers of RocketMQ's two-phase sends. A half
//! message (`TRAN_MSG=true`) is stored in `RMQ_SYS_TRANS_HALF_TOPIC` with its real topic and
//! queue in properties, where no consumer reads it; END_TRANSACTION commits it (the message is
//! stored again in its real queue) or rolls it back, and either way an op record naming it goes
//! to `RMQ_SYS_TRANS_OP_HALF_TOPIC`. The check chore (`chores/transaction_check.rs`) asks a
//! producer of the group about half messages left undecided past `transactionTimeOut`.
//!
//! A check stores the half message again (its check count + 1) so that the half queue is read
//! once, front to back. Every copy names its first version's queue offset, its *root*
//! (`TRAN_PREPARED_QUEUE_OFFSET`); a decision is recorded against the root, and a root is decided
//! at most once, so a commit that races a check, or a producer answering twice, stores the
//! message once.
//!
//! Owns: the decided roots and the check chore's read positions (`config/transaction.json`).
//! Must never: forget a decision while a copy of its root can still be read (decisions are kept
//! for [`TransactionService::memory_ms`]), or hold more than [`MAX_DECIDED`] of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use petrel_protocol::fastjson::from_slice_lenient as from_json;
use petrel_protocol::properties::{Properties, keys};
use serde::{Deserialize, Serialize};

use crate::persist::{read_if_exists, write_atomically};

/// Where half messages wait, unread by consumers, until their transaction is decided.
pub const HALF_TOPIC: &str = petrel_protocol::topics::TRANS_HALF_TOPIC;
/// Where the op records go, one per decided half message (commit or rollback).
pub const OP_TOPIC: &str = petrel_protocol::topics::TRANS_OP_HALF_TOPIC;
/// Where a half message goes after `transactionCheckMax` checks without an answer.
pub const CHECK_MAX_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// The tag of an op record (RocketMQ's "remove" tag).
pub const OP_TAG: &str = "d";
/// Decisions remembered at once; past it the oldest are forgotten first.
pub const MAX_DECIDED: usize = 1_000_000;

/// The transaction settings of the broker configuration, for the check chore.
#[derive(Debug, Clone)]
pub struct TransactionSettings {
    /// `transactionTimeOut`: a half message is checked once it is this old.
    pub timeout_ms: u64,
    /// `transactionCheckMax`: checks before a half message is given up.
    pub check_max: u32,
    /// `transactionCheckInterval`: between two check passes.
    pub check_interval_ms: u64,
}

/// The check chore's read positions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckPositions {
    /// The next half-queue offset to look at.
    pub half_offset: i64,
    /// The op-queue offset from which every decision still remembered can be re-read.
    pub op_offset: i64,
}

/// The decided roots of half messages and the check chore's read positions.
pub struct TransactionService {
    settings: TransactionSettings,
    /// root → store time (ms) of its op record.
    decided: Mutex<HashMap<i64, i64>>,
    positions: Mutex<CheckPositions>,
    path: PathBuf,
}

impl TransactionService {
    /// # Errors
    /// An unreadable `config/transaction.json`.
    pub fn open(root: &Path, settings: TransactionSettings) -> std::io::Result<TransactionService> {
        let path = root.join("config").join("transaction.json");
        let positions = match read_if_exists(&path)? {
            Some(bytes) => from_json(&bytes).map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?,
            None => CheckPositions::default(),
        };
        Ok(TransactionService {
            settings,
            decided: Mutex::new(HashMap::new()),
            positions: Mutex::new(positions),
            path,
        })
    }

    /// The settings the service was opened with.
    #[must_use]
    pub fn settings(&self) -> &TransactionSettings {
        &self.settings
    }

    /// Whether a send with these properties is a half message.
    #[must_use]
    pub fn is_half(properties: &Properties) -> bool {
        properties.get(keys::TRANSACTION_PREPARED).is_some_and(|v| v == "true")
    }

    /// The root of a half message stored at `queue_offset`: its first version's offset.
    #[must_use]
    pub fn root_of(properties: &Properties, queue_offset: i64) -> i64 {
        properties
            .get(keys::TRANSACTION_PREPARED_QUEUE_OFFSET)
            .and_then(|v| v.parse().ok())
            .unwrap_or(queue_offset)
    }

    /// How long a decision is remembered: longer than any copy of its root can wait unread.
    #[must_use]
    pub fn memory_ms(&self) -> i64 {
        let s = &self.settings;
        let span = (u64::from(s.check_max) + 2) * s.check_interval_ms + 2 * s.timeout_ms;
        i64::try_from(span).unwrap_or(i64::MAX)
    }

    /// Records that `root` was decided (its op record stored at `at_ms`); false when it already
    /// was (the caller must then store nothing).
    pub fn decide(&self, root: i64, at_ms: i64) -> bool {
        let mut decided = self.decided.lock();
        if decided.contains_key(&root) {
            return false;
        }
        if decided.len() >= MAX_DECIDED {
            let oldest = decided.iter().min_by_key(|(_, at)| **at).map(|(r, _)| *r);
            if let Some(r) = oldest {
                decided.remove(&r);
            }
        }
        decided.insert(root, at_ms);
        true
    }

    /// Takes back a decision whose effect could not be stored (the commit failed).
    pub fn undecide(&self, root: i64) {
        self.decided.lock().remove(&root);
    }

    /// Whether `root` was decided and the decision is still remembered.
    #[must_use]
    pub fn is_decided(&self, root: i64) -> bool {
        self.decided.lock().contains_key(&root)
    }

    /// Forgets decisions made before `before_ms`.
    pub fn forget_before(&self, before_ms: i64) {
        self.decided.lock().retain(|_, at| *at >= before_ms);
    }

    /// How many decisions are remembered now.
    #[must_use]
    pub fn decided_count(&self) -> usize {
        self.decided.lock().len()
    }

    /// The check chore's read positions: those last set, or those loaded at start.
    #[must_use]
    pub fn positions(&self) -> CheckPositions {
        *self.positions.lock()
    }

    /// Sets the read positions and writes them. Blocking.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn save_positions(&self, positions: CheckPositions) -> std::io::Result<()> {
        let changed = {
            let mut p = self.positions.lock();
            let changed = *p != positions;
            *p = positions;
            changed
        };
        if changed {
            write_atomically(
                &self.path,
                &serde_json::to_vec(&positions).expect("the check positions serialize to JSON"),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(dir: &Path) -> TransactionService {
        TransactionService::open(
            dir,
            TransactionSettings {
                timeout_ms: 6000,
                check_max: 15,
                check_interval_ms: 30_000,
            },
        )
        .unwrap()
    }

    #[test]
    fn a_root_is_decided_once_and_forgotten_only_after_its_memory() {
        let dir = tempfile::tempdir().unwrap();
        let t = service(dir.path());
        assert!(t.decide(7, 1000));
        assert!(!t.decide(7, 2000), "a second answer for the same root stores nothing");
        assert!(t.is_decided(7));
        t.forget_before(1000);
        assert!(t.is_decided(7));
        t.forget_before(1001);
        assert!(!t.is_decided(7));
        assert!(t.memory_ms() > 15 * 30_000, "longer than every check of a root");
        assert!(t.decide(8, 0));
        t.undecide(8);
        assert!(t.decide(8, 0), "a failed commit can be decided again");
    }

    #[test]
    fn a_copy_names_its_root_and_positions_survive_a_reopen() {
        let mut p = Properties::default();
        assert_eq!(TransactionService::root_of(&p, 5), 5);
        p.insert(keys::TRANSACTION_PREPARED_QUEUE_OFFSET.into(), "2".into());
        assert_eq!(TransactionService::root_of(&p, 9), 2);
        p.insert(keys::TRANSACTION_PREPARED.into(), "true".into());
        assert!(TransactionService::is_half(&p));

        let dir = tempfile::tempdir().unwrap();
        let t = service(dir.path());
        let at = CheckPositions {
            half_offset: 12,
            op_offset: 4,
        };
        t.save_positions(at).unwrap();
        assert_eq!(service(dir.path()).positions(), at);
    }
}
