//! Crash recovery of the commit log: open every segment (names, sizes, contiguity), scan from the
//! checkpoint checking each record's size, magic and CRC, and decide whether what follows the
//! last valid record is a torn tail (cut it) or damage in the middle of the log (refuse to start).
//!
//! A torn tail is what a crash leaves past the last sync: the kernel writes pages back in any
//! order, so some sectors of the unsynced window reached the disk and some did not. A sector
//! that did not holds what its last sync wrote: the data up to that point, then zeros (segments
//! are allocated, or zero-filled, before use). So a tear shows as zeros running up to a sector
//! boundary. When a valid record follows the first bad one, recovery looks between them for
//! that mark — an all-zero sector, a zero run from the bad record's start to a sector boundary,
//! or one of at least [`TEAR_ZERO_RUN_BYTES`] ending at a sector boundary. Without it, the bad
//! record sat among records that reached the disk — a flipped bit, a bad sector — and cutting
//! there would throw away acknowledged messages: recovery stops with an error naming the
//! segment and offset, unless the operator asked to truncate
//! ([`CommitLogConfig::truncate_corruption`]). The test can be wrong both ways, rarely: a
//! damaged record whose own bytes hold such a zero run (a body of zeros) looks like a tear; a
//! tear that stopped fewer than 16 bytes before a sector's end, inside a record, is taken for
//! damage and needs the operator. The first is ruled out below a durable point known from
//! outside the log ([`CommitLogConfig::durable_below`]: what readers saw under SYNC_FLUSH was
//! flushed, so nothing there can be torn): a bad record there is damage, zeros or not. Past
//! it, a tear that discards valid records after it is logged as an error, naming them.
//!
//! Owns: deciding where the valid log ends. Must never: read before the checkpoint (recovery
//! time must not grow with the log), keep bytes after a torn tail, or delete records that
//! follow damage without the operator's say.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use petrel_protocol::message::{BLANK_MAGIC_CODE, MAGIC_CODE_V1, MAGIC_CODE_V2, MessageExt, RecordView};

use crate::checkpoint::{Checkpoint, QueueKey};
use crate::commit_log::{BLANK_BYTES, CommitLogConfig, RecoveryReport};
use crate::error::{Result, StoreError};
use crate::mapped_file::MappedFile;

/// Opens every segment of `dir`, checking names, sizes and contiguity.
pub(crate) fn load_segments(dir: &Path, size: u64) -> Result<Vec<Arc<MappedFile>>> {
    let mut found: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| StoreError::io(dir, e))? {
        let path = entry.map_err(|e| StoreError::io(dir, e))?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit()) {
            found.push((name.parse().expect("20 digits"), path));
        }
    }
    found.sort();
    let mut segs = Vec::with_capacity(found.len());
    for (i, (offset, path)) in found.iter().enumerate() {
        if offset % size != 0 || (i > 0 && *offset != found[i - 1].0 + size) {
            return Err(StoreError::Layout {
                path: path.display().to_string(),
                reason: format!("segment start {offset} is not contiguous with a segment size of {size}"),
            });
        }
        segs.push(Arc::new(MappedFile::open(path, *offset, size)?));
    }
    Ok(segs)
}

/// Appends are sequential, so bytes written past the recovered end are contiguous: once this
/// many zero bytes follow the last non-zero one, nothing further was written. Larger than any
/// single append (a frame is at most 16 MiB).
pub const TORN_TAIL_ZERO_RUN_BYTES: usize = 32 << 20;

/// Length of the non-zero region at the start of `tail` (up to its last non-zero byte), read
/// in chunks and bounded by [`TORN_TAIL_ZERO_RUN_BYTES`] of zeros, so a clean end costs a
/// bounded read instead of a scan of the whole segment.
fn torn_tail_len(tail: &[u8]) -> usize {
    const CHUNK: usize = 1 << 20;
    let mut end = 0;
    for (i, chunk) in tail.chunks(CHUNK).enumerate() {
        let at = i * CHUNK;
        if let Some(p) = chunk.iter().rposition(|b| *b != 0) {
            end = at + p + 1;
        } else if at + chunk.len() - end >= TORN_TAIL_ZERO_RUN_BYTES {
            break;
        }
    }
    end
}

/// A position (or length) inside a segment, as an index into its mapping.
fn in_segment(pos: u64) -> usize {
    usize::try_from(pos).expect("a segment is mapped whole, so a position inside it fits usize")
}

pub(crate) fn recover(
    config: &CommitLogConfig,
    segments: &[Arc<MappedFile>],
    checkpoint: Option<Checkpoint>,
) -> Result<(BTreeMap<QueueKey, i64>, RecoveryReport)> {
    let size = config.segment_size_bytes;
    let first = segments.first().map_or(0, |s| s.start_offset());
    let segment_end = segments.last().map_or(0, |s| s.start_offset() + size);
    let checkpoint = checkpoint.filter(|c| c.flushed_offset >= first && c.flushed_offset <= segment_end);
    let (mut offset, mut queue_offsets) = match checkpoint {
        Some(c) => (c.flushed_offset, c.queue_offsets),
        None => (first, BTreeMap::new()),
    };
    let mut report = RecoveryReport {
        scanned_from: offset,
        ..RecoveryReport::default()
    };
    let seg_for = |o: u64| -> Option<&Arc<MappedFile>> { segments.get(usize::try_from(o.checked_sub(first)? / size).ok()?) };
    while let Some(seg) = seg_for(offset) {
        let pos = in_segment(offset - seg.start_offset());
        if pos as u64 + BLANK_BYTES > size {
            offset = seg.start_offset() + size;
            continue;
        }
        let head = seg.slice(pos, 8);
        let rec_size = i32::from_be_bytes(head[0..4].try_into().expect("4 bytes"));
        let magic = i32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
        if magic == BLANK_MAGIC_CODE && rec_size as u64 == size - pos as u64 {
            offset = seg.start_offset() + size;
            continue;
        }
        if rec_size == 0 && magic == 0 {
            break;
        }
        // Read in place: recovery needs only a record's queue and offset, not a copy of it.
        match RecordView::parse_verified(seg.slice(pos, seg.len() - pos)).map(|v| (v, v.size_bytes)) {
            // Past the durable point a record whose end is zeros lost that end in the crash (a
            // slave that had received part of it, a page that was never written back).
            Ok((v, used)) if used == rec_size as usize && offset >= config.durable_below && v.ends_in_zero() => {
                report.stop_reason = Some(format!(
                    "record at {offset}: its last bytes are zeros, a write that did not reach the disk"
                ));
                break;
            }
            Ok((v, used)) if used == rec_size as usize => {
                for (topic, queue_id, queue_offset) in crate::commit_log::positions(&v, config.lmq) {
                    let next = queue_offsets.entry((topic.to_owned(), queue_id)).or_insert(0);
                    *next = (*next).max(queue_offset + 1);
                }
                report.records_scanned += 1;
                offset += used as u64;
            }
            Ok(_) => {
                report.stop_reason = Some(format!("record at {offset}: size field disagrees with its fields"));
                break;
            }
            Err(e) => {
                report.stop_reason = Some(format!("record at {offset}: {e}"));
                break;
            }
        }
    }
    report.end_offset = offset;
    let valid_after = match (find_valid_record_after(segments, size, offset), seg_for(offset)) {
        (Some(found), Some(seg)) if found_in_torn_record(seg, size, offset, found) => {
            find_valid_record_after(segments, size, seg.start_offset() + size - 1)
        }
        (found, _) => found,
    };
    // A bad record below the durable point is damage even when nothing valid follows it: it
    // was flushed whole, so cutting there would drop what readers already saw.
    let damaged_durable = report.stop_reason.is_some() && offset < config.durable_below;
    let damaged =
        damaged_durable || valid_after.is_some_and(|found| offset < config.durable_below || !tear_between(segments, size, offset, found));
    if damaged {
        let seg = seg_for(offset).map_or_else(|| config.dir.clone(), |s| s.path().to_path_buf());
        let reason = report
            .stop_reason
            .clone()
            .unwrap_or_else(|| "zeros where a record should start".into());
        if !config.truncate_corruption {
            let path = seg.display().to_string();
            return Err(match valid_after {
                Some(next_valid) => StoreError::Corrupt {
                    path,
                    offset,
                    next_valid,
                    reason,
                },
                None => StoreError::DurableDamaged {
                    path,
                    offset,
                    durable_below: config.durable_below,
                    reason,
                },
            });
        }
        tracing::error!(segment = %seg.display(), offset, next_valid = ?valid_after, durable_below = config.durable_below, %reason,
            "damaged record where the log was durable: truncating because truncate_corruption is set");
    } else if let Some(found) = valid_after {
        tracing::error!(
            offset,
            next_valid = found,
            durable_below = config.durable_below,
            reason = ?report.stop_reason,
            "a torn write past the last durable point: cutting it and the valid records written after it in the same unsynced window"
        );
    }
    cut_tail(config, segments, offset, &mut report)?;
    Ok((queue_offsets, report))
}

/// Cuts everything from `offset` on: the newest segments go first (a crash part-way leaves a
/// contiguous log, never a gap), the directory is synced, then the rest of the segment holding
/// `offset` is zeroed.
fn cut_tail(config: &CommitLogConfig, segments: &[Arc<MappedFile>], offset: u64, report: &mut RecoveryReport) -> Result<()> {
    let size = config.segment_size_bytes;
    let first = segments.first().map_or(0, |s| s.start_offset());
    let keep_start = offset - (offset - first) % size;
    let mut removed = false;
    for seg in segments.iter().rev().filter(|s| s.start_offset() + size > offset) {
        let start = seg.start_offset();
        let from = in_segment(offset.saturating_sub(start));
        let torn = torn_tail_len(seg.slice(from, seg.len() - from));
        report.truncated_bytes += torn as u64;
        if start > keep_start {
            std::fs::remove_file(seg.path()).map_err(|e| StoreError::io(seg.path(), e))?;
            removed = true;
        } else {
            if removed {
                crate::checkpoint::sync_dir(&config.dir)?;
            }
            if torn > 0 {
                // No writer or reader exists yet, so a second map of the file may write it.
                MappedFile::open(seg.path(), start, size)?.zero_range(from, from + torn)?;
            }
        }
    }
    if report.truncated_bytes > 0 {
        tracing::warn!(offset, bytes = report.truncated_bytes, reason = ?report.stop_reason, "cut the commit log's torn tail");
    }
    Ok(())
}

/// Sector size of the zero test: the unit a disk writes atomically.
const SECTOR_BYTES: u64 = 512;

/// The offset of the first record after `from` (not at it) whose size, magic and CRC check,
/// looking through the non-zero data that follows in every segment.
fn find_valid_record_after(segments: &[Arc<MappedFile>], size: u64, from: u64) -> Option<u64> {
    for seg in segments.iter().filter(|s| s.start_offset() + size > from) {
        let start = seg.start_offset();
        let pos = if from >= start { in_segment(from - start) + 1 } else { 0 };
        if pos as u64 >= size {
            continue;
        }
        let tail = seg.slice(pos, seg.len() - pos);
        let region = &tail[..torn_tail_len(tail)];
        for (i, w) in region.windows(8).enumerate() {
            let magic = i32::from_be_bytes([w[4], w[5], w[6], w[7]]);
            if magic != MAGIC_CODE_V1 && magic != MAGIC_CODE_V2 {
                continue;
            }
            let rec_size = i32::from_be_bytes([w[0], w[1], w[2], w[3]]);
            if rec_size <= 0 || i as u64 + rec_size as u64 > region.len() as u64 {
                continue;
            }
            if matches!(MessageExt::decode_verified(&region[i..]), Ok((_, used)) if used == rec_size as usize) {
                return Some(start + (pos + i) as u64);
            }
        }
    }
    None
}

/// Whether the valid record `found` lies in the body of the bad record at `offset` rather than
/// after it: a message body may carry a stored record, and when only a prefix of the outer record
/// was written (a slave that received part of it, pages never written back) that inner record
/// is whole while the outer one is not. It is taken for the outer record's body when the outer
/// record's declared span holds it and runs past the last byte written, and the valid records
/// from it stop short of that byte (records written after a damaged one run up to it).
fn found_in_torn_record(seg: &MappedFile, size: u64, offset: u64, found: u64) -> bool {
    let start = seg.start_offset();
    let pos = in_segment(offset - start);
    let head = seg.slice(pos, 8);
    let rec_size = i32::from_be_bytes(head[0..4].try_into().expect("4 bytes"));
    let magic = i32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
    if (magic != MAGIC_CODE_V1 && magic != MAGIC_CODE_V2) || rec_size <= 0 {
        return false;
    }
    let span_end = offset + rec_size as u64;
    let data_end = offset + torn_tail_len(seg.slice(pos, seg.len() - pos)) as u64;
    if found <= offset || found >= span_end || span_end <= data_end || span_end > start + size {
        return false;
    }
    let mut at = found;
    // Each step consumes a whole record, so at most (data_end - found) / 8 steps.
    while at < data_end {
        let at_pos = in_segment(at - start);
        let rest = seg.slice(at_pos, seg.len() - at_pos);
        match MessageExt::decode_verified(rest) {
            Ok((_, used)) if used > 0 => at += used as u64,
            _ => break,
        }
    }
    at < data_end
}

/// A zero run this long ending at a sector boundary marks a tear (record headers hold runs of
/// up to 12 zero bytes of their own: a zero reconsume count and transaction offset).
pub const TEAR_ZERO_RUN_BYTES: usize = 16;

/// Whether `[from, to)` shows a tear: a zero run that ends at a sector boundary and either
/// starts at `from` (the first record's start) or is at least [`TEAR_ZERO_RUN_BYTES`] long (a
/// whole zero sector is one).
fn tear_between(segments: &[Arc<MappedFile>], size: u64, from: u64, to: u64) -> bool {
    let mut boundary = (from / SECTOR_BYTES + 1) * SECTOR_BYTES;
    while boundary <= to {
        let Some(seg) = segments
            .iter()
            .find(|s| s.start_offset() < boundary && boundary <= s.start_offset() + size)
        else {
            return false;
        };
        let sector_start = boundary - SECTOR_BYTES;
        let lo = sector_start.max(from);
        let bytes = seg.slice(in_segment(lo - seg.start_offset()), in_segment(boundary - lo));
        let run = bytes.iter().rev().take_while(|b| **b == 0).count();
        if run >= TEAR_ZERO_RUN_BYTES || (run > 0 && run == bytes.len() && lo == from) {
            return true;
        }
        boundary += SECTOR_BYTES;
    }
    false
}

#[cfg(test)]
mod torn_tail_tests {
    use super::*;

    #[test]
    fn torn_tail_ends_at_the_last_nonzero_byte_before_a_long_zero_run() {
        let mut tail = vec![0u8; TORN_TAIL_ZERO_RUN_BYTES + (8 << 20)];
        assert_eq!(torn_tail_len(&tail), 0);
        tail[10] = 1;
        tail[3 << 20] = 7; // a gap shorter than the run still belongs to the torn write
        assert_eq!(torn_tail_len(&tail), (3 << 20) + 1);
        let far = tail.len() - 1;
        tail[far] = 9; // past a full zero run: never written by this store, not scanned
        assert_eq!(torn_tail_len(&tail), (3 << 20) + 1);
    }
}
