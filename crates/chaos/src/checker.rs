//! The checker: from what producers sent and were acknowledged, what the consumer group was
//! given, and what the queues hold at the end, it counts what was lost, duplicated (and why),
//! reordered, and how long sends found no broker.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::workload::{Delivery, MsgId, Sent};

/// A gap between two acknowledgements this long counts as unavailability.
pub const UNAVAILABLE_THRESHOLD_MS: u64 = 200;
/// Examples kept per finding.
const EXAMPLES: usize = 20;

/// What the checker found: the run passes when nothing acknowledged was lost and nothing reordered.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Verdict {
    /// Messages sent (each counted once, however many attempts).
    pub sent: u64,
    /// Messages whose send was acknowledged.
    pub acked: u64,
    /// Acknowledged, and then missing from the queues at the end or never given to the
    /// consumer group: must be 0.
    pub lost: u64,
    /// Keys of the first lost messages, at most 20.
    pub lost_examples: Vec<String>,
    /// Of `lost`: missing from its queue at the end (whether or not consumed before).
    pub lost_from_log: u64,
    /// Of `lost`: not delivered, and its queue could not be read at the end (no broker served
    /// it before the drain deadline), so whether the cluster still holds it is unknown.
    pub lost_unreadable: u64,
    /// Of `lost`: in the queues, never given to the consumer group.
    pub undelivered: u64,
    /// Given to the consumer group (acknowledged or not), then missing from its queue at the end
    /// (its queue was read): a broker served a message it later lost — a consumer acted on
    /// something that no longer exists. Must be 0. Counted apart from `lost`, which it overlaps
    /// for acknowledged messages.
    pub consumed_lost: u64,
    /// The first of `consumed_lost`, at most 20, each with the queue and offset it was delivered from.
    pub consumed_lost_examples: Vec<String>,
    /// Never acknowledged and never delivered (allowed).
    pub unacked_lost: u64,
    /// Never acknowledged but delivered: stored before the send's answer was lost (allowed).
    pub unacked_delivered: u64,
    /// Deliveries beyond the first, per cause.
    pub duplicated: u64,
    /// Of `duplicated`: deliveries of extra copies stored by a producer's retried send.
    pub duplicated_by_producer_retry: u64,
    /// Of `duplicated`: the consumer side given the same stored copy again.
    pub duplicated_by_redelivery: u64,
    /// Messages stored twice whose producer tried them once: the broker's doing.
    pub stored_twice_without_retry: u64,
    /// Ordered messages first delivered after a later one of the same producer: must be 0.
    pub reordered: u64,
    /// The same, in the queues' own order at the end: must be 0.
    pub reordered_in_log: u64,
    /// The first reorders of either kind, at most 20, each saying whether it was seen delivered or stored.
    pub reorder_examples: Vec<String>,
    /// Deliveries of keys no producer of this run sent.
    pub foreign: u64,
    /// The longest time with no acknowledgement, and every such window over the threshold.
    pub max_unavailable_ms: u64,
    /// The windows of the producers' run with no acknowledgement for at least `UNAVAILABLE_THRESHOLD_MS`.
    pub unavailable: Vec<Window>,
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Window {
    pub start_ms: u64,
    pub end_ms: u64,
}

impl Window {
    pub fn len_ms(&self) -> u64 {
        self.end_ms - self.start_ms
    }
}

impl Verdict {
    /// Whether nothing acknowledged or consumed was lost and nothing ordered was reordered.
    pub fn passed(&self) -> bool {
        self.lost == 0 && self.consumed_lost == 0 && self.reordered == 0 && self.reordered_in_log == 0
    }
}

/// The queues the run read at the end, and those it could not.
pub struct Stored {
    pub log: Vec<Delivery>,
    pub unreadable: HashSet<(&'static str, i32)>,
}

/// `ordered`: the producers whose messages must keep their order within their queue.
/// `window`: the time the producers ran, milliseconds since the start.
pub fn check(sent: &[Sent], delivered: &[Delivery], stored: &Stored, ordered: &HashSet<u32>, window: (u64, u64)) -> Verdict {
    let mut v = Verdict {
        sent: sent.len() as u64,
        ..Verdict::default()
    };
    let mut given: HashMap<MsgId, u64> = HashMap::new();
    for d in delivered {
        *given.entry(d.id).or_default() += 1;
    }
    let mut kept: HashMap<MsgId, u64> = HashMap::new();
    for d in &stored.log {
        *kept.entry(d.id).or_default() += 1;
    }
    let attempts: HashMap<MsgId, u32> = sent.iter().map(|s| (s.id, s.attempts)).collect();
    for s in sent {
        let delivered = given.contains_key(&s.id);
        if s.acked_ms.is_none() {
            if delivered {
                v.unacked_delivered += 1;
            } else {
                v.unacked_lost += 1;
            }
            continue;
        }
        v.acked += 1;
        let in_log = kept.contains_key(&s.id);
        if in_log && delivered {
            continue;
        }
        v.lost += 1;
        let unreadable = s.acked_queue.is_some_and(|q| stored.unreadable.contains(&q));
        v.lost_unreadable += u64::from(!in_log && unreadable);
        v.lost_from_log += u64::from(!in_log && !unreadable);
        v.undelivered += u64::from(in_log && !delivered);
        if v.lost_examples.len() < EXAMPLES {
            v.lost_examples.push(s.id.key());
        }
    }
    consumed_then_lost(&mut v, delivered, &kept, stored);
    duplicates(&mut v, &given, &kept, &attempts);
    v.foreign = given.keys().filter(|id| !attempts.contains_key(id)).count() as u64;
    v.reordered = reorders(delivered, ordered, &mut v.reorder_examples, "delivered");
    v.reordered_in_log = reorders(&stored.log, ordered, &mut v.reorder_examples, "stored");
    let mut acks: Vec<u64> = sent.iter().filter_map(|s| s.acked_ms).collect();
    acks.sort_unstable();
    v.unavailable = gaps(&acks, window);
    v.max_unavailable_ms = v.unavailable.iter().map(Window::len_ms).max().unwrap_or(0);
    v
}

/// Messages the group was given whose queue, read at the end, no longer holds them.
fn consumed_then_lost(v: &mut Verdict, delivered: &[Delivery], kept: &HashMap<MsgId, u64>, stored: &Stored) {
    let mut counted: HashSet<MsgId> = HashSet::new();
    for d in delivered {
        if kept.contains_key(&d.id) || stored.unreadable.contains(&(d.topic, d.queue)) || !counted.insert(d.id) {
            continue;
        }
        v.consumed_lost += 1;
        if v.consumed_lost_examples.len() < EXAMPLES {
            v.consumed_lost_examples
                .push(format!("{} (queue {} offset {})", d.id.key(), d.queue, d.offset));
        }
    }
}

fn duplicates(v: &mut Verdict, given: &HashMap<MsgId, u64>, kept: &HashMap<MsgId, u64>, attempts: &HashMap<MsgId, u32>) {
    for (id, n) in given {
        let extra = n - 1;
        let copies = kept.get(id).copied().unwrap_or(0);
        let retried = attempts.get(id).is_some_and(|a| *a > 1);
        // Extra stored copies come from retries of one send; deliveries beyond the stored
        // copies are the consumer side reading again.
        let from_retry = if retried { extra.min(copies.saturating_sub(1)) } else { 0 };
        v.duplicated += extra;
        v.duplicated_by_producer_retry += from_retry;
        v.duplicated_by_redelivery += extra - from_retry;
    }
    v.stored_twice_without_retry = kept
        .iter()
        .filter(|(id, n)| **n > 1 && attempts.get(*id).is_none_or(|a| *a <= 1))
        .count() as u64;
}

/// Messages of ordered producers that came after a later message of the same producer in the
/// same queue. A message seen again (a redelivery or a retried copy) is not a reorder.
fn reorders(log: &[Delivery], ordered: &HashSet<u32>, examples: &mut Vec<String>, view: &str) -> u64 {
    let mut last: HashMap<(&str, i32, u32), u64> = HashMap::new();
    let mut seen: BTreeSet<MsgId> = BTreeSet::new();
    let mut count = 0;
    for d in log.iter().filter(|d| ordered.contains(&d.id.producer)) {
        let fresh = seen.insert(d.id);
        let prev = last.entry((d.topic, d.queue, d.id.producer)).or_insert(d.id.seq);
        if fresh && d.id.seq < *prev {
            count += 1;
            if examples.len() < EXAMPLES {
                examples.push(format!(
                    "{view}: {} after seq {} (queue {} offset {})",
                    d.id.key(),
                    prev,
                    d.queue,
                    d.offset
                ));
            }
        }
        *prev = (*prev).max(d.id.seq);
    }
    count
}

/// The stretches of `window` longer than the threshold with no acknowledgement in them.
fn gaps(acks: &[u64], window: (u64, u64)) -> Vec<Window> {
    let mut out = Vec::new();
    let mut from = window.0;
    for t in acks.iter().copied().chain(std::iter::once(window.1)) {
        if t.saturating_sub(from) >= UNAVAILABLE_THRESHOLD_MS {
            out.push(Window { start_ms: from, end_ms: t });
        }
        from = from.max(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(producer: u32, seq: u64, attempts: u32, acked_ms: Option<u64>) -> Sent {
        Sent {
            id: MsgId { producer, seq },
            attempts,
            acked_ms,
            acked_queue: acked_ms.map(|_| ("T", 0)),
        }
    }

    /// The queues at the end, all of them read.
    fn read(log: &[Delivery]) -> Stored {
        Stored {
            log: log.to_vec(),
            unreadable: HashSet::new(),
        }
    }

    fn at(producer: u32, seq: u64, offset: i64) -> Delivery {
        Delivery {
            id: MsgId { producer, seq },
            topic: "T",
            queue: 0,
            offset,
        }
    }

    #[test]
    fn an_acknowledged_message_missing_from_the_log_or_the_group_is_lost_and_an_unacknowledged_one_is_not() {
        let sent = [
            sent(0, 0, 1, Some(10)),
            sent(0, 1, 1, Some(20)),
            sent(0, 2, 3, None),
            sent(0, 3, 3, None),
        ];
        let log = [at(0, 0, 0), at(0, 3, 1)];
        let v = check(&sent, &log, &read(&log), &HashSet::new(), (0, 30));
        assert_eq!((v.sent, v.acked, v.lost, v.lost_from_log, v.undelivered), (4, 2, 1, 1, 0));
        assert_eq!(v.lost_examples, ["c0-1"]);
        assert_eq!((v.unacked_lost, v.unacked_delivered), (1, 1));
        assert!(!v.passed());
        // Consumed, then gone from the log (a broker that forgot it): lost too.
        let v = check(&sent[..1], &log[..1], &read(&[]), &HashSet::new(), (0, 30));
        assert_eq!((v.lost, v.lost_from_log, v.undelivered), (1, 1, 0));
        // In the log, never given to the group: lost.
        let v = check(&sent[..1], &[], &read(&log[..1]), &HashSet::new(), (0, 30));
        assert_eq!((v.lost, v.lost_from_log, v.undelivered), (1, 0, 1));
        let v = check(&sent[..1], &log[..1], &read(&log[..1]), &HashSet::new(), (0, 30));
        assert!(v.passed());
    }

    /// The failover that deletes what consumers read: counted whether or not the message was
    /// acknowledged, and never for a queue nobody could read at the end.
    #[test]
    fn a_consumed_message_missing_at_the_end_is_consumed_then_lost_acknowledged_or_not() {
        let sent = [sent(0, 0, 1, Some(10)), sent(0, 1, 1, None), sent(0, 2, 1, Some(30))];
        let consumed = [at(0, 0, 0), at(0, 1, 1), at(0, 1, 1), at(0, 2, 2)];
        let v = check(&sent, &consumed, &read(&consumed[3..]), &HashSet::new(), (0, 40));
        assert_eq!(v.consumed_lost, 2, "seq 0 (acknowledged) and seq 1 (not), each once");
        assert_eq!((v.lost, v.lost_from_log), (1, 1), "only the acknowledged one is also lost");
        assert_eq!(v.consumed_lost_examples, ["c0-0 (queue 0 offset 0)", "c0-1 (queue 0 offset 1)"]);
        assert!(!v.passed());
        let mut stored = read(&consumed[3..]);
        stored.unreadable.insert(("T", 0));
        let v = check(&sent[1..2], &consumed[1..2], &stored, &HashSet::new(), (0, 40));
        assert_eq!(v.consumed_lost, 0, "its queue could not be read: fate unknown");
        assert!(v.passed(), "an unacknowledged message whose queue is unread fails nothing");
        let v = check(&sent, &consumed, &read(&consumed), &HashSet::new(), (0, 40));
        assert_eq!(v.consumed_lost, 0);
    }

    #[test]
    fn a_missing_message_whose_queue_could_not_be_read_at_the_end_is_counted_apart_but_still_fails_the_run() {
        let sent = [sent(0, 0, 1, Some(10)), sent(0, 1, 1, Some(20))];
        let mut stored = read(&[]);
        let v = check(&sent, &[], &stored, &HashSet::new(), (0, 30));
        assert_eq!((v.lost, v.lost_from_log, v.lost_unreadable), (2, 2, 0));
        stored.unreadable.insert(("T", 0));
        let v = check(&sent, &[], &stored, &HashSet::new(), (0, 30));
        assert_eq!((v.lost, v.lost_from_log, v.lost_unreadable), (2, 0, 2));
        assert!(!v.passed(), "a run that cannot read its queues proves nothing");
        // Delivered before its queue became unreadable: whether the cluster kept it is as unknown.
        let v = check(&sent, &[at(0, 0, 0)], &stored, &HashSet::new(), (0, 30));
        assert_eq!((v.lost, v.lost_unreadable, v.undelivered), (2, 2, 0));
    }

    #[test]
    fn duplicates_are_put_down_to_a_retry_when_the_log_holds_two_copies_else_to_redelivery() {
        let sent = [sent(0, 0, 2, Some(5)), sent(0, 1, 1, Some(6))];
        let stored = [at(0, 0, 0), at(0, 0, 1), at(0, 1, 2)];
        let delivered = [at(0, 0, 0), at(0, 0, 1), at(0, 1, 2), at(0, 1, 2)];
        let v = check(&sent, &delivered, &read(&stored), &HashSet::new(), (0, 10));
        assert_eq!(
            (v.duplicated, v.duplicated_by_producer_retry, v.duplicated_by_redelivery),
            (2, 1, 1)
        );
        assert_eq!(v.stored_twice_without_retry, 0);
        assert!(v.passed());
    }

    #[test]
    fn a_later_message_before_an_earlier_one_of_an_ordered_producer_is_a_reorder_but_a_redelivery_is_not() {
        let sent: Vec<Sent> = (0..4).map(|s| sent(1, s, 1, Some(s))).collect();
        let redelivered = [at(1, 0, 0), at(1, 1, 1), at(1, 2, 2), at(1, 1, 1), at(1, 2, 2), at(1, 3, 3)];
        let ordered = HashSet::from([1]);
        let v = check(&sent, &redelivered, &read(&redelivered), &ordered, (0, 4));
        assert_eq!((v.reordered, v.reordered_in_log), (0, 0));
        let swapped = [at(1, 0, 0), at(1, 2, 1), at(1, 1, 2), at(1, 3, 3)];
        let v = check(&sent, &swapped, &read(&redelivered), &ordered, (0, 4));
        assert_eq!((v.reordered, v.reordered_in_log), (1, 0));
        assert_eq!(v.reorder_examples, ["delivered: c1-1 after seq 2 (queue 0 offset 2)"]);
        assert!(!v.passed());
        // Unordered producers may interleave freely.
        let v = check(&sent, &swapped, &read(&swapped), &HashSet::new(), (0, 4));
        assert_eq!(v.reordered, 0);
    }

    #[test]
    fn unavailability_is_every_gap_between_acknowledgements_over_the_threshold_including_the_ends() {
        let sent = [sent(0, 0, 1, Some(300)), sent(0, 1, 1, Some(350)), sent(0, 2, 1, Some(1350))];
        let v = check(&sent, &[], &read(&[]), &HashSet::new(), (0, 1500));
        let windows: Vec<(u64, u64)> = v.unavailable.iter().map(|w| (w.start_ms, w.end_ms)).collect();
        assert_eq!(windows, [(0, 300), (350, 1350)]);
        assert_eq!(v.max_unavailable_ms, 1000);
    }
}
