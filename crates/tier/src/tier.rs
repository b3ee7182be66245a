//! `Tier`: uploads a sealed segment, reads ranges of it back, deletes it.
//!
//! Every call blocks (the tier runs its own small runtime for the object store's client): it is
//! for the store's threads, never for an async task.

use std::collections::{HashMap, HashSet, VecDeque};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use md5::{Digest, Md5};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{BackoffConfig, ClientOptions, MultipartUpload, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};
use parking_lot::{Condvar, Mutex};

use crate::config::TierConfig;
use crate::error::{Result, TierError};
use crate::manifest::{Manifest, TieredSegment};

/// What the tier did, for metrics.
#[derive(Debug, Default)]
pub struct TierStats {
    /// Segments uploaded and confirmed.
    pub uploaded_segments: AtomicU64,
    /// Their bytes.
    pub uploaded_bytes: AtomicU64,
    /// Bytes fetched from the object store by reads.
    pub fetched_bytes: AtomicU64,
    /// Blocks a read found in the cache.
    pub cache_hits: AtomicU64,
    /// Blocks fetched ahead of an in-order reader.
    pub read_ahead_blocks: AtomicU64,
    /// Uploads verified by reading them back (the store's ETag was not the parts' MD5).
    pub read_back_uploads: AtomicU64,
    /// Blocks (or whole objects) whose checksum did not match.
    pub checksum_failures: AtomicU64,
}

/// The cold tier of one broker's commit log.
pub struct Tier {
    config: TierConfig,
    client: Arc<dyn ObjectStore>,
    runtime: Option<tokio::runtime::Runtime>,
    manifest: Mutex<Manifest>,
    reads: Arc<Reads>,
    stats: Arc<TierStats>,
    /// One upload or deletion at a time: a deletion's late request must not remove the object
    /// a new upload of the same segment just wrote.
    writes: Mutex<()>,
    /// Set once an ETag was not the parts' MD5 (said once in the log, not per upload).
    e_tags_not_md5: std::sync::atomic::AtomicBool,
}

impl Drop for Tier {
    fn drop(&mut self) {
        // The last handle may go inside an async context (the broker's shutdown), where a
        // runtime may not block while it stops.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tier").field("config", &self.config).finish_non_exhaustive()
    }
}

/// Makes ring the process's TLS crypto provider, once. The S3 client's HTTP stack (reqwest, built
/// without a provider of its own so that no second C crypto library is built) takes the
/// process's default, and panics building a client when there is none. The broker's own TLS
/// names ring explicitly, so this changes nothing else.
pub(crate) fn install_crypto_provider() {
    // An error means a provider is installed already: by an earlier call, or by the embedding
    // program. Either one serves.
    let _ = rustls::crypto::ring::default_provider().install_default();
    assert!(
        rustls::crypto::CryptoProvider::get_default().is_some(),
        "a TLS crypto provider is installed"
    );
}

impl Tier {
    /// A tier with the settings of `config`, its manifest in `dir`. Contacts nobody yet.
    ///
    /// # Errors
    /// Settings that cannot work; a manifest that cannot be read.
    pub fn open(config: TierConfig, dir: &Path) -> Result<Tier> {
        if let Some(problem) = config.problem() {
            return Err(TierError::Config(problem));
        }
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
                base: 2.0,
            },
            max_retries: config.max_retries,
            retry_timeout: config.request_timeout * u32::try_from(config.max_retries + 1).unwrap_or(u32::MAX),
        };
        install_crypto_provider();
        let client = AmazonS3Builder::new()
            .with_endpoint(&config.endpoint)
            .with_bucket_name(&config.bucket)
            .with_region(&config.region)
            .with_access_key_id(&config.access_key)
            .with_secret_access_key(config.secret_key.as_ref().map_or("", petrel_kit::config::Secret::expose))
            .with_virtual_hosted_style_request(false)
            .with_unsigned_payload(!config.sign_payload)
            .with_retry(retry)
            // The client's options carry `allow_http` too: set here, not before them.
            .with_client_options(
                ClientOptions::new()
                    .with_allow_http(config.endpoint.starts_with("http://"))
                    .with_timeout(config.request_timeout)
                    .with_connect_timeout(Duration::from_secs(5)),
            )
            .build()
            .map_err(|e| TierError::store("configuring the S3 client", e))?;
        Tier::with_store(config, dir, Arc::new(client))
    }

    /// A tier over `client`, any object store (`open` gives it an S3 client): for a store
    /// that is not S3's, and for tests of what S3-compatible servers differ in.
    ///
    /// # Errors
    /// Settings that cannot work; a manifest that cannot be read.
    pub fn with_store(config: TierConfig, dir: &Path, client: Arc<dyn ObjectStore>) -> Result<Tier> {
        if let Some(problem) = config.problem() {
            return Err(TierError::Config(problem));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("tier-io")
            .enable_all()
            .build()
            .map_err(|e| TierError::io(dir, e))?;
        let reads = Reads {
            cache: Mutex::new(BlockCache::new(config.read_cache_bytes)),
            ahead: Mutex::new(HashSet::new()),
            fetched: Condvar::new(),
        };
        Ok(Tier {
            manifest: Mutex::new(Manifest::open(dir)?),
            client,
            runtime: Some(runtime),
            writes: Mutex::new(()),
            e_tags_not_md5: std::sync::atomic::AtomicBool::new(false),
            reads: Arc::new(reads),
            stats: Arc::new(TierStats::default()),
            config,
        })
    }

    /// The settings.
    #[must_use]
    pub fn config(&self) -> &TierConfig {
        &self.config
    }

    /// What the tier did.
    #[must_use]
    pub fn stats(&self) -> &TierStats {
        &self.stats
    }

    /// Whether the object store is known (durably) to hold the segment starting at `start_offset`.
    #[must_use]
    pub fn holds(&self, start_offset: u64) -> bool {
        self.manifest.lock().get(start_offset).is_some()
    }

    /// Whether the tier holds exactly the bytes of the local file at `path` for the segment
    /// starting at `start_offset`: same length, and every block's CRC the one recorded at upload.
    /// What retention asks right before deleting the local file, so that a segment rewritten
    /// after its upload (a replica's log cut back and written again) is never deleted on the
    /// strength of an older copy.
    ///
    /// # Errors
    /// The local file unreadable.
    pub fn holds_same(&self, start_offset: u64, path: &Path) -> Result<bool> {
        let Some(segment) = self.manifest.lock().get(start_offset).cloned() else {
            return Ok(false);
        };
        let file = std::fs::File::open(path).map_err(|e| TierError::io(path, e))?;
        let bytes = file.metadata().map_err(|e| TierError::io(path, e))?.len();
        if bytes != segment.bytes {
            return Ok(false);
        }
        let block_bytes = usize::try_from(segment.block_bytes).expect("a block fits memory");
        let mut buf = vec![0u8; block_bytes];
        if segment.block_crcs.len() as u64 != bytes.div_ceil(segment.block_bytes) {
            return Ok(false);
        }
        for (index, want) in segment.block_crcs.iter().enumerate() {
            let at = index as u64 * segment.block_bytes;
            let len = usize::try_from((bytes - at).min(segment.block_bytes)).expect("within a block");
            file.read_exact_at(&mut buf[..len], at).map_err(|e| TierError::io(path, e))?;
            if crc32fast::hash(&buf[..len]) != *want {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The start of the oldest segment the object store holds.
    #[must_use]
    pub fn min_offset(&self) -> Option<u64> {
        self.manifest.lock().first().map(|s| s.start_offset)
    }

    /// The segments the object store holds, oldest first.
    #[must_use]
    pub fn segments(&self) -> Vec<TieredSegment> {
        self.manifest.lock().segments().cloned().collect()
    }

    fn key(&self, start_offset: u64) -> Key {
        Key::from(format!("{}/commitlog/{start_offset:020}", self.config.prefix))
    }

    /// Where `segment`'s object is: the key it was uploaded under, or, on a manifest line from
    /// before keys were recorded, the current prefix's.
    fn object_key(&self, segment: &TieredSegment) -> Key {
        if segment.key.is_empty() {
            self.key(segment.start_offset)
        } else {
            Key::from(segment.key.as_str())
        }
    }

    /// The record object written beside the segment's object.
    fn record_key(object_key: &Key) -> Key {
        Key::from(format!("{object_key}.json"))
    }

    /// Runs `f` on the tier's runtime and waits for it from any thread: a broker's read may
    /// come from an async task (its worker then waits, as on a page fault, for at most the
    /// read deadline).
    fn wait<T: Send + 'static>(&self, f: impl std::future::Future<Output = T> + Send + 'static) -> T {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.rt().block_on(f);
        }
        let (done, result) = std::sync::mpsc::sync_channel(1);
        self.rt().spawn(async move {
            let _ = done.send(f.await);
        });
        result.recv().expect("the tier's runtime runs as long as the tier")
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        assert!(
            tokio::runtime::Handle::try_current().is_err(),
            "the tier blocks: call it from a thread of the store's, not from an async task"
        );
        self.rt().block_on(f)
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("the runtime lives until the tier is dropped")
    }

    /// Uploads the sealed segment at `path` (which starts the log at `start_offset`) and
    /// records it in the manifest once the object store has confirmed every byte: the ETag it
    /// answers must be the one computed from the parts sent, and the object's size the file's.
    /// A failed upload is aborted and leaves the manifest as it was.
    ///
    /// # Errors
    /// The file unreadable; the object store failing past its retries; a checksum mismatch.
    pub fn upload(&self, start_offset: u64, path: &Path) -> Result<TieredSegment> {
        let _one = self.writes.lock();
        let started = Instant::now();
        let file = std::fs::File::open(path).map_err(|e| TierError::io(path, e))?;
        let meta = file.metadata().map_err(|e| TierError::io(path, e))?;
        let bytes = meta.len();
        let written_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let key = self.key(start_offset);
        tracing::info!(start_offset, bytes, %key, "uploading a segment to the tier");
        let mut upload = self
            .block_on(self.client.put_multipart(&key))
            .map_err(|e| TierError::store(format!("starting the upload of {key}"), e))?;
        let sent = match self.send_parts(&file, path, bytes, upload.as_mut()) {
            Ok(sent) => sent,
            Err(e) => {
                let _ = self.block_on(upload.abort());
                return Err(e);
            }
        };
        let done = match self.block_on(upload.complete()) {
            Ok(done) => done,
            Err(e) => {
                let _ = self.block_on(upload.abort());
                return Err(TierError::store(format!("completing the upload of {key}"), e));
            }
        };
        let segment = TieredSegment {
            start_offset,
            bytes,
            block_bytes: self.config.block_bytes as u64,
            block_crcs: sent.block_crcs,
            e_tag: done.e_tag.clone().unwrap_or_default(),
            written_ms,
            key: key.to_string(),
        };
        if let Err(e) = self.confirm(&key, &segment, &sent.e_tag) {
            self.stats.checksum_failures.fetch_add(1, Ordering::Relaxed);
            let _ = self.block_on(self.client.delete(&key));
            return Err(e);
        }
        let record = serde_json::to_vec(&segment).map_err(|e| TierError::Manifest(e.to_string()))?;
        self.block_on(self.client.put(&Self::record_key(&key), PutPayload::from(record)))
            .map_err(|e| TierError::store(format!("writing the record of {key}"), e))?;
        self.manifest.lock().add(segment.clone())?;
        self.stats.uploaded_segments.fetch_add(1, Ordering::Relaxed);
        self.stats.uploaded_bytes.fetch_add(bytes, Ordering::Relaxed);
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(start_offset, bytes, elapsed_ms, %key, "segment uploaded to the tier");
        Ok(segment)
    }

    /// Sends the file in parts, paced to the bandwidth bound; returns each block's CRC and
    /// the multipart ETag the object store must answer (the MD5 of the parts' MD5s, `-N`).
    fn send_parts(&self, file: &std::fs::File, path: &Path, bytes: u64, upload: &mut dyn MultipartUpload) -> Result<Sent> {
        let part_bytes = self.config.part_bytes as u64;
        let parts = bytes.div_ceil(part_bytes).max(1);
        let mut pace = Pace::new(self.config.upload_bytes_per_second);
        let mut part_md5s = Vec::with_capacity(usize::try_from(parts).unwrap_or(0) * 16);
        let mut block_crcs = Vec::new();
        for part in 0..parts {
            let at = part * part_bytes;
            let len = usize::try_from((bytes - at).min(part_bytes)).expect("a part fits memory");
            let mut buf = vec![0u8; len];
            file.read_exact_at(&mut buf, at).map_err(|e| TierError::io(path, e))?;
            block_crcs.extend(buf.chunks(self.config.block_bytes).map(crc32fast::hash));
            part_md5s.extend_from_slice(&Md5::digest(&buf));
            pace.wait_for(len);
            self.block_on(upload.put_part(PutPayload::from(buf)))
                .map_err(|e| TierError::store(format!("sending part {} of {}", part + 1, path.display()), e))?;
        }
        Ok(Sent {
            block_crcs,
            e_tag: format!("{}-{parts}", hex(&Md5::digest(&part_md5s))),
        })
    }

    /// Checks what the object store confirmed against what was sent: the object's size, and
    /// its ETag against the MD5 of the parts' MD5s. An ETag that is not that proves nothing
    /// either way (stores with server-side encryption under a KMS key, and others, make theirs
    /// otherwise): the object is then read back, block by block, against the CRCs of what was
    /// sent — a slower proof, as strong, and the only one such a store allows.
    fn confirm(&self, key: &Key, segment: &TieredSegment, expected_e_tag: &str) -> Result<()> {
        let head = self
            .block_on(self.client.head(key))
            .map_err(|e| TierError::store(format!("checking {key}"), e))?;
        if head.size != segment.bytes {
            return Err(TierError::Checksum(format!(
                "{key}: {} bytes stored, {} sent",
                head.size, segment.bytes
            )));
        }
        let answered = segment.e_tag.trim_matches('"');
        if answered == expected_e_tag {
            return Ok(());
        }
        if !self.e_tags_not_md5.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                %key,
                answered,
                expected = expected_e_tag,
                "the object store's ETag is not the MD5 of the parts sent: uploads are verified by reading them back"
            );
        }
        for index in 0..blocks_of(segment) {
            self.block_on(self.fetch(segment, index, self.config.read_deadline)).map_err(|e| {
                TierError::Checksum(format!(
                    "{key}: read back after an ETag that is not the parts' MD5 ({answered:?}): {e}"
                ))
            })?;
        }
        self.stats.read_back_uploads.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Bytes of verified blocks the read cache holds now.
    #[must_use]
    pub fn cached_bytes(&self) -> u64 {
        u64::try_from(self.reads.cache.lock().held_bytes).unwrap_or(u64::MAX)
    }

    /// `len` bytes at `pos` of the tiered segment starting at `start_offset`, each block
    /// checked against its CRC (and kept in the read cache). Callable from any thread; a block
    /// not fetched within the read deadline is an error.
    ///
    /// # Errors
    /// [`TierError::NotTiered`]; a range past the segment; the object store failing past its
    /// retries; [`TierError::Timeout`]; [`TierError::Checksum`] for a block that is not what
    /// was uploaded.
    pub fn read(&self, start_offset: u64, pos: u64, len: usize) -> Result<Bytes> {
        let segment = self
            .manifest
            .lock()
            .get(start_offset)
            .cloned()
            .ok_or(TierError::NotTiered(start_offset))?;
        let end = pos + len as u64;
        if end > segment.bytes {
            return Err(TierError::Checksum(format!(
                "bytes {pos}..{end} asked of a segment of {} bytes",
                segment.bytes
            )));
        }
        if len == 0 {
            return Ok(Bytes::new());
        }
        let block_bytes = segment.block_bytes;
        if block_bytes == 0 || u64::try_from(segment.block_crcs.len()).ok() != Some(segment.bytes.div_ceil(block_bytes)) {
            return Err(TierError::Checksum(format!(
                "the manifest gives segment {start_offset} {} block CRCs for {} bytes",
                segment.block_crcs.len(),
                segment.bytes
            )));
        }
        // One deadline for the whole read: waiting on a read-ahead that then fails, or a second
        // block, must not restart the clock.
        let deadline = Instant::now() + self.config.read_deadline;
        let mut out = BytesMut::with_capacity(len);
        let (first, last) = (pos / block_bytes, (end - 1) / block_bytes);
        for index in first..=last {
            let block = self.block(&segment, index, deadline)?;
            let block_start = index * block_bytes;
            let from = usize::try_from(pos.max(block_start) - block_start).expect("within a block");
            let to = usize::try_from(end.min(block_start + block.len() as u64) - block_start).expect("within a block");
            out.extend_from_slice(&block[from..to]);
        }
        assert_eq!(out.len(), len);
        self.read_ahead(&segment, last);
        Ok(out.freeze())
    }

    /// Block `index` of `segment`, from the cache or the object store, by `deadline`.
    fn block(&self, segment: &TieredSegment, index: u64, deadline: Instant) -> Result<Bytes> {
        let id = block_id(segment, index);
        if let Some(hit) = self.reads.cached(id, deadline) {
            self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(hit);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(TierError::Timeout(format!(
                "block {index} of segment {} was not read within {:?}",
                segment.start_offset, self.config.read_deadline
            )));
        }
        let fetch = self.fetch(segment, index, left);
        let bytes = self.wait(fetch)?;
        self.reads.cache.lock().put(id, bytes.clone());
        Ok(bytes)
    }

    /// Block `index` of `segment` from the object store, checked against its CRC, within
    /// `deadline`: a future for the foreground read (the time its read has left) and for a
    /// read-ahead task (the whole read deadline) alike.
    fn fetch(
        &self,
        segment: &TieredSegment,
        index: u64,
        deadline: Duration,
    ) -> impl std::future::Future<Output = Result<Bytes>> + Send + 'static {
        let want = block_id(segment, index).2;
        let from = index * segment.block_bytes;
        let to = (from + segment.block_bytes).min(segment.bytes);
        let key = self.object_key(segment);
        let (client, stats) = (self.client.clone(), self.stats.clone());
        async move {
            let fetched = tokio::time::timeout(deadline, client.get_range(&key, from..to)).await;
            let bytes = fetched
                .map_err(|_| {
                    TierError::Timeout(format!(
                        "reading {key} bytes {from}..{to}: not answered in the {deadline:?} its read had left"
                    ))
                })?
                .map_err(|e| TierError::store(format!("reading {key} bytes {from}..{to}"), e))?;
            stats.fetched_bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            if bytes.len() as u64 != to - from || want != crc32fast::hash(&bytes) {
                stats.checksum_failures.fetch_add(1, Ordering::Relaxed);
                return Err(TierError::Checksum(format!(
                    "{key} bytes {from}..{to}: {} bytes read, their CRC is not the uploaded one",
                    bytes.len()
                )));
            }
            Ok(bytes)
        }
    }

    /// After a read that ended in block `index`: if the block before it is cached too (the
    /// reader goes through the log in order, as a consumer or a replica catching up does), the
    /// next `read_ahead_blocks` blocks not cached yet — into the next tiered segment at the end
    /// of this one — are fetched in the background, so that its next reads find them. A lone
    /// read (a view by id) fetches nothing more.
    fn read_ahead(&self, segment: &TieredSegment, index: u64) {
        let ahead = u64::try_from(self.config.read_ahead_blocks).unwrap_or(0);
        if ahead == 0 {
            return;
        }
        let previous = match index.checked_sub(1) {
            Some(before) => Some(block_id(segment, before)),
            None => {
                let manifest = self.manifest.lock();
                let before = manifest.before(segment.start_offset);
                before.and_then(|p| blocks_of(p).checked_sub(1).map(|last| block_id(p, last)))
            }
        };
        if !previous.is_some_and(|id| self.reads.cache.lock().contains(id)) {
            return;
        }
        let blocks = blocks_of(segment);
        let mut next_segment: Option<Option<TieredSegment>> = None;
        for k in 1..=ahead {
            let at = index + k;
            if at < blocks {
                self.fetch_ahead(segment, at);
                continue;
            }
            let next = next_segment.get_or_insert_with(|| self.manifest.lock().get(segment.end_offset()).cloned());
            match next {
                Some(next) if at - blocks < blocks_of(next) => self.fetch_ahead(next, at - blocks),
                _ => break,
            }
        }
    }

    /// Fetches block `index` of `segment` into the cache on the tier's runtime, unless it is
    /// cached, being fetched, or too many fetches are in flight.
    fn fetch_ahead(&self, segment: &TieredSegment, index: u64) {
        let id = block_id(segment, index);
        if self.reads.cache.lock().contains(id) {
            return;
        }
        {
            let mut fetching = self.reads.ahead.lock();
            if fetching.len() >= READ_AHEAD_IN_FLIGHT_MAX || !fetching.insert(id) {
                return;
            }
        }
        self.stats.read_ahead_blocks.fetch_add(1, Ordering::Relaxed);
        let (fetch, reads) = (self.fetch(segment, index, self.config.read_deadline), self.reads.clone());
        self.rt().spawn(async move {
            let fetched = fetch.await;
            // Cached before it leaves the set: a read waiting on it then finds it.
            if let Ok(bytes) = fetched {
                reads.cache.lock().put(id, bytes);
            }
            reads.ahead.lock().remove(&id);
            reads.fetched.notify_all();
        });
    }

    /// Stops holding a segment whose tiered copy is stale (the local file was rewritten after
    /// its upload): its manifest line goes (durably) and its cached blocks, but no request is
    /// made, so a caller that must not wait (the store's maintenance thread, asking before a
    /// local delete) never waits behind an upload in progress. The offload then uploads the
    /// segment again, which overwrites both objects under the same keys.
    ///
    /// # Errors
    /// The manifest unwritable.
    pub fn disown(&self, start_offset: u64) -> Result<()> {
        self.manifest.lock().remove(start_offset)?;
        self.reads.cache.lock().forget(start_offset);
        tracing::info!(start_offset, "stale tiered segment disowned; it is uploaded again");
        Ok(())
    }

    /// Deletes a tiered segment: first from the manifest (durably), then its objects, so a
    /// crash between leaves an orphan object, never a manifest naming a missing one.
    ///
    /// # Errors
    /// The manifest unwritable; the object store failing past its retries.
    pub fn delete(&self, start_offset: u64) -> Result<()> {
        let _one = self.writes.lock();
        let object = {
            let mut manifest = self.manifest.lock();
            let object = manifest
                .get(start_offset)
                .map_or_else(|| self.key(start_offset), |s| self.object_key(s));
            manifest.remove(start_offset)?;
            object
        };
        self.reads.cache.lock().forget(start_offset);
        for key in [object.clone(), Self::record_key(&object)] {
            match self.block_on(self.client.delete(&key)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(TierError::store(format!("deleting {key}"), e)),
            }
        }
        tracing::info!(start_offset, "tiered segment deleted");
        Ok(())
    }
}

struct Sent {
    block_crcs: Vec<u32>,
    e_tag: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Paces uploads to a bandwidth bound: each part waits until the bytes before it have had
/// their time.
struct Pace {
    bytes_per_second: u64,
    next: Instant,
}

impl Pace {
    fn new(bytes_per_second: u64) -> Pace {
        Pace {
            bytes_per_second,
            next: Instant::now(),
        }
    }

    fn wait_for(&mut self, bytes: usize) {
        if self.bytes_per_second == 0 {
            return;
        }
        let now = Instant::now();
        if self.next > now {
            std::thread::sleep(self.next - now);
        }
        #[expect(clippy::cast_precision_loss, reason = "a pace, not an account")]
        let takes = Duration::from_secs_f64(bytes as f64 / self.bytes_per_second as f64);
        self.next = self.next.max(now) + takes;
    }
}

/// A cached block: its segment's start offset, its index, and its CRC as uploaded (a block
/// cached from an older upload of the segment is never taken for this one's).
type BlockId = (u64, u64, u32);

/// The blocks of a segment the manifest holds (its CRCs were checked to match its size when
/// it was read, or it is the one just read).
fn blocks_of(segment: &TieredSegment) -> u64 {
    u64::try_from(segment.block_crcs.len()).unwrap_or(u64::MAX)
}

fn block_id(segment: &TieredSegment, index: u64) -> BlockId {
    let crc = usize::try_from(index).ok().and_then(|i| segment.block_crcs.get(i)).copied();
    (
        segment.start_offset,
        index,
        crc.expect("a block of the segment: its range was checked"),
    )
}

/// Read-ahead fetches in flight at most, over every reader: a bound on the requests and the
/// memory they hold before the cache takes them.
const READ_AHEAD_IN_FLIGHT_MAX: usize = 16;

/// The read cache, and the blocks being read ahead into it: shared with the read-ahead tasks.
struct Reads {
    cache: Mutex<BlockCache>,
    /// Blocks a read-ahead task is fetching.
    ahead: Mutex<HashSet<BlockId>>,
    /// Notified (under `ahead`) when one of them is done.
    fetched: Condvar,
}

impl Reads {
    /// Block `id` from the cache, waiting (until `deadline`) for a read-ahead task fetching it
    /// rather than asking the object store a second time. `None`: fetch it.
    fn cached(&self, id: BlockId, deadline: Instant) -> Option<Bytes> {
        let mut fetching = self.ahead.lock();
        while fetching.contains(&id) {
            if self.fetched.wait_until(&mut fetching, deadline).timed_out() {
                break;
            }
        }
        drop(fetching);
        self.cache.lock().get(id)
    }
}

/// Verified blocks, the oldest dropped first once they exceed the byte bound.
struct BlockCache {
    limit_bytes: usize,
    held_bytes: usize,
    blocks: HashMap<BlockId, Bytes>,
    order: VecDeque<BlockId>,
}

impl BlockCache {
    fn new(limit_bytes: usize) -> BlockCache {
        BlockCache {
            limit_bytes,
            held_bytes: 0,
            blocks: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn get(&self, id: BlockId) -> Option<Bytes> {
        self.blocks.get(&id).cloned()
    }

    fn contains(&self, id: BlockId) -> bool {
        self.blocks.contains_key(&id)
    }

    fn put(&mut self, id: BlockId, block: Bytes) {
        if block.len() > self.limit_bytes || self.blocks.contains_key(&id) {
            return;
        }
        while self.held_bytes + block.len() > self.limit_bytes {
            let oldest = self.order.pop_front().expect("bytes held are in blocks");
            if let Some(gone) = self.blocks.remove(&oldest) {
                self.held_bytes -= gone.len();
            }
        }
        self.held_bytes += block.len();
        self.blocks.insert(id, block);
        self.order.push_back(id);
        assert!(self.held_bytes <= self.limit_bytes);
    }

    fn forget(&mut self, start_offset: u64) {
        self.order.retain(|id| id.0 != start_offset);
        let held = &mut self.held_bytes;
        self.blocks.retain(|id, b| {
            let keep = id.0 != start_offset;
            if !keep {
                *held -= b.len();
            }
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_holds_at_most_its_bound_and_drops_the_oldest() {
        let mut c = BlockCache::new(10);
        c.put((0, 0, 7), Bytes::from(vec![0; 4]));
        c.put((0, 1, 7), Bytes::from(vec![1; 4]));
        c.put((0, 2, 7), Bytes::from(vec![2; 4]));
        assert!(c.get((0, 0, 7)).is_none() && c.get((0, 2, 7)).is_some());
        assert_eq!(c.held_bytes, 8);
        c.put((1, 0, 7), Bytes::from(vec![3; 11]));
        assert!(c.get((1, 0, 7)).is_none(), "a block over the bound is not kept");
        assert!(c.get((0, 2, 8)).is_none(), "another upload's block is not this one");
        c.forget(0);
        assert_eq!((c.held_bytes, c.blocks.len()), (0, 0));
    }

    /// An `https://` endpoint is spoken to over TLS with ring, the provider the tier installs
    /// (the HTTP stack has none of its own and would panic building its client without one). A
    /// server that answers in plain HTTP fails the handshake: the upload is an error, not a panic.
    #[test]
    fn an_https_endpoint_goes_through_tls_and_a_failed_handshake_is_an_error() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
        let port = listener.local_addr().expect("its address").port();
        // Bounded: a client that never connects fails the test rather than hanging it.
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let server = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut stream = loop {
                match listener.accept() {
                    Ok((stream, _)) => break stream,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        assert!(Instant::now() < deadline, "the client connects within 30 s");
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            };
            stream.set_nonblocking(false).expect("a blocking stream");
            let mut hello = [0_u8; 5];
            stream.read_exact(&mut hello).expect("its first bytes");
            stream
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .expect("answered");
            hello
        });
        let dir = tempfile::tempdir().expect("a directory");
        let mut config = TierConfig::new(format!("https://127.0.0.1:{port}"), "bucket");
        config.access_key = "key".to_owned();
        config.secret_key = Some(crate::Secret::new("secret"));
        config.max_retries = 0;
        config.request_timeout = Duration::from_secs(10);
        let tier = Tier::open(config, &dir.path().join("tier")).expect("opened with an https endpoint");
        let path = dir.path().join("segment");
        std::fs::write(&path, b"records").expect("written");
        let failed = tier.upload(0, &path);
        assert!(failed.is_err(), "a plain-HTTP answer to a TLS client: {failed:?}");
        // 0x16: a TLS handshake record; the client spoke TLS.
        assert_eq!(server.join().expect("the server thread")[0], 0x16, "a TLS ClientHello");
    }

    /// object_store's in-memory store answers a multipart upload with an ETag of its own (a
    /// counter), as stores with KMS encryption answer one that is not the parts' MD5: the
    /// upload is verified by reading it back, and taken.
    #[test]
    fn an_etag_that_is_not_the_parts_md5_is_checked_by_reading_the_object_back() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut config = TierConfig::new("http://in-memory", "bucket");
        config.part_bytes = 5 << 20;
        let store = Arc::new(object_store::memory::InMemory::new());
        let tier = Tier::with_store(config, &dir.path().join("tier"), store).expect("opened");
        let data: Vec<u8> = (0..(11 << 20) + 7)
            .map(|i: usize| u8::try_from(i % 251).expect("below 251"))
            .collect();
        let path = dir.path().join("segment");
        std::fs::write(&path, &data).expect("written");
        let uploaded = tier.upload(0, &path).expect("uploaded, verified by reading back");
        assert!(!uploaded.e_tag.ends_with("-3"), "not an MD5 ETag: {}", uploaded.e_tag);
        assert_eq!(tier.stats().read_back_uploads.load(Ordering::Relaxed), 1);
        assert_eq!(tier.stats().fetched_bytes.load(Ordering::Relaxed), data.len() as u64);
        assert!(tier.holds_same(0, &path).expect("checked"));
        assert_eq!(&tier.read(0, 5 << 20, 9).expect("read")[..], &data[5 << 20..(5 << 20) + 9]);
    }

    /// A read that finds its block being read ahead waits for that fetch; if the fetch fails,
    /// the read has only what is left of its own deadline, not a second one: a stalled object
    /// store costs a reader one deadline, as the broker's busy answer promises.
    #[test]
    fn a_read_behind_a_failed_read_ahead_keeps_its_one_deadline() {
        use object_store::throttle::{ThrottleConfig, ThrottledStore};
        const DEADLINE: Duration = Duration::from_secs(2);
        let dir = tempfile::tempdir().expect("a directory");
        let mut config = TierConfig::new("http://in-memory", "bucket");
        config.part_bytes = 5 << 20;
        config.read_deadline = DEADLINE;
        let store = Arc::new(ThrottledStore::new(
            object_store::memory::InMemory::new(),
            ThrottleConfig::default(),
        ));
        let tier = Tier::with_store(config, &dir.path().join("tier"), store.clone()).expect("opened");
        let path = dir.path().join("segment");
        std::fs::write(&path, vec![7_u8; 3 << 20]).expect("written");
        let segment = tier.upload(0, &path).expect("uploaded");
        // From here every read of the object store stalls past any deadline.
        store.config_mut(|c| c.wait_get_per_call = Duration::from_secs(60));
        tier.fetch_ahead(&segment, 2);
        let started = Instant::now();
        let read = tier.read(0, 2 << 20, 16);
        let waited = started.elapsed();
        assert!(matches!(read, Err(TierError::Timeout(_))), "{read:?}");
        // One deadline is 2 s; a second one after the failed read-ahead would make it 4 s.
        assert!(waited < DEADLINE + DEADLINE / 2, "the read took {waited:?}");
        // The read-ahead's own deadline ends about when the read's does: it leaves its set.
        let mut ahead = tier.reads.ahead.lock();
        let until = Instant::now() + DEADLINE;
        while !ahead.is_empty() && !tier.reads.fetched.wait_until(&mut ahead, until).timed_out() {}
        assert!(ahead.is_empty(), "the failed read-ahead left its set");
    }

    #[test]
    fn the_pace_spreads_parts_over_the_bound() {
        let mut p = Pace::new(1_000_000);
        let started = Instant::now();
        for _ in 0..3 {
            p.wait_for(100_000);
        }
        // The third part waits for the first two's 0.2 s.
        assert!(started.elapsed() >= Duration::from_millis(199), "{:?}", started.elapsed());
    }
}
