//! The one place a service's error becomes a gRPC answer: RocketMQ 5's `Code` and a message,
//! carried in the answer's `Status` (the RPC itself succeeds, as RocketMQ's proxy answers).
//!
//! Owns: the mapping from `BrokerError` to `Code`. Must never: lose the service's words (the
//! message is the error's text).

use petrel_broker::BrokerError;

use crate::pb::{Code, Status};

/// An answer's status: a code and the words a client reads.
#[must_use]
pub fn status(code: Code, message: impl Into<String>) -> Status {
    Status {
        code: code as i32,
        message: message.into(),
    }
}

/// The status that says the request was served.
#[must_use]
pub fn ok() -> Status {
    status(Code::Ok, "OK")
}

/// A refusal before any service was asked: the request itself is wrong.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// RocketMQ's code for it.
    pub code: Code,
    /// What is wrong, for the client's log.
    pub message: String,
}

impl Refusal {
    /// A refusal with `code`.
    #[must_use]
    pub fn new(code: Code, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }

    /// The status a client reads.
    #[must_use]
    pub fn status(&self) -> Status {
        status(self.code, self.message.clone())
    }
}

impl From<BrokerError> for Refusal {
    fn from(e: BrokerError) -> Refusal {
        Refusal::new(code_of(&e), e.to_string())
    }
}

/// RocketMQ 5's code for a service's error, as its proxy maps the broker's response codes.
#[must_use]
pub fn code_of(e: &BrokerError) -> Code {
    match e {
        BrokerError::BadRequest(_) | BrokerError::InvalidParameter(_) => Code::BadRequest,
        // The body's size is checked before the service is asked (MESSAGE_BODY_TOO_LARGE).
        BrokerError::MessageIllegal(_) => Code::BadRequest,
        BrokerError::NoPermission(_) => Code::Forbidden,
        BrokerError::TopicNotExist(_) => Code::TopicNotFound,
        BrokerError::GroupNotExist(_) => Code::ConsumerGroupNotFound,
        BrokerError::SubscriptionParseFailed(_) => Code::IllegalFilterExpression,
        BrokerError::ConsumerNotOnline(_) | BrokerError::QueryNotFound(_) => Code::NotFound,
        BrokerError::NotSupported(_) => Code::NotImplemented,
        BrokerError::Busy(_) | BrokerError::LimitReached(_) => Code::TooManyRequests,
        BrokerError::InSyncReplicasNotEnough(_) => Code::HaNotAvailable,
        _ => Code::InternalServerError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_keeps_its_rocketmq_code_and_words() {
        let cases = [
            (BrokerError::topic_not_exist("T"), Code::TopicNotFound),
            (BrokerError::GroupNotExist("g".into()), Code::ConsumerGroupNotFound),
            (BrokerError::Busy("full".into()), Code::TooManyRequests),
            (BrokerError::MessageIllegal("bad properties".into()), Code::BadRequest),
            (BrokerError::NoPermission("no".into()), Code::Forbidden),
            (BrokerError::Internal("x".into()), Code::InternalServerError),
        ];
        for (e, code) in cases {
            let words = e.to_string();
            let r = Refusal::from(e);
            assert_eq!(r.code, code, "{words}");
            assert_eq!(r.status().message, words);
        }
    }
}
