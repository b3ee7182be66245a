//! For tests: a real S3-compatible server, SeaweedFS's `weed server -s3` (Apache-2.0), on
//! loopback ports, with one identity whose keys are [`ACCESS_KEY`] and [`SECRET_KEY`]; buckets
//! are created on first write. `scripts/seaweedfs-build.sh` builds the binary; tests find it in
//! `PETREL_WEED` ([`weed_binary`]).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{ObjectStoreExt, PutPayload};

/// The server's one access key.
pub const ACCESS_KEY: &str = "petrel-access";
/// Its secret.
pub const SECRET_KEY: &str = "petrel-secret-0123";

/// `PETREL_WEED`, or `None` with a line saying the test is skipped.
#[must_use]
pub fn weed_binary() -> Option<PathBuf> {
    let bin = std::env::var_os("PETREL_WEED").map(PathBuf::from);
    if bin.is_none() {
        eprintln!("skipped: PETREL_WEED is not set (scripts/tier-s3.sh builds SeaweedFS and sets it)");
    }
    bin
}

/// A running SeaweedFS; killed when dropped.
pub struct SeaweedFs {
    child: Child,
    s3_port: u16,
    log: PathBuf,
}

impl Drop for SeaweedFs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl SeaweedFs {
    /// Starts `bin` with its data and log under `dir`, and waits (90 s at most) until a write
    /// to `bucket` succeeds: the filer and a volume come up after the S3 port opens.
    ///
    /// # Panics
    /// If the server cannot be started or never answers.
    #[must_use]
    pub fn start(bin: &Path, dir: &Path, bucket: &str) -> SeaweedFs {
        /// The ports are free when chosen, but another process may take one before the server
        /// binds it: a server that exits while coming up is started again on new ones, this
        /// many times at most.
        const STARTS_MAX: u32 = 4;
        let mut weed = Self::spawn(bin, dir);
        let mut starts = 1;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if weed.child.try_wait().ok().flatten().is_some() {
                assert!(starts < STARTS_MAX, "SeaweedFS exited {starts} times:\n{}", weed.log_text());
                weed = Self::spawn(bin, dir);
                starts += 1;
                continue;
            }
            let ready = Key::from("ready");
            let up = TcpStream::connect(("127.0.0.1", weed.s3_port)).is_ok()
                && runtime
                    .block_on(weed.client(bucket).put(&ready, PutPayload::from_static(b"ready")))
                    .is_ok();
            if up {
                return weed;
            }
            assert!(Instant::now() < deadline, "SeaweedFS did not come up in 90 s:\n{}", weed.log_text());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn spawn(bin: &Path, dir: &Path) -> SeaweedFs {
        let config = dir.join("s3.json");
        let identity = format!(
            r#"{{"identities":[{{"name":"petrel","credentials":[{{"accessKey":"{ACCESS_KEY}","secretKey":"{SECRET_KEY}"}}],"actions":["Admin","Read","Write","List","Tagging"]}}]}}"#
        );
        std::fs::write(&config, identity).expect("the identity file written");
        let data = dir.join("weed-data");
        std::fs::create_dir_all(&data).expect("the data directory");
        let log = dir.join("weed.log");
        let out = std::fs::File::create(&log).expect("the log");
        // Ten ports held at once, so none repeats; released just before the server binds them.
        let held: Vec<TcpListener> = (0..10).map(|_| TcpListener::bind("127.0.0.1:0").expect("a port")).collect();
        let p: Vec<u16> = held.iter().map(|l| l.local_addr().expect("bound").port()).collect();
        drop(held);
        let names = [
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port",
            "s3.port.grpc",
            "s3.port.iceberg",
            "s3.port.lance",
        ];
        let child = Command::new(bin)
            .arg("server")
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-metricsPort=0", "-filer", "-s3"])
            .args(["-volume.max=8", "-master.volumeSizeLimitMB=64"])
            .arg(format!("-dir={}", data.display()))
            .arg(format!("-s3.config={}", config.display()))
            .args(names.iter().zip(&p).map(|(name, port)| format!("-{name}={port}")))
            .stdout(out.try_clone().expect("the log"))
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .expect("weed started");
        SeaweedFs { child, s3_port: p[6], log }
    }

    /// `http://127.0.0.1:PORT`, its S3 gateway.
    #[must_use]
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    /// The server's process id (to stop and resume it).
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`-STOP`, `-CONT`, …) to the server.
    ///
    /// # Panics
    /// If `kill` fails.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .expect("kill ran");
        assert!(status.success(), "kill {signal} failed");
    }

    /// A client of `bucket` with the server's keys, to look behind a tier's back.
    ///
    /// # Panics
    /// If the client cannot be built.
    #[must_use]
    pub fn client(&self, bucket: &str) -> AmazonS3 {
        crate::tier::install_crypto_provider();
        AmazonS3Builder::new()
            .with_endpoint(self.endpoint())
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id(ACCESS_KEY)
            .with_secret_access_key(SECRET_KEY)
            .with_allow_http(true)
            .build()
            .expect("a client")
    }

    /// The server's log so far.
    #[must_use]
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
