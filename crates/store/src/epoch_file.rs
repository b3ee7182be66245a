//! The epoch file of a broker in controller mode: which master epoch wrote which stretch of the
//! commit log. Each entry is `(epoch, start offset)`; an epoch's stretch ends where the next
//! one starts, and the last one at the log's end. A new master appends `(its epoch, its end)`;
//! a replica appends the entries its master's frames announce. When a replica rejoins, the two
//! files tell where their logs stop agreeing (see [`consistent_point`]) and the replica cuts
//! its log and its file there.
//!
//! The file is RocketMQ's `epochFileCheckpoint` (`CheckpointFile`): a line with the number of
//! entries, a line with the CRC32 (masked to 31 bits) of the entry lines, then one
//! `epoch-startOffset` line per entry, so a store can move between Petrel and RocketMQ. It is
//! replaced through a rename; RocketMQ keeps a `.bak` copy as well, which is read when the
//! file is missing or damaged.
//!
//! Owns: the entries and their file. Must never: hold two entries for one epoch, let epochs or
//! start offsets go down, or report an entry it has not persisted.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::error::{Result, StoreError};

/// RocketMQ's file name, under the store root.
pub const EPOCH_FILE_NAME: &str = "epochFileCheckpoint";
/// Entries kept at most (RocketMQ's master sends at most 1,000 in its handshake); the oldest
/// go first, as the log they describe is long deleted by then.
pub const MAX_EPOCH_ENTRIES: usize = 1000;

/// One master epoch and where its records begin in the commit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The master's epoch number; it grows with each new master.
    pub epoch: i32,
    /// Commit-log offset of the epoch's first record.
    pub start_offset: u64,
}

/// The epoch file.
pub struct EpochFile {
    path: PathBuf,
    entries: Mutex<Vec<EpochEntry>>,
}

impl EpochFile {
    /// Opens `root/epochFileCheckpoint` (or its `.bak`); missing files mean no entries.
    ///
    /// # Errors
    /// Both files exist and neither parses.
    pub fn open(root: &Path) -> Result<EpochFile> {
        let path = root.join(EPOCH_FILE_NAME);
        let backup = backup_path(&path);
        let entries = match read(&path) {
            Ok(Some(e)) => e,
            Ok(None) => read(&backup).ok().flatten().unwrap_or_default(),
            Err(first) => match read(&backup) {
                Ok(Some(e)) => e,
                _ => return Err(first),
            },
        };
        check_order(&entries).map_err(|reason| StoreError::Layout {
            path: path.display().to_string(),
            reason: reason.to_string(),
        })?;
        Ok(EpochFile {
            path,
            entries: Mutex::new(entries),
        })
    }

    /// Every entry, oldest first.
    #[must_use]
    pub fn entries(&self) -> Vec<EpochEntry> {
        self.entries.lock().clone()
    }

    /// The newest epoch, or -1 for none (RocketMQ's value).
    #[must_use]
    pub fn last_epoch(&self) -> i32 {
        self.entries.lock().last().map_or(-1, |e| e.epoch)
    }

    /// Appends an entry and persists the file. An entry equal to the last is accepted as a
    /// no-op (a repeated announcement).
    ///
    /// # Errors
    /// [`StoreError::Layout`] when the epoch or the offset does not grow; the write failing.
    pub fn append(&self, entry: EpochEntry) -> Result<()> {
        let mut entries = self.entries.lock();
        if let Some(last) = entries.last() {
            if *last == entry {
                return Ok(());
            }
            if last.epoch >= entry.epoch || last.start_offset > entry.start_offset {
                return Err(StoreError::Layout {
                    path: self.path.display().to_string(),
                    reason: format!("epoch entry {entry:?} does not follow the last one, {last:?}"),
                });
            }
            if last.start_offset == entry.start_offset {
                // The last epoch wrote nothing: the new one replaces it (RocketMQ refuses the
                // append instead, and its slave would then name the wrong epoch).
                entries.pop();
            }
        }
        entries.push(entry);
        if entries.len() > MAX_EPOCH_ENTRIES {
            entries.remove(0);
        }
        write(&self.path, &entries)
    }

    /// Removes the entries that start at or past `offset` (the log is cut there).
    ///
    /// # Errors
    /// The write failing.
    pub fn truncate_from(&self, offset: u64) -> Result<()> {
        let mut entries = self.entries.lock();
        let before = entries.len();
        entries.retain(|e| e.start_offset < offset);
        if entries.len() == before {
            return Ok(());
        }
        write(&self.path, &entries)
    }

    /// The entry whose stretch holds `offset`, and where that stretch ends (`None`: it is the
    /// last, open-ended one).
    #[must_use]
    pub fn entry_at(&self, offset: u64) -> Option<(EpochEntry, Option<u64>)> {
        let entries = self.entries.lock();
        let i = entries.iter().rposition(|e| e.start_offset <= offset)?;
        Some((entries[i], entries.get(i + 1).map(|n| n.start_offset)))
    }
}

/// Where the logs of a replica and its master stop agreeing: for the newest epoch both hold
/// with the same start, the lesser of the two ends of that epoch. `None` when they share no
/// epoch (the replica cannot follow this master without an operator). Each side's last epoch
/// ends at that side's log end.
#[must_use]
pub fn consistent_point(local: &[EpochEntry], local_end: u64, master: &[EpochEntry], master_end: u64) -> Option<u64> {
    let end_of = |entries: &[EpochEntry], i: usize, log_end: u64| entries.get(i + 1).map_or(log_end, |n| n.start_offset);
    for (i, mine) in local.iter().enumerate().rev() {
        let Some(j) = master.iter().position(|m| m.epoch == mine.epoch) else {
            continue;
        };
        if master[j].start_offset == mine.start_offset {
            return Some(end_of(local, i, local_end).min(end_of(master, j, master_end)));
        }
    }
    None
}

/// Why an epoch file's text is not a valid list of entries.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadEntries(String);

fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    PathBuf::from(name)
}

fn check_order(entries: &[EpochEntry]) -> std::result::Result<(), BadEntries> {
    for pair in entries.windows(2) {
        if pair[0].epoch >= pair[1].epoch || pair[0].start_offset > pair[1].start_offset {
            return Err(BadEntries(format!("epoch entries out of order: {:?} then {:?}", pair[0], pair[1])));
        }
    }
    Ok(())
}

fn render(entries: &[EpochEntry]) -> String {
    let lines: String = entries.iter().map(|e| format!("{}-{}\n", e.epoch, e.start_offset)).collect();
    let crc = petrel_protocol::message::body_crc(lines.as_bytes());
    format!("{}\n{crc}\n{lines}", entries.len())
}

fn parse(text: &str) -> std::result::Result<Vec<EpochEntry>, BadEntries> {
    let mut lines = text.lines();
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| BadEntries("no entry count".into()))?;
    let crc: i64 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| BadEntries("no checksum".into()))?;
    let mut body = String::new();
    let mut entries = Vec::new();
    for line in lines {
        body.push_str(line);
        body.push('\n');
        let (epoch, start) = line.split_once('-').ok_or_else(|| BadEntries(format!("bad entry line {line:?}")))?;
        entries.push(EpochEntry {
            epoch: epoch.trim().parse().map_err(|_| BadEntries(format!("bad epoch in {line:?}")))?,
            start_offset: start.trim().parse().map_err(|_| BadEntries(format!("bad offset in {line:?}")))?,
        });
    }
    if entries.len() != count {
        return Err(BadEntries(format!("{count} entries announced, {} found", entries.len())));
    }
    // RocketMQ skips the check when the checksum is 0.
    if crc != 0 && crc != i64::from(petrel_protocol::message::body_crc(body.as_bytes())) {
        return Err(BadEntries("checksum mismatch".into()));
    }
    Ok(entries)
}

fn read(path: &Path) -> Result<Option<Vec<EpochEntry>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    parse(&text).map(Some).map_err(|reason| StoreError::Layout {
        path: path.display().to_string(),
        reason: reason.to_string(),
    })
}

fn write(path: &Path, entries: &[EpochEntry]) -> Result<()> {
    let text = render(entries);
    // The backup first: a crash between the two leaves one whole copy of the new entries.
    for target in [backup_path(path), path.to_owned()] {
        petrel_kit::fs::write_atomically(&target, text.as_bytes(), petrel_kit::fs::Mode::Default)
            .map_err(|e| StoreError::io(&target, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(epoch: i32, start_offset: u64) -> EpochEntry {
        EpochEntry { epoch, start_offset }
    }

    #[test]
    fn the_file_is_rocketmqs_checkpoint_format_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let f = EpochFile::open(dir.path()).unwrap();
        assert_eq!(f.last_epoch(), -1);
        f.append(e(1, 0)).unwrap();
        f.append(e(2, 4096)).unwrap();
        let text = std::fs::read_to_string(dir.path().join(EPOCH_FILE_NAME)).unwrap();
        let crc = petrel_protocol::message::body_crc(b"1-0\n2-4096\n");
        assert_eq!(text, format!("2\n{crc}\n1-0\n2-4096\n"));
        assert_eq!(EpochFile::open(dir.path()).unwrap().entries(), vec![e(1, 0), e(2, 4096)]);
        // A damaged file falls back to the copy.
        std::fs::write(dir.path().join(EPOCH_FILE_NAME), "2\n1\n1-0\n").unwrap();
        assert_eq!(EpochFile::open(dir.path()).unwrap().last_epoch(), 2);
    }

    #[test]
    fn epochs_and_offsets_only_grow_and_an_empty_epoch_gives_way() {
        let dir = tempfile::tempdir().unwrap();
        let f = EpochFile::open(dir.path()).unwrap();
        f.append(e(3, 100)).unwrap();
        assert!(f.append(e(3, 200)).is_err());
        assert!(f.append(e(4, 50)).is_err());
        f.append(e(3, 100)).unwrap();
        f.append(e(5, 100)).unwrap();
        assert_eq!(f.entries(), vec![e(5, 100)]);
        f.append(e(6, 300)).unwrap();
        assert_eq!(f.entry_at(99), None);
        assert_eq!(f.entry_at(100), Some((e(5, 100), Some(300))));
        assert_eq!(f.entry_at(1 << 40), Some((e(6, 300), None)));
        f.truncate_from(300).unwrap();
        assert_eq!(f.entries(), vec![e(5, 100)]);
    }

    #[test]
    fn the_consistent_point_is_the_end_of_the_newest_shared_epoch() {
        // The old master wrote epoch 2 past 900; the new master took over at 800 with epoch 3.
        let old = [e(1, 0), e(2, 500)];
        let new = [e(1, 0), e(2, 500), e(3, 800)];
        assert_eq!(consistent_point(&old, 900, &new, 1200), Some(800));
        // A replica that is simply behind keeps everything.
        assert_eq!(consistent_point(&old, 700, &new, 1200), Some(700));
        // Same epoch number, different start: not shared.
        assert_eq!(consistent_point(&[e(1, 0), e(2, 600)], 900, &new, 1200), Some(500));
        assert_eq!(consistent_point(&[e(7, 0)], 10, &new, 1200), None);
    }
}
