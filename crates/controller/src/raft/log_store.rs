//! The Raft log and vote on disk, for one controller.
//!
//! Files in the controller's directory:
//! - `raft-log`: records `[length 4][crc32 4][entry as JSON]`, appended and `fdatasync`ed before
//!   openraft is told the entries are durable;
//! - `raft-vote`, `raft-meta` (purged and committed log ids): JSON written to a temporary file,
//!   synced, renamed over the old one, and the directory synced.
//!
//! Every write and sync runs on tokio's blocking pool: openraft's core awaits them, but no
//! runtime worker waits for the disk (a slow fsync would otherwise stall every task on that
//! worker — the brokers' heartbeats and Raft's own timers among them). The disk side and the
//! in-memory side have separate locks, so a read never waits behind a sync either.
//!
//! A crash can tear only the last record of `raft-log` (appends are the only in-place writes);
//! opening drops a torn tail, which Raft allows because an entry counts as stored only after
//! the sync that covered it. Truncation and purging rewrite the file through a rename: the
//! controller's log is small (a few commands per broker event, purged after each snapshot).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, RaftLogReader, StorageError, StorageIOError, Vote};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::TypeConfig;

/// The largest record the log accepts, so a damaged length cannot make opening allocate without bound.
pub const MAX_RECORD_BYTES: usize = 16 << 20;
const LOG_FILE: &str = "raft-log";
const VOTE_FILE: &str = "raft-vote";
const META_FILE: &str = "raft-meta";

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Meta {
    last_purged: Option<LogId<u64>>,
    committed: Option<LogId<u64>>,
}

/// The disk side: held across every write and sync, so disk work runs one at a time and in
/// the order openraft asked for it. Only the blocking pool takes it.
#[derive(Debug)]
struct Files {
    dir: PathBuf,
    log: File,
}

/// The memory side: what readers see. Held only for short in-memory work, never across I/O,
/// so a read on a runtime worker never waits for a sync (lock order: files, then state).
#[derive(Debug)]
struct State {
    entries: BTreeMap<u64, Entry<TypeConfig>>,
    vote: Option<Vote<u64>>,
    meta: Meta,
}

#[derive(Debug)]
struct Shared {
    files: Mutex<Files>,
    state: Mutex<State>,
}

/// The log store openraft writes through; clones share one log.
#[derive(Debug, Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
}

impl LogStore {
    /// Opens (creating if needed) the log in `dir`, dropping a torn last record.
    pub fn open(dir: &Path) -> io::Result<LogStore> {
        fs::create_dir_all(dir)?;
        let vote = read_json(&dir.join(VOTE_FILE))?;
        let meta: Meta = read_json(&dir.join(META_FILE))?.unwrap_or_default();
        let path = dir.join(LOG_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let (entries, good_len) = decode_records(&bytes);
        let log = OpenOptions::new().create(true).append(true).open(&path)?;
        if good_len < bytes.len() {
            tracing::warn!(path = %path.display(), kept_bytes = good_len, dropped_bytes = bytes.len() - good_len, "dropping a torn tail of the raft log");
            log.set_len(good_len as u64)?;
            log.sync_all()?;
        }
        let first_kept = meta.last_purged.map_or(0, |id| id.index + 1);
        let entries = entries
            .into_iter()
            .filter(|e| e.log_id.index >= first_kept)
            .map(|e| (e.log_id.index, e))
            .collect();
        let shared = Shared {
            files: Mutex::new(Files { dir: dir.to_owned(), log }),
            state: Mutex::new(State { entries, vote, meta }),
        };
        Ok(LogStore { shared: Arc::new(shared) })
    }
}

/// Decodes records until the first one that is short or fails its checksum; returns the
/// entries and the length of the good prefix.
fn decode_records(bytes: &[u8]) -> (Vec<Entry<TypeConfig>>, usize) {
    let mut entries = Vec::new();
    let mut at = 0usize;
    while let Some(header) = bytes.get(at..at + 8) {
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        let Some(body) = bytes.get(at + 8..at + 8 + len).filter(|_| len <= MAX_RECORD_BYTES) else {
            break;
        };
        if crc32fast::hash(body) != crc {
            break;
        }
        let Ok(entry) = serde_json::from_slice::<Entry<TypeConfig>>(body) else {
            break;
        };
        entries.push(entry);
        at += 8 + len;
    }
    (entries, at)
}

fn encode_record(entry: &Entry<TypeConfig>, out: &mut Vec<u8>) -> io::Result<()> {
    let body = serde_json::to_vec(entry).map_err(io::Error::other)?;
    if body.len() > MAX_RECORD_BYTES {
        return Err(io::Error::other(format!(
            "a raft entry of {} bytes is over {MAX_RECORD_BYTES}",
            body.len()
        )));
    }
    let len = u32::try_from(body.len()).map_err(io::Error::other)?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(())
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> io::Result<Option<T>> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(io::Error::other),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replaces `path` with `bytes` so that a crash leaves the old file or the new one, never a mix.
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    petrel_kit::fs::write_atomically(path, bytes, petrel_kit::fs::Mode::Default)
}

impl Files {
    fn save_meta(&self, meta: &Meta) -> io::Result<()> {
        let bytes = serde_json::to_vec(meta).map_err(io::Error::other)?;
        replace_file(&self.dir.join(META_FILE), &bytes)
    }

    /// Rewrites `raft-log` to hold exactly `bytes` (encoded records).
    fn rewrite_log(&mut self, bytes: &[u8]) -> io::Result<()> {
        let path = self.dir.join(LOG_FILE);
        replace_file(&path, bytes)?;
        self.log = OpenOptions::new().append(true).open(&path)?;
        Ok(())
    }
}

impl State {
    fn read_range<RB: RangeBounds<u64>>(&self, range: RB) -> Vec<Entry<TypeConfig>> {
        self.entries.range(range).map(|(_, e)| e.clone()).collect()
    }

    fn encode_entries(&self) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        for entry in self.entries.values() {
            encode_record(entry, &mut bytes)?;
        }
        Ok(bytes)
    }
}

fn write_err(e: io::Error) -> StorageError<u64> {
    StorageIOError::write_logs(&e).into()
}

/// Runs `work` on tokio's blocking pool holding the disk side (see the module's header); it
/// takes the memory side itself, briefly, when it has something to show readers.
async fn off_runtime<T: Send + 'static>(
    shared: &Arc<Shared>,
    work: impl FnOnce(&mut Files, &Mutex<State>) -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let shared = Arc::clone(shared);
    tokio::task::spawn_blocking(move || {
        #[cfg(test)]
        tests::note_disk_thread();
        work(&mut shared.files.lock(), &shared.state)
    })
    .await
    .map_err(|e| io::Error::other(format!("the raft log's disk task failed: {e}")))
    .and_then(|r| r)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<u64>> {
        Ok(self.shared.state.lock().read_range(range))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<u64>> {
        let state = self.shared.state.lock();
        let last_purged_log_id = state.meta.last_purged;
        let last_log_id = state.entries.values().next_back().map(|e| e.log_id).or(last_purged_log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError<u64>> {
        let bytes = serde_json::to_vec(vote).map_err(|e| StorageIOError::write_vote(&e))?;
        let vote = *vote;
        off_runtime(&self.shared, move |files, state| {
            replace_file(&files.dir.join(VOTE_FILE), &bytes)?;
            state.lock().vote = Some(vote);
            Ok(())
        })
        .await
        .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError<u64>> {
        Ok(self.shared.state.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), StorageError<u64>> {
        off_runtime(&self.shared, move |files, state| {
            let meta = {
                let mut state = state.lock();
                state.meta.committed = committed;
                state.meta.clone()
            };
            files.save_meta(&meta)
        })
        .await
        .map_err(write_err)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, StorageError<u64>> {
        Ok(self.shared.state.lock().meta.committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut bytes = Vec::new();
        let mut added = Vec::new();
        for entry in entries {
            encode_record(&entry, &mut bytes).map_err(write_err)?;
            added.push(entry);
        }
        let written = off_runtime(&self.shared, move |files, state| {
            files.log.write_all(&bytes).and_then(|()| files.log.sync_data())?;
            // Readers see the entries only once they are durable.
            let mut state = state.lock();
            for entry in added {
                if let Some(last) = state.entries.keys().next_back() {
                    assert_eq!(*last + 1, entry.log_id.index, "raft log appends are contiguous");
                }
                state.entries.insert(entry.log_id.index, entry);
            }
            Ok(())
        })
        .await;
        if let Err(e) = &written {
            callback.log_io_completed(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(write_err(io::Error::new(e.kind(), e.to_string())));
        }
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        off_runtime(&self.shared, move |files, state| {
            // Readers stop seeing the removed entries at once; the file follows.
            let bytes = {
                let mut state = state.lock();
                let _ = state.entries.split_off(&log_id.index);
                state.encode_entries()?
            };
            files.rewrite_log(&bytes)
        })
        .await
        .map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        off_runtime(&self.shared, move |files, state| {
            let meta = {
                let state = state.lock();
                assert!(state.meta.last_purged.is_none_or(|p| p <= log_id), "purging never goes back");
                let mut meta = state.meta.clone();
                meta.last_purged = Some(log_id);
                meta
            };
            // The purge point is recorded first: a crash between the two writes leaves purged
            // entries in the file, which opening skips.
            files.save_meta(&meta)?;
            let bytes = {
                let mut state = state.lock();
                state.meta.last_purged = Some(log_id);
                state.entries = state.entries.split_off(&(log_id.index + 1));
                state.encode_entries()?
            };
            files.rewrite_log(&bytes)
        })
        .await
        .map_err(write_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static DISK_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    static DISK_THREADS: Mutex<Vec<std::thread::ThreadId>> = Mutex::new(Vec::new());

    /// Called where the disk work runs.
    pub(super) fn note_disk_thread() {
        DISK_THREAD.with(|d| d.set(true));
        DISK_THREADS.lock().push(std::thread::current().id());
    }

    /// Every write and sync of the log runs off the thread that drives openraft (here the
    /// current-thread runtime's only thread), so a slow disk stalls no task on it.
    #[test]
    fn writes_and_syncs_run_off_the_runtime_thread() {
        let dir = tempfile::tempdir().expect("dir");
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let runtime_thread = std::thread::current().id();
        runtime.block_on(async {
            let mut store = LogStore::open(dir.path()).expect("open");
            let vote = Vote::new(3, 1);
            store.save_vote(&vote).await.expect("vote");
            store.save_committed(None).await.expect("committed");
            assert_eq!(store.read_vote().await.expect("read"), Some(vote));
        });
        let threads = DISK_THREADS.lock().clone();
        assert!(threads.len() >= 2, "the disk work was noted: {threads:?}");
        assert!(
            threads.iter().all(|t| *t != runtime_thread),
            "a write or sync ran on the runtime's thread"
        );
        assert!(!DISK_THREAD.with(std::cell::Cell::get), "and never on this one");
    }

    /// A read does not wait behind disk work: with the disk side held (a sync that takes
    /// forever), the vote, the log state and the entries still answer.
    #[test]
    fn reads_answer_while_the_disk_side_is_busy() {
        let dir = tempfile::tempdir().expect("dir");
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        runtime.block_on(async {
            let mut store = LogStore::open(dir.path()).expect("open");
            store.save_vote(&Vote::new(2, 1)).await.expect("vote");
            // Another thread holds the disk side, as a sync that never ends would.
            let shared = Arc::clone(&store.shared);
            let (held_tx, held_rx) = std::sync::mpsc::channel();
            let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
            let holder = std::thread::spawn(move || {
                let _disk = shared.files.lock();
                held_tx.send(()).expect("send");
                let _ = release_rx.recv();
            });
            held_rx.recv().expect("the disk side is held");
            assert_eq!(store.read_vote().await.expect("read"), Some(Vote::new(2, 1)));
            assert!(store.get_log_state().await.expect("state").last_log_id.is_none());
            assert!(store.try_get_log_entries(0..10).await.expect("entries").is_empty());
            release_tx.send(()).expect("release");
            holder.join().expect("holder");
        });
    }
}
