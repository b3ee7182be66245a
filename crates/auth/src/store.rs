//! The user and policy tables: in memory for every request, written whole to `users.json` and
//! `acls.json` (mode 0600: they hold the secrets a signature is checked with) on every change,
//! through a temporary file and a rename, so a crash leaves the old or the new table, never half.
//!
//! The admin requests' semantics are RocketMQ's (`AuthenticationMetadataManagerImpl`,
//! `AuthorizationMetadataManagerImpl`): creating an existing user fails, updating changes only
//! what is given, creating or updating an ACL merges its entries into the subject's policy by
//! resource, deleting a resource's entry deletes the ACL when nothing is left.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, RwLock};
use serde::Deserialize;

use crate::error::AuthError;
use crate::model::{AclInfo, Action, EntryInfo, PolicyInfo, Resource, SourceIp, UserInfo};

/// Users a store holds at most.
pub const MAX_USERS: usize = 65_536;
/// Entries one subject's policies hold at most.
pub const MAX_ACL_ENTRIES: usize = 4096;
/// Longest user name and password, bytes.
const MAX_NAME_BYTES: usize = 256;

const USERS_FILE: &str = "users.json";
const ACLS_FILE: &str = "acls.json";

#[derive(Clone)]
pub(crate) struct User {
    pub(crate) password: String,
    pub(crate) superuser: bool,
    pub(crate) enabled: bool,
}

/// Without the password: a user printed in a log or a panic shows none.
impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("superuser", &self.superuser)
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) resource: Resource,
    pub(crate) actions: Vec<Action>,
    pub(crate) source_ips: Vec<SourceIp>,
    pub(crate) allow: bool,
}

/// One subject's policies: the `CUSTOM` one is consulted first, `DEFAULT` when nothing in it
/// matches.
#[derive(Debug, Clone, Default)]
pub(crate) struct Acl {
    pub(crate) custom: Vec<Entry>,
    pub(crate) default: Vec<Entry>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Tables {
    pub(crate) users: BTreeMap<String, User>,
    pub(crate) acls: BTreeMap<String, Acl>,
}

/// `{"accessKey": ..., "secretKey": ...}`: RocketMQ's `innerClientAuthenticationCredentials`.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    /// The user name sent as `AccessKey`.
    pub access_key: String,
    /// The key the request signature is an HMAC under; never sent.
    pub secret_key: String,
}

/// Without the secret key.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

/// Users and policies, shared by the broker and an embedded name server.
pub struct AuthStore {
    dir: Option<PathBuf>,
    pub(crate) tables: RwLock<Tables>,
    /// Serializes changes, so two admin requests cannot interleave their file writes.
    writer: Mutex<()>,
}

impl std::fmt::Debug for AuthStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthStore").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl AuthStore {
    /// A store that lives in memory only (a name server's users from its configuration).
    #[must_use]
    pub fn in_memory() -> AuthStore {
        AuthStore {
            dir: None,
            tables: RwLock::new(Tables::default()),
            writer: Mutex::new(()),
        }
    }

    /// Opens the tables kept in `dir` (created if missing).
    ///
    /// # Errors
    /// A file that cannot be read or does not hold valid users or ACLs: the broker does not
    /// start on tables it cannot trust.
    pub fn open(dir: &Path) -> Result<AuthStore, AuthError> {
        std::fs::create_dir_all(dir).map_err(|e| AuthError::Storage(format!("{}: {e}", dir.display())))?;
        let mut tables = Tables::default();
        let users: Vec<UserInfo> = read_json(&dir.join(USERS_FILE))?;
        for info in users {
            let (name, user) = user_from_info(&info, true)?;
            tables.users.insert(name, user);
        }
        let acls: Vec<AclInfo> = read_json(&dir.join(ACLS_FILE))?;
        for info in acls {
            let (name, acl) = acl_from_info(&info, None)?;
            tables.acls.insert(name, acl);
        }
        Ok(AuthStore {
            dir: Some(dir.to_owned()),
            tables: RwLock::new(tables),
            writer: Mutex::new(()),
        })
    }

    /// Makes sure a super user exists (`initAuthenticationUser`, `innerClientAuthenticationCredentials`);
    /// an existing user of that name is left as it is, as in RocketMQ.
    ///
    /// # Errors
    /// An empty name or password, or the tables cannot be written.
    pub fn ensure_super_user(&self, username: &str, password: &str) -> Result<(), AuthError> {
        if self.tables.read().users.contains_key(username) {
            return Ok(());
        }
        self.create_user(&UserInfo {
            username: Some(username.to_owned()),
            password: Some(password.to_owned()),
            user_type: Some("Super".into()),
            user_status: None,
        })
    }

    /// Whether `username` is an enabled super user.
    #[must_use]
    pub fn is_super_user(&self, username: &str) -> bool {
        self.tables.read().users.get(username).is_some_and(|u| u.superuser && u.enabled)
    }

    /// AUTH_CREATE_USER.
    ///
    /// # Errors
    /// Invalid fields, an existing user, the bound on users, or storage.
    pub fn create_user(&self, info: &UserInfo) -> Result<(), AuthError> {
        let (name, user) = user_from_info(info, true)?;
        self.change(|t| {
            if t.users.contains_key(&name) {
                return Err(AuthError::Authentication("The user is existed".into()));
            }
            if t.users.len() >= MAX_USERS {
                return Err(AuthError::Invalid(format!("The broker holds {MAX_USERS} users, its most")));
            }
            t.users.insert(name, user);
            Ok(())
        })
    }

    /// AUTH_UPDATE_USER: the password, type and status that are given replace the old ones.
    ///
    /// # Errors
    /// Invalid fields, no such user, or storage.
    pub fn update_user(&self, info: &UserInfo) -> Result<(), AuthError> {
        let name = user_name(info)?;
        let patch = user_from_info(info, false)?.1;
        self.change(|t| {
            let old = t
                .users
                .get_mut(&name)
                .ok_or_else(|| AuthError::Authentication("The user is not exist".into()))?;
            if info.password.as_deref().is_some_and(|p| !p.trim().is_empty()) {
                old.password = patch.password;
            }
            if info.user_type.is_some() {
                old.superuser = patch.superuser;
            }
            if info.user_status.is_some() {
                old.enabled = patch.enabled;
            }
            Ok(())
        })
    }

    /// AUTH_DELETE_USER: the user and its ACL; a missing user is not an error.
    ///
    /// # Errors
    /// Storage.
    pub fn delete_user(&self, username: &str) -> Result<(), AuthError> {
        self.change(|t| {
            t.users.remove(username);
            t.acls.remove(username);
            Ok(())
        })
    }

    /// AUTH_GET_USER.
    #[must_use]
    pub fn get_user(&self, username: &str) -> Option<UserInfo> {
        self.tables.read().users.get(username).map(|u| user_info(username, u))
    }

    /// AUTH_LIST_USER: users whose name contains `filter` (all when it is empty).
    #[must_use]
    pub fn list_users(&self, filter: Option<&str>) -> Vec<UserInfo> {
        let filter = filter.unwrap_or("").trim();
        let t = self.tables.read();
        t.users
            .iter()
            .filter(|(n, _)| n.contains(filter))
            .map(|(n, u)| user_info(n, u))
            .collect()
    }

    /// AUTH_CREATE_ACL and AUTH_UPDATE_ACL (the same in RocketMQ): merges the entries into the
    /// subject's policies by resource.
    ///
    /// # Errors
    /// An invalid ACL, a subject that is not an existing user, the bound on entries, or storage.
    pub fn put_acl(&self, info: &AclInfo, subject: Option<&str>) -> Result<(), AuthError> {
        let (name, acl) = acl_from_info(info, subject)?;
        self.change(|t| {
            if !t.users.contains_key(&name) {
                return Err(AuthError::Authorization(format!("The subject of User:{name} is not exist.")));
            }
            let old = t.acls.entry(name).or_default();
            merge(&mut old.custom, acl.custom);
            merge(&mut old.default, acl.default);
            if old.custom.len() + old.default.len() > MAX_ACL_ENTRIES {
                return Err(AuthError::Invalid(format!(
                    "A subject holds {MAX_ACL_ENTRIES} policy entries at most"
                )));
            }
            Ok(())
        })
    }

    /// AUTH_DELETE_ACL: one resource's entry of a policy (`CUSTOM` unless named), or the whole ACL
    /// when no resource is named or nothing is left.
    ///
    /// # Errors
    /// No such subject or ACL, an invalid resource, or storage.
    pub fn delete_acl(&self, subject: &str, policy_type: Option<&str>, resource: Option<&str>) -> Result<(), AuthError> {
        let name = subject_user(subject)?;
        let resource = resource.filter(|r| !r.trim().is_empty()).map(Resource::parse).transpose()?;
        let default = is_default_policy(policy_type)?;
        self.change(|t| {
            if !t.users.contains_key(&name) {
                return Err(AuthError::Authorization("The subject is not exist.".into()));
            }
            let acl = t
                .acls
                .get_mut(&name)
                .ok_or_else(|| AuthError::Authorization("The acl is not exist.".into()))?;
            if let Some(r) = &resource {
                let entries = if default { &mut acl.default } else { &mut acl.custom };
                entries.retain(|e| &e.resource != r);
            }
            if resource.is_none() || (acl.custom.is_empty() && acl.default.is_empty()) {
                t.acls.remove(&name);
            }
            Ok(())
        })
    }

    /// AUTH_GET_ACL.
    ///
    /// # Errors
    /// A subject that is not `User:name`.
    pub fn get_acl(&self, subject: &str) -> Result<Option<AclInfo>, AuthError> {
        let name = subject_user(subject)?;
        Ok(self.tables.read().acls.get(&name).map(|a| acl_info(&name, a)))
    }

    /// AUTH_LIST_ACL: ACLs whose subject contains `subject_filter` and that hold an entry whose
    /// resource contains `resource_filter`.
    #[must_use]
    pub fn list_acls(&self, subject_filter: Option<&str>, resource_filter: Option<&str>) -> Vec<AclInfo> {
        let sf = subject_filter.unwrap_or("").trim();
        let rf = resource_filter.unwrap_or("").trim();
        let t = self.tables.read();
        t.acls
            .iter()
            .filter(|(n, _)| format!("User:{n}").contains(sf))
            .filter(|(_, a)| rf.is_empty() || a.custom.iter().chain(&a.default).any(|e| e.resource.to_string().contains(rf)))
            .map(|(n, a)| acl_info(n, a))
            .collect()
    }

    /// Applies `f` to a copy of the tables, writes the copy, then makes it current.
    fn change(&self, f: impl FnOnce(&mut Tables) -> Result<(), AuthError>) -> Result<(), AuthError> {
        let _writer = self.writer.lock();
        let mut next = self.tables.read().clone();
        f(&mut next)?;
        if let Some(dir) = &self.dir {
            let users: Vec<UserInfo> = next.users.iter().map(|(n, u)| user_info(n, u)).collect();
            let acls: Vec<AclInfo> = next.acls.iter().map(|(n, a)| acl_info(n, a)).collect();
            write_json(&dir.join(USERS_FILE), &users)?;
            write_json(&dir.join(ACLS_FILE), &acls)?;
        }
        *self.tables.write() = next;
        Ok(())
    }
}

fn merge(old: &mut Vec<Entry>, new: Vec<Entry>) {
    for entry in new {
        match old.iter_mut().find(|e| e.resource == entry.resource) {
            Some(e) => *e = entry,
            None => old.push(entry),
        }
    }
}

fn is_default_policy(policy_type: Option<&str>) -> Result<bool, AuthError> {
    match policy_type.map(str::trim).filter(|p| !p.is_empty()) {
        None => Ok(false),
        Some(p) if p.eq_ignore_ascii_case("custom") => Ok(false),
        Some(p) if p.eq_ignore_ascii_case("default") => Ok(true),
        Some(p) => Err(AuthError::Invalid(format!(
            "The policy type {p:?} is invalid: expected Custom or Default"
        ))),
    }
}

fn user_name(info: &UserInfo) -> Result<String, AuthError> {
    let name = info.username.as_deref().map(str::trim).unwrap_or("");
    if name.is_empty() {
        return Err(AuthError::Authentication("username can not be blank".into()));
    }
    if name.len() > MAX_NAME_BYTES || name.contains(':') {
        return Err(AuthError::Invalid(format!(
            "The username is invalid: at most {MAX_NAME_BYTES} bytes, no ':'"
        )));
    }
    Ok(name.to_owned())
}

fn user_from_info(info: &UserInfo, create: bool) -> Result<(String, User), AuthError> {
    let name = user_name(info)?;
    let password = info.password.clone().unwrap_or_default();
    if create && password.trim().is_empty() {
        return Err(AuthError::Authentication("password can not be blank".into()));
    }
    if password.len() > MAX_NAME_BYTES {
        return Err(AuthError::Invalid(format!("The password is longer than {MAX_NAME_BYTES} bytes")));
    }
    let superuser = match info.user_type.as_deref().map(str::trim) {
        None | Some("") => false,
        Some(t) if t.eq_ignore_ascii_case("normal") => false,
        Some(t) if t.eq_ignore_ascii_case("super") => true,
        Some(t) => {
            return Err(AuthError::Invalid(format!(
                "The user type {t:?} is invalid: expected Super or Normal"
            )));
        }
    };
    let enabled = match info.user_status.as_deref().map(str::trim) {
        None | Some("") => true,
        Some(s) if s.eq_ignore_ascii_case("enable") => true,
        Some(s) if s.eq_ignore_ascii_case("disable") => false,
        Some(s) => {
            return Err(AuthError::Invalid(format!(
                "The user status {s:?} is invalid: expected enable or disable"
            )));
        }
    };
    Ok((
        name,
        User {
            password,
            superuser,
            enabled,
        },
    ))
}

fn user_info(name: &str, u: &User) -> UserInfo {
    UserInfo {
        username: Some(name.to_owned()),
        password: Some(u.password.clone()),
        user_type: Some(if u.superuser { "Super" } else { "Normal" }.into()),
        user_status: Some(if u.enabled { "enable" } else { "disable" }.into()),
    }
}

/// `User:alice` → `alice`; only users are subjects.
fn subject_user(subject: &str) -> Result<String, AuthError> {
    let subject = subject.trim();
    match subject.split_once(':') {
        Some((kind, name)) if kind.eq_ignore_ascii_case("user") && !name.is_empty() => Ok(name.to_owned()),
        _ => Err(AuthError::Invalid(format!(
            "The subject {subject:?} is invalid: expected User:name"
        ))),
    }
}

fn entry_from_info(info: &EntryInfo) -> Result<Entry, AuthError> {
    let resource = Resource::parse(
        info.resource
            .as_deref()
            .ok_or_else(|| AuthError::Authorization("The resource is null.".into()))?,
    )?;
    let names = info.actions.as_deref().unwrap_or_default();
    if names.is_empty() {
        return Err(AuthError::Authorization("The actions is empty.".into()));
    }
    let actions = names
        .iter()
        .map(|a| {
            Action::parse(a).ok_or_else(|| {
                AuthError::Invalid(format!(
                    "The action {a:?} is invalid: expected All, Pub, Sub, Create, Update, Delete, Get or List"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let source_ips = info
        .source_ips
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|s| SourceIp::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let allow = match info.decision.as_deref().map(str::trim) {
        Some(d) if d.eq_ignore_ascii_case("allow") => true,
        Some(d) if d.eq_ignore_ascii_case("deny") => false,
        _ => return Err(AuthError::Authorization("The decision is null or illegal.".into())),
    };
    Ok(Entry {
        resource,
        actions,
        source_ips,
        allow,
    })
}

fn acl_from_info(info: &AclInfo, subject: Option<&str>) -> Result<(String, Acl), AuthError> {
    let subject = info
        .subject
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .or(subject)
        .ok_or_else(|| AuthError::Invalid("The subject is null.".into()))?;
    let name = subject_user(subject)?;
    let policies = info.policies.as_deref().unwrap_or_default();
    if policies.is_empty() {
        return Err(AuthError::Authorization("The policies is empty.".into()));
    }
    let mut acl = Acl::default();
    for policy in policies {
        let entries = policy.entries.as_deref().unwrap_or_default();
        if entries.is_empty() {
            return Err(AuthError::Authorization("The policy entries is empty.".into()));
        }
        let default = is_default_policy(policy.policy_type.as_deref())?;
        let parsed = entries.iter().map(entry_from_info).collect::<Result<Vec<_>, _>>()?;
        merge(if default { &mut acl.default } else { &mut acl.custom }, parsed);
    }
    Ok((name, acl))
}

fn entry_info(e: &Entry) -> EntryInfo {
    EntryInfo {
        resource: Some(e.resource.to_string()),
        actions: Some(e.actions.iter().map(|a| a.name().to_owned()).collect()),
        source_ips: (!e.source_ips.is_empty()).then(|| e.source_ips.iter().map(ToString::to_string).collect()),
        decision: Some(if e.allow { "Allow" } else { "Deny" }.into()),
    }
}

fn acl_info(name: &str, a: &Acl) -> AclInfo {
    let mut policies = Vec::new();
    for (kind, entries) in [("Custom", &a.custom), ("Default", &a.default)] {
        if !entries.is_empty() {
            policies.push(PolicyInfo {
                policy_type: Some(kind.into()),
                entries: Some(entries.iter().map(entry_info).collect()),
            });
        }
    }
    AclInfo {
        subject: Some(format!("User:{name}")),
        policies: Some(policies),
    }
}

fn read_json<T: serde::de::DeserializeOwned + Default>(path: &Path) -> Result<T, AuthError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| AuthError::Storage(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(AuthError::Storage(format!("{}: {e}", path.display()))),
    }
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), AuthError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| AuthError::Storage(e.to_string()))?;
    // Credentials: only the broker's own user may read them.
    petrel_kit::fs::write_atomically(path, &bytes, petrel_kit::fs::Mode::OwnerOnly)
        .map_err(|e| AuthError::Storage(format!("{}: {e}", path.display())))
}
