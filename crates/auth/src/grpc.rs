//! RocketMQ 5's gRPC signature (the SDKs' `authorization` metadata): `MQv2-HMAC-SHA1
//! Credential=<AccessKey>[/…], SignedHeaders=x-mq-date-time, Signature=<hex>`, where the
//! signature is HMAC-SHA1 keyed by the user's secret over the `x-mq-date-time` value. SDKs
//! write the hex in either case; Go's credential carries a `//Rocketmq` suffix.
//!
//! Owns: parsing that header and checking it. Must never: accept a signature it did not
//! recompute, or compare in time that depends on where the bytes differ.

use hmac::{Hmac, Mac};
use sha1::Sha1;

use crate::decide::{AuthSettings, Principal};
use crate::error::AuthError;
use crate::store::AuthStore;

/// The longest `authorization` value read; a longer one is refused unread.
pub const MAX_AUTHORIZATION_BYTES: usize = 1024;

/// The parts of an `authorization` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcAuthorization {
    /// The user (the credential up to its first `/`).
    pub access_key: String,
    /// The signature's bytes.
    pub signature: Vec<u8>,
}

impl GrpcAuthorization {
    /// Parses an `authorization` value.
    ///
    /// # Errors
    /// Not RocketMQ's scheme, no credential, or a signature that is not hex.
    pub fn parse(value: &str) -> Result<GrpcAuthorization, AuthError> {
        let bad = |why: &str| AuthError::Authentication(format!("authorization header: {why}"));
        if value.len() > MAX_AUTHORIZATION_BYTES {
            return Err(bad("too long"));
        }
        let (scheme, rest) = value.split_once(' ').ok_or_else(|| bad("no scheme"))?;
        if scheme != "MQv2-HMAC-SHA1" {
            return Err(bad("not MQv2-HMAC-SHA1"));
        }
        let (mut access_key, mut signature) = (None, None);
        for part in rest.split(',') {
            let Some((k, v)) = part.trim().split_once('=') else { continue };
            match k.trim() {
                "Credential" => access_key = v.trim().split('/').next().map(str::to_owned),
                "Signature" => signature = Some(hex(v.trim()).ok_or_else(|| bad("the signature is not hex"))?),
                _ => {}
            }
        }
        match (access_key.filter(|k| !k.is_empty()), signature) {
            (Some(access_key), Some(signature)) => Ok(GrpcAuthorization { access_key, signature }),
            _ => Err(bad("no credential or no signature")),
        }
    }
}

fn hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || text.len() > 2 * 64 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

impl AuthStore {
    /// Checks a gRPC request's `authorization` (and its `x-mq-date-time`) when authentication
    /// is on; the principal it names otherwise.
    ///
    /// # Errors
    /// No or a malformed `authorization`, an unknown or disabled user, or a wrong signature.
    pub fn authenticate_grpc(
        &self,
        settings: &AuthSettings,
        authorization: Option<&str>,
        date_time: Option<&str>,
    ) -> Result<Principal, AuthError> {
        let parsed = authorization.filter(|a| !a.is_empty()).map(GrpcAuthorization::parse);
        if !settings.authentication_enabled {
            // Unsigned use is allowed; a name is still used by authorization if it parses.
            return Ok(Principal::Unchecked(parsed.and_then(Result::ok).map(|a| a.access_key)));
        }
        let auth = parsed.ok_or_else(|| AuthError::Authentication("No user: the request is not signed (no authorization)".into()))??;
        let name = auth.access_key;
        let date = date_time.ok_or_else(|| AuthError::Authentication(format!("User:{name}: no x-mq-date-time")))?;
        let password = {
            let tables = self.tables.read();
            let user = tables
                .users
                .get(&name)
                .ok_or_else(|| AuthError::Authentication(format!("User:{name} is not found.")))?;
            if !user.enabled {
                return Err(AuthError::Authentication(format!("User:{name} is disabled.")));
            }
            user.password.clone()
        };
        let mut mac = Hmac::<Sha1>::new_from_slice(password.as_bytes()).expect("HMAC takes a key of any length");
        mac.update(date.as_bytes());
        // `verify_slice` compares in constant time.
        mac.verify_slice(&auth.signature)
            .map(|()| Principal::User(name.clone()))
            .map_err(|_| AuthError::Authentication(format!("User:{name}: check signature failed.")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::UserInfo;

    fn signed(secret: &str, date: &str, upper: bool) -> String {
        let mut mac = Hmac::<Sha1>::new_from_slice(secret.as_bytes()).expect("any key");
        mac.update(date.as_bytes());
        let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
        let hex = if upper { hex.to_uppercase() } else { hex };
        format!("MQv2-HMAC-SHA1 Credential=alice//Rocketmq, SignedHeaders=x-mq-date-time, Signature={hex}")
    }

    fn store() -> AuthStore {
        let store = AuthStore::in_memory();
        let user: UserInfo =
            serde_json::from_str(r#"{"username":"alice","password":"secret12","userType":"Normal","userStatus":"enable"}"#)
                .expect("a user");
        store.create_user(&user).expect("created");
        store
    }

    #[test]
    fn a_signature_of_either_case_checks_out_and_a_wrong_one_does_not() {
        let settings = AuthSettings {
            authentication_enabled: true,
            ..AuthSettings::default()
        };
        let s = store();
        let date = "20261127T050000Z";
        for upper in [true, false] {
            let p = s.authenticate_grpc(&settings, Some(&signed("secret12", date, upper)), Some(date));
            assert_eq!(p.expect("signed"), Principal::User("alice".into()));
        }
        let refused = [
            s.authenticate_grpc(&settings, Some(&signed("wrong", date, true)), Some(date)),
            s.authenticate_grpc(&settings, Some(&signed("secret12", date, true)), Some("20261127T050001Z")),
            s.authenticate_grpc(&settings, None, Some(date)),
            s.authenticate_grpc(&settings, Some(&signed("secret12", date, true)), None),
            s.authenticate_grpc(&settings, Some("Basic abc"), Some(date)),
        ];
        for r in refused {
            assert!(matches!(r, Err(AuthError::Authentication(_))), "{r:?}");
        }
        let off = AuthSettings::default();
        assert_eq!(
            s.authenticate_grpc(&off, Some(&signed("wrong", date, true)), None)
                .expect("not checked"),
            Principal::Unchecked(Some("alice".into()))
        );
    }
}
