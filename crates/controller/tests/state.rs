//! The controller's state machine on its own: registration, election order, SyncStateSet
//! changes fenced by epochs, and (property test) that no sequence of commands ever gives one
//! epoch two masters or elects outside the SyncStateSet unless allowed.

use std::collections::{BTreeMap, BTreeSet};

use petrel_controller::{Candidate, Command, ControllerState, Outcome};
use petrel_protocol::response_code as code;
use proptest::prelude::*;

const SET: &str = "broker-a";

fn apply_id(state: &mut ControllerState, id: u64) {
    let out = state.apply(Command::ApplyBrokerId {
        cluster: "DefaultCluster".into(),
        broker_name: SET.into(),
        broker_id: id,
        register_check_code: format!("127.0.0.1:{};uuid-{id}", 10_000 + id),
    });
    assert_eq!(out, Ok(Outcome::BrokerIdApplied));
}

fn live(id: u64, epoch: u32, max_offset: u64) -> Candidate {
    Candidate {
        broker_id: id,
        epoch,
        max_offset,
        priority: 0,
    }
}

fn elect(state: &mut ControllerState, requester: Option<u64>, alive: Vec<Candidate>) -> Result<Outcome, petrel_controller::Refused> {
    state.apply(Command::ElectMaster {
        broker_name: SET.into(),
        requester,
        designate: false,
        unclean: false,
        alive,
    })
}

fn alter(state: &mut ControllerState, master: u64, new_set: &[u64], alive: &[u64]) -> Result<Outcome, petrel_controller::Refused> {
    let set = state.broker_set(SET).expect("registered").clone();
    state.apply(Command::AlterSyncStateSet {
        broker_name: SET.into(),
        master,
        master_epoch: set.master_epoch,
        sync_state_set_epoch: set.sync_state_set_epoch,
        new_set: new_set.iter().copied().collect(),
        alive: alive.iter().copied().collect(),
    })
}

/// A set of three with broker 1 master and everyone in sync.
fn three_in_sync() -> ControllerState {
    let mut state = ControllerState::default();
    for id in 1..=3 {
        apply_id(&mut state, id);
    }
    assert!(matches!(
        elect(&mut state, Some(1), vec![live(1, 0, 0)]),
        Ok(Outcome::Elected {
            master: 1,
            master_epoch: 1,
            ..
        })
    ));
    assert!(alter(&mut state, 1, &[1, 2, 3], &[1, 2, 3]).is_ok());
    state
}

#[test]
fn broker_ids_are_handed_out_once_and_given_back_to_their_owner() {
    let mut state = ControllerState::default();
    assert_eq!(state.next_broker_id(SET), 1);
    let refused = state.apply(Command::ApplyBrokerId {
        cluster: "c".into(),
        broker_name: SET.into(),
        broker_id: 2,
        register_check_code: "a;1".into(),
    });
    assert_eq!(
        refused.map_err(|r| r.code),
        Err(code::CONTROLLER_BROKER_ID_INVALID),
        "a new set starts at id 1"
    );
    apply_id(&mut state, 1);
    apply_id(&mut state, 1);
    assert_eq!(state.next_broker_id(SET), 2);
    let stolen = state.apply(Command::ApplyBrokerId {
        cluster: "c".into(),
        broker_name: SET.into(),
        broker_id: 1,
        register_check_code: "127.0.0.9:1;other".into(),
    });
    assert_eq!(stolen.map_err(|r| r.code), Err(code::CONTROLLER_BROKER_ID_INVALID));
}

#[test]
fn the_first_election_takes_the_requester_and_later_ones_keep_a_live_master() {
    let mut state = three_in_sync();
    let kept = elect(&mut state, Some(2), vec![live(1, 1, 100), live(2, 1, 100)]);
    assert!(
        matches!(
            kept,
            Ok(Outcome::Elected {
                master: 1,
                master_epoch: 1,
                still_exist: true,
                ..
            })
        ),
        "{kept:?}"
    );
}

#[test]
fn a_dead_master_is_replaced_by_the_in_sync_replica_with_the_most_data() {
    let mut state = three_in_sync();
    let out = elect(&mut state, None, vec![live(2, 1, 500), live(3, 1, 900)]);
    let Ok(Outcome::Elected {
        master,
        master_epoch,
        sync_state_set,
        sync_state_set_epoch,
        still_exist,
        address,
    }) = out
    else {
        panic!("{out:?}");
    };
    assert_eq!((master, master_epoch, still_exist), (3, 2, false));
    assert_eq!(address, "127.0.0.1:10003");
    assert_eq!(sync_state_set, BTreeSet::from([3]), "a new master starts alone in its SyncStateSet");
    assert_eq!(sync_state_set_epoch, 3);
}

#[test]
fn the_epoch_outranks_the_offset_and_priority_breaks_ties() {
    let mut state = three_in_sync();
    let out = elect(
        &mut state,
        None,
        vec![
            live(2, 1, 900),
            Candidate {
                broker_id: 3,
                epoch: 1,
                max_offset: 900,
                priority: -1,
            },
        ],
    );
    assert!(
        matches!(out, Ok(Outcome::Elected { master: 3, .. })),
        "priority -1 beats 0: {out:?}"
    );
    let mut state = three_in_sync();
    let out = elect(&mut state, None, vec![live(2, 2, 10), live(3, 1, 900)]);
    assert!(
        matches!(out, Ok(Outcome::Elected { master: 2, .. })),
        "a newer epoch beats more bytes: {out:?}"
    );
}

#[test]
fn a_replica_outside_the_sync_state_set_wins_only_when_unclean_election_is_allowed() {
    let mut state = three_in_sync();
    assert!(alter(&mut state, 1, &[1, 2], &[1, 2, 3]).is_ok());
    let clean = elect(&mut state, None, vec![live(3, 1, 900)]);
    assert_eq!(
        clean,
        Ok(Outcome::NoMaster { master_epoch: 2 }),
        "3 is not in sync: no master, and the epoch moves"
    );
    let by_broker = elect(&mut state, Some(3), vec![live(3, 1, 900)]);
    assert_eq!(by_broker.map_err(|r| r.code), Err(code::CONTROLLER_ELECT_MASTER_FAILED));
    let unclean = state.apply(Command::ElectMaster {
        broker_name: SET.into(),
        requester: None,
        designate: false,
        unclean: true,
        alive: vec![live(3, 1, 900)],
    });
    assert!(
        matches!(
            unclean,
            Ok(Outcome::Elected {
                master: 3,
                master_epoch: 3,
                ..
            })
        ),
        "{unclean:?}"
    );
}

#[test]
fn a_sync_state_set_change_from_a_fenced_master_is_refused_and_changes_nothing() {
    let mut state = three_in_sync();
    let before = state.broker_set(SET).cloned();
    let stale_epoch = state.apply(Command::AlterSyncStateSet {
        broker_name: SET.into(),
        master: 1,
        master_epoch: 0,
        sync_state_set_epoch: before.as_ref().map_or(0, |s| s.sync_state_set_epoch),
        new_set: BTreeSet::from([1]),
        alive: BTreeSet::from([1]),
    });
    assert_eq!(stale_epoch.map_err(|r| r.code), Err(code::CONTROLLER_FENCED_MASTER_EPOCH));
    assert_eq!(
        alter(&mut state, 2, &[2], &[2]).map_err(|r| r.code),
        Err(code::CONTROLLER_INVALID_MASTER)
    );
    assert_eq!(
        alter(&mut state, 1, &[2, 3], &[2, 3]).map_err(|r| r.code),
        Err(code::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED)
    );
    assert_eq!(
        alter(&mut state, 1, &[1, 9], &[1, 9]).map_err(|r| r.code),
        Err(code::CONTROLLER_INVALID_REPLICAS)
    );
    assert_eq!(
        alter(&mut state, 1, &[1, 2], &[1]).map_err(|r| r.code),
        Err(code::CONTROLLER_BROKER_NOT_ALIVE)
    );
    assert_eq!(state.broker_set(SET).cloned(), before, "refusals leave the state as it was");
}

#[test]
fn the_state_survives_a_serde_round_trip() {
    let state = three_in_sync();
    let bytes = serde_json::to_vec(&state).expect("encode");
    let back: ControllerState = serde_json::from_slice(&bytes).expect("decode");
    assert_eq!(back, state);
}

fn arb_command() -> impl Strategy<Value = Command> {
    let ids = || proptest::collection::btree_set(1u64..=4, 0..=4);
    let candidates = proptest::collection::vec((1u64..=4, 0u32..4, 0u64..3, -1i32..=1), 0..=4).prop_map(|v| {
        v.into_iter()
            .map(|(broker_id, epoch, max_offset, priority)| Candidate {
                broker_id,
                epoch,
                max_offset,
                priority,
            })
            .collect()
    });
    prop_oneof![
        (1u64..=4).prop_map(|id| Command::ApplyBrokerId {
            cluster: "c".into(),
            broker_name: SET.into(),
            broker_id: id,
            register_check_code: format!("127.0.0.1:{id};u{id}"),
        }),
        (proptest::option::of(1u64..=4), any::<bool>(), any::<bool>(), candidates).prop_map(|(requester, designate, unclean, alive)| {
            Command::ElectMaster {
                broker_name: SET.into(),
                requester,
                designate,
                unclean,
                alive,
            }
        }),
        (1u64..=4, 0u32..6, 0u32..8, ids(), ids()).prop_map(|(master, master_epoch, sync_state_set_epoch, new_set, alive)| {
            Command::AlterSyncStateSet {
                broker_name: SET.into(),
                master,
                master_epoch,
                sync_state_set_epoch,
                new_set,
                alive,
            }
        }),
        (proptest::option::of(ids()), any::<bool>(), ids()).prop_map(|(broker_ids, clean_living, alive)| Command::CleanBrokerData {
            broker_name: SET.into(),
            clean_living,
            alive,
            broker_ids
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// One epoch, one master; epochs only grow; a clean election picks from the SyncStateSet.
    #[test]
    fn no_epoch_ever_has_two_masters(commands in proptest::collection::vec(arb_command(), 1..60)) {
        let mut state = ControllerState::default();
        let mut master_of_epoch: BTreeMap<u32, u64> = BTreeMap::new();
        let mut last_epoch = 0u32;
        for command in commands {
            let before = state.broker_set(SET).cloned();
            let clean_elect = matches!(&command, Command::ElectMaster { unclean: false, .. });
            let out = state.apply(command);
            if out.is_err() {
                prop_assert_eq!(state.broker_set(SET).cloned(), before, "a refusal changed the state");
                continue;
            }
            let Some(after) = state.broker_set(SET) else {
                // The set is forgotten: a set registered again under the name starts afresh.
                master_of_epoch.clear();
                last_epoch = 0;
                continue;
            };
            prop_assert!(after.master_epoch >= last_epoch, "epoch went back");
            last_epoch = after.master_epoch;
            if let Some(master) = after.master {
                let first = *master_of_epoch.entry(after.master_epoch).or_insert(master);
                prop_assert_eq!(first, master, "two masters in epoch {}", after.master_epoch);
                if let (Some(Outcome::Elected { still_exist: false, .. }), Some(before)) = (out.ok(), before)
                    && clean_elect
                    && before.master_epoch > 0
                {
                    prop_assert!(before.sync_state_set.contains(&master), "clean election outside the SyncStateSet");
                }
            }
        }
    }
}
