//! Where the tier's objects go and how uploads and reads behave.

use std::time::Duration;

pub use petrel_kit::config::Secret;

/// The tier's settings (the broker's `tiered*` keys, docs/configuration.md).
#[derive(Debug, Clone)]
pub struct TierConfig {
    /// The S3 endpoint, e.g. `http://127.0.0.1:8333` (`objectStoreEndpoint`).
    pub endpoint: String,
    /// The bucket (`objectStoreBucket`); it must exist.
    pub bucket: String,
    /// The key prefix of this broker's objects (`tieredStoreFilePath`), e.g. `petrel/broker-a`.
    pub prefix: String,
    /// The region the requests are signed for (`objectStoreRegion`).
    pub region: String,
    /// Whether request bodies are signed too (`objectStoreSignPayload`): a SHA-256 of every
    /// byte uploaded. By default only over plain HTTP: over TLS the body cannot be changed on
    /// the way, and the ETag check or the read-back catches accidental corruption either way.
    pub sign_payload: bool,
    /// The access key id (`objectStoreAccessKey`).
    pub access_key: String,
    /// The secret key (`objectStoreSecretKey`).
    pub secret_key: Option<Secret>,
    /// Upload bandwidth, bytes per second; 0: unbounded (`tieredUploadBytesPerSecond`).
    pub upload_bytes_per_second: u64,
    /// Bytes per multipart part (S3's minimum part is 5 MiB, but for the last one).
    pub part_bytes: usize,
    /// Bytes per checksummed block: the unit of a range read and of the read cache.
    pub block_bytes: usize,
    /// Bytes of verified blocks the read cache keeps at most (`tieredReadCacheBytes`).
    pub read_cache_bytes: usize,
    /// Blocks fetched ahead of a reader that reads a segment in order (`tieredReadAheadBlocks`;
    /// 0: none), into the read cache, so that a consumer catching up from the bucket does not
    /// wait one object-store round trip per block.
    pub read_ahead_blocks: usize,
    /// How long one request may take before it is retried.
    pub request_timeout: Duration,
    /// How long a read waits for a block, retries included, before it fails (a consumer is
    /// then told to retry, rather than held).
    pub read_deadline: Duration,
    /// Retries of a failed request (with exponential backoff) before the operation fails.
    pub max_retries: usize,
}

/// S3's smallest part but the last.
pub const MIN_PART_BYTES: usize = 5 << 20;

impl TierConfig {
    /// A tier at `endpoint`/`bucket` with the defaults: 8 MiB parts, 1 MiB blocks, a 64 MiB
    /// read cache, two blocks of read-ahead, no bandwidth bound, 30 s per request, 5 retries, 5 s for a read.
    #[must_use]
    pub fn new(endpoint: impl Into<String>, bucket: impl Into<String>) -> TierConfig {
        let endpoint: String = endpoint.into();
        TierConfig {
            sign_payload: !endpoint.starts_with("https://"),
            endpoint,
            bucket: bucket.into(),
            prefix: "petrel".into(),
            region: "us-east-1".into(),
            access_key: String::new(),
            secret_key: None,
            upload_bytes_per_second: 0,
            part_bytes: 8 << 20,
            block_bytes: 1 << 20,
            read_cache_bytes: 64 << 20,
            read_ahead_blocks: 2,
            request_timeout: Duration::from_secs(30),
            read_deadline: Duration::from_secs(5),
            max_retries: 5,
        }
    }

    /// Why these settings cannot work, if they cannot.
    #[must_use]
    pub fn problem(&self) -> Option<String> {
        if self.endpoint.is_empty() || self.bucket.is_empty() {
            return Some("objectStoreEndpoint and objectStoreBucket must both be set".into());
        }
        if self.part_bytes < MIN_PART_BYTES {
            return Some(format!("a part must be at least {MIN_PART_BYTES} bytes (S3's minimum)"));
        }
        if self.block_bytes == 0 || !self.part_bytes.is_multiple_of(self.block_bytes) {
            return Some("the checksum block must divide the part size".into());
        }
        if self.read_cache_bytes < self.block_bytes {
            return Some("the read cache must hold at least one block".into());
        }
        if self.read_ahead_blocks.saturating_add(1).saturating_mul(self.block_bytes) > self.read_cache_bytes {
            return Some("the read cache must hold the block read and the blocks read ahead of it".into());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_never_shown() {
        let mut c = TierConfig::new("http://x", "b");
        c.secret_key = Some(Secret::new("hunter2"));
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains(petrel_kit::config::REDACTED),
            "{shown}"
        );
    }

    #[test]
    fn parts_below_s3s_minimum_are_refused() {
        let mut c = TierConfig::new("http://x", "b");
        assert_eq!(c.problem(), None);
        c.part_bytes = MIN_PART_BYTES - 1;
        assert!(c.problem().is_some());
    }
}
