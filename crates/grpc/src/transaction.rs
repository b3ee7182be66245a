//! Transaction ids of gRPC sends: a half message's commit-log offset and its offset in the half
//! topic, which END_TRANSACTION needs and a gRPC EndTransaction does not otherwise carry. The
//! id says both, so the broker keeps nothing per open transaction.
//!
//! Owns: the id's format. Must never: accept an id that does not parse in full.

use crate::pb::Code;
use crate::status::Refusal;

/// What a transaction id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionId {
    /// The half message's commit-log offset.
    pub commit_log_offset: i64,
    /// The half message's offset in the half topic's queue.
    pub tran_state_table_offset: i64,
}

impl TransactionId {
    /// The id's text: both offsets in fixed-width hex.
    #[must_use]
    pub fn encode(&self) -> String {
        format!("{:016X}{:016X}", self.commit_log_offset, self.tran_state_table_offset)
    }

    /// Reads an id back.
    ///
    /// # Errors
    /// `INVALID_TRANSACTION_ID` for anything that is not an id of ours.
    pub fn decode(text: &str) -> Result<TransactionId, Refusal> {
        let bad = || Refusal::new(Code::InvalidTransactionId, format!("transaction id [{text}] is not valid"));
        if text.len() != 32 || !text.is_ascii() {
            return Err(bad());
        }
        let hex = |s: &str| u64::from_str_radix(s, 16).ok().and_then(|v| i64::try_from(v).ok()).ok_or_else(bad);
        Ok(TransactionId {
            commit_log_offset: hex(&text[..16])?,
            tran_state_table_offset: hex(&text[16..])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_reads_back_and_nothing_else_reads() {
        let id = TransactionId {
            commit_log_offset: 1 << 40,
            tran_state_table_offset: 17,
        };
        assert_eq!(TransactionId::decode(&id.encode()).expect("ours"), id);
        for bad in [
            "",
            "00",
            "X000000000000000000000000000000Z",
            "FFFFFFFFFFFFFFFF0000000000000000",
            "é0000000000000000000000000000000",
        ] {
            assert_eq!(TransactionId::decode(bad).expect_err(bad).code, Code::InvalidTransactionId, "{bad}");
        }
    }
}
