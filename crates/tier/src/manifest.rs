//! The local manifest: which segments the object store holds, each line written (and fsynced)
//! only after its upload was confirmed, so that a local file is deleted only once a durable
//! record says where its bytes are.
//!
//! One JSON line per segment. A line cut by a crash is the last one and was never confirmed to
//! anyone: it is dropped on load. A removal rewrites the file beside itself and renames it over.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, TierError};

/// A segment the object store holds: where it starts in the log, its length, and the CRC-32
/// of each block (what every range read is checked against).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TieredSegment {
    /// The segment's first offset in the commit log (its file name).
    pub start_offset: u64,
    /// Its length in bytes.
    pub bytes: u64,
    /// Bytes per checksummed block.
    pub block_bytes: u64,
    /// CRC-32 of each block, in order (the last may be short).
    pub block_crcs: Vec<u32>,
    /// The object's ETag as the object store confirmed it.
    pub e_tag: String,
    /// When the segment was last written (its file's modification time), ms since the epoch:
    /// the tier's retention counts from it, as the local one does.
    #[serde(default)]
    pub written_ms: u64,
    /// The object's key in the bucket, as uploaded: reads and deletes use it, so a prefix
    /// changed since (`tieredStoreFilePath`) does not lose what the bucket holds under the old
    /// one. Empty on a line written before keys were recorded: the current prefix's key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
}

impl TieredSegment {
    /// The offset just past the segment.
    #[must_use]
    pub fn end_offset(&self) -> u64 {
        self.start_offset + self.bytes
    }
}

/// Bounds a manifest line: a 1 GiB segment of 1 MiB blocks is about 12 KiB of JSON.
const MAX_LINE_BYTES: usize = 4 << 20;

pub(crate) struct Manifest {
    path: PathBuf,
    segments: BTreeMap<u64, TieredSegment>,
}

impl Manifest {
    pub(crate) fn open(dir: &Path) -> Result<Manifest> {
        petrel_kit::fs::create_dir_durably(dir).map_err(|e| TierError::io(dir, e))?;
        let path = dir.join("tier.manifest");
        let mut text = petrel_kit::fs::read_if_exists(&path)
            .map_err(|e| TierError::io(&path, e))?
            .unwrap_or_default();
        if !text.is_empty() && !text.ends_with(b"\n") {
            // A last line cut by a crash (or a failed write) was never confirmed: cut it off,
            // so that the next line does not follow its fragment.
            let keep = text.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
            tracing::warn!(path = %path.display(), "dropped a torn last line of the tier manifest");
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| TierError::io(&path, e))?;
            file.set_len(keep as u64).map_err(|e| TierError::io(&path, e))?;
            file.sync_all().map_err(|e| TierError::io(&path, e))?;
            text.truncate(keep);
        }
        let lines: Vec<&[u8]> = text.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
        let mut segments = BTreeMap::new();
        for (i, line) in lines.iter().enumerate() {
            let parsed = (line.len() <= MAX_LINE_BYTES)
                .then(|| serde_json::from_slice::<TieredSegment>(line).ok())
                .flatten();
            match parsed {
                Some(s) => {
                    segments.insert(s.start_offset, s);
                }
                None => return Err(TierError::Manifest(format!("{}: line {} is not a segment", path.display(), i + 1))),
            }
        }
        Ok(Manifest { path, segments })
    }

    pub(crate) fn get(&self, start_offset: u64) -> Option<&TieredSegment> {
        self.segments.get(&start_offset)
    }

    /// The segment that ends where the one at `start_offset` begins, if the tier holds it.
    pub(crate) fn before(&self, start_offset: u64) -> Option<&TieredSegment> {
        let (_, previous) = self.segments.range(..start_offset).next_back()?;
        (previous.end_offset() == start_offset).then_some(previous)
    }

    pub(crate) fn first(&self) -> Option<&TieredSegment> {
        self.segments.values().next()
    }

    pub(crate) fn segments(&self) -> impl Iterator<Item = &TieredSegment> {
        self.segments.values()
    }

    /// Records `segment` durably (appended and fsynced) before returning.
    pub(crate) fn add(&mut self, segment: TieredSegment) -> Result<()> {
        let mut line = serde_json::to_vec(&segment).map_err(|e| TierError::Manifest(e.to_string()))?;
        assert!(line.len() <= MAX_LINE_BYTES, "a manifest line of {} bytes", line.len());
        line.push(b'\n');
        let created = !self.path.exists();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| TierError::io(&self.path, e))?;
        let before = file.metadata().map_err(|e| TierError::io(&self.path, e))?.len();
        if let Err(e) = file.write_all(&line).and_then(|()| file.sync_data()) {
            // A part written (a full disk) must not stay in front of the next line.
            let _ = file.set_len(before);
            return Err(TierError::io(&self.path, e));
        }
        if created {
            sync_dir(&self.path)?;
        }
        self.segments.insert(segment.start_offset, segment);
        Ok(())
    }

    /// Forgets a segment durably: the manifest is rewritten without it.
    pub(crate) fn remove(&mut self, start_offset: u64) -> Result<()> {
        if self.segments.remove(&start_offset).is_none() {
            return Ok(());
        }
        let mut text = Vec::new();
        for s in self.segments.values() {
            text.extend(serde_json::to_vec(s).map_err(|e| TierError::Manifest(e.to_string()))?);
            text.push(b'\n');
        }
        petrel_kit::fs::write_atomically(&self.path, &text, petrel_kit::fs::Mode::Default).map_err(|e| TierError::io(&self.path, e))
    }
}

/// Makes the directory entry of `path` durable (its creation).
fn sync_dir(path: &Path) -> Result<()> {
    let dir = path.parent().expect("the manifest lies in a directory");
    petrel_kit::fs::sync_dir(dir).map_err(|e| TierError::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(start_offset: u64) -> TieredSegment {
        TieredSegment {
            start_offset,
            bytes: 10,
            block_bytes: 4,
            block_crcs: vec![1, 2, 3],
            e_tag: "e".into(),
            written_ms: 0,
            key: format!("p/commitlog/{start_offset:020}"),
        }
    }

    #[test]
    fn what_was_added_and_not_removed_is_there_after_a_reopen() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut m = Manifest::open(dir.path()).expect("opened");
        for start in [0, 10, 20] {
            m.add(segment(start)).expect("added");
        }
        m.remove(10).expect("removed");
        let m = Manifest::open(dir.path()).expect("reopened");
        let starts: Vec<u64> = m.segments().map(|s| s.start_offset).collect();
        assert_eq!(starts, vec![0, 20]);
        assert_eq!(m.get(20), Some(&segment(20)));
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_a_bad_middle_line_is_an_error() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut m = Manifest::open(dir.path()).expect("opened");
        m.add(segment(0)).expect("added");
        let path = dir.path().join("tier.manifest");
        let mut text = std::fs::read(&path).expect("read");
        text.extend_from_slice(b"{\"start_offset\":10,\"by");
        std::fs::write(&path, &text).expect("written");
        let mut m = Manifest::open(dir.path()).expect("a torn tail is no error");
        assert_eq!(m.segments().count(), 1);
        // Cut off at open: the next line starts on a line of its own.
        m.add(segment(30)).expect("added");
        let m = Manifest::open(dir.path()).expect("reopened after an add");
        assert_eq!(m.segments().map(|s| s.start_offset).collect::<Vec<_>>(), vec![0, 30]);
        let mut text = std::fs::read(&path).expect("read");
        text.extend_from_slice(b"not a segment\n");
        text.extend(serde_json::to_vec(&segment(20)).expect("json"));
        text.extend_from_slice(b"\n");
        std::fs::write(&path, &text).expect("written");
        assert!(matches!(Manifest::open(dir.path()), Err(TierError::Manifest(_))));
    }
}
