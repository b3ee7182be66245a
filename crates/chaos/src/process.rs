//! One child process under test: its command line, its log file, and what a harness does to it
//! (start, wait until it is ready, SIGSTOP/SIGCONT, kill -9, SIGTERM). The chaos cluster's nodes
//! and the integration tests' brokers, name servers and controllers are all one of these.
//!
//! Owns: its child. Must never: outlive its owner (dropping it kills and reaps the child), or
//! wait without a deadline.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How often a readiness check is repeated.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// How long an orderly shutdown may take after SIGTERM.
const TERMINATE_TIMEOUT: Duration = Duration::from_secs(60);

/// A child process with its command line and log; not running until [`Process::start`].
#[derive(Debug)]
pub struct Process {
    name: String,
    /// What runs the program, if anything (`ip netns exec NS`, `prlimit --nofile=N:N --`).
    wrapper: Vec<String>,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    /// How the child exited, once seen: its pid may belong to another process from then on.
    exited: Option<ExitStatus>,
}

/// Why a process did not become ready.
#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    /// It exited first.
    #[error("{name} exited ({status}) before it was ready; its log:\n{log}")]
    Exited {
        /// The process's name.
        name: String,
        /// How it exited.
        status: ExitStatus,
        /// Its log so far.
        log: String,
    },
    /// The deadline passed.
    #[error("{name} was not ready in {timeout:?}; its log:\n{log}")]
    Timeout {
        /// The process's name.
        name: String,
        /// How long it was given.
        timeout: Duration,
        /// Its log so far.
        log: String,
    },
    /// It could not be started or watched.
    #[error("{name}: {source}")]
    Io {
        /// The process's name.
        name: String,
        /// What failed.
        #[source]
        source: io::Error,
    },
}

impl Process {
    /// `program` with `args`, its output appended to `log`.
    #[must_use]
    pub fn new(name: impl Into<String>, program: impl Into<PathBuf>, args: Vec<String>, log: impl Into<PathBuf>) -> Process {
        Process {
            name: name.into(),
            wrapper: Vec::new(),
            program: program.into(),
            args,
            env: Vec::new(),
            log: log.into(),
            child: None,
            exited: None,
        }
    }

    /// Runs the program under `wrapper` (a command that runs the rest of its line).
    #[must_use]
    pub fn wrapped_in(mut self, wrapper: Vec<String>) -> Process {
        self.wrapper = wrapper;
        self
    }

    /// Runs the program with its open-file limit (soft and hard) at `limit`, through util-linux's
    /// `prlimit`.
    #[must_use]
    pub fn with_open_files(self, limit: u64) -> Process {
        self.wrapped_in(vec!["prlimit".into(), format!("--nofile={limit}:{limit}"), "--".into()])
    }

    /// Adds an environment variable.
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Process {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Its name, for messages.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its command-line arguments, to change before the next start.
    pub fn args_mut(&mut self) -> &mut Vec<String> {
        &mut self.args
    }

    /// Its log file.
    #[must_use]
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Its log so far (empty if there is none yet).
    #[must_use]
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Starts it, without waiting for anything.
    ///
    /// # Errors
    /// The log cannot be opened or the program started.
    ///
    /// # Panics
    /// It is running already.
    pub fn start(&mut self) -> io::Result<()> {
        assert!(self.child.is_none(), "{} is running", self.name);
        self.exited = None;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let mut command = match self.wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&self.program);
                c
            }
            None => Command::new(&self.program),
        };
        let child = command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until `ready` holds, checking every 20 ms for at most `timeout`, on this thread.
    ///
    /// # Errors
    /// It exited first, or the deadline passed.
    pub fn wait_until(&mut self, timeout: Duration, mut ready: impl FnMut(&Process) -> bool) -> Result<(), NotReady> {
        let deadline = Instant::now() + timeout;
        loop {
            if ready(self) {
                return Ok(());
            }
            self.check_alive(deadline, timeout)?;
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Whether it may still become ready: running, and before `deadline`.
    ///
    /// # Errors
    /// It exited, or the deadline passed.
    pub fn check_alive(&mut self, deadline: Instant, timeout: Duration) -> Result<(), NotReady> {
        if let Some(status) = self.exit_status().map_err(|source| NotReady::Io {
            name: self.name.clone(),
            source,
        })? {
            return Err(NotReady::Exited {
                name: self.name.clone(),
                status,
                log: self.log(),
            });
        }
        if Instant::now() > deadline {
            return Err(NotReady::Timeout {
                name: self.name.clone(),
                timeout,
                log: self.log(),
            });
        }
        Ok(())
    }

    /// How it exited, if it has (it is reaped then); `None` while it runs or was never started.
    ///
    /// # Errors
    /// The status cannot be read.
    pub fn exit_status(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.exited.is_none()
            && let Some(child) = self.child.as_mut()
        {
            self.exited = child.try_wait()?;
        }
        Ok(self.exited)
    }

    /// Its pid while it runs: `None` once it has been seen to exit (the pid may be another
    /// process's by then).
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        if self.exited.is_some() {
            return None;
        }
        self.child.as_ref().map(Child::id)
    }

    /// Sends `signal`.
    ///
    /// # Errors
    /// It is not running, or the signal cannot be sent.
    pub fn signal(&self, signal: Signal) -> io::Result<()> {
        let pid = self
            .pid()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| io::Error::other(format!("{} is not running", self.name)))?;
        kill(Pid::from_raw(pid), signal).map_err(io::Error::from)
    }

    /// kill -9, then reaps it: it stops wherever it was. Nothing if it is not running.
    ///
    /// # Errors
    /// It cannot be killed or reaped.
    pub fn kill(&mut self) -> io::Result<Option<ExitStatus>> {
        // A child that exited already cannot be signalled, and need not be.
        if self.exit_status()?.is_none()
            && let Some(child) = self.child.as_mut()
        {
            child.kill()?;
        }
        // Kept until reaped: on an error the next call (or the drop) tries again.
        let status = match self.child.as_mut() {
            Some(child) => child.wait()?,
            None => return Ok(None),
        };
        self.child = None;
        self.exited = None;
        Ok(Some(status))
    }

    /// SIGTERM, then waits (at most a minute) for it to exit: its orderly shutdown.
    ///
    /// # Errors
    /// It is not running, cannot be signalled or reaped, or is still running after the minute
    /// (it is killed when dropped).
    pub fn terminate(&mut self) -> io::Result<ExitStatus> {
        self.signal(Signal::SIGTERM)?;
        let deadline = Instant::now() + TERMINATE_TIMEOUT;
        loop {
            if let Some(status) = self.exit_status()? {
                self.child = None;
                self.exited = None;
                return Ok(status);
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "{} still runs {TERMINATE_TIMEOUT:?} after SIGTERM",
                    self.name
                )));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Forgets a child that the caller has reaped some other way (its status seen by
    /// [`Process::exit_status`]).
    pub fn forget_exited(&mut self) {
        self.child = None;
        self.exited = None;
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // A stopped process dies of SIGKILL too.
        let _ = self.kill();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a failure is the test failing")]

    use super::*;

    fn sh(dir: &Path, script: &str) -> Process {
        Process::new("sh", "sh", vec!["-c".into(), script.into()], dir.join("sh.log"))
    }

    #[test]
    fn a_process_is_ready_when_its_check_holds_and_an_early_exit_is_told_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut ready = sh(dir.path(), "echo booted; sleep 30");
        ready.start().unwrap();
        ready.wait_until(Duration::from_secs(10), |p| p.log().contains("booted")).unwrap();
        assert!(ready.pid().is_some());
        let status = ready.kill().unwrap().expect("it ran");
        assert!(!status.success(), "killed, not exited");
        assert!(ready.pid().is_none());

        let mut dies = sh(dir.path(), "echo cannot start; exit 3");
        dies.start().unwrap();
        match dies.wait_until(Duration::from_secs(10), |_| false) {
            Err(NotReady::Exited { status, log, .. }) => {
                assert_eq!(status.code(), Some(3));
                assert!(log.contains("cannot start"), "{log}");
            }
            other => panic!("{other:?}"),
        }
        assert!(dies.pid().is_none(), "an exited child's pid is not handed out");
        assert!(dies.signal(Signal::SIGCONT).is_err(), "nor signalled");
        let mut slow = sh(dir.path(), "sleep 30");
        slow.start().unwrap();
        assert!(matches!(
            slow.wait_until(Duration::from_millis(100), |_| false),
            Err(NotReady::Timeout { .. })
        ));
    }

    #[test]
    fn sigterm_is_an_orderly_exit_and_the_open_file_limit_is_applied() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = sh(dir.path(), "trap 'exit 7' TERM; echo up; while true; do sleep 0.05; done");
        p.start().unwrap();
        p.wait_until(Duration::from_secs(10), |p| p.log().contains("up")).unwrap();
        assert_eq!(p.terminate().unwrap().code(), Some(7));

        let mut limited = sh(dir.path(), "ulimit -n").with_open_files(123);
        limited.start().unwrap();
        limited.wait_until(Duration::from_secs(10), |p| p.log().contains("123")).unwrap();
    }
}
