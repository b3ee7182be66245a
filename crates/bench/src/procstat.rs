//! CPU% and RSS of another process (the broker under test), read from /proc.
//!
//! Owns: turning two readings of `/proc/<pid>/stat` into a CPU percentage. Must never: fail a
//! benchmark because the process is gone — a missing process reads as `None`.

use std::time::Instant;

/// Samples one process's CPU use and RSS; each sample covers the time since the previous one.
pub struct ProcSampler {
    /// The process sampled.
    pub pid: u32,
    ticks_per_s: f64,
    last: Option<(Instant, u64)>,
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = process(pid)?.stat().ok()?;
    Some(stat.utime + stat.stime)
}

fn process(pid: u32) -> Option<procfs::process::Process> {
    procfs::process::Process::new(i32::try_from(pid).ok()?).ok()
}

/// CPU time `pid` has used (user and system), in seconds; `None` once it is gone.
#[must_use]
pub fn cpu_s(pid: u32) -> Option<f64> {
    let ticks = procfs::ticks_per_second();
    Some(cpu_ticks(pid)? as f64 / if ticks > 0 { ticks as f64 } else { 100.0 })
}

/// Resident set size of `pid` in MiB.
pub fn rss_mb(pid: u32) -> Option<f64> {
    let kib = process(pid)?.status().ok()?.vmrss?;
    Some(kib as f64 / 1024.0)
}

impl ProcSampler {
    /// Starts sampling `pid`: takes the first CPU reading, which the first [`ProcSampler::sample`] counts from.
    pub fn new(pid: u32) -> ProcSampler {
        let ticks = procfs::ticks_per_second();
        ProcSampler {
            pid,
            ticks_per_s: if ticks > 0 { ticks as f64 } else { 100.0 },
            last: cpu_ticks(pid).map(|t| (Instant::now(), t)),
        }
    }

    /// CPU% since the previous call (100% = one core) and the current RSS in MiB.
    pub fn sample(&mut self) -> Option<(f64, f64)> {
        let now = Instant::now();
        let ticks = cpu_ticks(self.pid)?;
        let rss = rss_mb(self.pid)?;
        let (then, before) = self.last.replace((now, ticks))?;
        let secs = now.duration_since(then).as_secs_f64();
        if secs <= 0.0 {
            return None;
        }
        Some(((ticks.saturating_sub(before)) as f64 / self.ticks_per_s / secs * 100.0, rss))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_this_process_sees_the_cpu_it_burns() {
        let mut s = ProcSampler::new(std::process::id());
        let started = Instant::now();
        let mut x = 0u64;
        while started.elapsed().as_millis() < 300 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let (cpu, rss) = s.sample().expect("our own process is readable");
        assert!(cpu > 20.0 && cpu < 150.0, "a busy loop on one core: {cpu}%");
        assert!(rss > 0.5, "{rss} MiB");
        assert!(ProcSampler::new(u32::MAX).sample().is_none());
    }
}
