use thiserror::Error;

/// Why a request or an admin change was refused. The broker answers the first three with
/// NO_PERMISSION (16) and the remark, as RocketMQ answers its `AuthenticationException` and
/// `AuthorizationException`; a storage failure is SYSTEM_ERROR (1).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// The sender could not be identified: no `AccessKey`, an unknown or disabled user, or a bad signature.
    #[error("{0}")]
    Authentication(String),
    /// The user is known but no policy allows what the request does.
    #[error("{0}")]
    Authorization(String),
    /// An admin request that names something malformed or missing.
    #[error("{0}")]
    Invalid(String),
    /// The users or ACLs files could not be read, parsed or written.
    #[error("cannot store the users or ACLs: {0}")]
    Storage(String),
}
