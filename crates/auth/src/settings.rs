//! The ACL 2.0 keys a broker.conf or namesrv.conf spells as JSON or lists, parsed once for
//! every process that reads them.

use serde::Deserialize;

use crate::error::AuthError;
use crate::store::Credentials;

#[derive(Deserialize)]
struct InitUser {
    username: String,
    password: String,
}

/// Parses `initAuthenticationUser`: the super user's name and password.
///
/// # Errors
/// Not `{"username": ..., "password": ...}` with both non-empty.
pub fn parse_init_user(json: &str) -> Result<(String, String), AuthError> {
    let u: InitUser =
        serde_json::from_str(json).map_err(|_| AuthError::Invalid("expected {\"username\":\"...\",\"password\":\"...\"}".to_owned()))?;
    if u.username.trim().is_empty() || u.password.is_empty() {
        return Err(AuthError::Invalid("username and password must not be empty".into()));
    }
    Ok((u.username, u.password))
}

/// Parses `innerClientAuthenticationCredentials`: what the process signs its own requests with.
///
/// # Errors
/// Not `{"accessKey": ..., "secretKey": ...}` with both non-empty.
pub fn parse_credentials(json: &str) -> Result<Credentials, AuthError> {
    let c: Credentials =
        serde_json::from_str(json).map_err(|_| AuthError::Invalid("expected {\"accessKey\":\"...\",\"secretKey\":\"...\"}".to_owned()))?;
    if c.access_key.trim().is_empty() || c.secret_key.is_empty() {
        return Err(AuthError::Invalid("accessKey and secretKey must not be empty".into()));
    }
    Ok(c)
}

/// Parses a comma-separated list of request codes (a whitelist).
///
/// # Errors
/// A part that is not a number.
pub fn parse_codes(text: &str) -> Result<Vec<i32>, AuthError> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<i32>()
                .map_err(|_| AuthError::Invalid(format!("{p:?} is not a request code")))
        })
        .collect()
}

/// Whether `authenticationStrategy` names RocketMQ's stateful strategy.
#[must_use]
pub fn is_stateful(strategy: &str) -> bool {
    strategy.ends_with("StatefulAuthenticationStrategy") || strategy.eq_ignore_ascii_case("stateful")
}

/// Checks `authenticationStrategy`.
///
/// # Errors
/// Neither of RocketMQ's two strategies.
pub fn check_strategy(strategy: &str) -> Result<(), AuthError> {
    if is_stateful(strategy) || strategy.ends_with("StatelessAuthenticationStrategy") || strategy.eq_ignore_ascii_case("stateless") {
        Ok(())
    } else {
        Err(AuthError::Invalid(
            "expected RocketMQ's StatelessAuthenticationStrategy or StatefulAuthenticationStrategy (or stateless / stateful)".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_keys_need_both_fields_and_the_lists_numbers() {
        assert_eq!(parse_init_user(r#"{"username":"root","password":"pw"}"#).expect("valid").0, "root");
        assert!(parse_init_user(r#"{"username":"root","password":""}"#).is_err());
        assert!(parse_init_user("root:pw").is_err());
        assert_eq!(
            parse_credentials(r#"{"accessKey":"ak","secretKey":"sk"}"#)
                .expect("valid")
                .access_key,
            "ak"
        );
        assert!(parse_credentials(r#"{"accessKey":" ","secretKey":"sk"}"#).is_err());
        assert_eq!(parse_codes(" 10, 11 ,,").expect("valid"), [10, 11]);
        assert!(parse_codes("10,x").is_err());
        assert!(check_strategy("org.apache.rocketmq.auth.authentication.strategy.StatelessAuthenticationStrategy").is_ok());
        assert!(check_strategy("sometimes").is_err());
    }
}
