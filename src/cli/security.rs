//! Tokens and TLS flags, shared by every networked command. A token comes from
//! its flag or variable, or from a file (`*_TOKEN_FILE`): Swarm and Kubernetes
//! hand secrets over as files (`/run/secrets/...`), which keeps them out of
//! the environment `docker inspect` shows.

use anyhow::Context;
use clap::Args;
use sebulba_transport::security::{Security, Tls, Tokens};
use std::path::{Path, PathBuf};

/// Tokens and TLS. A server accepts the classes whose tokens it is given (any
/// given: the rest are refused); a client sends its own class's token.
/// Secrets come best from the environment or from files.
#[derive(Args, Debug, Clone, Default)]
pub struct SecurityArgs {
    /// Token actors present (the learner and param-server accept it; actors send it).
    #[arg(long, env = "SEBULBA_ACTOR_TOKEN", hide_env_values = true)]
    pub actor_token: Option<String>,
    /// File holding `--actor-token` (a Swarm or Kubernetes secret).
    #[arg(long, env = "SEBULBA_ACTOR_TOKEN_FILE", conflicts_with = "actor_token")]
    pub actor_token_file: Option<PathBuf>,
    /// Token the learner presents to publish weights (the param-server accepts it).
    #[arg(long, env = "SEBULBA_LEARNER_TOKEN", hide_env_values = true)]
    pub learner_token: Option<String>,
    /// File holding `--learner-token`.
    #[arg(
        long,
        env = "SEBULBA_LEARNER_TOKEN_FILE",
        conflicts_with = "learner_token"
    )]
    pub learner_token_file: Option<PathBuf>,
    /// Read-only token: the evaluator and dashboards (read weights, file scores).
    #[arg(long, env = "SEBULBA_READ_TOKEN", hide_env_values = true)]
    pub read_token: Option<String>,
    /// File holding `--read-token`.
    #[arg(long, env = "SEBULBA_READ_TOKEN_FILE", conflicts_with = "read_token")]
    pub read_token_file: Option<PathBuf>,
    /// Server certificate chain (PEM): this role's servers speak TLS.
    #[arg(long, env = "SEBULBA_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// Private key of `--tls-cert` (PEM).
    #[arg(long, env = "SEBULBA_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// CA certificate (PEM) to verify servers with: this role's clients speak TLS.
    #[arg(long, env = "SEBULBA_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Server name to verify instead of each URL's host.
    #[arg(long, env = "SEBULBA_TLS_DOMAIN")]
    pub tls_domain: Option<String>,
}

impl SecurityArgs {
    /// These settings as the environment of a child process of the same
    /// binary (not as flags: tokens on a command line are in `ps`).
    pub fn to_env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let text = [
            ("SEBULBA_ACTOR_TOKEN", &self.actor_token),
            ("SEBULBA_LEARNER_TOKEN", &self.learner_token),
            ("SEBULBA_READ_TOKEN", &self.read_token),
            ("SEBULBA_TLS_DOMAIN", &self.tls_domain),
        ];
        let paths = [
            ("SEBULBA_ACTOR_TOKEN_FILE", &self.actor_token_file),
            ("SEBULBA_LEARNER_TOKEN_FILE", &self.learner_token_file),
            ("SEBULBA_READ_TOKEN_FILE", &self.read_token_file),
            ("SEBULBA_TLS_CERT", &self.tls_cert),
            ("SEBULBA_TLS_KEY", &self.tls_key),
            ("SEBULBA_TLS_CA", &self.tls_ca),
        ];
        let text = text
            .into_iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| (k, v.into())));
        let paths = paths
            .into_iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| (k, v.into())));
        text.chain(paths).collect()
    }

    pub fn load(&self) -> anyhow::Result<Security> {
        let tokens = Tokens {
            actor: token(&self.actor_token, self.actor_token_file.as_deref(), "actor")?,
            learner: token(
                &self.learner_token,
                self.learner_token_file.as_deref(),
                "learner",
            )?,
            read_only: token(&self.read_token, self.read_token_file.as_deref(), "read")?,
        };
        let tls = Tls::load(
            self.tls_cert.as_deref(),
            self.tls_key.as_deref(),
            self.tls_ca.as_deref(),
            self.tls_domain.clone(),
        )?;
        Ok(Security::new(tokens, tls)?)
    }
}

/// A token from its value (empty: none) or its file (surrounding whitespace
/// dropped: `echo` and editors add a newline; an empty file is an error, not
/// an open server).
fn token(
    value: &Option<String>,
    file: Option<&Path>,
    class: &str,
) -> anyhow::Result<Option<String>> {
    let Some(path) = file else {
        return Ok(value.clone().filter(|t| !t.is_empty()));
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--{class}-token-file: reading {}", path.display()))?;
    let t = text.trim();
    anyhow::ensure!(
        !t.is_empty(),
        "--{class}-token-file: {} is empty",
        path.display()
    );
    anyhow::ensure!(
        !t.contains(char::is_whitespace),
        "--{class}-token-file: {} holds more than one word",
        path.display()
    );
    Ok(Some(t.to_string()))
}

#[cfg(test)]
mod tests {
    use super::token;

    #[test]
    fn a_token_file_is_read_trimmed_and_an_empty_one_refused() {
        let dir = std::env::temp_dir().join(format!("sebulba-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("actor.token");
        std::fs::write(&file, "s3cret\n").expect("write");
        assert_eq!(
            token(&None, Some(&file), "actor").expect("read"),
            Some("s3cret".into())
        );
        std::fs::write(&file, " \n").expect("write");
        let err = token(&None, Some(&file), "actor").expect_err("empty");
        assert!(format!("{err:#}").contains("--actor-token-file"), "{err:#}");
        std::fs::write(&file, "two words").expect("write");
        assert!(token(&None, Some(&file), "actor").is_err());
        let missing = dir.join("missing");
        let err = token(&None, Some(&missing), "read").expect_err("missing");
        assert!(format!("{err:#}").contains("missing"), "{err:#}");
        // Without a file: the value, an empty one meaning none.
        assert_eq!(
            token(&Some(String::new()), None, "read").expect("none"),
            None
        );
        assert_eq!(
            token(&Some("t".into()), None, "read").expect("value"),
            Some("t".into())
        );
        std::fs::remove_dir_all(&dir).expect("clean");
    }
}
