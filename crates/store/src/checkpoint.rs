//! The checkpoint: the offset up to which the commit log is known durable, and the next queue
//! offset of every topic-queue at that point. Recovery scans only what lies after it.
//!
//! Written in two parts, so that its cost follows the queues that change, not the queues that
//! exist (a broker with a million light queues, nearly all idle, rewrote 40 MB every second):
//! - `checkpoint`, the base: every queue, replaced whole (a temporary file, synced, renamed)
//!   at open, at close, and when the deltas have grown as large as it (and past a floor, see
//!   `flusher.rs`);
//! - `checkpoint.delta`: blocks appended and synced after it, each with the durable offset of
//!   its moment and the queues changed since the block before (or gone: a light queue
//!   removed), each with its own CRC. A block names the base's generation: blocks of an older
//!   base (a crash between a new base and the removal of the old deltas) are ignored.
//!
//! Loading applies the blocks in order and stops at the first that does not verify (the torn
//! end of an interrupted append): every complete block holds the state of its moment.
//!
//! Owns: both files and the `abort` marker. Must never: leave a half-written base in place, or
//! let a block's changes be lost while a later block claims a later offset (changes that could
//! not be written are carried to the next block).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Result, StoreError};

pub const CHECKPOINT_FILE: &str = "checkpoint";
pub const CHECKPOINT_DELTA_FILE: &str = "checkpoint.delta";
pub const ABORT_FILE: &str = "abort";
const HEADER: &str = "petrel-checkpoint v1";

/// A topic and queue id.
pub type QueueKey = (String, i32);

/// A [`QueueKey`] borrowed: looks one up in a `hashbrown` map without building it (a name
/// copied per dispatched record was the dispatcher's largest allocation at a million queues).
#[derive(Clone, Copy)]
pub struct QueueRef<'a>(pub &'a str, pub i32);

impl std::hash::Hash for QueueRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As `(String, i32)` hashes: the same value for the same key.
        (self.0, self.1).hash(state);
    }
}

impl hashbrown::Equivalent<QueueKey> for QueueRef<'_> {
    fn equivalent(&self, key: &QueueKey) -> bool {
        self.1 == key.1 && self.0 == key.0
    }
}

/// A [`QueueKey`] as the store's maps of opened queues keep it: the name inline (up to 24
/// bytes), so that a lookup among a million compares it in the map's slot, with no second
/// cache miss to a heap copy. It hashes as `(&str, i32)` does, so [`QueueRef`] finds it.
pub type InlineQueueKey = (compact_str::CompactString, i32);

impl hashbrown::Equivalent<InlineQueueKey> for QueueRef<'_> {
    fn equivalent(&self, key: &InlineQueueKey) -> bool {
        self.1 == key.1 && self.0 == key.0.as_str()
    }
}

/// The durable commit-log offset and every queue's next offset at it: the base with the delta
/// blocks of its generation applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Every record below this commit-log offset is durable and valid.
    pub flushed_offset: u64,
    /// Next queue offset of each topic-queue, counting records below `flushed_offset`.
    pub queue_offsets: BTreeMap<QueueKey, i64>,
    /// The base's generation: the delta blocks written after it name it.
    pub generation: u64,
}

/// The queues of topics that changed since the last block: each topic's every queue, or `None`
/// for a topic that is gone.
pub type Changes = BTreeMap<compact_str::CompactString, Option<BTreeMap<i32, i64>>>;

impl Checkpoint {
    /// The base's text. Written into one buffer sized up front: a line built per queue was most
    /// of a million-queue base's write time.
    fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut body = String::with_capacity(usize::try_from(self.approximate_bytes()).unwrap_or(0) + 32);
        let _ = write!(
            body,
            "{HEADER}\nflushed_offset\t{}\ngeneration\t{}\n",
            self.flushed_offset, self.generation
        );
        for ((topic, queue_id), next) in &self.queue_offsets {
            let _ = writeln!(body, "queue\t{topic}\t{queue_id}\t{next}");
        }
        let crc = crc32(body.as_bytes());
        let _ = writeln!(body, "crc\t{crc}");
        body
    }

    fn parse(text: &str) -> Option<Checkpoint> {
        let body = verified_body(text)?;
        let mut lines = body.lines();
        if lines.next()? != HEADER {
            return None;
        }
        let mut cp = Checkpoint::default();
        // Gathered, then built in one pass: the base lists its queues in order, and a map built
        // from a sorted run costs a fraction of a million inserts (a later duplicate wins, as
        // an insert would have it).
        let mut queues: Vec<(QueueKey, i64)> = Vec::with_capacity(text.len() / 32);
        for line in lines {
            let mut fields = line.split('\t');
            match fields.next()? {
                "flushed_offset" => cp.flushed_offset = exactly::<1>(fields)?[0].parse().ok()?,
                "generation" => cp.generation = exactly::<1>(fields)?[0].parse().ok()?,
                "queue" => {
                    let [topic, qid, next] = exactly::<3>(fields)?;
                    queues.push(((topic.to_owned(), qid.parse().ok()?), next.parse().ok()?));
                }
                _ => return None,
            }
        }
        cp.queue_offsets = queues.into_iter().collect();
        Some(cp)
    }

    /// The checkpoint in `dir` (the base with the delta blocks of its generation applied), or
    /// `None` if there is none or its base does not verify.
    pub fn load(dir: &Path) -> Result<Option<Checkpoint>> {
        let path = dir.join(CHECKPOINT_FILE);
        let delta = dir.join(CHECKPOINT_DELTA_FILE);
        // Deltas without their base mean nothing, and a new base would start its generations
        // again: they go, so that none of them is ever read against a base it was not written for.
        let orphans = || match std::fs::remove_file(&delta) {
            Ok(()) => sync_dir(dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io(&delta, e)),
        };
        let mut cp = match std::fs::read_to_string(&path) {
            Ok(text) => match Checkpoint::parse(&text) {
                Some(cp) => cp,
                None => {
                    tracing::warn!(path = %path.display(), "checkpoint does not verify; recovering from the first segment");
                    orphans()?;
                    return Ok(None);
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                orphans()?;
                return Ok(None);
            }
            Err(e) => return Err(StoreError::io(&path, e)),
        };
        let text = match std::fs::read(&delta) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(cp)),
            Err(e) => return Err(StoreError::io(&delta, e)),
        };
        // A torn block may hold a split character: what does not decode ends the blocks.
        let text = String::from_utf8_lossy(&text);
        let mut rest: &str = &text;
        while let Some(end) = rest
            .find("\ncrc\t")
            .and_then(|at| rest[at + 1..].find('\n').map(|n| at + 1 + n + 1))
        {
            let (block, after) = rest.split_at(end);
            if !cp.apply(block) {
                break;
            }
            rest = after;
        }
        Ok(Some(cp))
    }

    /// Applies one delta block if it verifies and belongs to this base; returns whether it did
    /// (a block of an older base is skipped, and loading goes on).
    fn apply(&mut self, block: &str) -> bool {
        let Some(body) = verified_body(block) else {
            return false;
        };
        let mut lines = body.lines();
        let Some(["delta", generation, flushed]) = lines.next().and_then(|head| exactly::<3>(head.split('\t'))) else {
            return false;
        };
        let (Ok(generation), Ok(flushed)) = (generation.parse::<u64>(), flushed.parse::<u64>()) else {
            return false;
        };
        if generation != self.generation {
            return true;
        }
        // Checked whole before any of it applies: a block is taken entirely or not at all.
        let mut ops: Vec<(&str, Option<(i32, i64)>)> = Vec::new();
        for line in lines {
            let mut fields = line.split('\t');
            match fields.next() {
                Some("topic" | "gone") => match exactly::<1>(fields) {
                    Some([topic]) => ops.push((topic, None)),
                    None => return false,
                },
                Some("queue") => {
                    let Some([topic, qid, n]) = exactly::<3>(fields) else {
                        return false;
                    };
                    let (Ok(qid), Ok(n)) = (qid.parse(), n.parse()) else { return false };
                    ops.push((topic, Some((qid, n))));
                }
                _ => return false,
            }
        }
        self.apply_ops(&ops);
        self.flushed_offset = flushed;
        true
    }

    /// Applies a block's changes in order: a topic's line drops every queue it had, its queue
    /// lines put back what it has now. Done without a name copied per line: a queue that
    /// stays (nearly every one in a fill of a million light queues) is updated in place, and
    /// only a queue new to the map costs its key.
    fn apply_ops(&mut self, ops: &[(&str, Option<(i32, i64)>)]) {
        let mut key: QueueKey = (String::new(), 0);
        let mut stale: Vec<i32> = Vec::new();
        let mut at = 0;
        while let Some(&(topic, op)) = ops.get(at) {
            at += 1;
            if let Some((qid, next)) = op {
                self.put(&mut key, topic, qid, next);
                continue;
            }
            key.0.clear();
            key.0.push_str(topic);
            key.1 = i32::MIN;
            stale.clear();
            stale.extend(
                self.queue_offsets
                    .range(&key..)
                    .take_while(|((t, _), _)| t == topic)
                    .map(|((_, q), _)| *q),
            );
            // The queue lines that follow their topic's line: what the topic has now.
            while let Some(&(t, Some((qid, next)))) = ops.get(at) {
                if t != topic {
                    break;
                }
                at += 1;
                self.put(&mut key, topic, qid, next);
                stale.retain(|q| *q != qid);
            }
            for &qid in &stale {
                key.1 = qid;
                self.queue_offsets.remove(&key);
            }
        }
    }

    /// Sets a queue's next offset, `key` the scratch key of the lookup.
    fn put(&mut self, key: &mut QueueKey, topic: &str, qid: i32, next: i64) {
        if key.0 != topic {
            key.0.clear();
            key.0.push_str(topic);
        }
        key.1 = qid;
        match self.queue_offsets.get_mut(key) {
            Some(slot) => *slot = next,
            None => {
                self.queue_offsets.insert(key.clone(), next);
            }
        }
    }

    /// Writes the base durably (temporary file, fsync, rename, fsync of the directory), then
    /// removes the delta blocks of older bases.
    pub fn store(&self, dir: &Path) -> Result<()> {
        let path = dir.join(CHECKPOINT_FILE);
        petrel_kit::fs::write_atomically(&path, self.render().as_bytes(), petrel_kit::fs::Mode::Default)
            .map_err(|e| StoreError::io(&path, e))?;
        let delta = dir.join(CHECKPOINT_DELTA_FILE);
        match std::fs::remove_file(&delta) {
            Ok(()) => sync_dir(dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io(&delta, e)),
        }
    }

    /// Bytes of the base file as [`store`](Self::store) writes it, roughly: the threshold for
    /// folding the deltas into a new base.
    pub fn approximate_bytes(&self) -> u64 {
        self.queue_offsets.keys().map(|(t, _)| t.len() as u64 + 24).sum::<u64>() + 64
    }
}

/// Appends one delta block to `dir/checkpoint.delta` and syncs it; returns its bytes.
pub fn append_delta(dir: &Path, generation: u64, flushed_offset: u64, changes: &Changes) -> Result<u64> {
    use std::fmt::Write as _;
    use std::io::Write as _;
    let mut body = format!("delta\t{generation}\t{flushed_offset}\n");
    for (topic, queues) in changes {
        // A topic's line first: its queues then replace all it had.
        let _ = writeln!(body, "{}\t{topic}", if queues.is_some() { "topic" } else { "gone" });
        for (qid, next) in queues.iter().flatten() {
            let _ = writeln!(body, "queue\t{topic}\t{qid}\t{next}");
        }
    }
    let crc = crc32(body.as_bytes());
    let _ = writeln!(body, "crc\t{crc}");
    let path = dir.join(CHECKPOINT_DELTA_FILE);
    let created = !path.exists();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))?;
    let before = file.metadata().map_err(|e| StoreError::io(&path, e))?.len();
    if let Err(e) = file.write_all(body.as_bytes()).and_then(|()| file.sync_data()) {
        // A torn block would hide every later one: cut it off. If even that fails, the caller
        // must write a new base (`Torn`).
        return Err(match file.set_len(before).and_then(|()| file.sync_data()) {
            Ok(()) => StoreError::io(&path, e),
            Err(_) => StoreError::CheckpointTorn(path.display().to_string()),
        });
    }
    if created {
        sync_dir(dir)?;
    }
    Ok(body.len() as u64)
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    petrel_kit::fs::sync_dir(dir).map_err(|e| StoreError::io(dir, e))
}

/// The body of a base or a block, through the newline before its last line, if that line is
/// `crc\t` and the body's CRC (trailing newlines after it are tolerated).
fn verified_body(text: &str) -> Option<&str> {
    let text = text.trim_end_matches('\n');
    let (body, crc_line) = text.split_at(text.rfind('\n')? + 1);
    let crc: u32 = crc_line.strip_prefix("crc\t")?.parse().ok()?;
    (crc == crc32(body.as_bytes())).then_some(body)
}

/// The next `N` fields, if there are exactly `N` left.
fn exactly<'a, const N: usize>(mut fields: impl Iterator<Item = &'a str>) -> Option<[&'a str; N]> {
    let mut out = [""; N];
    for slot in &mut out {
        *slot = fields.next()?;
    }
    fields.next().is_none().then_some(out)
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

#[cfg(test)]
mod delta_tests {
    use super::*;

    /// A topic and its queues' next offsets, or `None`: the topic went.
    type TopicChange<'a> = (&'a str, Option<&'a [(i32, i64)]>);

    fn changes(list: &[TopicChange<'_>]) -> Changes {
        list.iter()
            .map(|(t, qs)| ((*t).into(), qs.map(|qs| qs.iter().copied().collect())))
            .collect()
    }

    fn base(dir: &Path, generation: u64) -> Checkpoint {
        let mut cp = Checkpoint {
            flushed_offset: 100,
            generation,
            ..Checkpoint::default()
        };
        cp.queue_offsets.insert(("T".into(), 0), 5);
        cp.queue_offsets.insert(("T".into(), 1), 6);
        cp.queue_offsets.insert(("%LMQ%a".into(), 0), 1);
        cp.store(dir).unwrap();
        cp
    }

    #[test]
    fn blocks_apply_in_order_and_a_topic_that_went_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        base(dir.path(), 3);
        append_delta(
            dir.path(),
            3,
            200,
            &changes(&[("T", Some(&[(0, 9), (1, 6)])), ("%LMQ%b", Some(&[(0, 1)]))]),
        )
        .unwrap();
        append_delta(dir.path(), 3, 300, &changes(&[("%LMQ%a", None), ("%LMQ%b", Some(&[(0, 2)]))])).unwrap();
        let cp = Checkpoint::load(dir.path()).unwrap().unwrap();
        assert_eq!(cp.flushed_offset, 300);
        let want: BTreeMap<QueueKey, i64> = [(("%LMQ%b".into(), 0), 2), (("T".into(), 0), 9), (("T".into(), 1), 6)].into();
        assert_eq!(cp.queue_offsets, want);
        // A topic's line replaces all it had: a queue it no longer lists goes, one it lists
        // again keeps its place with the block's offset, a new one comes.
        append_delta(dir.path(), 3, 400, &changes(&[("T", Some(&[(1, 8), (2, 1)]))])).unwrap();
        let cp = Checkpoint::load(dir.path()).unwrap().unwrap();
        let want: BTreeMap<QueueKey, i64> = [(("%LMQ%b".into(), 0), 2), (("T".into(), 1), 8), (("T".into(), 2), 1)].into();
        assert_eq!((cp.flushed_offset, &cp.queue_offsets), (400, &want));
        // A new base takes the deltas' place.
        let folded = Checkpoint {
            generation: 4,
            ..cp.clone()
        };
        folded.store(dir.path()).unwrap();
        assert!(!dir.path().join(CHECKPOINT_DELTA_FILE).exists());
        assert_eq!(Checkpoint::load(dir.path()).unwrap(), Some(folded));
    }

    #[test]
    fn a_torn_block_ends_the_deltas_and_blocks_of_an_older_base_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        base(dir.path(), 1);
        // A block of generation 0 (a crash between a new base and the old deltas' removal).
        append_delta(dir.path(), 0, 900, &changes(&[("T", Some(&[(0, 99)]))])).unwrap();
        append_delta(dir.path(), 1, 200, &changes(&[("T", Some(&[(0, 7)]))])).unwrap();
        let good = std::fs::read(dir.path().join(CHECKPOINT_DELTA_FILE)).unwrap();
        append_delta(dir.path(), 1, 300, &changes(&[("T", Some(&[(0, 8)]))])).unwrap();
        let whole = std::fs::read(dir.path().join(CHECKPOINT_DELTA_FILE)).unwrap();
        // Every cut inside the last block loads as the block before it.
        for cut in good.len()..whole.len() {
            std::fs::write(dir.path().join(CHECKPOINT_DELTA_FILE), &whole[..cut]).unwrap();
            let cp = Checkpoint::load(dir.path()).unwrap().unwrap();
            assert_eq!((cp.flushed_offset, cp.queue_offsets[&("T".into(), 0)]), (200, 7), "cut at {cut}");
        }
        // A damaged byte inside a block ends the deltas there too.
        let mut damaged = whole.clone();
        let at = good.len() + 12;
        damaged[at] ^= 1;
        std::fs::write(dir.path().join(CHECKPOINT_DELTA_FILE), &damaged).unwrap();
        assert_eq!(Checkpoint::load(dir.path()).unwrap().unwrap().flushed_offset, 200);
        std::fs::write(dir.path().join(CHECKPOINT_DELTA_FILE), &whole).unwrap();
        assert_eq!(Checkpoint::load(dir.path()).unwrap().unwrap().flushed_offset, 300);
    }
}
