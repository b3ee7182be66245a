//! `ScheduleService`: RocketMQ's delay levels. A send whose `DELAY` property names level `n`
//! (1 ..= the levels of `messageDelayLevel`, larger values clamped to the last) is stored in
//! `SCHEDULE_TOPIC_XXXX`, queue `n - 1`, its real topic and queue in `REAL_TOPIC` / `REAL_QID`.
//! The schedule chore (`chores/schedule.rs`) moves each to its real queue once its store time plus
//! the level's delay has passed. Within one level the delay is fixed, so due times follow the
//! queue's order: a level is a FIFO with one read offset, persisted in `config/delayOffset.json`
//! (RocketMQ's file and layout) and copied by slaves from their master (GET_ALL_DELAY_OFFSET).
//!
//! Owns: the level table, which sends are delayed, the per-level offsets. Must never: move a
//! level's offset past a message that is not stored in its real queue (a crash then delivers it
//! again, never not at all), or hold more levels than [`MAX_DELAY_LEVELS`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use petrel_protocol::fastjson::from_slice_lenient as from_json;
use petrel_protocol::properties::{Properties, keys};
use serde::{Deserialize, Serialize};

use crate::error::BrokerError;
use crate::persist::{read_if_exists, write_atomically};

/// The topic delayed messages wait in, one queue per level.
pub const SCHEDULE_TOPIC: &str = petrel_protocol::topics::SCHEDULE_TOPIC;

/// The most levels `messageDelayLevel` may list (RocketMQ's default has 18).
pub const MAX_DELAY_LEVELS: usize = 64;

/// The longest delay one level may have: 30 days.
pub const MAX_DELAY_MS: u64 = 30 * 24 * 3600 * 1000;

/// The body of GET_ALL_DELAY_OFFSET and of `config/delayOffset.json`: per level (1-based), the
/// schedule queue's offset of the next message to deliver.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DelayOffsetTable {
    /// level -> the schedule queue's next offset to deliver
    #[serde(default)]
    pub offset_table: BTreeMap<i32, i64>,
}

/// Parses `messageDelayLevel` ("1s 5s 10s 30s 1m … 2h": whitespace-separated numbers with a unit
/// of `ms`, `s`, `m`, `h` or `d`) into each level's delay in milliseconds.
///
/// # Errors
/// An empty list, more than [`MAX_DELAY_LEVELS`], a bad number or unit, or a delay of 0 or over
/// [`MAX_DELAY_MS`].
pub fn parse_delay_levels(spec: &str) -> Result<Vec<u64>, BrokerError> {
    let mut delays_ms = Vec::new();
    for item in spec.split_whitespace() {
        let split = item.find(|c: char| !c.is_ascii_digit()).unwrap_or(item.len());
        let (number, unit) = item.split_at(split);
        let n: u64 = number
            .parse()
            .map_err(|_| BrokerError::InvalidParameter(format!("`{item}`: expected a number and a unit (ms, s, m, h, d)")))?;
        let unit_ms = match unit {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => {
                return Err(BrokerError::InvalidParameter(format!(
                    "`{item}`: unknown unit `{unit}` (ms, s, m, h, d)"
                )));
            }
        };
        let ms = n.saturating_mul(unit_ms);
        if ms == 0 || ms > MAX_DELAY_MS {
            return Err(BrokerError::InvalidParameter(format!(
                "`{item}`: a delay must be more than 0 and at most 30d"
            )));
        }
        delays_ms.push(ms);
    }
    if delays_ms.is_empty() || delays_ms.len() > MAX_DELAY_LEVELS {
        return Err(BrokerError::InvalidParameter(format!("must list 1 to {MAX_DELAY_LEVELS} delays")));
    }
    Ok(delays_ms)
}

/// The delay levels and, per level, how far its schedule queue has been delivered.
pub struct ScheduleService {
    delays_ms: Vec<u64>,
    /// Per level (index `level - 1`), the next schedule-queue offset to deliver.
    offsets: Mutex<Vec<i64>>,
    dirty: AtomicBool,
    path: PathBuf,
}

impl ScheduleService {
    /// The levels of `spec` and the offsets persisted under `root` (none: every level from 0).
    ///
    /// # Errors
    /// A bad `spec`, or an unreadable offsets file.
    pub fn open(root: &Path, spec: &str) -> std::io::Result<ScheduleService> {
        let delays_ms = parse_delay_levels(spec).map_err(std::io::Error::other)?;
        let path = root.join("config").join("delayOffset.json");
        let service = ScheduleService {
            offsets: Mutex::new(vec![0; delays_ms.len()]),
            delays_ms,
            dirty: AtomicBool::new(false),
            path,
        };
        if let Some(bytes) = read_if_exists(&service.path)? {
            let table: DelayOffsetTable =
                from_json(&bytes).map_err(|e| std::io::Error::other(format!("{}: {e}", service.path.display())))?;
            service.merge(&table);
        }
        Ok(service)
    }

    /// How many delay levels `messageDelayLevel` lists.
    #[must_use]
    pub fn levels(&self) -> i32 {
        i32::try_from(self.delays_ms.len()).expect("at most MAX_DELAY_LEVELS")
    }

    /// The delay of `level` (1-based), milliseconds.
    #[must_use]
    pub fn delay_ms(&self, level: i32) -> u64 {
        assert!((1..=self.levels()).contains(&level), "level {level} out of 1..={}", self.levels());
        self.delays_ms[usize::try_from(level - 1).expect("positive")]
    }

    /// The level a message waits at: its `DELAY` property, clamped to the last level; `None` when
    /// it has none, 0 or less, or is a half message (transactions keep their own path).
    #[must_use]
    pub fn level_of(&self, properties: &Properties) -> Option<i32> {
        if properties.get(keys::TRANSACTION_PREPARED).is_some_and(|v| v == "true") {
            return None;
        }
        let level: i32 = properties.get(keys::DELAY_TIME_LEVEL)?.trim().parse().ok()?;
        (level > 0).then(|| level.min(self.levels()))
    }

    /// The next offset to deliver at `level`.
    #[must_use]
    pub fn offset(&self, level: i32) -> i64 {
        self.offsets.lock()[index(level)]
    }

    /// Moves `level`'s offset forward to `to` (never back: a delivered message stays delivered).
    pub fn advance(&self, level: i32, to: i64) {
        let mut offsets = self.offsets.lock();
        let at = &mut offsets[index(level)];
        if to > *at {
            *at = to;
            self.dirty.store(true, Ordering::Release);
        }
    }

    /// Sets `level`'s offset to `to`, back as well as forward: the queue's bounds moved under it
    /// (retention, or a new master whose log is shorter).
    pub fn reset(&self, level: i32, to: i64) {
        self.offsets.lock()[index(level)] = to.max(0);
        self.dirty.store(true, Ordering::Release);
    }

    /// Takes the master's offsets (a slave's sync): each level goes to the master's value.
    pub fn merge(&self, table: &DelayOffsetTable) {
        let mut offsets = self.offsets.lock();
        for (&level, &offset) in &table.offset_table {
            if (1..=self.levels()).contains(&level) && offsets[index(level)] != offset {
                offsets[index(level)] = offset.max(0);
                self.dirty.store(true, Ordering::Release);
            }
        }
    }

    /// Per level, the messages stored in its schedule queue and not yet delivered.
    #[must_use]
    pub fn pending(&self, store: &petrel_store::MessageStore) -> Vec<i64> {
        let offsets = self.offsets.lock().clone();
        (0..self.levels())
            .zip(offsets)
            .map(|(queue_id, offset)| (store.queue_offsets(SCHEDULE_TOPIC, queue_id).1 - offset).max(0))
            .collect()
    }

    /// The per-level offsets, 1-based, as GET_ALL_DELAY_OFFSET and the file hold them.
    #[must_use]
    pub fn table(&self) -> DelayOffsetTable {
        let offsets = self.offsets.lock();
        DelayOffsetTable {
            offset_table: (1..=self.levels()).zip(offsets.iter().copied()).collect(),
        }
    }

    /// The per-level offsets as `config/delayOffset.json` holds them (GET_ALL_DELAY_OFFSET's body).
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&self.table()).expect("the delay offsets serialize to JSON")
    }

    /// Writes the offsets if they changed since the last write. Blocking.
    ///
    /// # Errors
    /// The file cannot be written (it is tried again at the next call).
    pub fn persist(&self) -> std::io::Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        write_atomically(&self.path, &self.to_json()).inspect_err(|_| self.dirty.store(true, Ordering::Release))
    }
}

fn index(level: i32) -> usize {
    usize::try_from(level - 1).expect("levels are 1-based")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROCKETMQ_DEFAULT: &str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

    #[test]
    fn rocketmqs_default_ladder_parses_to_eighteen_levels() {
        let d = parse_delay_levels(ROCKETMQ_DEFAULT).unwrap();
        assert_eq!(d.len(), 18);
        assert_eq!((d[0], d[2], d[4], d[17]), (1000, 10_000, 60_000, 7_200_000));
        assert_eq!(parse_delay_levels("250ms 1d").unwrap(), vec![250, 86_400_000]);
    }

    #[test]
    fn bad_ladders_are_refused_with_the_item_named() {
        for (spec, says) in [
            ("", "1 to 64"),
            ("1s 5x", "`5x`"),
            ("s", "`s`"),
            ("0s", "more than 0"),
            ("31d", "at most 30d"),
        ] {
            let e = parse_delay_levels(spec).unwrap_err();
            assert!(e.to_string().contains(says), "{spec:?}: {e}");
        }
        assert!(parse_delay_levels(&"1s ".repeat(MAX_DELAY_LEVELS)).is_ok());
        assert!(parse_delay_levels(&"1s ".repeat(MAX_DELAY_LEVELS + 1)).is_err());
    }

    #[test]
    fn the_level_is_the_delay_property_clamped_and_half_messages_are_not_delayed() {
        let dir = tempfile::tempdir().unwrap();
        let s = ScheduleService::open(dir.path(), "1s 5s 10s").unwrap();
        let props = |pairs: &[(&str, &str)]| -> Properties { pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect() };
        assert_eq!(s.level_of(&props(&[("DELAY", "2")])), Some(2));
        assert_eq!(s.level_of(&props(&[("DELAY", "99")])), Some(3));
        assert_eq!(s.level_of(&props(&[("DELAY", "0")])), None);
        assert_eq!(s.level_of(&props(&[("DELAY", "-1")])), None);
        assert_eq!(s.level_of(&props(&[("DELAY", "x")])), None);
        assert_eq!(s.level_of(&props(&[])), None);
        assert_eq!(s.level_of(&props(&[("DELAY", "2"), ("TRAN_MSG", "true")])), None);
    }

    #[test]
    fn offsets_only_move_forward_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let s = ScheduleService::open(dir.path(), "1s 5s").unwrap();
        s.advance(2, 7);
        s.advance(2, 3);
        assert_eq!((s.offset(1), s.offset(2)), (0, 7));
        s.persist().unwrap();
        let again = ScheduleService::open(dir.path(), "1s 5s").unwrap();
        assert_eq!((again.offset(1), again.offset(2)), (0, 7));
        // RocketMQ's fastjson writes the level keys bare; a slave of a RocketMQ master reads them.
        again.merge(&from_json::<DelayOffsetTable>(br#"{"offsetTable":{1:4,2:9,40:1}}"#).unwrap());
        assert_eq!((again.offset(1), again.offset(2)), (4, 9));
    }
}
