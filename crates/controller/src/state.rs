//! The controller's state: per broker set, its replicas, its master, `masterEpoch` and the
//! SyncStateSet with its epoch. This is the Raft state machine; every change is a [`Command`]
//! that the log orders, and [`ControllerState::apply`] is a pure function of the state and the
//! command, so every controller that applies the same log holds the same state.
//!
//! Why commands carry the leader's observations: RocketMQ's controller checks a request
//! against its in-memory state and then appends the resulting event, so two requests checked
//! against the same state can both pass and both apply (an elect and an alter racing). Here
//! the check happens inside `apply`, in log order; what only the leader knows (which brokers
//! heartbeat, their epochs and offsets) travels in the command, so applying stays
//! deterministic.

use std::collections::{BTreeMap, BTreeSet};

use petrel_protocol::response_code as code;
use serde::{Deserialize, Serialize};

/// The id a broker set's first broker gets (RocketMQ's `FIRST_BROKER_CONTROLLER_ID`).
pub const FIRST_BROKER_ID: u64 = 1;

/// Bounds on what one state holds, so a client cannot grow the state machine without limit.
pub const MAX_BROKER_SETS: usize = 4096;
/// Replicas one broker set may register.
pub const MAX_REPLICAS_PER_SET: usize = 64;

/// A broker known to its set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    /// The broker's address (`host:port`), as it last registered.
    pub address: String,
    /// `address;uuid` as RocketMQ's brokers send it: the same broker asking again gets its id back.
    pub register_check_code: String,
}

/// One broker set (one `brokerName`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerSet {
    /// The cluster the set's first broker named.
    pub cluster: String,
    /// The set's `brokerName`.
    pub broker_name: String,
    /// The registered brokers, by broker id.
    pub replicas: BTreeMap<u64, Replica>,
    /// One above the highest id handed out: what the next new broker should ask for.
    pub next_broker_id: u64,
    /// The master's broker id; `None` while the set has no master.
    pub master: Option<u64>,
    /// Grows by one at every election, failed ones included, and never goes back.
    pub master_epoch: u32,
    /// The ids of the replicas in sync with the master, the master included; only these may be elected cleanly.
    pub sync_state_set: BTreeSet<u64>,
    /// Grows by one at every change of `sync_state_set`; a master's alter request must name the current one.
    pub sync_state_set_epoch: u32,
}

/// What the leader saw of one live broker when it proposed an election.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// The broker's id in its set.
    pub broker_id: u64,
    /// The last epoch in the broker's epoch file.
    pub epoch: u32,
    /// The broker's max commit-log offset; the highest wins among equal epochs.
    pub max_offset: u64,
    /// `brokerElectionPriority`: lower wins among equals.
    pub priority: i32,
}

/// A change to the controller's state, in log order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// `CONTROLLER_APPLY_BROKER_ID`: a broker claims an id in its set.
    ApplyBrokerId {
        /// The broker's cluster, recorded when this creates the set.
        cluster: String,
        /// The set the broker belongs to.
        broker_name: String,
        /// The id it claims.
        broker_id: u64,
        /// `address;uuid`: the same broker claiming the id again is let through.
        register_check_code: String,
    },
    /// `CONTROLLER_REGISTER_BROKER`: a registered broker comes back, perhaps at a new address.
    RegisterBroker {
        /// The broker's set.
        broker_name: String,
        /// The broker's id in the set.
        broker_id: u64,
        /// The address it now serves on.
        address: String,
    },
    /// `CONTROLLER_ELECT_MASTER`, from a broker (`requester`) or from the controller when a
    /// master stopped heartbeating (`requester: None`).
    ElectMaster {
        /// The set that needs a master.
        broker_name: String,
        /// The broker that asked, or `None` when the controller's scan did.
        requester: Option<u64>,
        /// The requester must win if it is live (`designateElect`).
        designate: bool,
        /// Fall back to replicas outside the SyncStateSet (`enableElectUncleanMaster`).
        unclean: bool,
        /// Every broker of the set the leader saw heartbeat in time.
        alive: Vec<Candidate>,
    },
    /// `CONTROLLER_ALTER_SYNC_STATE_SET`, from the master.
    AlterSyncStateSet {
        /// The set whose SyncStateSet changes.
        broker_name: String,
        /// The broker id of the master that asks; refused unless it is the set's master.
        master: u64,
        /// The master epoch the master holds; refused (fenced) unless current.
        master_epoch: u32,
        /// The SyncStateSet epoch the master holds; refused (fenced) unless current.
        sync_state_set_epoch: u32,
        /// The SyncStateSet the master wants: registered, live replicas including itself.
        new_set: BTreeSet<u64>,
        /// The ids of the set's brokers the leader saw heartbeat in time.
        alive: BTreeSet<u64>,
    },
    /// `CLEAN_BROKER_DATA`: forget some replicas of a set, or the whole set. Unless
    /// `clean_living`, a live broker (in `alive`, as the leader saw) or a set with a master is
    /// refused, as RocketMQ refuses it.
    CleanBrokerData {
        /// The set to clean.
        broker_name: String,
        /// The replicas to forget; `None` forgets the whole set.
        broker_ids: Option<BTreeSet<u64>>,
        /// Forget brokers even while they are alive (`isCleanLivingBroker`).
        clean_living: bool,
        /// The ids of the set's brokers the leader saw heartbeat in time.
        alive: BTreeSet<u64>,
    },
}

/// What a command did, as the broker's answer needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The broker holds the id it asked for.
    BrokerIdApplied,
    /// The broker's address is recorded; its set as it stands now.
    Registered {
        /// The master's id and address, if the set has one.
        master: Option<(u64, String)>,
        /// The set's master epoch.
        master_epoch: u32,
        /// The set's SyncStateSet.
        sync_state_set: BTreeSet<u64>,
        /// The SyncStateSet's epoch.
        sync_state_set_epoch: u32,
    },
    /// A new master, or (`still_exist`) the old one kept.
    Elected {
        /// The master's broker id.
        master: u64,
        /// The master's address.
        address: String,
        /// The set's master epoch after the election.
        master_epoch: u32,
        /// The SyncStateSet after the election (just the master when it is new).
        sync_state_set: BTreeSet<u64>,
        /// The SyncStateSet's epoch after the election.
        sync_state_set_epoch: u32,
        /// Whether the old master was kept rather than a new one chosen.
        still_exist: bool,
    },
    /// No master could be elected: the set has none now.
    NoMaster {
        /// The set's master epoch, moved on so that the old master is fenced.
        master_epoch: u32,
    },
    /// The master's new SyncStateSet took effect.
    SyncStateSetAltered {
        /// The SyncStateSet now.
        sync_state_set: BTreeSet<u64>,
        /// Its epoch, one above the one the master named.
        sync_state_set_epoch: u32,
    },
    /// The replicas (or the whole set) are forgotten.
    Cleaned,
}

/// A refusal, with the RocketMQ response code the broker expects for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{remark} (code {code})")]
pub struct Refused {
    /// The RocketMQ response code to answer with.
    pub code: i32,
    /// Why, as the answer's remark.
    pub remark: String,
}

fn refuse(code: i32, remark: impl Into<String>) -> Refused {
    Refused {
        code,
        remark: remark.into(),
    }
}

/// Every broker set the controller knows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerState {
    sets: BTreeMap<String, BrokerSet>,
}

impl ControllerState {
    /// The set named `broker_name`, if registered.
    pub fn broker_set(&self, broker_name: &str) -> Option<&BrokerSet> {
        self.sets.get(broker_name)
    }

    /// Every set, by name.
    pub fn broker_sets(&self) -> impl Iterator<Item = &BrokerSet> {
        self.sets.values()
    }

    /// The id a new broker of `broker_name` should ask for (`CONTROLLER_GET_NEXT_BROKER_ID`).
    pub fn next_broker_id(&self, broker_name: &str) -> u64 {
        self.sets.get(broker_name).map_or(FIRST_BROKER_ID, |s| s.next_broker_id)
    }

    /// Applies one command. A refusal leaves the state exactly as it was.
    pub fn apply(&mut self, command: Command) -> Result<Outcome, Refused> {
        let outcome = match command {
            Command::ApplyBrokerId {
                cluster,
                broker_name,
                broker_id,
                register_check_code,
            } => self.apply_broker_id(cluster, broker_name, broker_id, register_check_code),
            Command::RegisterBroker {
                broker_name,
                broker_id,
                address,
            } => self.register(&broker_name, broker_id, address),
            Command::ElectMaster {
                broker_name,
                requester,
                designate,
                unclean,
                alive,
            } => self.elect(&broker_name, requester, designate, unclean, &alive),
            Command::AlterSyncStateSet {
                broker_name,
                master,
                master_epoch,
                sync_state_set_epoch,
                new_set,
                alive,
            } => self.alter(&broker_name, master, master_epoch, sync_state_set_epoch, new_set, &alive),
            Command::CleanBrokerData {
                broker_name,
                broker_ids,
                clean_living,
                alive,
            } => self.clean(&broker_name, broker_ids, clean_living, &alive),
        };
        self.assert_invariants();
        outcome
    }

    fn apply_broker_id(&mut self, cluster: String, broker_name: String, broker_id: u64, check_code: String) -> Result<Outcome, Refused> {
        let address = check_code.split(';').next().unwrap_or_default().to_owned();
        let replica = Replica {
            address,
            register_check_code: check_code,
        };
        let Some(set) = self.sets.get_mut(&broker_name) else {
            if broker_id != FIRST_BROKER_ID {
                return Err(refuse(
                    code::CONTROLLER_BROKER_ID_INVALID,
                    format!(
                        "broker set {broker_name} is not registered; its first broker must apply for id {FIRST_BROKER_ID}, not {broker_id}"
                    ),
                ));
            }
            if self.sets.len() >= MAX_BROKER_SETS {
                return Err(refuse(
                    code::CONTROLLER_INVALID_REQUEST,
                    format!("the controller holds {MAX_BROKER_SETS} broker sets already"),
                ));
            }
            let set = BrokerSet {
                cluster,
                broker_name: broker_name.clone(),
                replicas: BTreeMap::from([(broker_id, replica)]),
                next_broker_id: broker_id + 1,
                master: None,
                master_epoch: 0,
                sync_state_set: BTreeSet::new(),
                sync_state_set_epoch: 0,
            };
            self.sets.insert(broker_name, set);
            return Ok(Outcome::BrokerIdApplied);
        };
        match set.replicas.get(&broker_id) {
            Some(owner) if owner.register_check_code != replica.register_check_code => Err(refuse(
                code::CONTROLLER_BROKER_ID_INVALID,
                format!(
                    "broker id {broker_id} of {broker_name} belongs to another broker ({})",
                    owner.address
                ),
            )),
            Some(_) => Ok(Outcome::BrokerIdApplied),
            None if set.replicas.len() >= MAX_REPLICAS_PER_SET => Err(refuse(
                code::CONTROLLER_BROKER_ID_INVALID,
                format!("broker set {broker_name} has {MAX_REPLICAS_PER_SET} replicas already"),
            )),
            None => {
                set.replicas.insert(broker_id, replica);
                set.next_broker_id = set.next_broker_id.max(broker_id + 1);
                Ok(Outcome::BrokerIdApplied)
            }
        }
    }

    fn register(&mut self, broker_name: &str, broker_id: u64, address: String) -> Result<Outcome, Refused> {
        let set = self.set_mut(broker_name, code::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)?;
        let Some(replica) = set.replicas.get_mut(&broker_id) else {
            return Err(refuse(
                code::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                format!("broker id {broker_id} is not registered in broker set {broker_name}"),
            ));
        };
        replica.address = address;
        let master = set.master.map(|id| (id, set.replicas[&id].address.clone()));
        Ok(Outcome::Registered {
            master,
            master_epoch: set.master_epoch,
            sync_state_set: set.sync_state_set.clone(),
            sync_state_set_epoch: set.sync_state_set_epoch,
        })
    }

    fn elect(
        &mut self,
        broker_name: &str,
        requester: Option<u64>,
        designate: bool,
        unclean: bool,
        alive: &[Candidate],
    ) -> Result<Outcome, Refused> {
        let set = self.set_mut(broker_name, code::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)?;
        let first_election = set.master.is_none() && set.master_epoch == 0;
        let chosen = match requester.filter(|id| first_election && set.replicas.contains_key(id)) {
            Some(first) => Some(first),
            None => choose_master(set, requester.filter(|_| designate), unclean, alive),
        };
        if let Some(old) = set.master.filter(|old| chosen == Some(*old)) {
            return Ok(Outcome::Elected {
                master: old,
                address: set.replicas[&old].address.clone(),
                master_epoch: set.master_epoch,
                sync_state_set: set.sync_state_set.clone(),
                sync_state_set_epoch: set.sync_state_set_epoch,
                still_exist: true,
            });
        }
        let Some(master) = chosen else {
            if requester.is_some() {
                return Err(refuse(
                    code::CONTROLLER_ELECT_MASTER_FAILED,
                    format!("no replica of {broker_name} can be master now"),
                ));
            }
            // The controller asked because the master stopped: the set has no master from now
            // on, and the epoch moves so that the old master's epoch is fenced.
            set.master = None;
            set.master_epoch += 1;
            return Ok(Outcome::NoMaster {
                master_epoch: set.master_epoch,
            });
        };
        set.master = Some(master);
        set.master_epoch += 1;
        set.sync_state_set = BTreeSet::from([master]);
        set.sync_state_set_epoch += 1;
        Ok(Outcome::Elected {
            master,
            address: set.replicas[&master].address.clone(),
            master_epoch: set.master_epoch,
            sync_state_set: set.sync_state_set.clone(),
            sync_state_set_epoch: set.sync_state_set_epoch,
            still_exist: false,
        })
    }

    fn alter(
        &mut self,
        broker_name: &str,
        master: u64,
        master_epoch: u32,
        sync_state_set_epoch: u32,
        new_set: BTreeSet<u64>,
        alive: &BTreeSet<u64>,
    ) -> Result<Outcome, Refused> {
        let set = self.set_mut(broker_name, code::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED)?;
        if set.master != Some(master) {
            return Err(refuse(
                code::CONTROLLER_INVALID_MASTER,
                format!("the master of {broker_name} is {:?}, not {master}", set.master),
            ));
        }
        if set.master_epoch != master_epoch {
            return Err(refuse(
                code::CONTROLLER_FENCED_MASTER_EPOCH,
                format!("the master epoch of {broker_name} is {}, not {master_epoch}", set.master_epoch),
            ));
        }
        if set.sync_state_set_epoch != sync_state_set_epoch {
            return Err(refuse(
                code::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                format!(
                    "the SyncStateSet epoch of {broker_name} is {}, not {sync_state_set_epoch}",
                    set.sync_state_set_epoch
                ),
            ));
        }
        if new_set == set.sync_state_set {
            return Err(refuse(
                code::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                "the new SyncStateSet equals the current one",
            ));
        }
        if let Some(unknown) = new_set.iter().find(|id| !set.replicas.contains_key(id)) {
            return Err(refuse(
                code::CONTROLLER_INVALID_REPLICAS,
                format!("replica {unknown} is not registered in {broker_name}"),
            ));
        }
        if let Some(dead) = new_set.iter().find(|id| !alive.contains(id)) {
            return Err(refuse(
                code::CONTROLLER_BROKER_NOT_ALIVE,
                format!("replica {dead} of {broker_name} is not alive"),
            ));
        }
        if !new_set.contains(&master) {
            return Err(refuse(
                code::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                format!("the new SyncStateSet leaves out the master {master}"),
            ));
        }
        set.sync_state_set = new_set;
        set.sync_state_set_epoch += 1;
        Ok(Outcome::SyncStateSetAltered {
            sync_state_set: set.sync_state_set.clone(),
            sync_state_set_epoch: set.sync_state_set_epoch,
        })
    }

    fn clean(
        &mut self,
        broker_name: &str,
        broker_ids: Option<BTreeSet<u64>>,
        clean_living: bool,
        alive: &BTreeSet<u64>,
    ) -> Result<Outcome, Refused> {
        let set = self.set_mut(broker_name, code::CONTROLLER_INVALID_CLEAN_BROKER_METADATA)?;
        if !clean_living {
            let living = match &broker_ids {
                None => set.master,
                Some(ids) => ids.iter().copied().find(|id| alive.contains(id)),
            };
            if let Some(id) = living {
                return Err(refuse(
                    code::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                    format!("broker {id} of {broker_name} is still alive; clean it with isCleanLivingBroker=true"),
                ));
            }
        }
        let Some(ids) = broker_ids else {
            self.sets.remove(broker_name);
            return Ok(Outcome::Cleaned);
        };
        if let Some(master) = set.master.filter(|m| ids.contains(m)) {
            return Err(refuse(
                code::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                format!("broker {master} is the master of {broker_name}"),
            ));
        }
        set.replicas.retain(|id, _| !ids.contains(id));
        if !set.sync_state_set.is_disjoint(&ids) {
            set.sync_state_set.retain(|id| !ids.contains(id));
            set.sync_state_set_epoch += 1;
        }
        if set.replicas.is_empty() {
            self.sets.remove(broker_name);
        }
        Ok(Outcome::Cleaned)
    }

    fn set_mut(&mut self, broker_name: &str, missing_code: i32) -> Result<&mut BrokerSet, Refused> {
        self.sets
            .get_mut(broker_name)
            .ok_or_else(|| refuse(missing_code, format!("broker set {broker_name} is not registered")))
    }

    /// What every state must satisfy; checked after every command, in production too.
    fn assert_invariants(&self) {
        assert!(self.sets.len() <= MAX_BROKER_SETS, "broker sets bounded");
        for set in self.sets.values() {
            assert!(
                !set.replicas.is_empty() && set.replicas.len() <= MAX_REPLICAS_PER_SET,
                "{}: replicas bounded",
                set.broker_name
            );
            assert!(
                set.replicas.keys().all(|id| *id < set.next_broker_id),
                "{}: ids below next_broker_id",
                set.broker_name
            );
            assert!(
                set.sync_state_set.iter().all(|id| set.replicas.contains_key(id)),
                "{}: SyncStateSet of replicas",
                set.broker_name
            );
            if let Some(master) = set.master {
                assert!(
                    set.sync_state_set.contains(&master),
                    "{}: the master is in the SyncStateSet",
                    set.broker_name
                );
                assert!(set.master_epoch > 0, "{}: a master has an epoch", set.broker_name);
            }
        }
    }
}

/// RocketMQ's election order: the SyncStateSet first (the unclean fallback to every replica
/// only when allowed); the old master while it is live; a designated broker if live; else the
/// highest (epoch, max offset), then the lowest priority, then the lowest id.
fn choose_master(set: &BrokerSet, prefer: Option<u64>, unclean: bool, alive: &[Candidate]) -> Option<u64> {
    let from = |pool: &dyn Fn(u64) -> bool| -> Option<u64> {
        let live: Vec<&Candidate> = alive
            .iter()
            .filter(|c| pool(c.broker_id) && set.replicas.contains_key(&c.broker_id))
            .collect();
        if live.is_empty() {
            return None;
        }
        let is_live = |id: u64| live.iter().any(|c| c.broker_id == id);
        if let Some(old) = set.master.filter(|m| is_live(*m) && prefer.is_none_or(|p| p == *m)) {
            return Some(old);
        }
        if let Some(wanted) = prefer {
            return is_live(wanted).then_some(wanted);
        }
        live.iter()
            .min_by(|a, b| {
                b.epoch
                    .cmp(&a.epoch)
                    .then(b.max_offset.cmp(&a.max_offset))
                    .then(a.priority.cmp(&b.priority))
                    .then(a.broker_id.cmp(&b.broker_id))
            })
            .map(|c| c.broker_id)
    };
    from(&|id| set.sync_state_set.contains(&id)).or_else(|| if unclean { from(&|_| true) } else { None })
}
