//! The Raft state machine: [`ControllerState`] plus what openraft needs beside it (the last
//! applied log id, the membership) and its snapshots.
//!
//! A snapshot is the whole state as JSON, written to `raft-snapshot` through a rename before
//! openraft may purge the log it covers; opening loads it, and openraft replays the committed
//! entries after it.

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{Entry, EntryPayload, LogId, RaftSnapshotBuilder, StorageError, StorageIOError, StoredMembership};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use super::log_store::replace_file;
use super::{Response, TypeConfig};
use crate::state::ControllerState;

const SNAPSHOT_FILE: &str = "raft-snapshot";

/// The applied state, shared with the node that answers queries from it.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Applied {
    /// The id of the last log entry applied to `state`; `None` before the first.
    pub last_applied: Option<LogId<u64>>,
    /// The group's membership as of the last membership entry applied.
    pub membership: StoredMembership<u64, openraft::BasicNode>,
    /// The controller state the applied entries produced.
    pub state: ControllerState,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<u64, openraft::BasicNode>,
    applied: Applied,
}

/// The state machine openraft applies to; clones share one state.
#[derive(Debug, Clone)]
pub struct StateMachine {
    dir: PathBuf,
    applied: Arc<RwLock<Applied>>,
    snapshot: Arc<RwLock<Option<StoredSnapshot>>>,
}

impl StateMachine {
    /// Opens the state machine in `dir`, starting from its snapshot if it has one.
    pub fn open(dir: &Path) -> io::Result<StateMachine> {
        std::fs::create_dir_all(dir)?;
        let snapshot: Option<StoredSnapshot> = match std::fs::read(dir.join(SNAPSHOT_FILE)) {
            Ok(bytes) => Some(serde_json::from_slice(&bytes).map_err(io::Error::other)?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let applied = snapshot.as_ref().map(|s| s.applied.clone()).unwrap_or_default();
        Ok(StateMachine {
            dir: dir.to_owned(),
            applied: Arc::new(RwLock::new(applied)),
            snapshot: Arc::new(RwLock::new(snapshot)),
        })
    }

    /// The applied state, for reads.
    pub fn applied(&self) -> Arc<RwLock<Applied>> {
        Arc::clone(&self.applied)
    }

    fn persist(&self, stored: &StoredSnapshot) -> Result<(), StorageError<u64>> {
        let signature = Some(stored.meta.signature());
        let bytes = serde_json::to_vec(stored).map_err(|e| StorageIOError::write_snapshot(signature.clone(), &e))?;
        replace_file(&self.dir.join(SNAPSHOT_FILE), &bytes).map_err(|e| StorageIOError::write_snapshot(signature, &e))?;
        Ok(())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let applied = self.applied.read().clone();
        let snapshot_id = match applied.last_applied {
            Some(id) => format!("{}-{}-{}", id.leader_id.term, id.leader_id.node_id, id.index),
            None => "empty".to_owned(),
        };
        let meta = SnapshotMeta {
            last_log_id: applied.last_applied,
            last_membership: applied.membership.clone(),
            snapshot_id,
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            applied,
        };
        self.persist(&stored)?;
        let bytes = serde_json::to_vec(&stored.applied).map_err(|e| StorageIOError::read_state_machine(&e))?;
        *self.snapshot.write() = Some(stored);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId<u64>>, StoredMembership<u64, openraft::BasicNode>), StorageError<u64>> {
        let applied = self.applied.read();
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + openraft::OptionalSend,
        I::IntoIter: openraft::OptionalSend,
    {
        let mut applied = self.applied.write();
        let mut responses = Vec::new();
        for entry in entries {
            assert!(applied.last_applied < Some(entry.log_id), "entries apply once, in order");
            applied.last_applied = Some(entry.log_id);
            let response = match entry.payload {
                EntryPayload::Blank => Response(None),
                EntryPayload::Normal(command) => Response(Some(applied.state.apply(command))),
                EntryPayload::Membership(membership) => {
                    applied.membership = StoredMembership::new(Some(entry.log_id), membership);
                    Response(None)
                }
            };
            responses.push(response);
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let mut applied: Applied =
            serde_json::from_slice(snapshot.get_ref()).map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        applied.last_applied = meta.last_log_id;
        applied.membership = meta.last_membership.clone();
        let stored = StoredSnapshot {
            meta: meta.clone(),
            applied: applied.clone(),
        };
        self.persist(&stored)?;
        *self.applied.write() = applied;
        *self.snapshot.write() = Some(stored);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        let Some(stored) = self.snapshot.read().clone() else {
            return Ok(None);
        };
        let bytes = serde_json::to_vec(&stored.applied).map_err(|e| StorageIOError::read_state_machine(&e))?;
        Ok(Some(Snapshot {
            meta: stored.meta,
            snapshot: Box::new(Cursor::new(bytes)),
        }))
    }
}
