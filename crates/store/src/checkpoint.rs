//! The checkpoint: the offset up to which the commit log is known durable, and the next queue
//! offset of every topic-queue at that point. Recovery scans only what lies after it.
//!
//! Owns: the checkpoint file and the `abort` marker. Must never: leave a half-written
//! checkpoint in place (it is written to a temporary file, synced, then renamed over the old).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Result, StoreError};

pub const CHECKPOINT_FILE: &str = "checkpoint";
pub const ABORT_FILE: &str = "abort";
const HEADER: &str = "petrel-checkpoint v1";

/// A topic and queue id.
pub type QueueKey = (String, i32);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Every record below this commit-log offset is durable and valid.
    pub flushed_offset: u64,
    /// Next queue offset of each topic-queue, counting records below `flushed_offset`.
    pub queue_offsets: BTreeMap<QueueKey, i64>,
}

impl Checkpoint {
    fn render(&self) -> String {
        let mut body = format!("{HEADER}\nflushed_offset\t{}\n", self.flushed_offset);
        for ((topic, queue_id), next) in &self.queue_offsets {
            body.push_str(&format!("queue\t{topic}\t{queue_id}\t{next}\n"));
        }
        let crc = crc32(body.as_bytes());
        body.push_str(&format!("crc\t{crc}\n"));
        body
    }

    fn parse(text: &str) -> Option<Checkpoint> {
        let (body, crc_line) = text.trim_end_matches('\n').rsplit_once('\n')?;
        let body = format!("{body}\n");
        let crc: u32 = crc_line.strip_prefix("crc\t")?.parse().ok()?;
        if crc != crc32(body.as_bytes()) {
            return None;
        }
        let mut lines = body.lines();
        if lines.next()? != HEADER {
            return None;
        }
        let mut cp = Checkpoint::default();
        for line in lines {
            let fields: Vec<&str> = line.split('\t').collect();
            match fields.as_slice() {
                ["flushed_offset", v] => cp.flushed_offset = v.parse().ok()?,
                ["queue", topic, qid, next] => {
                    cp.queue_offsets
                        .insert(((*topic).to_owned(), qid.parse().ok()?), next.parse().ok()?);
                }
                _ => return None,
            }
        }
        Some(cp)
    }

    /// The checkpoint in `dir`, or `None` if there is none or it does not verify.
    pub fn load(dir: &Path) -> Result<Option<Checkpoint>> {
        let path = dir.join(CHECKPOINT_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let cp = Checkpoint::parse(&text);
                if cp.is_none() {
                    tracing::warn!(path = %path.display(), "checkpoint does not verify; recovering from the first segment");
                }
                Ok(cp)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io(&path, e)),
        }
    }

    /// Writes the checkpoint durably: temporary file, fsync, rename, fsync of the directory.
    pub fn store(&self, dir: &Path) -> Result<()> {
        let path = dir.join(CHECKPOINT_FILE);
        petrel_kit::fs::write_atomically(&path, self.render().as_bytes(), petrel_kit::fs::Mode::Default)
            .map_err(|e| StoreError::io(&path, e))
    }
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    petrel_kit::fs::sync_dir(dir).map_err(|e| StoreError::io(dir, e))
}

fn crc32(bytes: &[u8]) -> u32 {
    petrel_protocol::message::body_crc(bytes)
}

/// Creates the abort marker (holding our pid); returns whether one was already there, i.e.
/// whether the last run ended without a clean shutdown.
pub fn mark_running(dir: &Path) -> Result<bool> {
    let path = dir.join(ABORT_FILE);
    let unclean = path.exists();
    std::fs::write(&path, std::process::id().to_string()).map_err(|e| StoreError::io(&path, e))?;
    sync_dir(dir)?;
    Ok(unclean)
}

/// Removes the abort marker after a clean shutdown.
pub fn mark_clean(dir: &Path) -> Result<()> {
    let path = dir.join(ABORT_FILE);
    std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_damage() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Checkpoint::load(dir.path()).unwrap(), None);
        let mut cp = Checkpoint {
            flushed_offset: 12345,
            ..Checkpoint::default()
        };
        cp.queue_offsets.insert(("%RETRY%g".into(), 0), 7);
        cp.queue_offsets.insert(("T".into(), 3), 99);
        cp.store(dir.path()).unwrap();
        assert_eq!(Checkpoint::load(dir.path()).unwrap(), Some(cp));
        let path = dir.path().join(CHECKPOINT_FILE);
        let damaged = std::fs::read_to_string(&path).unwrap().replace("12345", "12346");
        std::fs::write(&path, damaged).unwrap();
        assert_eq!(Checkpoint::load(dir.path()).unwrap(), None);
    }

    #[test]
    fn abort_marker() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!mark_running(dir.path()).unwrap());
        assert!(mark_running(dir.path()).unwrap(), "still marked: the previous run did not close");
        mark_clean(dir.path()).unwrap();
        assert!(!mark_running(dir.path()).unwrap());
    }
}
