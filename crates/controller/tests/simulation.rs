//! Randomized fault runs of a three-controller group on the in-process router, on tokio's paused
//! clock (time jumps ahead whenever every task waits, so seconds of Raft timeouts pass in
//! milliseconds): crashes and restarts from disk, isolated members, proposals everywhere. After
//! each run every member must hold the same state, and no two acknowledged answers may name two
//! masters for one epoch or lose an acknowledged broker id. `PETREL_SIM_SEEDS` sets the number of
//! runs (a few in the suite).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use petrel_controller::{Candidate, Command, ControllerNode, ControllerState, Outcome, ProposeError, RaftTiming, Router};

const TIMING: RaftTiming = RaftTiming {
    heartbeat_interval_ms: 50,
    election_timeout_min_ms: 300,
    election_timeout_max_ms: 600,
    snapshot_every_entries: 10,
    propose_timeout_ms: 1000,
};

/// xorshift64*: a seedable generator, so a failing seed replays the same choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

async fn start(router: &Router, root: &Path, id: u64) -> ControllerNode {
    let node = ControllerNode::start(id, &root.join(format!("c{id}")), TIMING, router.network(id))
        .await
        .expect("start");
    router.add(id, node.raft().clone());
    node
}

/// A random command; half the SyncStateSet changes are built from `seen` (a member's applied
/// state), so that some pass the epoch checks.
fn random_command(rng: &mut Rng, seen: &ControllerState) -> Command {
    let id = 1 + rng.below(4);
    if let Some(set) = seen.broker_set("broker-a").filter(|s| s.master.is_some() && rng.below(2) == 0) {
        let master = set.master.unwrap_or(1);
        let mut new_set: BTreeSet<u64> = set.replicas.keys().copied().filter(|_| rng.below(2) == 0).collect();
        new_set.insert(master);
        return Command::AlterSyncStateSet {
            broker_name: "broker-a".into(),
            master,
            master_epoch: set.master_epoch,
            sync_state_set_epoch: set.sync_state_set_epoch,
            new_set,
            alive: (1..=4).collect(),
        };
    }
    match rng.below(3) {
        0 => Command::ApplyBrokerId {
            cluster: "c".into(),
            broker_name: "broker-a".into(),
            broker_id: id,
            register_check_code: format!("127.0.0.1:{id};u{id}"),
        },
        1 => Command::ElectMaster {
            broker_name: "broker-a".into(),
            requester: Some(id).filter(|_| rng.below(2) == 0),
            designate: false,
            unclean: rng.below(4) == 0,
            alive: {
                let ids: Vec<u64> = (1..=4).filter(|_| rng.below(4) != 0).collect();
                ids.into_iter()
                    .map(|b| Candidate {
                        broker_id: b,
                        epoch: 1,
                        max_offset: rng.below(3),
                        priority: 0,
                    })
                    .collect()
            },
        },
        _ => Command::AlterSyncStateSet {
            broker_name: "broker-a".into(),
            master: id,
            master_epoch: u32::try_from(rng.below(5)).unwrap_or(0),
            sync_state_set_epoch: u32::try_from(rng.below(8)).unwrap_or(0),
            new_set: (1..=4).filter(|_| rng.below(2) == 0).collect(),
            alive: (1..=4).collect(),
        },
    }
}

/// What the acknowledged answers of one run claimed.
#[derive(Default)]
struct Acknowledged {
    master_of_epoch: BTreeMap<u32, u64>,
    broker_ids: BTreeSet<u64>,
    max_epoch: u32,
    answered: usize,
    refused: usize,
    unavailable: usize,
}

impl Acknowledged {
    fn record(&mut self, command: &Command, outcome: &Outcome) {
        self.answered += 1;
        match (command, outcome) {
            (Command::ApplyBrokerId { broker_id, .. }, Outcome::BrokerIdApplied) => {
                self.broker_ids.insert(*broker_id);
            }
            (_, Outcome::Elected { master, master_epoch, .. }) => {
                let first = *self.master_of_epoch.entry(*master_epoch).or_insert(*master);
                assert_eq!(first, *master, "two acknowledged masters for epoch {master_epoch}");
                self.max_epoch = self.max_epoch.max(*master_epoch);
            }
            (_, Outcome::NoMaster { master_epoch }) => self.max_epoch = self.max_epoch.max(*master_epoch),
            _ => {}
        }
    }
}

async fn run(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let dir = tempfile::tempdir().expect("tempdir");
    let router = Router::default();
    let mut nodes: BTreeMap<u64, Option<ControllerNode>> = BTreeMap::new();
    for id in 1..=3 {
        nodes.insert(id, Some(start(&router, dir.path(), id).await));
    }
    let members = (1..=3).map(|id| (id, format!("node-{id}"))).collect();
    nodes[&1].as_ref().expect("up").initialize(members).await.expect("initialize");
    let mut acked = Acknowledged::default();
    for _ in 0..120 {
        let id = 1 + rng.below(3);
        match rng.below(20) {
            0 => {
                if let Some(node) = nodes.get_mut(&id).and_then(Option::take) {
                    router.remove(id);
                    node.shutdown().await;
                }
            }
            1 | 2 => {
                if nodes[&id].is_none() {
                    nodes.insert(id, Some(start(&router, dir.path(), id).await));
                }
            }
            3 => router.isolate(id),
            4 | 5 => router.heal(),
            6 | 7 => tokio::time::sleep(Duration::from_millis(rng.below(2000))).await,
            _ => {
                let Some(node) = nodes[&id].clone() else { continue };
                let command = random_command(&mut rng, &node.read_local(Clone::clone));
                // As a broker does: ask one member, and on NOT_LEADER the leader it names.
                let mut answer = node.propose(command.clone()).await;
                if let Err(ProposeError::NotLeader { leader: Some(l), .. }) = answer
                    && let Some(Some(leader)) = nodes.get(&l)
                {
                    answer = leader.propose(command.clone()).await;
                }
                match answer {
                    Ok(Ok(outcome)) => acked.record(&command, &outcome),
                    Ok(Err(_)) => acked.refused += 1,
                    Err(_) => acked.unavailable += 1,
                }
            }
        }
    }
    router.heal();
    for id in 1..=3 {
        if nodes[&id].is_none() {
            nodes.insert(id, Some(start(&router, dir.path(), id).await));
        }
    }
    let live: Vec<ControllerNode> = nodes.into_values().flatten().collect();
    // A committed no-op through whoever leads, so that every member has applied the same log.
    let mut state: Option<ControllerState> = None;
    for _ in 0..400 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let states: Vec<ControllerState> = live.iter().map(|n| n.read_local(Clone::clone)).collect();
        let leader = live[0].leader();
        if leader.is_some() && live.iter().all(|n| n.leader() == leader) && states.windows(2).all(|w| w[0] == w[1]) {
            state = Some(states[0].clone());
            break;
        }
    }
    let state = state.unwrap_or_else(|| panic!("seed {seed}: the members did not converge"));
    if let Some(set) = state.broker_set("broker-a") {
        assert!(set.master_epoch >= acked.max_epoch, "seed {seed}: an acknowledged epoch was lost");
        for id in &acked.broker_ids {
            assert!(set.replicas.contains_key(id), "seed {seed}: acknowledged broker id {id} was lost");
        }
        if let Some(master) = set.master {
            let claimed = acked.master_of_epoch.get(&set.master_epoch).copied().unwrap_or(master);
            assert_eq!(claimed, master, "seed {seed}: the state's master differs from the acknowledged one");
        }
    } else {
        assert!(acked.broker_ids.is_empty(), "seed {seed}: acknowledged broker ids were lost");
    }
    println!(
        "seed {seed}: {} applied, {} refused by the state, {} not committed; {} acknowledged elections over epochs up to {}, {} broker ids, final state {:?}",
        acked.answered,
        acked.refused,
        acked.unavailable,
        acked.master_of_epoch.len(),
        acked.max_epoch,
        acked.broker_ids.len(),
        state
            .broker_set("broker-a")
            .map(|s| (s.master, s.master_epoch, s.sync_state_set.len()))
    );
    for node in &live {
        node.shutdown().await;
    }
}

#[test]
fn random_crashes_and_partitions_never_split_an_epoch_or_lose_an_acknowledged_change() {
    let seeds: u64 = std::env::var("PETREL_SIM_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    for seed in 0..seeds {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        runtime.block_on(run(seed));
    }
}
