//! AUTH_CREATE_USER (3001), AUTH_UPDATE_USER (3002), AUTH_DELETE_USER (3003), AUTH_GET_USER
//! (3004), AUTH_LIST_USER (3005). Only a super user may create, change or delete a super user (a
//! request without an `AccessKey`, possible only with authentication off, counts as one, as in
//! RocketMQ). Only a super user is shown passwords (RocketMQ shows them to anyone allowed
//! `Cluster:Get`).

#[allow(unused_imports, reason = "each file's rules name the helpers they need")]
use crate::access::rules::*;
#[allow(unused_imports, reason = "each file's handlers name the services they use")]
use crate::front::context::*;
use crate::front::unit::{Typed, Unit};
use petrel_protocol::codes::request_code as rc;
use petrel_protocol::header::{ListUsersRequestHeader, UserRequestHeader};
use std::sync::Arc;

use petrel_auth::{ACCESS_KEY, AuthError, UserInfo};
use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;
use petrel_remoting::{Connection, Reply, error};

use super::{change, found, given, store};
use crate::broker::Broker;

/// Who signed the request: the signature's `AccessKey`, which the gate has verified.
fn signer(request: &RemotingCommand) -> Option<&str> {
    request.ext(ACCESS_KEY).map(str::trim).filter(|v| !v.is_empty())
}

fn body(request: &RemotingCommand) -> Result<UserInfo, Box<RemotingCommand>> {
    serde_json::from_slice::<UserInfo>(&request.body)
        .map_err(|e| Box::new(error(request, resp::INVALID_PARAMETER, format!("bad UserInfo body: {e}"))))
}

/// The user named by the header with the body's fields.
fn named_user(h: &UserRequestHeader, request: &RemotingCommand) -> Result<UserInfo, Box<RemotingCommand>> {
    let Some(name) = given(h.username.as_ref()) else {
        return Err(Box::new(error(request, resp::INVALID_PARAMETER, "The username is blank")));
    };
    let mut info = body(request)?;
    info.username = Some(name.to_owned());
    Ok(info)
}

fn wants_super(info: &UserInfo) -> bool {
    info.user_type.as_deref().is_some_and(|t| t.trim().eq_ignore_ascii_case("super"))
}

pub(crate) fn create<C: Acl>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: UserRequestHeader, request: RemotingCommand) -> Reply {
    let info = match named_user(&h, &request) {
        Ok(i) => i,
        Err(answer) => return Reply::Now(*answer),
    };
    if wants_super(&info) && !ctx.access().is_super(signer(&request)) {
        return Reply::Now(error(
            &request,
            resp::SYSTEM_ERROR,
            "The super user can only be create by super user",
        ));
    }
    let store = store(ctx);
    change(request, move || store.create_user(&info))
}

pub(crate) fn update<C: Acl>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: UserRequestHeader, request: RemotingCommand) -> Reply {
    let info = match named_user(&h, &request) {
        Ok(i) => i,
        Err(answer) => return Reply::Now(*answer),
    };
    let by_super = ctx.access().is_super(signer(&request));
    if wants_super(&info) && !by_super {
        return Reply::Now(error(
            &request,
            resp::SYSTEM_ERROR,
            "The super user can only be update by super user",
        ));
    }
    let store = store(ctx);
    change(request, move || {
        let name = info.username.clone().unwrap_or_default();
        if !by_super && store.is_super_user(&name) {
            return Err(AuthError::Authentication("The super user can only be update by super user".into()));
        }
        store.update_user(&info)
    })
}

pub(crate) fn delete<C: Acl>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: UserRequestHeader, request: RemotingCommand) -> Reply {
    let name = given(h.username.as_ref()).unwrap_or_default().to_owned();
    let by_super = ctx.access().is_super(signer(&request));
    let store = store(ctx);
    change(request, move || {
        if !by_super && store.is_super_user(&name) {
            return Err(AuthError::Authentication("The super user can only be update by super user".into()));
        }
        store.delete_user(&name)
    })
}

/// Whether the answer may carry passwords: only to a super user who signed the request (who may
/// set any password anyway), or when nothing is authenticated at all. Anyone else with
/// `Cluster:Get` sees users without their passwords, which are the keys requests are signed
/// with.
fn shows_passwords<C: Acl>(ctx: &C, request: &RemotingCommand) -> bool {
    if !ctx.access().settings.authentication_enabled {
        return true;
    }
    signer(request).is_some_and(|name| ctx.access().store.is_super_user(name))
}

fn shown<C: Acl>(ctx: &C, request: &RemotingCommand, user: UserInfo) -> UserInfo {
    if shows_passwords(ctx, request) {
        user
    } else {
        user.without_password()
    }
}

pub(crate) fn get<C: Acl>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: UserRequestHeader, request: RemotingCommand) -> Reply {
    let Some(name) = given(h.username.as_ref()) else {
        return Reply::Now(error(&request, resp::INVALID_PARAMETER, "The username is blank"));
    };
    let user = ctx.access().store.get_user(name).map(|u| shown(ctx, &request, u));
    found(&request, user.as_ref())
}

pub(crate) fn list<C: Acl>(ctx: &Arc<C>, _conn: &Arc<Connection>, h: ListUsersRequestHeader, request: RemotingCommand) -> Reply {
    let users: Vec<UserInfo> = ctx
        .access()
        .store
        .list_users(given(h.filter.as_ref()))
        .into_iter()
        .map(|u| shown(ctx, &request, u))
        .collect();
    found(&request, (!users.is_empty()).then_some(&users))
}

/// This file's requests: each code with its access rule (what it touches, for whom) and its
/// handler. Registered by one line in `handlers/mod.rs`.
pub(crate) const UNITS: &[Unit] = &[
    Unit {
        code: rc::AUTH_CREATE_USER,
        rule: Rule::Cluster(UPDATE),
        handle: &Typed::new(create::<Broker>),
    },
    Unit {
        code: rc::AUTH_UPDATE_USER,
        rule: Rule::Cluster(UPDATE),
        handle: &Typed::new(update::<Broker>),
    },
    Unit {
        code: rc::AUTH_DELETE_USER,
        rule: Rule::Cluster(UPDATE),
        handle: &Typed::new(delete::<Broker>),
    },
    Unit {
        code: rc::AUTH_GET_USER,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(get::<Broker>),
    },
    Unit {
        code: rc::AUTH_LIST_USER,
        rule: Rule::Cluster(GET),
        handle: &Typed::new(list::<Broker>),
    },
];
