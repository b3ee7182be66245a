//! A network namespace per process, all on one bridge, so that a partition can cut exactly the
//! links between chosen processes while the workload (in the root namespace) still reaches
//! every one of them: Jepsen's approach, with blackhole routes instead of iptables (the only
//! tool needed is iproute2's `ip`).
//!
//! A blackhole route drops the packets a namespace sends to an address without telling the
//! sender, as a real partition does: established connections stall until their own timeouts.

use std::process::Command;

use crate::error::{ChaosError, Result};

/// The most namespaces one run creates (addresses .1 to .N of its /24).
pub const MAX_NAMESPACES: usize = 32;

pub struct Netns {
    prefix: String,
    bridge: String,
    /// The third octet of this run's 10.213.x.0/24.
    subnet: u8,
    count: usize,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| ChaosError::Setup(format!("cannot run `ip` (iproute2): {e}")))?;
    if !out.status.success() {
        return Err(ChaosError::Setup(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

impl Netns {
    /// `count` namespaces named after this process, each with a veth on a new bridge.
    pub fn create(count: usize) -> Result<Netns> {
        assert!(count > 0 && count <= MAX_NAMESPACES, "namespaces: {count}");
        sweep_dead_runs();
        let pid = std::process::id();
        // Interface names are at most 15 bytes; the pid keeps concurrent runs apart.
        let mut net = Netns {
            prefix: format!("pc{pid}"),
            bridge: format!("pc{pid}br"),
            subnet: u8::try_from(20 + pid % 200).unwrap_or(20),
            count: 0,
        };
        ip(&["link", "add", &net.bridge, "type", "bridge"])?;
        ip(&["link", "set", &net.bridge, "up"])?;
        ip(&["addr", "add", &format!("{}/24", net.gateway()), "dev", &net.bridge])?;
        for i in 0..count {
            net.add(i)?;
            net.count = i + 1;
        }
        Ok(net)
    }

    fn add(&self, i: usize) -> Result<()> {
        let ns = self.name(i);
        let veth = format!("{}v{i}", self.prefix);
        ip(&["netns", "add", &ns])?;
        ip(&["link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
        ip(&["link", "set", &veth, "master", &self.bridge, "up"])?;
        ip(&["-n", &ns, "addr", "add", &format!("{}/24", self.addr(i)), "dev", "eth0"])?;
        ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])
    }

    pub fn name(&self, i: usize) -> String {
        format!("{}n{i}", self.prefix)
    }

    /// The address of namespace `i`.
    pub fn addr(&self, i: usize) -> String {
        format!("10.213.{}.{}", self.subnet, i + 1)
    }

    fn gateway(&self) -> String {
        format!("10.213.{}.254", self.subnet)
    }

    /// Cuts `i` off from each of `others`, both ways.
    pub fn isolate(&self, i: usize, others: &[usize]) -> Result<()> {
        for o in others {
            ip(&["-n", &self.name(i), "route", "add", "blackhole", &format!("{}/32", self.addr(*o))])?;
            ip(&["-n", &self.name(*o), "route", "add", "blackhole", &format!("{}/32", self.addr(i))])?;
        }
        Ok(())
    }

    /// Undoes `isolate(i, others)`.
    pub fn heal(&self, i: usize, others: &[usize]) -> Result<()> {
        for o in others {
            ip(&["-n", &self.name(i), "route", "del", "blackhole", &format!("{}/32", self.addr(*o))])?;
            ip(&["-n", &self.name(*o), "route", "del", "blackhole", &format!("{}/32", self.addr(i))])?;
        }
        Ok(())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for i in 0..self.count {
            let _ = ip(&["netns", "del", &self.name(i)]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

/// The pid a name of ours (`pc{pid}br`, `pc{pid}n{i}`) was made by, if it is one of ours.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("pc")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    let suffix = &rest[digits..];
    let ours = suffix == "br"
        || suffix
            .strip_prefix('n')
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
    if !ours {
        return None;
    }
    rest[..digits].parse().ok()
}

/// Deletes the bridges and namespaces of runs whose process is gone (killed, so its `Drop` never
/// ran). Two runs whose pids agree modulo 200 share a subnet, and a dead run's bridge holding the
/// same gateway address would take the new run's routes.
fn sweep_dead_runs() {
    let dead = |name: &str| {
        owner_pid(name).is_some_and(|pid| pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists())
    };
    let listed = |args: &[&str]| -> Vec<String> {
        Command::new("ip")
            .args(args)
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter_map(|l| l.split_whitespace().next())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    for ns in listed(&["netns", "list"]).iter().filter(|n| dead(n)) {
        eprintln!("chaos: deleting namespace {ns} left by a run that is gone");
        let _ = ip(&["netns", "del", ns]);
    }
    for bridge in listed(&["-br", "link", "show", "type", "bridge"]).iter().filter(|n| dead(n)) {
        eprintln!("chaos: deleting bridge {bridge} left by a run that is gone");
        let _ = ip(&["link", "del", bridge]);
    }
}

/// Whether this process may create network namespaces.
pub fn available() -> bool {
    nix::unistd::geteuid().is_root() && Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success())
}

#[cfg(test)]
mod tests {
    use super::owner_pid;

    #[test]
    fn only_our_bridge_and_namespace_names_name_a_pid() {
        assert_eq!(owner_pid("pc9863br"), Some(9863));
        assert_eq!(owner_pid("pc9863n0"), Some(9863));
        assert_eq!(owner_pid("pc9863n12"), Some(9863));
        // A veth, someone else's names, and half-names are left alone.
        assert_eq!(owner_pid("pc9863v0"), None);
        assert_eq!(owner_pid("pc9863n"), None);
        assert_eq!(owner_pid("pcbr"), None);
        assert_eq!(owner_pid("docker0"), None);
        assert_eq!(owner_pid("pc12"), None);
    }
}
