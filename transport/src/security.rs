//! Who may call what, and over what. Each role class has its own shared-secret
//! bearer token: actors, the learner, and read-only followers (the evaluator,
//! dashboards). A server given any token refuses a call that carries no
//! recognised one (`Unauthenticated`), and a recognised one on an RPC its class
//! may not call (`PermissionDenied`): an actor token cannot publish weights.
//! Tokens are compared as SHA-256 digests in constant time (no early exit, no
//! length leak) and are never logged. TLS (rustls) wraps every server and client
//! when certificates are given.

use sha2::{Digest, Sha256};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use subtle::ConstantTimeEq;
use tonic::Status;
use tonic::metadata::MetadataMap;
use tonic::transport::{Certificate, Identity};
use tracing::warn;

/// Whether a call failed on its credentials (missing, unknown or the wrong
/// role's): retrying cannot help, so clients give up and say so.
pub fn credentials_refused(status: &Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
    )
}

/// Shortest token accepted: shorter secrets are guessable.
pub const MIN_TOKEN_LEN: usize = 16;

/// A role class: what a token lets its holder do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// Joins the learner and streams trajectories; reads weights.
    Actor,
    /// Publishes weights; reads weights and evaluations.
    Learner,
    /// Reads weights and evaluations, files evaluation reports.
    ReadOnly,
}

impl Class {
    pub const ALL: [Class; 3] = [Class::Actor, Class::Learner, Class::ReadOnly];

    pub fn name(self) -> &'static str {
        match self {
            Class::Actor => "actor",
            Class::Learner => "learner",
            Class::ReadOnly => "read-only",
        }
    }

    /// The flag (and, upper-cased with `SEBULBA_`, the variable) holding its token.
    pub fn flag(self) -> &'static str {
        match self {
            Class::Actor => "--actor-token",
            Class::Learner => "--learner-token",
            Class::ReadOnly => "--read-token",
        }
    }
}

/// The configured tokens. `Debug` says only which are set.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Tokens {
    pub actor: Option<String>,
    pub learner: Option<String>,
    pub read_only: Option<String>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |t: &Option<String>| if t.is_some() { "set" } else { "unset" };
        f.debug_struct("Tokens")
            .field("actor", &set(&self.actor))
            .field("learner", &set(&self.learner))
            .field("read_only", &set(&self.read_only))
            .finish()
    }
}

impl Tokens {
    pub fn get(&self, class: Class) -> Option<&str> {
        match class {
            Class::Actor => self.actor.as_deref(),
            Class::Learner => self.learner.as_deref(),
            Class::ReadOnly => self.read_only.as_deref(),
        }
    }

    pub fn any(&self) -> bool {
        Class::ALL.iter().any(|&c| self.get(c).is_some())
    }

    /// Long enough, sendable as an HTTP header, and distinct (a token shared by
    /// two classes would make every wrong-role check meaningless).
    pub fn validate(&self) -> Result<(), SecurityError> {
        for class in Class::ALL {
            let Some(t) = self.get(class) else { continue };
            let invalid = |message: String| SecurityError::Invalid {
                field: class.flag(),
                message,
            };
            if t.len() < MIN_TOKEN_LEN {
                return Err(invalid(format!(
                    "{} characters; a token needs at least {MIN_TOKEN_LEN}",
                    t.len()
                )));
            }
            if !t.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(invalid(
                    "only visible ASCII characters (no spaces) can travel in a header".into(),
                ));
            }
            for other in Class::ALL {
                if other != class && self.get(other) == Some(t) {
                    return Err(invalid(format!(
                        "the same as {}; every class needs its own token",
                        other.flag()
                    )));
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("{field}: reading {path}: {source}")]
    Read {
        field: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// Server side: decides whether a call's bearer token may make it. Cloned into
/// every service of a server; counts what it refused.
#[derive(Clone, Default)]
pub struct Gate {
    inner: Arc<GateInner>,
}

#[derive(Default)]
struct GateInner {
    digests: Vec<(Class, [u8; 32])>,
    unauthenticated: AtomicU64,
    denied: AtomicU64,
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let classes: Vec<_> = self.inner.digests.iter().map(|(c, _)| c.name()).collect();
        f.debug_struct("Gate").field("classes", &classes).finish()
    }
}

impl Gate {
    /// A gate accepting the classes whose tokens are set; open when none is.
    pub fn new(tokens: &Tokens) -> Self {
        let digests = Class::ALL
            .iter()
            .filter_map(|&c| tokens.get(c).map(|t| (c, digest(t.as_bytes()))))
            .collect();
        Self {
            inner: Arc::new(GateInner {
                digests,
                ..Default::default()
            }),
        }
    }

    pub fn is_enforcing(&self) -> bool {
        !self.inner.digests.is_empty()
    }

    /// Lets the call through if its `authorization: Bearer <token>` names a class
    /// in `allowed` (returning it), or if the gate is open (`None`).
    pub fn check(
        &self,
        metadata: &MetadataMap,
        rpc: &str,
        allowed: &[Class],
    ) -> Result<Option<Class>, Status> {
        if !self.is_enforcing() {
            return Ok(None);
        }
        let presented = metadata
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let Some(presented) = presented else {
            return Err(
                self.unauthenticated(rpc, "missing `authorization: Bearer <token>` metadata")
            );
        };
        let presented = digest(presented.as_bytes());
        // Every configured digest is compared in full, whichever matches.
        let mut class = None;
        for (c, d) in &self.inner.digests {
            if bool::from(d.ct_eq(&presented)) {
                class = Some(*c);
            }
        }
        match class {
            None => Err(self.unauthenticated(rpc, "the bearer token is not recognised")),
            Some(c) if allowed.contains(&c) => Ok(Some(c)),
            Some(c) => {
                self.inner.denied.fetch_add(1, Ordering::Relaxed);
                warn!(rpc, class = c.name(), "call refused: wrong role");
                let may: Vec<_> = allowed.iter().map(|c| c.name()).collect();
                Err(Status::permission_denied(format!(
                    "{rpc}: a {} token may not call this (allowed: {})",
                    c.name(),
                    may.join(", ")
                )))
            }
        }
    }

    fn unauthenticated(&self, rpc: &str, why: &str) -> Status {
        self.inner.unauthenticated.fetch_add(1, Ordering::Relaxed);
        warn!(rpc, "call refused: {why}");
        Status::unauthenticated(format!("{rpc}: {why}"))
    }

    /// Calls refused so far: (unauthenticated, wrong role).
    pub fn refused(&self) -> (u64, u64) {
        (
            self.inner.unauthenticated.load(Ordering::Relaxed),
            self.inner.denied.load(Ordering::Relaxed),
        )
    }

    /// An interceptor admitting any recognised class: for services (reflection)
    /// that every participant may use but strangers may not.
    pub fn any_class(&self) -> impl tonic::service::Interceptor + Clone + use<> {
        let gate = self.clone();
        move |req: tonic::Request<()>| {
            gate.check(req.metadata(), "grpc.reflection", &Class::ALL)?;
            Ok(req)
        }
    }
}

/// TLS material, read once at start-up.
#[derive(Clone, Default)]
pub struct Tls {
    /// Server certificate chain and key (PEM): servers speak TLS when set.
    pub identity: Option<Identity>,
    /// CA certificate (PEM) clients trust: clients speak TLS when set.
    pub ca: Option<Certificate>,
    /// Name to verify the server certificate against instead of the URL's host.
    pub domain: Option<String>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("server", &self.identity.is_some())
            .field("client", &self.ca.is_some())
            .field("domain", &self.domain)
            .finish()
    }
}

fn read(field: &'static str, path: &Path) -> Result<Vec<u8>, SecurityError> {
    let bytes = std::fs::read(path).map_err(|source| SecurityError::Read {
        field,
        path: path.to_path_buf(),
        source,
    })?;
    if !String::from_utf8_lossy(&bytes).contains("-----BEGIN") {
        return Err(SecurityError::Invalid {
            field,
            message: format!("{} is not PEM", path.display()),
        });
    }
    Ok(bytes)
}

impl Tls {
    /// Reads the PEM files; a certificate needs its key and vice versa.
    pub fn load(
        cert: Option<&Path>,
        key: Option<&Path>,
        ca: Option<&Path>,
        domain: Option<String>,
    ) -> Result<Self, SecurityError> {
        let identity = match (cert, key) {
            (Some(c), Some(k)) => Some(Identity::from_pem(
                read("--tls-cert", c)?,
                read("--tls-key", k)?,
            )),
            (None, None) => None,
            (Some(_), None) => {
                return Err(SecurityError::Invalid {
                    field: "--tls-key",
                    message: "--tls-cert is set, so its private key is needed too".into(),
                });
            }
            (None, Some(_)) => {
                return Err(SecurityError::Invalid {
                    field: "--tls-cert",
                    message: "--tls-key is set, so its certificate is needed too".into(),
                });
            }
        };
        let ca = ca
            .map(|p| read("--tls-ca", p).map(Certificate::from_pem))
            .transpose()?;
        Ok(Self {
            identity,
            ca,
            domain,
        })
    }
}

/// Everything a role needs to serve and to call securely: the tokens (its own
/// class's is sent on its calls; all given are accepted by its servers) and TLS.
#[derive(Clone, Debug, Default)]
pub struct Security {
    pub tokens: Tokens,
    pub tls: Tls,
}

impl Security {
    pub fn new(tokens: Tokens, tls: Tls) -> Result<Self, SecurityError> {
        tokens.validate()?;
        Ok(Self { tokens, tls })
    }

    /// Plain text, no tokens: tests and benchmarks on loopback.
    pub fn insecure() -> Self {
        Self::default()
    }

    pub fn gate(&self) -> Gate {
        Gate::new(&self.tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn tokens() -> Tokens {
        Tokens {
            actor: Some("actor-secret-0123456789".into()),
            learner: Some("learner-secret-0123456789".into()),
            read_only: Some("reader-secret-0123456789".into()),
        }
    }

    fn md(auth: Option<&str>) -> MetadataMap {
        let mut md = MetadataMap::new();
        if let Some(a) = auth {
            md.insert("authorization", a.parse().expect("ascii"));
        }
        md
    }

    #[test]
    fn an_open_gate_lets_everything_through() {
        let gate = Gate::new(&Tokens::default());
        assert!(!gate.is_enforcing());
        assert_eq!(
            gate.check(&md(None), "X", &[Class::Learner]).ok(),
            Some(None)
        );
    }

    #[test]
    fn each_token_names_its_class_and_only_allowed_classes_pass() {
        let gate = Gate::new(&tokens());
        let bearer = |t: &str| md(Some(&format!("Bearer {t}")));
        let t = tokens();
        for class in Class::ALL {
            let m = bearer(t.get(class).expect("set"));
            assert_eq!(gate.check(&m, "X", &Class::ALL).ok(), Some(Some(class)));
            let others: Vec<_> = Class::ALL.into_iter().filter(|&c| c != class).collect();
            let e = gate.check(&m, "Publish", &others).expect_err("wrong role");
            assert_eq!(e.code(), Code::PermissionDenied);
            assert!(e.message().contains(class.name()), "{}", e.message());
        }
        assert_eq!(gate.refused(), (0, 3));
    }

    #[test]
    fn missing_malformed_and_unknown_tokens_are_unauthenticated_and_not_echoed() {
        let gate = Gate::new(&tokens());
        let cases = [
            md(None),
            md(Some("actor-secret-0123456789")),
            md(Some("Basic actor-secret-0123456789")),
            md(Some("Bearer actor-secret-012345678")),
            md(Some("Bearer actor-secret-01234567890")),
            md(Some("Bearer ")),
        ];
        for m in &cases {
            let e = gate.check(m, "Join", &Class::ALL).expect_err("refused");
            assert_eq!(e.code(), Code::Unauthenticated);
            assert!(!e.message().contains("secret"), "{}", e.message());
        }
        assert_eq!(gate.refused(), (cases.len() as u64, 0));
    }

    #[test]
    fn short_spaced_or_shared_tokens_are_refused_naming_the_flag() {
        let short = Tokens {
            actor: Some("short".into()),
            ..Default::default()
        };
        let e = short.validate().expect_err("short").to_string();
        assert!(e.starts_with("--actor-token"), "{e}");
        let spaced = Tokens {
            read_only: Some("a token with spaces in it".into()),
            ..Default::default()
        };
        assert!(
            spaced
                .validate()
                .expect_err("spaces")
                .to_string()
                .starts_with("--read-token")
        );
        let shared = Tokens {
            actor: Some("same-secret-0123456789".into()),
            learner: Some("same-secret-0123456789".into()),
            read_only: None,
        };
        let e = shared.validate().expect_err("shared").to_string();
        assert!(e.contains("own token"), "{e}");
        assert!(tokens().validate().is_ok());
        assert!(!format!("{:?}", tokens()).contains("secret"));
    }

    #[test]
    fn tls_needs_both_halves_and_pem() {
        let dir = std::env::temp_dir().join(format!("sebulba-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, b"not a certificate").expect("write");
        let e = Tls::load(Some(&junk), None, None, None).expect_err("no key");
        assert!(e.to_string().starts_with("--tls-key"), "{e}");
        let e = Tls::load(None, None, Some(&junk), None).expect_err("not pem");
        assert!(e.to_string().starts_with("--tls-ca"), "{e}");
        let e = Tls::load(None, None, Some(&dir.join("absent.pem")), None).expect_err("absent");
        assert!(e.to_string().starts_with("--tls-ca"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
