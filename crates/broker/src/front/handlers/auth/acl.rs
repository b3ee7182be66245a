//! AUTH_CREATE_ACL (3006), AUTH_UPDATE_ACL (3007) — both merge the body's entries into the
//! subject's policies by resource, as in RocketMQ — AUTH_DELETE_ACL (3008), AUTH_GET_ACL (3009)
//! and AUTH_LIST_ACL (3010).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use petrel_protocol::header::{AclRequestHeader, ListAclsRequestHeader};
use std::sync::Arc;

use petrel_auth::AclInfo;
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Reply, error};

use super::{change, found, given, refusal, store};
use crate::broker::Broker;

/// CREATE and UPDATE.
pub(crate) fn put<C: Acl>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: AclRequestHeader, request: RemotingCommand) -> Reply {
    let info: AclInfo = match serde_json::from_slice(&request.body) {
        Ok(i) => i,
        Err(e) => {
            return Reply::Now(error(
                &request,
                resp::NO_PERMISSION,
                format!("The body of acl is null or invalid: {e}"),
            ));
        }
    };
    let subject = given(h.subject.as_ref()).map(str::to_owned);
    let store = store(ctx);
    change(request, move || store.put_acl(&info, subject.as_deref()))
}

pub(crate) fn delete<C: Acl>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: AclRequestHeader, request: RemotingCommand) -> Reply {
    let subject = given(h.subject.as_ref()).unwrap_or_default().to_owned();
    let policy_type = given(h.policy_type.as_ref()).map(str::to_owned);
    let resource = given(h.resource.as_ref()).map(str::to_owned);
    let store = store(ctx);
    change(request, move || {
        store.delete_acl(&subject, policy_type.as_deref(), resource.as_deref())
    })
}

pub(crate) fn get<C: Acl>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: AclRequestHeader, request: RemotingCommand) -> Reply {
    match ctx.access().store.get_acl(given(h.subject.as_ref()).unwrap_or_default()) {
        Ok(acl) => found(&request, acl.as_ref()),
        Err(e) => Reply::Now(refusal(&request, &e)),
    }
}

pub(crate) fn list<C: Acl>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: ListAclsRequestHeader, request: RemotingCommand) -> Reply {
    let acls = ctx
        .access()
        .store
        .list_acls(given(h.subject_filter.as_ref()), given(h.resource_filter.as_ref()));
    found(&request, (!acls.is_empty()).then_some(&acls))
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::AUTH_CREATE_ACL,
        rule: Rule::Cluster(UPDATE),
        handle: &Typed::new(put::<Broker>),
    },
    Unit {
        code: rc::AUTH_UPDATE_ACL,
        rule: Rule::Cluster(UPDATE),
        handle: &Typed::new(put::<Broker>),
    },
    Unit {
        code: rc::AUTH_DELETE_ACL,
        rule: Rule::Cluster(UPDATE),
        handle: &Typed::new(delete::<Broker>),
    },
    Unit {
        code: rc::AUTH_GET_ACL,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(get::<Broker>),
    },
    Unit {
        code: rc::AUTH_LIST_ACL,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(list::<Broker>),
    },
];
