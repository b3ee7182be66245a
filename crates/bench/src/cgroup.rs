//! Memory use of a memory cgroup (the one the broker under test runs in), read from its control
//! files: cgroup v1 (`memory.usage_in_bytes`, `memory.stat`'s `total_rss` / `total_cache`,
//! `memory.oom_control`'s `oom_kill`) or v2 (`memory.current`, `memory.stat`'s `anon` / `file`,
//! `memory.events`' `oom_kill`).
//!
//! Owns: turning those files into one sample. Must never: fail a run because a file went away — a
//! cgroup removed mid-run reads as `None`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One reading of a memory cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CgroupSample {
    /// What the kernel charges the cgroup with (anon + page cache + kernel), the figure the limit
    /// is enforced against.
    pub usage_bytes: u64,
    /// Anonymous memory (not file-backed) charged to the cgroup: v1 `total_rss`, v2 `anon`.
    pub anon_bytes: u64,
    /// Page cache charged to the cgroup (file-backed pages, mapped or not).
    pub cache_bytes: u64,
    /// Processes the kernel's OOM killer has killed in this cgroup so far.
    pub oom_kills: u64,
}

/// A memory cgroup (v1 or v2) whose control files are read for samples.
#[derive(Debug, Clone)]
pub struct CgroupMemory {
    dir: PathBuf,
    v2: bool,
}

/// The value of `key` in a `key value` per line file (`memory.stat`, `memory.events`).
fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        if k == key { v.trim().parse().ok() } else { None }
    })
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl CgroupMemory {
    /// The cgroup at `dir` (e.g. `/sys/fs/cgroup/memory/petrel-soak`).
    pub fn open(dir: &Path) -> std::io::Result<CgroupMemory> {
        let v2 = dir.join("memory.current").exists();
        let probe = dir.join(if v2 { "memory.current" } else { "memory.usage_in_bytes" });
        if !probe.exists() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} is not a memory cgroup (no {})", dir.display(), probe.display()),
            ));
        }
        Ok(CgroupMemory { dir: dir.to_owned(), v2 })
    }

    /// The hard limit, if one is set.
    pub fn limit_bytes(&self) -> Option<u64> {
        if self.v2 {
            // "max" (no limit) does not parse, which is the answer.
            return read_u64(&self.dir.join("memory.max"));
        }
        // v1 writes "no limit" as a number near i64::MAX rounded to pages.
        read_u64(&self.dir.join("memory.limit_in_bytes")).filter(|&l| l < (1 << 60))
    }

    /// The highest usage the kernel recorded since the cgroup was made (v1
    /// `memory.max_usage_in_bytes`, v2 `memory.peak` where the kernel has it): catches a peak
    /// between two samples.
    pub fn peak_bytes(&self) -> Option<u64> {
        read_u64(&self.dir.join(if self.v2 { "memory.peak" } else { "memory.max_usage_in_bytes" }))
    }

    /// The cgroup's memory now; `None` when a control file cannot be read (the cgroup is gone).
    pub fn sample(&self) -> Option<CgroupSample> {
        let stat = std::fs::read_to_string(self.dir.join("memory.stat")).ok()?;
        if self.v2 {
            let events = std::fs::read_to_string(self.dir.join("memory.events")).ok()?;
            return Some(CgroupSample {
                usage_bytes: read_u64(&self.dir.join("memory.current"))?,
                anon_bytes: field(&stat, "anon")?,
                cache_bytes: field(&stat, "file")?,
                oom_kills: field(&events, "oom_kill").unwrap_or(0),
            });
        }
        let oom = std::fs::read_to_string(self.dir.join("memory.oom_control")).ok()?;
        Some(CgroupSample {
            usage_bytes: read_u64(&self.dir.join("memory.usage_in_bytes"))?,
            // The hierarchical totals include child cgroups; without hierarchy they equal these.
            anon_bytes: field(&stat, "total_rss").or_else(|| field(&stat, "rss"))?,
            cache_bytes: field(&stat, "total_cache").or_else(|| field(&stat, "cache"))?,
            oom_kills: field(&oom, "oom_kill").unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_cgroup_reads_from_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("memory.usage_in_bytes"), "300000000\n").unwrap();
        std::fs::write(d.join("memory.limit_in_bytes"), "536870912\n").unwrap();
        std::fs::write(d.join("memory.max_usage_in_bytes"), "400000000\n").unwrap();
        std::fs::write(d.join("memory.stat"), "cache 5\nrss 6\ntotal_cache 200000000\ntotal_rss 90000000\n").unwrap();
        std::fs::write(d.join("memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n").unwrap();
        let cg = CgroupMemory::open(d).unwrap();
        assert_eq!(cg.limit_bytes(), Some(536_870_912));
        assert_eq!(cg.peak_bytes(), Some(400_000_000));
        assert_eq!(
            cg.sample(),
            Some(CgroupSample {
                usage_bytes: 300_000_000,
                anon_bytes: 90_000_000,
                cache_bytes: 200_000_000,
                oom_kills: 2
            })
        );
        std::fs::write(d.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(cg.limit_bytes(), None, "v1's 'no limit'");
    }

    #[test]
    fn a_v2_cgroup_reads_from_its_files_and_a_plain_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(CgroupMemory::open(dir.path()).is_err());
        let d = dir.path();
        std::fs::write(d.join("memory.current"), "1000\n").unwrap();
        std::fs::write(d.join("memory.max"), "max\n").unwrap();
        std::fs::write(d.join("memory.stat"), "anon 400\nfile 500\n").unwrap();
        std::fs::write(d.join("memory.events"), "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n").unwrap();
        let cg = CgroupMemory::open(d).unwrap();
        assert_eq!(cg.limit_bytes(), None);
        assert_eq!(
            cg.sample(),
            Some(CgroupSample {
                usage_bytes: 1000,
                anon_bytes: 400,
                cache_bytes: 500,
                oom_kills: 1
            })
        );
        std::fs::remove_file(d.join("memory.stat")).unwrap();
        assert_eq!(cg.sample(), None, "a cgroup going away is not an error");
    }
}
