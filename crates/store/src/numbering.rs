//! The queue numbering: the next queue offset of every topic-queue the commit log numbers, and
//! which topics changed since the checkpoint last took them.
//!
//! Read and written only under the put-message lock, once per append, so an append costs one
//! hash lookup on a name it already numbers: the topic's entry carries its own "changed" mark,
//! and the names marked since the last take are listed beside the map. A topic with a million
//! light queues beside it costs the same lookup as one alone (hashbrown's foldhash, not
//! SipHash: the map is internal, and its seed is random per process). Names are kept inline
//! (`CompactString`, up to 24 bytes): a lookup compares them in the map's own slot, with no
//! second cache miss to the name's heap copy, and marking a name allocates nothing.
//!
//! A topic that goes (a light queue forgotten) stays as an empty, marked entry until the
//! checkpoint takes it, so that its going is reported once, and a topic that comes back before
//! then is still listed once.
//!
//! Owns: the numbering and the change marks. Must never: list a name twice, or lose a change
//! (a marked entry is always listed; a listed name is unmarked only when it is taken).

use std::collections::BTreeMap;

use compact_str::CompactString;
use hashbrown::HashMap;
use smallvec::SmallVec;

use crate::checkpoint::{Changes, QueueKey};

/// One topic's queues, sorted by queue id (a light queue has one; a topic, a few to hundreds).
/// A single queue is kept in the slot itself: among a million light queues, a send's lookup
/// then touches one cache line, not a second one at the vector's heap copy.
#[derive(Default)]
struct TopicQueues {
    next: SmallVec<[(i32, i64); 1]>,
    /// Listed in [`Numbering::marked`] and not yet taken.
    changed: bool,
}

// The inline queue costs no slot space over a vector's (24 bytes, and the mark).
const _: () = assert!(std::mem::size_of::<TopicQueues>() <= 32);

impl TopicQueues {
    fn get(&self, queue_id: i32) -> Option<i64> {
        self.next.binary_search_by_key(&queue_id, |&(q, _)| q).ok().map(|i| self.next[i].1)
    }

    fn to_map(&self) -> BTreeMap<i32, i64> {
        self.next.iter().copied().collect()
    }
}

/// See the module header.
#[derive(Default)]
pub(crate) struct Numbering {
    topics: HashMap<CompactString, TopicQueues>,
    /// The names whose entries are marked, each once.
    marked: Vec<CompactString>,
    /// How many topics with queues are light message queues.
    lmq_queues: usize,
}

impl Numbering {
    /// The numbering a recovery found.
    pub(crate) fn recovered(queue_offsets: &BTreeMap<QueueKey, i64>) -> Numbering {
        // Sized once: a million light queues inserted into a growing map rehashed it about
        // twenty times, a seventh of a start's CPU at a million queues.
        let mut names = 0;
        let mut last: Option<&str> = None;
        for (topic, _) in queue_offsets.keys() {
            if last != Some(topic.as_str()) {
                names += 1;
                last = Some(topic);
            }
        }
        let mut n = Numbering {
            topics: HashMap::with_capacity(names),
            ..Numbering::default()
        };
        // In key order: each topic's queues arrive sorted.
        for (&(ref topic, queue_id), &next) in queue_offsets {
            let entry = n.topics.entry_ref(topic.as_str()).or_default();
            assert!(
                entry.next.last().is_none_or(|&(q, _)| q < queue_id),
                "recovered queues arrive in order"
            );
            entry.next.push((queue_id, next));
        }
        n.lmq_queues = n.topics.keys().filter(|t| petrel_protocol::lmq::is_lmq(t)).count();
        n
    }

    /// The next queue offset of `topic` / `queue_id`, to be advanced by the caller; marks the
    /// topic changed. Allocates only for a queue seen the first time (and for a name longer than
    /// 24 bytes, once per checkpoint interval).
    pub(crate) fn next_mut(&mut self, topic: &str, queue_id: i32) -> &mut i64 {
        let entry = self.topics.entry_ref(topic).or_default();
        if !entry.changed {
            entry.changed = true;
            self.marked.push(CompactString::from(topic));
        }
        if entry.next.is_empty() && petrel_protocol::lmq::is_lmq(topic) {
            self.lmq_queues += 1;
        }
        let at = match entry.next.binary_search_by_key(&queue_id, |&(q, _)| q) {
            Ok(at) => at,
            Err(at) => {
                entry.next.insert(at, (queue_id, 0));
                at
            }
        };
        &mut entry.next[at].1
    }

    /// The next queue offset of `topic` / `queue_id`; `None` for a queue it does not number.
    pub(crate) fn get(&self, topic: &str, queue_id: i32) -> Option<i64> {
        self.topics.get(topic).and_then(|t| t.get(queue_id))
    }

    /// How many light message queues are numbered.
    pub(crate) fn lmq_queues(&self) -> usize {
        self.lmq_queues
    }

    /// Forgets `topic`'s queues (its next record starts again at 0); the next take says it went.
    pub(crate) fn forget(&mut self, topic: &str) {
        let Some(entry) = self.topics.get_mut(topic) else { return };
        if entry.next.is_empty() {
            return;
        }
        entry.next.clear();
        if petrel_protocol::lmq::is_lmq(topic) {
            self.lmq_queues -= 1;
        }
        if !entry.changed {
            entry.changed = true;
            self.marked.push(CompactString::from(topic));
        }
    }

    /// Every queue's next offset now, for a checkpoint's base; the marks are cleared (the base
    /// holds every change).
    pub(crate) fn snapshot(&mut self) -> BTreeMap<QueueKey, i64> {
        self.clear_marks();
        self.topics
            .iter()
            .flat_map(|(t, qs)| qs.next.iter().map(move |&(q, n)| ((t.to_string(), q), n)))
            .collect()
    }

    /// The topics changed since the last take (or snapshot), with their queues' next offsets
    /// now; `None` for a topic that went.
    pub(crate) fn take_changes(&mut self) -> Changes {
        let mut changes = Changes::new();
        for name in std::mem::take(&mut self.marked) {
            let entry = self.topics.get_mut(&name).expect("a marked name has an entry");
            assert!(entry.changed, "a listed name is marked");
            entry.changed = false;
            let queues = if entry.next.is_empty() {
                self.topics.remove(&name);
                None
            } else {
                Some(entry.to_map())
            };
            let first = changes.insert(name, queues).is_none();
            assert!(first, "a name is listed once");
        }
        changes
    }

    fn clear_marks(&mut self) {
        for name in std::mem::take(&mut self.marked) {
            let entry = self.topics.get_mut(&name).expect("a marked name has an entry");
            entry.changed = false;
            if entry.next.is_empty() {
                self.topics.remove(&name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Taken = Vec<(String, Option<Vec<(i32, i64)>>)>;

    fn changes(n: &mut Numbering) -> Taken {
        n.take_changes()
            .into_iter()
            .map(|(t, q)| (t.to_string(), q.map(|m| m.into_iter().collect())))
            .collect()
    }

    #[test]
    fn numbers_each_queue_and_lists_a_changed_topic_once() {
        let mut n = Numbering::default();
        for q in [3, 1, 2, 1] {
            *n.next_mut("T", q) += 1;
        }
        assert_eq!(
            (n.get("T", 1), n.get("T", 3), n.get("T", 9), n.get("U", 1)),
            (Some(2), Some(1), None, None)
        );
        assert_eq!(changes(&mut n), vec![("T".into(), Some(vec![(1, 2), (2, 1), (3, 1)]))]);
        assert!(changes(&mut n).is_empty(), "taken once");
        *n.next_mut("T", 2) += 1;
        assert_eq!(changes(&mut n), vec![("T".into(), Some(vec![(1, 2), (2, 2), (3, 1)]))]);
    }

    #[test]
    fn a_forgotten_light_queue_goes_once_and_one_that_comes_back_is_listed_once() {
        let mut n = Numbering::default();
        *n.next_mut("%LMQ%a", 0) += 5;
        *n.next_mut("%LMQ%b", 0) += 1;
        assert_eq!(n.lmq_queues(), 2);
        let _ = changes(&mut n);
        n.forget("%LMQ%a");
        n.forget("%LMQ%a");
        assert_eq!((n.get("%LMQ%a", 0), n.lmq_queues()), (None, 1));
        assert_eq!(changes(&mut n), vec![("%LMQ%a".into(), None)]);
        // Gone and back within one interval: its new numbering, listed once.
        n.forget("%LMQ%b");
        *n.next_mut("%LMQ%b", 0) += 1;
        n.forget("%LMQ%b");
        *n.next_mut("%LMQ%b", 0) += 1;
        assert_eq!(n.lmq_queues(), 1);
        assert_eq!(changes(&mut n), vec![("%LMQ%b".into(), Some(vec![(0, 1)]))]);
    }

    #[test]
    fn a_snapshot_holds_every_queue_and_clears_the_marks() {
        let mut n = Numbering::recovered(&BTreeMap::from([
            (("T".into(), 0), 4),
            (("T".into(), 1), 7),
            (("%LMQ%x".into(), 0), 2),
        ]));
        assert_eq!(n.lmq_queues(), 1);
        *n.next_mut("T", 1) += 1;
        n.forget("%LMQ%x");
        let base = n.snapshot();
        assert_eq!(base, BTreeMap::from([(("T".into(), 0), 4), (("T".into(), 1), 8)]));
        assert!(changes(&mut n).is_empty(), "the base held the changes");
        assert_eq!(n.get("%LMQ%x", 0), None);
    }
}
