//! Light message queues (LMQ): RocketMQ's queues without a topic of their own, for MQTT's
//! per-device queues and RocketMQ 5's lite topics. A message sent to an ordinary topic names
//! them in `INNER_MULTI_DISPATCH` (`%LMQ%a,%LMQ%b`); the broker gives it the next offset of
//! each at append and writes those in `INNER_MULTI_QUEUE_OFFSET`, so that every reader of the
//! log (the dispatcher, recovery, a replica, RocketMQ's own slave) builds the same queues from
//! the record alone. Every LMQ has one queue, id 0.
//!
//! Owns: the names, the prefix rules and the parse of the two properties. Must never: accept
//! a pair of properties whose lists disagree in length (a record like that is dispatched to no
//! LMQ, as RocketMQ does).

use crate::properties::{keys, property};

/// The prefix of every light message queue's name, and of the groups that read only them.
pub const LMQ_PREFIX: &str = "%LMQ%";
/// The one queue of a light message queue.
pub const LMQ_QUEUE_ID: i32 = 0;
/// Separates the names in `INNER_MULTI_DISPATCH` and the offsets in `INNER_MULTI_QUEUE_OFFSET`.
pub const LMQ_DISPATCH_SEPARATOR: char = ',';
/// The bytes one offset takes at most in `INNER_MULTI_QUEUE_OFFSET`, separator included
/// (`i64::MAX` has 19 digits).
pub const MAX_OFFSET_TEXT_BYTES: usize = 20;

/// Whether `name` is a light message queue (or a group that reads them).
#[must_use]
pub fn is_lmq(name: &str) -> bool {
    name.starts_with(LMQ_PREFIX)
}

/// Whether a message stored in `topic` may be dispatched to light message queues: not a retry
/// topic, not the broker's own (`rmq_sys_…`, the schedule topic, and the transaction topics,
/// whose messages are dispatched when they reach their real topic).
#[must_use]
pub fn topic_allows_lmq(topic: &str) -> bool {
    use crate::topics::{RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC, SYSTEM_TOPIC_PREFIX, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC};
    !(topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
        || topic.starts_with(SYSTEM_TOPIC_PREFIX)
        || topic == SCHEDULE_TOPIC
        || topic == TRANS_HALF_TOPIC
        || topic == TRANS_OP_HALF_TOPIC)
}

/// The names of `INNER_MULTI_DISPATCH` in an encoded property string; `None` when it is absent
/// or blank.
#[must_use]
pub fn dispatch_names(properties: &str) -> Option<std::str::Split<'_, char>> {
    property(properties, keys::INNER_MULTI_DISPATCH)
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.split(LMQ_DISPATCH_SEPARATOR))
}

/// The `(queue, offset)` pairs a stored record names: its `INNER_MULTI_DISPATCH` zipped with
/// its `INNER_MULTI_QUEUE_OFFSET`. Empty when either is absent, when they differ in length,
/// or when a name is not an LMQ or an offset not a number: such a record goes to no LMQ.
#[must_use]
pub fn dispatch_pairs(properties: &str) -> Vec<(&str, i64)> {
    let (Some(names), Some(offsets)) = (dispatch_names(properties), property(properties, keys::INNER_MULTI_QUEUE_OFFSET)) else {
        return Vec::new();
    };
    let mut pairs = Vec::new();
    let mut offsets = offsets.split(LMQ_DISPATCH_SEPARATOR);
    for name in names {
        match offsets.next().map(str::parse::<i64>) {
            Some(Ok(offset)) if is_lmq(name) && offset >= 0 => pairs.push((name, offset)),
            _ => return Vec::new(),
        }
    }
    if offsets.next().is_some() {
        return Vec::new();
    }
    pairs
}

/// The property a broker appends to a record's properties at append: `offsets` joined, in the
/// wire's `name\u{1}value\u{2}` form (one allocation, however many queues).
#[must_use]
pub fn offsets_property(offsets: impl ExactSizeIterator<Item = i64>) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(offsets_property_max_bytes(offsets.len()));
    out.push_str(keys::INNER_MULTI_QUEUE_OFFSET);
    out.push('\u{1}');
    for (i, o) in offsets.enumerate() {
        if i > 0 {
            out.push(LMQ_DISPATCH_SEPARATOR);
        }
        write!(out, "{o}").expect("a String takes any write");
    }
    out.push('\u{2}');
    out
}

/// The most bytes [`offsets_property`] takes for `count` queues.
#[must_use]
pub fn offsets_property_max_bytes(count: usize) -> usize {
    keys::INNER_MULTI_QUEUE_OFFSET.len() + 2 + count * MAX_OFFSET_TEXT_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_need_both_lists_of_one_length_and_lmq_names() {
        let p = |d: &str, o: &str| format!("INNER_MULTI_DISPATCH\u{1}{d}\u{2}INNER_MULTI_QUEUE_OFFSET\u{1}{o}\u{2}");
        assert_eq!(dispatch_pairs(&p("%LMQ%a,%LMQ%b", "3,0")), vec![("%LMQ%a", 3), ("%LMQ%b", 0)]);
        assert!(dispatch_pairs(&p("%LMQ%a,%LMQ%b", "3")).is_empty());
        assert!(dispatch_pairs(&p("%LMQ%a", "3,4")).is_empty());
        assert!(dispatch_pairs(&p("orders,%LMQ%b", "3,4")).is_empty());
        assert!(dispatch_pairs(&p("%LMQ%a", "x")).is_empty());
        assert!(dispatch_pairs(&p("%LMQ%a", "-1")).is_empty());
        assert!(dispatch_pairs("INNER_MULTI_DISPATCH\u{1}%LMQ%a\u{2}").is_empty());
        assert!(dispatch_pairs("").is_empty());
    }

    #[test]
    fn the_offsets_property_reads_back_and_fits_its_bound() {
        let text = offsets_property([0, i64::MAX, 42].into_iter());
        assert!(text.len() <= offsets_property_max_bytes(3));
        let all = format!("INNER_MULTI_DISPATCH\u{1}%LMQ%a,%LMQ%b,%LMQ%c\u{2}{text}");
        assert_eq!(dispatch_pairs(&all), vec![("%LMQ%a", 0), ("%LMQ%b", i64::MAX), ("%LMQ%c", 42)]);
    }

    #[test]
    fn retry_schedule_and_transaction_topics_are_not_dispatched() {
        assert!(topic_allows_lmq("orders"));
        assert!(topic_allows_lmq("%DLQ%g"));
        for t in [
            "%RETRY%g",
            "rmq_sys_wheel_timer",
            "SCHEDULE_TOPIC_XXXX",
            "RMQ_SYS_TRANS_HALF_TOPIC",
            "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        ] {
            assert!(!topic_allows_lmq(t), "{t}");
        }
    }
}
