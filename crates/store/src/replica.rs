//! The commit log as replication sees it: a master reads its log as raw bytes to stream them,
//! and a replica appends those bytes at the master's offsets, so that the two logs are the same
//! byte for byte (RocketMQ's HA protocol carries exactly this; see `petrel-replication`).
//!
//! The stream ignores record boundaries: a chunk may end inside a record, and a segment's
//! filler travels with the rest of the segment. The replica therefore parses records as they
//! complete — to keep the queue offsets it would need as a master, and to refuse a stream that
//! is not a commit log before writing any of it.
//!
//! Owns: the replica's parse cursor. Must never: write replicated bytes anywhere but at the
//! log's end, let a chunk cross a segment, count a record before all its bytes arrived, or hold
//! more than one partial record (the carry is bounded by the largest record).

use std::sync::Arc;

use bytes::Bytes;
use petrel_protocol::message::{BLANK_MAGIC_CODE, MAGIC_CODE_V1, MAGIC_CODE_V2, RecordView};

use crate::commit_log::{BLANK_BYTES, Blocking, CommitLog, Staged};
use crate::error::{Result, StoreError};

/// Where a replica's parse of the master's stream stands.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReplicaCursor {
    /// Start of the first record (or filler) not yet parsed.
    next_record: u64,
    /// The bytes of that record received so far, when it started in an earlier chunk.
    carry: Vec<u8>,
}

/// A queue position a chunk completed: a record's topic, queue and queue offset (one per light
/// message queue the record names too).
type Completed = (String, i32, i64);

/// What [`ReplicaCursor::scan`] found in a chunk.
#[derive(Debug)]
struct Scanned {
    /// The cursor after the chunk's complete records.
    cursor: ReplicaCursor,
    /// Records the chunk completed.
    records: u64,
    /// Their queue positions: one per record, and one per light message queue it names.
    positions: Vec<Completed>,
}

impl ReplicaCursor {
    /// A cursor at a record boundary (the recovered end of the log).
    pub(crate) fn at(end: u64) -> ReplicaCursor {
        ReplicaCursor {
            next_record: end,
            carry: Vec::new(),
        }
    }

    /// Parses the records that `bytes`, at `offset` (the log's end), completes. Returns the
    /// cursor after them and the records, leaving `self` as it was: the caller applies both
    /// once the chunk is accepted.
    fn scan(&self, offset: u64, bytes: &[u8], segment_bytes: u64, lmq: bool) -> Result<Scanned> {
        let chunk_end = offset + bytes.len() as u64;
        // The filler's tail lies past the cursor's record: nothing in this chunk to parse.
        if self.carry.is_empty() && self.next_record >= chunk_end {
            return Ok(Scanned {
                cursor: self.clone(),
                records: 0,
                positions: Vec::new(),
            });
        }
        let joined;
        let (data, base) = if self.carry.is_empty() {
            assert!(self.next_record >= offset, "the cursor never lags the log's end without a carry");
            (bytes, offset)
        } else {
            assert_eq!(
                self.next_record + self.carry.len() as u64,
                offset,
                "the carry ends where the log ends"
            );
            joined = [self.carry.as_slice(), bytes].concat();
            (joined.as_slice(), self.next_record)
        };
        let mut at = self.next_record;
        let mut done = Vec::new();
        let mut records = 0;
        // Bounded: every turn moves `at` forward by a record or to the next segment.
        while at < chunk_end {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "at < chunk_end, where data ends, so at - base < data.len()"
            )]
            let rel = (at - base) as usize;
            let Some(head) = data.get(rel..rel + 8) else { break };
            let size = i32::from_be_bytes(head[0..4].try_into().expect("4 bytes"));
            let magic = i32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
            let segment_end = at - at % segment_bytes + segment_bytes;
            if magic == BLANK_MAGIC_CODE {
                at = segment_end;
                continue;
            }
            if (magic != MAGIC_CODE_V1 && magic != MAGIC_CODE_V2) || size < 8 || at + size as u64 + BLANK_BYTES > segment_end {
                return Err(StoreError::BadRecord(format!(
                    "the replicated stream has no record at offset {at} (size {size}, magic {magic:#x})"
                )));
            }
            let Some(record) = data.get(rel..rel + size as usize) else { break };
            let view = RecordView::parse(record).map_err(|e| StoreError::BadRecord(format!("replicated record at {at}: {e}")))?;
            done.extend(crate::commit_log::positions(&view, lmq).map(|(t, q, o)| (t.to_owned(), q, o)));
            records += 1;
            at += size as u64;
        }
        let carry = if at < chunk_end {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "at < chunk_end, where data ends, so at - base < data.len()"
            )]
            let rel = (at - base) as usize;
            data[rel..].to_vec()
        } else {
            Vec::new()
        };
        Ok(Scanned {
            cursor: ReplicaCursor { next_record: at, carry },
            records,
            positions: done,
        })
    }
}

impl CommitLog {
    /// Makes an empty log begin at `offset`, a segment boundary: a replica that joins a master
    /// whose log no longer starts at 0. Does nothing when the log already ends there.
    ///
    /// # Errors
    /// [`StoreError::ReplicaGap`] when the log is not empty; [`StoreError::Layout`] for an
    /// offset that is not a segment boundary.
    pub fn start_at(&self, offset: u64) -> Result<()> {
        let s = &self.shared;
        if !offset.is_multiple_of(s.config.segment_size_bytes) {
            return Err(StoreError::Layout {
                path: s.config.dir.display().to_string(),
                reason: format!("a log can only begin on a segment boundary, not at {offset}"),
            });
        }
        s.with_write_state(|w| {
            if w.write_offset == offset {
                return Ok(());
            }
            if w.write_offset != 0 || w.current.is_some() || !s.segments.read().is_empty() {
                return Err(StoreError::ReplicaGap {
                    expected: w.write_offset,
                    got: offset,
                });
            }
            let unused = {
                let mut next = s.next.lock();
                next.wanted = offset;
                next.retry_requested = true;
                next.error = None;
                next.ready.take()
            };
            if let Some(unused) = unused {
                let path = unused.path().to_owned();
                drop(unused);
                std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
            }
            w.write_offset = offset;
            w.replica = ReplicaCursor::at(offset);
            s.published.store(offset, std::sync::atomic::Ordering::SeqCst);
            s.written.advance(offset);
            s.flushed.advance(offset);
            s.next_changed.notify_all();
            s.allocator_wakeup.wake_always();
            tracing::info!(offset, "empty commit log begins at the master's offset");
            Ok(())
        })
    }

    /// Appends `bytes` of the master's log, which held them at `offset` (this log's end), and
    /// returns the new end. Blocks for the next segment or for room in the stage: for the
    /// replication thread, not the async runtime.
    ///
    /// # Errors
    /// [`StoreError::ReplicaGap`] when `offset` is not this log's end; [`StoreError::BadRecord`]
    /// when the bytes are not a commit log or cross a segment (the two sides' segment sizes
    /// differ); a write failure. Nothing is written on an error.
    pub fn append_replicated(&self, offset: u64, bytes: Bytes) -> Result<u64> {
        let s = &self.shared;
        s.check_writable()?;
        let len = bytes.len() as u64;
        let segment_bytes = s.config.segment_size_bytes;
        if len == 0 {
            return Ok(offset);
        }
        if offset % segment_bytes + len > segment_bytes {
            return Err(StoreError::BadRecord(format!(
                "a replicated chunk of {len} bytes at {offset} crosses a segment boundary \
                 (is the master's segment size {segment_bytes} bytes, as here?)"
            )));
        }
        s.wait_for_stage_room(bytes.len(), Blocking::Yes)?;
        s.with_write_state(|w| -> Result<()> {
            if w.write_offset != offset {
                return Err(StoreError::ReplicaGap {
                    expected: w.write_offset,
                    got: offset,
                });
            }
            if w.replica.carry.is_empty() && w.replica.next_record < w.write_offset {
                // This log took appends of its own since it last followed a master (it was
                // master itself): its end is a record boundary, and the parse starts there.
                w.replica = ReplicaCursor::at(w.write_offset);
            }
            let scanned = w.replica.scan(offset, &bytes, segment_bytes, s.config.lmq)?;
            let current_ends = w.current.as_ref().map(|c| c.start_offset() + segment_bytes);
            if current_ends.is_none_or(|e| offset >= e) {
                if !offset.is_multiple_of(segment_bytes) {
                    return Err(StoreError::ReplicaGap {
                        expected: offset - offset % segment_bytes,
                        got: offset,
                    });
                }
                let next = s.take_next_segment(offset, Blocking::Yes)?;
                s.segments.write().push(next.clone());
                w.current = Some(next);
                s.allocator_wakeup.wake();
            } else if offset % segment_bytes < segment_bytes / 2 && (offset + len) % segment_bytes >= segment_bytes / 2 {
                s.allocator_wakeup.wake();
            }
            s.stats
                .appended_records
                .fetch_add(scanned.records, std::sync::atomic::Ordering::Release);
            for (topic, queue_id, queue_offset) in &scanned.positions {
                *w.numbering.next_mut(topic, *queue_id) = queue_offset + 1;
            }
            w.replica = scanned.cursor;
            w.write_offset += len;
            s.stage_one(Staged {
                offset,
                bytes,
                end: w.write_offset,
            });
            Ok(())
        })?;
        if !crate::writer::write_staged(s) {
            return Err(StoreError::NotWritable("writing the commit log failed".into()));
        }
        Ok(offset + len)
    }

    /// Cuts the log back to `offset`, a record boundary at or below its end: a replica that
    /// rejoins a new master drops the tail its old master wrote and nobody else holds (the
    /// epoch files name the point). Waits until everything written is durable, then, under the
    /// put-message lock, zeroes the rest of the segment holding `offset`, deletes the segments
    /// after it, rolls the queue offsets back to the first record cut in each queue and lowers
    /// the watermarks. Returns the bytes cut.
    ///
    /// Readers must not have passed `offset` (the store checks its dispatcher first).
    ///
    /// # Errors
    /// [`StoreError::Layout`] for an offset past the end or inside a record; a write failing.
    pub fn truncate_to(&self, offset: u64) -> Result<u64> {
        let s = &self.shared;
        s.check_writable()?;
        // No checkpoint block is written while the log is cut: one taken before the cut would
        // claim the old end. The checkpointer takes this lock before the put-message lock too.
        let mut checkpoint = s.checkpoint.lock();
        self.request_flush();
        let end = self.max_offset();
        match s.flushed.wait_blocking(end, std::time::Duration::from_secs(30)) {
            Ok(()) => {}
            Err(e) => return Err(StoreError::NotWritable(format!("flushing before a truncation: {e}"))),
        }
        let (cut_bytes, queue_offsets) = s.with_write_state(|w| -> Result<(u64, _)> {
            let end = w.write_offset;
            if offset >= end {
                return Ok((0, None));
            }
            if s.flushed.get() < end {
                return Err(StoreError::NotWritable(format!(
                    "records were appended while the log was being cut at {offset}; try again"
                )));
            }
            let segment_bytes = s.config.segment_size_bytes;
            let cut = self.records_from(offset, end)?;
            for (topic, queue_id, queue_offset) in &cut {
                let next = w.numbering.next_mut(topic, *queue_id);
                *next = (*next).min(*queue_offset);
            }
            let keep_start = offset - offset % segment_bytes;
            let doomed: Vec<Arc<crate::mapped_file::MappedFile>> = {
                let mut segs = s.segments.write();
                let at = segs.iter().position(|g| g.start_offset() > keep_start).unwrap_or(segs.len());
                segs.split_off(at)
            };
            // Newest first: a crash part-way leaves a contiguous log.
            for seg in doomed.iter().rev() {
                std::fs::remove_file(seg.path()).map_err(|e| StoreError::io(seg.path(), e))?;
            }
            crate::checkpoint::sync_dir(&s.config.dir)?;
            w.current = s.segment_at(offset);
            if let Some(cur) = &w.current {
                let from = usize::try_from(offset - cur.start_offset()).expect("the segment holding `offset` is mapped whole");
                let upto = usize::try_from(end - cur.start_offset()).map_or(cur.len(), |upto| upto.min(cur.len()));
                // SAFETY: under the put-message lock with nothing staged; readers stop at
                // `offset` (the caller's contract), so nobody reads or writes these bytes.
                unsafe { cur.write_at(from, &vec![0; upto - from]) };
                cur.flush_range(from, upto)?;
            }
            {
                let mut next = s.next.lock();
                next.wanted = keep_start + segment_bytes;
                if let Some(unused) = next.ready.take_if(|r| r.start_offset() != keep_start + segment_bytes) {
                    let path = unused.path().to_owned();
                    drop(unused);
                    let _ = std::fs::remove_file(&path);
                }
                next.retry_requested = true;
            }
            s.allocator_wakeup.wake_always();
            w.write_offset = offset;
            w.replica = ReplicaCursor::at(offset);
            s.published.store(offset, std::sync::atomic::Ordering::SeqCst);
            s.written.lower_to(offset);
            s.flushed.lower_to(offset);
            tracing::warn!(
                offset,
                cut_bytes = end - offset,
                records = cut.len(),
                "commit log cut back to the consistent point"
            );
            // The queues' offsets at the cut, for the checkpoint below.
            Ok((end - offset, Some(w.numbering.snapshot())))
        })?;
        if let Some(queue_offsets) = queue_offsets {
            // The last checkpoint claims the old end: a crash now would recover from there,
            // taking the zeroed bytes after the cut for the log. A new base at the cut, which
            // is durable (the log was flushed past it before the cut).
            checkpoint.store_base(&s.config.dir, offset, queue_offsets)?;
        }
        Ok(cut_bytes)
    }

    /// A replica about to become master: drops the partial record its master's stream left
    /// at the end (the stream ignores record boundaries), or completes a segment whose filler
    /// had only begun to arrive, so that the next append starts at a record boundary.
    ///
    /// # Errors
    /// The cut failing.
    pub fn cut_partial_record(&self) -> Result<()> {
        let s = &self.shared;
        let (end, next_record) = s.with_write_state(|w| (w.write_offset, w.replica.next_record));
        if next_record < end {
            self.truncate_to(next_record)?;
        } else if next_record > end {
            s.with_write_state(|w| {
                assert_eq!(next_record % s.config.segment_size_bytes, 0, "only a filler runs ahead of the log");
                w.write_offset = next_record;
                w.current = None;
                s.published.store(next_record, std::sync::atomic::Ordering::SeqCst);
                s.written.advance(next_record);
                s.flushed.advance(next_record);
            });
        }
        Ok(())
    }

    /// The records in `[from, to)`, which must start at a record boundary.
    fn records_from(&self, from: u64, to: u64) -> Result<Vec<Completed>> {
        let segment_bytes = self.shared.config.segment_size_bytes;
        let mut at = from;
        let mut out = Vec::new();
        // Bounded: every turn moves `at` forward by a record or to the next segment.
        while at < to {
            let seg = self.shared.segment_at(at).ok_or_else(|| StoreError::Layout {
                path: self.shared.config.dir.display().to_string(),
                reason: format!("no segment holds offset {at}"),
            })?;
            let pos = usize::try_from(at - seg.start_offset()).expect("the segment holding `at` is mapped whole");
            if to - at < 8 {
                // A partial header: a replica's stream ended inside a record, never counted.
                break;
            }
            let head = seg.slice(pos, 8);
            let size = i32::from_be_bytes(head[0..4].try_into().expect("4 bytes"));
            let magic = i32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
            if magic == BLANK_MAGIC_CODE {
                at = at - at % segment_bytes + segment_bytes;
                continue;
            }
            let bad = || StoreError::Layout {
                path: self.shared.config.dir.display().to_string(),
                reason: format!("cannot cut the log at {from}: no record at {at} (size {size}, magic {magic:#x})"),
            };
            if size < 8 || pos + size as usize > seg.len() {
                return Err(bad());
            }
            if at + size as u64 > to {
                // A partial record (see above).
                break;
            }
            let view = RecordView::parse(seg.slice(pos, size as usize)).map_err(|_| bad())?;
            out.extend(crate::commit_log::positions(&view, self.shared.config.lmq).map(|(t, q, o)| (t.to_owned(), q, o)));
            at += size as u64;
        }
        Ok(out)
    }

    /// Up to `max_bytes` of the log's raw bytes from `offset`, never past the written end or the
    /// segment holding `offset`: empty when nothing is written there yet, `None` when `offset`
    /// lies below the oldest segment or past the end.
    #[must_use]
    pub fn read_raw(&self, offset: u64, max_bytes: usize) -> Option<Bytes> {
        let end = self.max_offset();
        if offset >= end {
            return (offset == end).then(Bytes::new);
        }
        let seg = self.shared.segment_at(offset)?;
        let segment_end = seg.start_offset() + self.shared.config.segment_size_bytes;
        #[expect(clippy::cast_possible_truncation, reason = "n <= max_bytes, a usize")]
        let n = (max_bytes as u64).min(end - offset).min(segment_end - offset) as usize;
        #[expect(
            clippy::cast_possible_truncation,
            reason = "offset lies in this segment, which is mapped whole, so pos fits usize"
        )]
        let pos = (offset - seg.start_offset()) as usize;
        Some(Bytes::copy_from_slice(seg.slice(pos, n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(topic: &str, queue_id: i32, queue_offset: i64, body_len: usize) -> Vec<u8> {
        let msg = petrel_protocol::message::MessageExt {
            topic: topic.into(),
            queue_id,
            queue_offset,
            body: vec![7; body_len].into(),
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:2".parse().unwrap(),
            ..Default::default()
        };
        let mut out = bytes::BytesMut::new();
        msg.encode(&mut out).unwrap();
        out.to_vec()
    }

    #[test]
    fn a_record_split_over_chunks_counts_once_when_it_completes() {
        let a = record("T", 1, 5, 100);
        let b = record("T", 2, 9, 300);
        let stream = [a.clone(), b.clone()].concat();
        let cursor = ReplicaCursor::at(0);
        let cut = a.len() + 50;
        let first = cursor.scan(0, &stream[..cut], 1 << 20, false).unwrap();
        assert_eq!((first.records, first.positions), (1, vec![("T".to_owned(), 1, 5)]));
        assert_eq!(first.cursor.carry.len(), 50);
        let second = first.cursor.scan(cut as u64, &stream[cut..], 1 << 20, false).unwrap();
        assert_eq!((second.records, second.positions), (1, vec![("T".to_owned(), 2, 9)]));
        assert!(second.cursor.carry.is_empty());
        assert_eq!(second.cursor.next_record, stream.len() as u64);
    }

    #[test]
    fn a_filler_skips_to_the_next_segment_even_across_chunks() {
        let seg = 4096u64;
        let a = record("T", 0, 0, 100);
        let mut first = a.clone();
        let filler_at = first.len();
        let remaining = i32::try_from(seg - filler_at as u64).expect("a filler's length fits i32");
        first.extend_from_slice(&remaining.to_be_bytes());
        first.extend_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
        first.resize(1000, 0);
        let done = ReplicaCursor::at(0).scan(0, &first, seg, false).unwrap();
        assert_eq!((done.records, done.positions.len()), (1, 1));
        assert_eq!(done.cursor.next_record, seg, "the cursor jumps to the next segment");
        let none = done.cursor.scan(1000, &[0u8; 3096], seg, false).unwrap();
        assert_eq!((none.records, none.positions.len()), (0, 0));
        assert_eq!(none.cursor.next_record, seg);
        let b = record("T", 0, 1, 10);
        let next = none.cursor.scan(seg, &b, seg, false).unwrap();
        assert_eq!(next.positions, vec![("T".to_owned(), 0, 1)]);
    }

    #[test]
    fn a_former_master_follows_from_its_own_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::commit_log::CommitLogConfig::new(dir.path().join("commitlog"));
        config.segment_size_bytes = 1 << 20;
        let log = CommitLog::open(config).unwrap();
        // Appends of its own, as a master: the replica cursor does not follow them.
        let mut own = record("T", 0, 0, 50);
        let first = log.append(&mut own, "T", 0).unwrap();
        log.wait_written(first.end_offset()).unwrap();
        // Demoted, it appends its new master's stream from its end.
        let theirs = record("T", 0, 1, 70);
        let end = log.append_replicated(first.end_offset(), Bytes::from(theirs.clone())).unwrap();
        assert_eq!(end, first.end_offset() + theirs.len() as u64);
        log.close().unwrap();
    }

    #[test]
    fn bytes_that_are_not_a_log_are_refused() {
        let e = ReplicaCursor::at(0).scan(0, &[0xAB; 64], 4096, false).unwrap_err();
        assert!(matches!(e, StoreError::BadRecord(_)), "{e}");
    }
}
