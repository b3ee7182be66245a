//! The controller's Raft: openraft's own conformance suite over our log and state machine, and
//! whole three-controller groups on the in-process router, with a crashed leader, an isolated
//! leader and restarts from disk.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use openraft::StorageError;
use openraft::testing::{StoreBuilder, Suite};
use petrel_controller::{
    Candidate, Command, ControllerNode, ControllerState, LogStore, Outcome, ProposeError, RaftTiming, Router, StateMachine, TypeConfig,
};
use tempfile::TempDir;

struct DiskBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for DiskBuilder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError<u64>> {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = LogStore::open(dir.path()).expect("open log");
        let sm = StateMachine::open(dir.path()).expect("open state machine");
        Ok((dir, log, sm))
    }
}

#[test]
fn the_storage_passes_openraft_conformance_suite() {
    if let Err(e) = Suite::test_all(DiskBuilder) {
        panic!("openraft's storage suite: {e}");
    }
}

const TIMING: RaftTiming = RaftTiming {
    heartbeat_interval_ms: 50,
    election_timeout_min_ms: 300,
    election_timeout_max_ms: 600,
    snapshot_every_entries: 20,
    propose_timeout_ms: 1500,
};

struct Group {
    _dir: TempDir,
    root: PathBuf,
    router: Router,
    nodes: BTreeMap<u64, ControllerNode>,
}

impl Group {
    async fn start() -> Group {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_owned();
        let router = Router::default();
        let mut nodes = BTreeMap::new();
        for id in 1..=3 {
            nodes.insert(id, start_node(&router, &root, id).await);
        }
        let members = (1..=3).map(|id| (id, format!("node-{id}"))).collect();
        nodes[&1].initialize(members).await.expect("initialize");
        let group = Group {
            _dir: dir,
            root,
            router,
            nodes,
        };
        group.leader(None).await;
        group
    }

    /// Waits until the live nodes agree on a leader other than `not`, and returns it.
    async fn leader(&self, not: Option<u64>) -> u64 {
        for _ in 0..200 {
            let seen: Vec<Option<u64>> = self.nodes.values().map(ControllerNode::leader).collect();
            if let Some(Some(leader)) = seen.first()
                && Some(*leader) != not
                && self.nodes.contains_key(leader)
                && seen.iter().all(|l| l == &Some(*leader))
            {
                return *leader;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no leader agreed within 5 s");
    }

    async fn propose(&self, command: Command) -> Outcome {
        for _ in 0..50 {
            let leader = self.leader(None).await;
            match self.nodes[&leader].propose(command.clone()).await {
                Ok(answer) => return answer.expect("accepted"),
                Err(ProposeError::NotLeader { .. }) => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("no leader took the proposal");
    }

    /// Waits until every live node has applied the same state, and returns it.
    async fn converged(&self) -> ControllerState {
        for _ in 0..200 {
            let states: Vec<ControllerState> = self.nodes.values().map(|n| n.read_local(Clone::clone)).collect();
            if states.windows(2).all(|w| w[0] == w[1]) {
                return states[0].clone();
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the controllers' states did not converge within 5 s");
    }
}

async fn start_node(router: &Router, root: &Path, id: u64) -> ControllerNode {
    let node = ControllerNode::start(id, &root.join(format!("c{id}")), TIMING, router.network(id))
        .await
        .expect("start");
    router.add(id, node.raft().clone());
    node
}

fn apply_id(id: u64) -> Command {
    Command::ApplyBrokerId {
        cluster: "DefaultCluster".into(),
        broker_name: "broker-a".into(),
        broker_id: id,
        register_check_code: format!("127.0.0.1:{};u{id}", 10_000 + id),
    }
}

fn elect(alive: &[u64]) -> Command {
    elect_by(None, alive)
}

fn elect_by(requester: Option<u64>, alive: &[u64]) -> Command {
    Command::ElectMaster {
        broker_name: "broker-a".into(),
        requester,
        designate: false,
        unclean: false,
        alive: alive
            .iter()
            .map(|id| Candidate {
                broker_id: *id,
                epoch: 1,
                max_offset: 100 * id,
                priority: 0,
            })
            .collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_survives_its_leaders_crash_and_the_crashed_node_catches_up_from_disk() {
    let mut group = Group::start().await;
    for id in 1..=3 {
        assert_eq!(group.propose(apply_id(id)).await, Outcome::BrokerIdApplied);
    }
    let first = elect_by(Some(1), &[1]);
    assert!(matches!(
        group.propose(first).await,
        Outcome::Elected {
            master: 1,
            master_epoch: 1,
            ..
        }
    ));
    let all_in_sync = Command::AlterSyncStateSet {
        broker_name: "broker-a".into(),
        master: 1,
        master_epoch: 1,
        sync_state_set_epoch: 1,
        new_set: [1, 2, 3].into(),
        alive: [1, 2, 3].into(),
    };
    assert!(matches!(
        group.propose(all_in_sync).await,
        Outcome::SyncStateSetAltered {
            sync_state_set_epoch: 2,
            ..
        }
    ));

    let crashed = group.leader(None).await;
    let node = group.nodes.remove(&crashed).expect("leader");
    group.router.remove(crashed);
    node.shutdown().await;
    let successor = group.leader(Some(crashed)).await;
    assert_ne!(successor, crashed);
    // The broker set's master dies too: the new controller leader elects the in-sync replica
    // with the most data.
    let out = group.propose(elect(&[2, 3])).await;
    assert!(
        matches!(
            out,
            Outcome::Elected {
                master: 3,
                master_epoch: 2,
                still_exist: false,
                ..
            }
        ),
        "{out:?}"
    );

    let restarted = start_node(&group.router, &group.root, crashed).await;
    group.nodes.insert(crashed, restarted);
    let state = group.converged().await;
    let set = state.broker_set("broker-a").expect("registered");
    assert_eq!((set.master, set.master_epoch, set.replicas.len()), (Some(3), 2, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_commits_nothing_and_the_majority_moves_on() {
    let group = Group::start().await;
    for id in 1..=2 {
        group.propose(apply_id(id)).await;
    }
    let first = elect_by(Some(1), &[1]);
    group.propose(first).await;

    let old = group.leader(None).await;
    group.router.isolate(old);
    let refused = group.nodes[&old].propose(elect(&[2])).await;
    assert!(refused.is_err(), "a leader cut off from the majority must not commit: {refused:?}");
    let majority: Vec<u64> = group.nodes.keys().copied().filter(|id| *id != old).collect();
    let new_leader = wait_for_majority_leader(&group, &majority).await;
    let out = group.nodes[&new_leader]
        .propose(elect(&[2]))
        .await
        .expect("majority commits")
        .expect("accepted");
    assert_eq!(
        out,
        Outcome::NoMaster { master_epoch: 2 },
        "2 is not in sync: the set is left without a master"
    );

    group.router.heal();
    let state = group.converged().await;
    let set = state.broker_set("broker-a").expect("registered");
    // Had the isolated leader's identical proposal applied too, the epoch would be 3.
    assert_eq!(
        (set.master, set.master_epoch),
        (None, 2),
        "the isolated leader's proposal never applied"
    );
}

async fn wait_for_majority_leader(group: &Group, majority: &[u64]) -> u64 {
    for _ in 0..200 {
        let leaders: Vec<Option<u64>> = majority.iter().map(|id| group.nodes[id].leader()).collect();
        if let Some(Some(l)) = leaders.first()
            && majority.contains(l)
            && leaders.iter().all(|x| x == &Some(*l))
        {
            return *l;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the majority elected no leader within 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_purge_the_log_and_a_whole_group_restarts_with_its_state() {
    let group = Group::start().await;
    group.propose(apply_id(1)).await;
    // Enough changes for several snapshots (one every 20 entries).
    for round in 0..30u64 {
        let cmd = Command::RegisterBroker {
            broker_name: "broker-a".into(),
            broker_id: 1,
            address: format!("127.0.0.1:{}", 20_000 + round),
        };
        group.propose(cmd).await;
    }
    let before = group.converged().await;
    let root = group.root.clone();
    for node in group.nodes.values() {
        node.shutdown().await;
    }
    for id in 1..=3 {
        assert!(
            root.join(format!("c{id}/raft-snapshot")).exists(),
            "controller {id} wrote a snapshot"
        );
    }
    let router = Router::default();
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        nodes.insert(id, start_node(&router, &root, id).await);
    }
    let restarted = Group {
        _dir: group._dir,
        root,
        router,
        nodes,
    };
    restarted.leader(None).await;
    let after = restarted.converged().await;
    assert_eq!(after, before);
    let set = after.broker_set("broker-a").expect("registered");
    assert_eq!(set.replicas[&1].address, "127.0.0.1:20029");
}
