use thiserror::Error;

/// Why a request or an admin change was refused. The broker answers the first three with
/// NO_PERMISSION (16) and the remark, as RocketMQ answers its `AuthenticationException` and
/// `AuthorizationException`; a storage failure is SYSTEM_ERROR (1).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AuthError {
    #[error("{0}")]
    Authentication(String),
    #[error("{0}")]
    Authorization(String),
    /// An admin request that names something malformed or missing.
    #[error("{0}")]
    Invalid(String),
    #[error("cannot store the users or ACLs: {0}")]
    Storage(String),
}
