//! Receipt handles: what a received message is acked, hidden longer or sent to the dead-letter
//! queue by. The client treats one as opaque; ours spells RocketMQ's `POP_CK` fields
//! (`queueOffset popTime invisibleTime reviveQid topicType brokerName queueId queueOffset`)
//! and adds the record's commit-log offset, so a handle names the message exactly and tells a
//! current pop from a stale one without any state kept per handle.
//!
//! Owns: the handle's format. Must never: accept a handle that does not parse in full.

use crate::pb::Code;
use crate::status::Refusal;

/// What a receipt handle names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptHandle {
    /// When the message was popped (or its invisible time last changed), epoch milliseconds.
    pub pop_time_ms: i64,
    /// How long it was to stay invisible from then, milliseconds.
    pub invisible_ms: i64,
    /// The broker that popped it.
    pub broker_name: String,
    /// Its queue.
    pub queue_id: i32,
    /// Its offset in the queue.
    pub queue_offset: i64,
    /// Where its record starts in the commit log.
    pub commit_log_offset: i64,
}

/// Fields a handle has.
const FIELDS: usize = 9;

impl ReceiptHandle {
    /// The handle's text.
    #[must_use]
    pub fn encode(&self) -> String {
        format!(
            "{offset} {pop} {invisible} 0 0 {broker} {queue} {offset} {log}",
            offset = self.queue_offset,
            pop = self.pop_time_ms,
            invisible = self.invisible_ms,
            broker = self.broker_name,
            queue = self.queue_id,
            log = self.commit_log_offset,
        )
    }

    /// Reads a handle back.
    ///
    /// # Errors
    /// `INVALID_RECEIPT_HANDLE` for anything that is not a handle of ours.
    pub fn decode(text: &str) -> Result<ReceiptHandle, Refusal> {
        let bad = || Refusal::new(Code::InvalidReceiptHandle, format!("receipt handle [{text}] is not valid"));
        let f: Vec<&str> = text.split(' ').collect();
        if f.len() != FIELDS {
            return Err(bad());
        }
        let int = |i: usize| f[i].parse::<i64>().map_err(|_| bad());
        let handle = ReceiptHandle {
            pop_time_ms: int(1)?,
            invisible_ms: int(2)?,
            broker_name: f[5].to_owned(),
            queue_id: f[6].parse().map_err(|_| bad())?,
            queue_offset: int(7)?,
            commit_log_offset: int(8)?,
        };
        if int(0)? != handle.queue_offset || handle.pop_time_ms < 0 || handle.invisible_ms < 0 {
            return Err(bad());
        }
        Ok(handle)
    }

    /// When the message becomes visible again unless acked or changed, epoch milliseconds; a
    /// handle past it is expired (RocketMQ answers INVALID_RECEIPT_HANDLE).
    #[must_use]
    pub fn visible_at_ms(&self) -> i64 {
        self.pop_time_ms.saturating_add(self.invisible_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_reads_back_as_written_and_nothing_else_reads() {
        let h = ReceiptHandle {
            pop_time_ms: 1_700_000_000_123,
            invisible_ms: 30_000,
            broker_name: "broker-a".into(),
            queue_id: 3,
            queue_offset: 77,
            commit_log_offset: 123_456,
        };
        let text = h.encode();
        assert_eq!(text, "77 1700000000123 30000 0 0 broker-a 3 77 123456");
        assert_eq!(ReceiptHandle::decode(&text).expect("ours"), h);
        assert_eq!(h.visible_at_ms(), 1_700_000_030_123);
        for bad in [
            "",
            "x",
            "77 1 2 0 0 b 3 78 9",
            "77 1 2 0 0 b x 77 9",
            "77 -1 2 0 0 b 3 77 9",
            "1 2 3 4 5 6 7 8 9 10",
        ] {
            let e = ReceiptHandle::decode(bad).expect_err(bad);
            assert_eq!(e.code, Code::InvalidReceiptHandle, "{bad}");
        }
    }
}
