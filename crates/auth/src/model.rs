//! ACL 2.0's vocabulary: users, resources, actions, policies, and their JSON forms as the
//! admin requests (3001–3010) carry them (`UserInfo`, `AclInfo`), which are also the forms stored
//! on disk.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::AuthError;

/// What a request does to a resource (RocketMQ's `Action`, spelt as its `getName()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Every action below.
    All,
    /// Sending messages to a topic.
    Pub,
    /// Consuming from a topic, or as a group.
    Sub,
    /// Creating the resource (an admin request).
    Create,
    /// Changing the resource (an admin request).
    Update,
    /// Deleting the resource (an admin request).
    Delete,
    /// Reading the resource's details (an admin request).
    Get,
    /// Listing resources (an admin request).
    List,
}

impl Action {
    /// Parses a name as mqadmin spells it, any case.
    #[must_use]
    pub fn parse(name: &str) -> Option<Action> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "all" => Action::All,
            "pub" => Action::Pub,
            "sub" => Action::Sub,
            "create" => Action::Create,
            "update" => Action::Update,
            "delete" => Action::Delete,
            "get" => Action::Get,
            "list" => Action::List,
            _ => return None,
        })
    }

    /// The name as RocketMQ spells it (`Pub`, `Sub`, ...), as shown in error messages and stored ACLs.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Action::All => "All",
            Action::Pub => "Pub",
            Action::Sub => "Sub",
            Action::Create => "Create",
            Action::Update => "Update",
            Action::Delete => "Delete",
            Action::Get => "Get",
            Action::List => "List",
        }
    }
}

/// The kinds of resource a policy names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceType {
    /// Every resource of every type: the bare `*` key.
    Any,
    /// A cluster (`Cluster:name`).
    Cluster,
    /// A namespace (`Namespace:name`).
    Namespace,
    /// A topic (`Topic:name`).
    Topic,
    /// A consumer group (`Group:name`); a retry topic stands for its group.
    Group,
}

impl ResourceType {
    fn parse(name: &str) -> Option<ResourceType> {
        Some(match name.to_ascii_lowercase().as_str() {
            "any" => ResourceType::Any,
            "cluster" => ResourceType::Cluster,
            "namespace" => ResourceType::Namespace,
            "topic" => ResourceType::Topic,
            "group" => ResourceType::Group,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            ResourceType::Any => "Any",
            ResourceType::Cluster => "Cluster",
            ResourceType::Namespace => "Namespace",
            ResourceType::Topic => "Topic",
            ResourceType::Group => "Group",
        }
    }
}

/// How a policy's resource name matches a request's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// `Topic:*`: every name.
    Any,
    /// `Topic:orders`: that name.
    Literal(String),
    /// `Topic:orders-*`: names starting so.
    Prefixed(String),
}

/// A resource: in a policy a pattern, in a request always a literal name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    /// Which type of resource this names.
    pub kind: ResourceType,
    /// Which names of that type it matches.
    pub pattern: Pattern,
}

/// RocketMQ's retry-topic prefix; a retry topic stands for its group.
pub const RETRY_PREFIX: &str = petrel_protocol::topics::RETRY_GROUP_TOPIC_PREFIX;

impl Resource {
    /// A topic; a retry topic's name stands for its group, as in RocketMQ.
    #[must_use]
    pub fn topic(name: &str) -> Resource {
        if let Some(group) = name.strip_prefix(RETRY_PREFIX) {
            return Resource::group(group);
        }
        Resource {
            kind: ResourceType::Topic,
            pattern: Pattern::Literal(name.to_owned()),
        }
    }

    /// A group; a retry topic's name stands for its group, as in RocketMQ.
    #[must_use]
    pub fn group(name: &str) -> Resource {
        let name = name.strip_prefix(RETRY_PREFIX).unwrap_or(name);
        Resource {
            kind: ResourceType::Group,
            pattern: Pattern::Literal(name.to_owned()),
        }
    }

    /// A cluster, by name.
    #[must_use]
    pub fn cluster(name: &str) -> Resource {
        Resource {
            kind: ResourceType::Cluster,
            pattern: Pattern::Literal(name.to_owned()),
        }
    }

    /// Parses RocketMQ's resource key: `*`, `Topic:*`, `Topic:name`, `Group:prefix*`.
    ///
    /// # Errors
    /// An unknown type or a missing name.
    pub fn parse(key: &str) -> Result<Resource, AuthError> {
        let key = key.trim();
        if key == "*" {
            return Ok(Resource {
                kind: ResourceType::Any,
                pattern: Pattern::Any,
            });
        }
        let invalid = || {
            AuthError::Invalid(format!(
                "The resource {key:?} is invalid: expected `*` or Type:name (Topic, Group, Cluster, Namespace)"
            ))
        };
        let (kind, name) = key.split_once(':').ok_or_else(invalid)?;
        let kind = ResourceType::parse(kind).ok_or_else(invalid)?;
        let pattern = match name {
            "" => return Err(invalid()),
            "*" => Pattern::Any,
            n if n.ends_with('*') => Pattern::Prefixed(n.trim_end_matches('*').to_owned()),
            n => Pattern::Literal(n.to_owned()),
        };
        Ok(Resource { kind, pattern })
    }

    /// Whether this (a policy's resource) covers `wanted` (a request's).
    #[must_use]
    pub fn covers(&self, wanted: &Resource) -> bool {
        if self.kind == ResourceType::Any {
            return true;
        }
        if self.kind != wanted.kind {
            return false;
        }
        let Pattern::Literal(name) = &wanted.pattern else {
            return false;
        };
        match &self.pattern {
            Pattern::Any => true,
            Pattern::Literal(n) => n == name,
            Pattern::Prefixed(p) => name.starts_with(p.as_str()),
        }
    }

    /// How specific a policy resource is: a literal name beats a prefix (the longer prefix
    /// first), which beats `Type:*`, which beats `*` — RocketMQ's order of policy entries.
    pub(crate) fn specificity(&self) -> (u8, usize) {
        match (&self.kind, &self.pattern) {
            (ResourceType::Any, _) => (0, 0),
            (_, Pattern::Any) => (1, 0),
            (_, Pattern::Prefixed(p)) => (2, p.len()),
            (_, Pattern::Literal(_)) => (3, 0),
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind == ResourceType::Any {
            return f.write_str("*");
        }
        match &self.pattern {
            Pattern::Any => write!(f, "{}:*", self.kind.name()),
            Pattern::Literal(n) => write!(f, "{}:{n}", self.kind.name()),
            Pattern::Prefixed(p) => write!(f, "{}:{p}*", self.kind.name()),
        }
    }
}

/// A source-IP condition: one address, or a CIDR block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceIp {
    net: IpAddr,
    prefix_bits: u8,
}

impl SourceIp {
    /// # Errors
    /// Not an IP address or a CIDR block.
    pub fn parse(text: &str) -> Result<SourceIp, AuthError> {
        let text = text.trim();
        let invalid = || AuthError::Invalid(format!("The source ip {text:?} is invalid: expected an address or a CIDR block"));
        let (addr, bits) = match text.split_once('/') {
            Some((a, b)) => (a, Some(b.parse::<u8>().map_err(|_| invalid())?)),
            None => (text, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| invalid())?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix_bits = bits.unwrap_or(max);
        if prefix_bits > max {
            return Err(invalid());
        }
        Ok(SourceIp { net, prefix_bits })
    }

    /// Whether `ip` is this address or inside this block; an IPv4-mapped IPv6 address counts as its IPv4 address.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match (self.net, ip) {
            (IpAddr::V4(_), IpAddr::V6(v6)) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            _ => ip,
        };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => masked(u128::from(u32::from(n)), u128::from(u32::from(a)), 32, self.prefix_bits),
            (IpAddr::V6(n), IpAddr::V6(a)) => masked(u128::from(n), u128::from(a), 128, self.prefix_bits),
            _ => false,
        }
    }
}

fn masked(net: u128, addr: u128, width: u8, prefix_bits: u8) -> bool {
    if prefix_bits == 0 {
        return true;
    }
    let shift = u32::from(width - prefix_bits);
    (net >> shift) == (addr >> shift)
}

impl fmt::Display for SourceIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let max = if self.net.is_ipv4() { 32 } else { 128 };
        if self.prefix_bits == max {
            write!(f, "{}", self.net)
        } else {
            write!(f, "{}/{}", self.net, self.prefix_bits)
        }
    }
}

/// A user as `UserInfo` carries it (the admin requests' body and the stored form). Its `Debug`
/// leaves the password out.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInfo {
    /// The user's name, which requests send as `AccessKey`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The secret the user's requests are signed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// `Super` or `Normal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_type: Option<String>,
    /// `enable` or `disable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_status: Option<String>,
}

impl std::fmt::Debug for UserInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserInfo")
            .field("username", &self.username)
            .field("user_type", &self.user_type)
            .field("user_status", &self.user_status)
            .finish_non_exhaustive()
    }
}

impl UserInfo {
    /// The same user without its password: what anyone but a super user is shown.
    #[must_use]
    pub fn without_password(mut self) -> UserInfo {
        self.password = None;
        self
    }
}

/// One entry of a policy, as `AclInfo.PolicyEntryInfo` carries it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryInfo {
    /// The resource key the entry covers: `*`, `Topic:*`, `Topic:name`, `Group:prefix*`.
    #[serde(default)]
    pub resource: Option<String>,
    /// The action names the entry covers (`Pub`, `Sub`, `All`, ...).
    #[serde(default)]
    pub actions: Option<Vec<String>>,
    /// Addresses or CIDR blocks the request must come from; none means any source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ips: Option<Vec<String>>,
    /// `Allow` or `Deny`.
    #[serde(default)]
    pub decision: Option<String>,
}

/// A policy (`CUSTOM` or `DEFAULT`) with its entries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyInfo {
    /// `Custom` or `Default`; absent means `Custom`.
    #[serde(default)]
    pub policy_type: Option<String>,
    /// The policy's entries.
    #[serde(default)]
    pub entries: Option<Vec<EntryInfo>>,
}

/// A subject's policies, as `AclInfo` carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AclInfo {
    /// Whom the policies apply to, as `User:name`.
    #[serde(default)]
    pub subject: Option<String>,
    /// The subject's policies.
    #[serde(default)]
    pub policies: Option<Vec<PolicyInfo>>,
}
