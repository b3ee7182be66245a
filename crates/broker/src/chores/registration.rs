//! Registration with name servers: REGISTER_BROKER every `registerNameServerPeriod` and after
//! every topic change, UNREGISTER_BROKER on shutdown — to the name server in this process, or
//! to external ones over one long-lived connection each, as RocketMQ's brokers keep them
//! (RocketMQ's name server unregisters a broker whose connection closes).
//!
//! Owns: the connections to name servers and the coalescing of registrations (many topic
//! changes at once cost one registration). Must never: wait on a name server without a
//! deadline, or let an unreachable name server stop the others or the broker.

use std::sync::{Arc, Weak};
use std::time::Duration;

use petrel_namesrv::NameServer;
use petrel_protocol::RemotingCommand;
use petrel_protocol::body::{RegisterBrokerBody, register_body_crc32};
use petrel_protocol::codes::{request_code as rc, response_code as resp};
use petrel_protocol::header::{CommandHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader};
use petrel_remoting::{Connection, ConnectionLimits, IgnoreRequests};

use super::ChoreError;
use crate::persist::{Coalesced, Job};
use crate::services::RouteAnnouncer;
use crate::services::topics::TopicService;

/// How long one registration may take per name server.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(6);
const UNREGISTER_TIMEOUT: Duration = Duration::from_secs(3);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Name servers expire a broker after 120 s of silence; the connection must outlive that.
const NAME_SERVER_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);

/// Where REGISTER_BROKER goes: the name server in this process, or external ones over TCP.
pub enum NameServers {
    /// The name server running in this process, called directly.
    Embedded(Arc<NameServer>),
    /// External name servers by `host:port`, each reached over its own connection.
    External(Vec<String>),
}

/// What the broker says about itself when it registers.
pub struct Identity {
    pub cluster: String,
    pub broker_name: String,
    /// The id to register under, which a controller-mode broker's role changes.
    pub role: Arc<crate::role::Role>,
    pub broker_addr: String,
    pub ha_server_addr: String,
}

/// One external name server and the connection to it (made again when it died).
struct Endpoint {
    addr: String,
    conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
}

impl Endpoint {
    async fn call(&self, request: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, ChoreError> {
        let mut slot = self.conn.lock().await;
        let conn = if slot.as_ref().is_none_or(|c| c.is_closed()) {
            let limits = ConnectionLimits {
                idle_timeout: NAME_SERVER_IDLE_TIMEOUT,
                ..ConnectionLimits::default()
            };
            let conn = petrel_remoting::connect(&self.addr, CONNECT_TIMEOUT, limits, Arc::new(IgnoreRequests))
                .await
                .map_err(ChoreError::call(&self.addr))?;
            *slot = Some(conn.clone());
            conn
        } else {
            slot.clone().ok_or_else(|| ChoreError::Unusable("no connection".into()))?
        };
        drop(slot);
        let answer = conn.call(request, timeout).await;
        if answer.is_err() {
            // A timed-out or broken connection is replaced on the next call.
            conn.shutdown();
        }
        answer.map_err(ChoreError::call(&self.addr))
    }
}

enum Targets {
    Embedded(Arc<NameServer>),
    External(Vec<Endpoint>),
}

/// A slave's master, as the name server's answer to its registration names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnedMaster {
    /// Where clients and the slave's metadata sync reach the master.
    pub addr: String,
    /// The master's HA server.
    pub ha_addr: String,
}

/// Registers the broker with its name servers, coalescing the registrations many topic changes
/// ask for, and remembers the master a slave's registration learns of.
pub struct Registrar {
    identity: Identity,
    targets: Targets,
    topics: Weak<TopicService>,
    work: Arc<Coalesced>,
    learned: parking_lot::Mutex<Option<LearnedMaster>>,
    /// Signs what goes to external name servers.
    access: Arc<crate::access::Access>,
}

impl Registrar {
    /// A registrar announcing `identity` and the topics of `topics` to `name_servers`, signing
    /// what goes to external ones with `access`'s inner credentials. Connects on first use.
    #[must_use]
    pub fn new(
        identity: Identity,
        name_servers: NameServers,
        topics: &Arc<TopicService>,
        access: Arc<crate::access::Access>,
    ) -> Arc<Registrar> {
        let targets = match name_servers {
            NameServers::Embedded(ns) => Targets::Embedded(ns),
            NameServers::External(addrs) => Targets::External(
                addrs
                    .into_iter()
                    .map(|addr| Endpoint {
                        addr,
                        conn: tokio::sync::Mutex::new(None),
                    })
                    .collect(),
            ),
        };
        Arc::new(Registrar {
            identity,
            targets,
            topics: Arc::downgrade(topics),
            work: Coalesced::new("registration"),
            learned: parking_lot::Mutex::new(None),
            access,
        })
    }

    /// The name servers, as the operator would write them.
    #[must_use]
    pub fn describe(&self) -> String {
        match &self.targets {
            Targets::Embedded(_) => "embedded".to_owned(),
            Targets::External(e) => e.iter().map(|e| e.addr.as_str()).collect::<Vec<_>>().join(";"),
        }
    }

    /// The REGISTER_BROKER request this broker sends (the full topic table, uncompressed).
    #[must_use]
    pub fn register_request(&self) -> Option<RemotingCommand> {
        if self.identity.role.broker_id() < 0 {
            // Controller mode, before the controllers gave this broker its role.
            return None;
        }
        let topics = self.topics.upgrade()?;
        let body = RegisterBrokerBody {
            filter_server_list: Vec::new(),
            topic_config_serialize_wrapper: topics.snapshot(),
        };
        let body = petrel_protocol::body::to_json(&body).into_bytes();
        let header = RegisterBrokerRequestHeader {
            broker_name: self.identity.broker_name.clone(),
            broker_addr: self.identity.broker_addr.clone(),
            cluster_name: self.identity.cluster.clone(),
            ha_server_addr: self.identity.ha_server_addr.clone(),
            broker_id: self.identity.role.broker_id(),
            heartbeat_timeout_millis: Some(120_000),
            enable_acting_master: Some(false),
            compressed: Some(false),
            body_crc32: Some(register_body_crc32(&body)),
        };
        Some(
            RemotingCommand::request(rc::REGISTER_BROKER, 0)
                .with_ext_fields(header.to_ext())
                .with_body(body),
        )
    }

    fn unregister_request(&self) -> RemotingCommand {
        let header = UnregisterBrokerRequestHeader {
            broker_name: self.identity.broker_name.clone(),
            broker_addr: self.identity.broker_addr.clone(),
            cluster_name: self.identity.cluster.clone(),
            broker_id: self.identity.role.broker_id(),
        };
        RemotingCommand::request(rc::UNREGISTER_BROKER, 0).with_ext_fields(header.to_ext())
    }

    /// The master the name servers last named in answer to this broker's registration (a
    /// slave's; a master is told none).
    #[must_use]
    pub fn learned_master(&self) -> Option<LearnedMaster> {
        self.learned.lock().clone()
    }

    fn learn(&self, answer: &RemotingCommand) {
        let Ok(h) = RegisterBrokerResponseHeader::from_command(answer) else {
            return;
        };
        if let (Some(addr), Some(ha_addr)) = (h.master_addr.filter(|a| !a.is_empty()), h.ha_server_addr.filter(|a| !a.is_empty())) {
            *self.learned.lock() = Some(LearnedMaster { addr, ha_addr });
        }
    }

    /// Registers with every name server now; failures are logged (the next period retries).
    pub async fn register_all(&self) {
        let Some(request) = self.register_request() else { return };
        match &self.targets {
            Targets::Embedded(ns) => match ns.handle(&request) {
                Some(r) if r.code == resp::SUCCESS => self.learn(&r),
                Some(r) => tracing::error!(code = r.code, remark = ?r.remark, "embedded name server refused registration"),
                None => {}
            },
            Targets::External(endpoints) => {
                let mut request = request;
                self.access.sign(&mut request);
                let calls = endpoints.iter().map(|e| e.call(request.clone(), REGISTER_TIMEOUT));
                for (e, result) in endpoints.iter().zip(futures::future::join_all(calls).await) {
                    match result {
                        Ok(r) if r.code == resp::SUCCESS => self.learn(&r),
                        Ok(r) => tracing::warn!(addr = %e.addr, code = r.code, remark = ?r.remark, "name server refused registration"),
                        Err(err) => tracing::warn!(addr = %e.addr, error = %err, "registration failed"),
                    }
                }
            }
        }
    }

    /// UNREGISTER_BROKER to every name server (shutdown).
    pub async fn unregister_all(&self) {
        let mut request = self.unregister_request();
        if matches!(self.targets, Targets::External(_)) {
            self.access.sign(&mut request);
        }
        match &self.targets {
            Targets::Embedded(ns) => {
                ns.handle(&request);
            }
            Targets::External(endpoints) => {
                let calls = endpoints.iter().map(|e| e.call(request.clone(), UNREGISTER_TIMEOUT));
                for (e, result) in endpoints.iter().zip(futures::future::join_all(calls).await) {
                    if let Err(err) = result {
                        tracing::warn!(addr = %e.addr, error = %err, "unregistration failed");
                    }
                }
            }
        }
    }

    /// The worker that runs registrations, and its job.
    pub fn worker(self: &Arc<Self>) -> (Arc<Coalesced>, Job) {
        let me = Arc::downgrade(self);
        let job: Job = Arc::new(move || {
            let me = me.clone();
            Box::pin(async move {
                if let Some(r) = me.upgrade() {
                    r.register_all().await;
                }
                Ok(())
            })
        });
        (self.work.clone(), job)
    }

    /// Asks for a registration without waiting for it (the periodic one).
    pub fn request(&self) {
        self.work.request();
    }
}

impl RouteAnnouncer for Registrar {
    fn announce(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let work = self.work.clone();
        let generation = work.request();
        Box::pin(async move {
            let _ = work.wait(generation).await;
        })
    }
}

/// Registers every `period` until the task is dropped.
pub async fn run_periodic(registrar: Arc<Registrar>, period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        registrar.request();
    }
}
