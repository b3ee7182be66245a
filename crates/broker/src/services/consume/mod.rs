//! `ConsumeService`: a pull — the queue's checks, the subscription to filter by (the request's
//! own, or the one the group registered), the tag filter, the read, the offset commit
//! piggy-backed on a pull, and long polling.
//!
//! Reads of data a caught-up consumer asks for (near the queue's end, in memory) run inline;
//! reads further back may touch the disk and go to the store pool.
//!
//! Owns: answering pulls. Must never: hold a pull past its requested hold (the client gives up
//! at 30 s, so at most 25 s), hold more pulls than the long-poll bound, or filter by a tag set
//! larger than its bound.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::Mutex;
use petrel_filter::Sql92;
use petrel_protocol::model::SubscriptionData;
use petrel_protocol::properties::property;
use petrel_store::{GetResult, GetStatus, MessageFilter, MessageStore};

use super::BrokerError;
use super::groups::{GroupService, MAX_SUBSCRIPTION_TAGS};
use super::offsets::OffsetService;
use super::topics::TopicService;
use crate::long_poll::LongPoll;
use crate::stats::BrokerStats;
use crate::store_pool::StorePool;

/// Messages one pull returns at most, whatever the client asks (`maxTransferCountOnMessageInMemory`).
pub const MAX_MSGS_PER_PULL: usize = 32;
/// Longest hold; a client that asks for more would time out before the answer.
pub const MAX_SUSPEND: Duration = Duration::from_secs(25);
/// A read at most this many entries behind the queue's end is served inline: that data was
/// written moments ago and is in memory. Further back, the read goes to the store pool.
pub const HOT_QUEUE_ENTRIES: i64 = 4096;

/// Compiled SQL92 selectors kept for reuse; past it the cache starts over.
pub const MAX_COMPILED_SELECTORS: usize = 1024;

/// What a pull keeps: tags by their hashes, or an SQL92 selector on the properties.
pub enum PullFilter {
    /// Keeps messages whose tag hash code is in the set.
    Tags(HashSet<i64>),
    /// Keeps messages whose properties the compiled selector matches.
    Sql(Arc<Sql92>),
}

impl MessageFilter for PullFilter {
    fn matches_tags_code(&self, tags_code: i64) -> bool {
        match self {
            PullFilter::Tags(codes) => codes.contains(&tags_code),
            PullFilter::Sql(_) => true,
        }
    }

    fn needs_properties(&self) -> bool {
        matches!(self, PullFilter::Sql(_))
    }

    fn matches_properties(&self, properties: &str) -> bool {
        match self {
            PullFilter::Tags(_) => true,
            PullFilter::Sql(sql) => sql.matches(&|name| property(properties, name)),
        }
    }
}

/// RocketMQ's `ExpressionType.isTagType`: TAG, or no type at all.
fn is_tag_type(expression_type: &str) -> bool {
    expression_type.is_empty() || expression_type.eq_ignore_ascii_case("TAG")
}

/// A subscription a pull carries itself.
#[derive(Debug, Clone)]
pub struct PullSubscription {
    /// `TAG` (or empty, which means TAG) or `SQL92`.
    pub expression_type: String,
    /// The tag expression (`a || b`, `*`) or the SQL92 selector.
    pub expression: String,
    /// The subscription's version, as the client stamped it.
    pub sub_version: i64,
}

/// A pull, as any front end hands it over.
#[derive(Debug, Clone, Default)]
pub struct PullRequest {
    /// The consumer group pulling.
    pub group: String,
    /// The topic pulled from.
    pub topic: String,
    /// The queue pulled from; must be below the topic's read queue count.
    pub queue_id: i32,
    /// The queue offset to read from.
    pub queue_offset: i64,
    /// Messages the client wants at most; clamped to 1..=[`MAX_MSGS_PER_PULL`].
    pub max_msgs: i32,
    /// An offset to commit first (the COMMIT_OFFSET flag).
    pub commit_offset: Option<i64>,
    /// How long to hold the pull when there is nothing yet (the SUSPEND flag), `None` not to.
    pub suspend: Option<Duration>,
    /// The pull's own subscription (the SUBSCRIPTION flag); else the group's registered one.
    pub subscription: Option<PullSubscription>,
}

/// What a pull found: the store's read, with RocketMQ's statuses.
pub type PullOutcome = GetResult;

/// Whether a read found nothing *yet* — the statuses RocketMQ answers `PULL_NOT_FOUND` and
/// long-polls on — rather than an offset the client must move.
#[must_use]
pub fn nothing_yet(status: GetStatus, requested_offset: i64) -> bool {
    match status {
        GetStatus::OffsetOverflowOne => true,
        GetStatus::NoMatchedLogicQueue | GetStatus::NoMessageInQueue => requested_offset == 0,
        _ => false,
    }
}

/// How long empty pulls are held.
pub struct ConsumeSettings {
    /// `longPollingEnable`: hold an empty pull for as long as it asks (up to [`MAX_SUSPEND`]).
    pub long_polling_enable: bool,
    /// `shortPollingTimeMills`: the hold when long polling is off, whatever the pull asks.
    pub short_polling_time: Duration,
    /// `enablePropertyFilter`: SQL92 subscriptions are served.
    pub enable_property_filter: bool,
}

/// Answers pulls; keeps the compiled SQL92 selectors for reuse.
pub struct ConsumeService {
    store: Arc<MessageStore>,
    topics: Arc<TopicService>,
    groups: Arc<GroupService>,
    offsets: Arc<OffsetService>,
    long_poll: Arc<LongPoll>,
    pool: Arc<StorePool>,
    stats: Arc<BrokerStats>,
    settings: ConsumeSettings,
    selectors: Mutex<HashMap<String, Arc<Sql92>>>,
}

impl ConsumeService {
    /// A service over the broker's shared parts, with no selector compiled yet.
    #[expect(clippy::too_many_arguments, reason = "the service's collaborators, wired once")]
    #[must_use]
    pub fn new(
        store: Arc<MessageStore>,
        topics: Arc<TopicService>,
        groups: Arc<GroupService>,
        offsets: Arc<OffsetService>,
        long_poll: Arc<LongPoll>,
        pool: Arc<StorePool>,
        stats: Arc<BrokerStats>,
        settings: ConsumeSettings,
    ) -> ConsumeService {
        ConsumeService {
            store,
            topics,
            groups,
            offsets,
            long_poll,
            pool,
            stats,
            settings,
            selectors: Mutex::new(HashMap::new()),
        }
    }

    /// A non-TAG subscription's filter: an SQL92 selector, compiled (or found compiled).
    ///
    /// # Errors
    /// SQL92 is off (`enablePropertyFilter`) or the type is unknown (SYSTEM_ERROR, RocketMQ's
    /// remark), or the expression does not compile (SUBSCRIPTION_PARSE_FAILED, with the reason).
    pub fn selector(&self, expression_type: &str, expression: &str) -> Result<Arc<Sql92>, BrokerError> {
        if !expression_type.eq_ignore_ascii_case("SQL92") || !self.settings.enable_property_filter {
            return Err(BrokerError::NotSupported(format!(
                "The broker does not support consumer to filter message by {expression_type}"
            )));
        }
        if let Some(sql) = self.selectors.lock().get(expression) {
            return Ok(sql.clone());
        }
        let sql = Arc::new(Sql92::compile(expression).map_err(|e| BrokerError::SubscriptionParseFailed(e.0))?);
        let mut selectors = self.selectors.lock();
        if selectors.len() >= MAX_COMPILED_SELECTORS {
            selectors.clear();
        }
        selectors.insert(expression.to_owned(), sql.clone());
        Ok(sql)
    }

    /// Answers a pull: at once when there is something (or an offset to move), else after up to
    /// the hold time.
    ///
    /// # Errors
    /// An unknown topic, no read permission, a bad queue id, an unusable subscription, or a bound.
    pub async fn pull(&self, req: PullRequest) -> Result<PullOutcome, BrokerError> {
        self.groups.check_consume(&req.group)?;
        let topic = self.topics.readable(&req.topic, "pulling")?;
        if req.queue_id < 0 || req.queue_id >= topic.read_queue_nums {
            return Err(BrokerError::InvalidParameter(format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}]",
                req.queue_id, req.topic, topic.read_queue_nums
            )));
        }
        let filter = Arc::new(self.filter(&req)?);
        if let Some(offset) = self.offsets.take_reset(&req.group, &req.topic, req.queue_id) {
            // An admin reset the queue: the client moves there (and commits nothing of its own).
            let (min_offset, max_offset) = self.store.queue_offsets(&req.topic, req.queue_id);
            return Ok(PullOutcome {
                status: GetStatus::OffsetReset,
                body: Vec::new(),
                message_count: 0,
                next_begin_offset: offset,
                min_offset,
                max_offset,
            });
        }
        if let Some(offset) = req.commit_offset
            && self.groups.is_known(&req.group)
        {
            // A commit from a group no client registered is dropped: the pull itself is served.
            let _ = self.offsets.commit(&req.group, &req.topic, req.queue_id, offset);
        }
        let first = self.read(&req, filter.clone()).await?;
        let Some(hold) = self.hold_time(&req).filter(|_| nothing_yet(first.status, req.queue_offset)) else {
            return Ok(first);
        };
        let place = self.long_poll.enter().inspect_err(|_| {
            self.stats.busy_refusals.fetch_add(1, Ordering::Relaxed);
        })?;
        let (store, offset) = (&self.store, req.queue_offset);
        self.long_poll
            .wait(&place, &req.topic, req.queue_id, hold, || {
                store.queue_offsets(&req.topic, req.queue_id).1 > offset
            })
            .await;
        drop(place);
        self.read(&req, filter).await
    }

    fn hold_time(&self, req: &PullRequest) -> Option<Duration> {
        let requested = req.suspend?;
        Some(if self.settings.long_polling_enable {
            requested.min(MAX_SUSPEND)
        } else {
            self.settings.short_polling_time
        })
    }

    /// What the pull keeps, `None` for everything.
    fn filter(&self, req: &PullRequest) -> Result<Option<PullFilter>, BrokerError> {
        let subscription = match &req.subscription {
            Some(s) => return self.filter_for(&req.topic, &s.expression_type, &s.expression, s.sub_version),
            None => match self.groups.subscription(&req.group, &req.topic) {
                Some(s) if is_tag_type(&s.expression_type) => s,
                Some(s) => return Ok(Some(PullFilter::Sql(self.selector(&s.expression_type, &s.sub_string)?))),
                None => return Ok(None),
            },
        };
        Self::tag_filter(&subscription)
    }

    /// The filter of an expression a request carries (a pull's own subscription, a pop's).
    ///
    /// # Errors
    /// As [`selector`](Self::selector), or a tag set past its bound.
    pub fn filter_for(
        &self,
        topic: &str,
        expression_type: &str,
        expression: &str,
        sub_version: i64,
    ) -> Result<Option<PullFilter>, BrokerError> {
        if !is_tag_type(expression_type) {
            return Ok(Some(PullFilter::Sql(self.selector(expression_type, expression)?)));
        }
        Self::tag_filter(&SubscriptionData::from_tag_expression(topic, expression, sub_version))
    }

    fn tag_filter(subscription: &SubscriptionData) -> Result<Option<PullFilter>, BrokerError> {
        if subscription.is_all() {
            return Ok(None);
        }
        if subscription.code_set.len() > MAX_SUBSCRIPTION_TAGS {
            return Err(BrokerError::SubscriptionParseFailed(format!(
                "the subscription names {} tags; at most {MAX_SUBSCRIPTION_TAGS}",
                subscription.code_set.len()
            )));
        }
        Ok(Some(PullFilter::Tags(
            subscription.code_set.iter().map(|c| i64::from(*c)).collect(),
        )))
    }

    /// One look at the queue: inline when the data is hot, on the store pool otherwise.
    async fn read(&self, req: &PullRequest, filter: Arc<Option<PullFilter>>) -> Result<GetResult, BrokerError> {
        let max = usize::try_from(req.max_msgs.max(1)).unwrap_or(1).min(MAX_MSGS_PER_PULL);
        let (_, queue_max) = self.store.queue_offsets(&req.topic, req.queue_id);
        // Cold-tier reads may wait on the object store: never inline.
        let hot = queue_max - req.queue_offset <= HOT_QUEUE_ENTRIES && !self.store.is_cold(&req.topic, req.queue_id, req.queue_offset);
        let got = if hot {
            self.store
                .get_messages(&req.topic, req.queue_id, req.queue_offset, max, as_filter(&filter))
        } else {
            self.stats.pulls_offloaded.fetch_add(1, Ordering::Relaxed);
            let (store, topic, queue_id, offset) = (self.store.clone(), req.topic.clone(), req.queue_id, req.queue_offset);
            self.pool
                .run(move || store.get_messages(&topic, queue_id, offset, max, as_filter(&filter)))?
                .await?
        };
        if got.status == GetStatus::Found {
            self.stats.got_messages.fetch_add(got.message_count as u64, Ordering::Relaxed);
            let (count, bytes) = (got.message_count as u64, got.body.len() as u64);
            self.stats.traffic.read(&req.topic, &req.group, None, count, bytes);
            self.offsets
                .record_pull(&req.group, &req.topic, req.queue_id, got.next_begin_offset);
        }
        Ok(got)
    }
}

fn as_filter(filter: &Option<PullFilter>) -> Option<&dyn MessageFilter> {
    filter.as_ref().map(|f| f as &dyn MessageFilter)
}

#[cfg(test)]
mod tests;
