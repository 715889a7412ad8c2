//! `sebulba certs`: a private CA and one server certificate for every role's
//! servers, so TLS can be turned on without openssl, and the three role tokens
//! in `tokens.env`, which every compose command of a secured cluster reads
//! (`--env-file`), and again one per file (`actor.token`, `learner.token`,
//! `read.token`) for Swarm secrets. The CA key is not kept: to add a name,
//! make a new set.

use anyhow::Context;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use std::path::Path;
use tracing::info;

pub fn write(out: &Path, names: &[String]) -> anyhow::Result<()> {
    anyhow::ensure!(!names.is_empty(), "--names: give at least one name");
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sebulba cluster CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let key = KeyPair::generate()?;
    let server = CertificateParams::new(names.to_vec())
        .context("--names")?
        .signed_by(&key, &ca)?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let write = |name: &str, pem: String, private: bool| -> anyhow::Result<()> {
        use std::io::Write;
        let path = out.join(name);
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        // The key is private from its first byte (no window of default mode).
        // (An existing file keeps its mode, so it is replaced, not rewritten.)
        #[cfg(unix)]
        if private {
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::remove_file(&path);
            opts.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = private;
        opts.open(&path)
            .and_then(|mut f| f.write_all(pem.as_bytes()))
            .with_context(|| format!("writing {}", path.display()))
    };
    write("ca.pem", ca.pem(), false)?;
    write("server.pem", server.pem(), false)?;
    write("server.key", key.serialize_pem(), true)?;
    let tokens = tokens();
    let env: String = tokens
        .iter()
        .map(|(var, _, t)| format!("{var}={t}\n"))
        .collect();
    write("tokens.env", env, true)?;
    for (_, file, t) in tokens {
        write(file, t, true)?;
    }
    info!(
        out = %out.display(),
        ?names,
        "wrote ca.pem, server.pem, server.key, tokens.env, actor.token, learner.token, read.token"
    );
    Ok(())
}

/// The three role tokens, 192 random bits each (hex): (variable, file, token).
fn tokens() -> [(&'static str, &'static str, String); 3] {
    use rand::Rng;
    let token = || {
        let bytes: [u8; 24] = rand::rng().random();
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    [
        ("SEBULBA_ACTOR_TOKEN", "actor.token", token()),
        ("SEBULBA_LEARNER_TOKEN", "learner.token", token()),
        ("SEBULBA_READ_TOKEN", "read.token", token()),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn three_distinct_long_tokens() {
        let tokens: Vec<String> = super::tokens().into_iter().map(|(_, _, t)| t).collect();
        for t in &tokens {
            assert_eq!(t.len(), 48);
            assert!(t.chars().all(|c| c.is_ascii_hexdigit()));
        }
        assert!(tokens[0] != tokens[1] && tokens[1] != tokens[2] && tokens[0] != tokens[2]);
    }
}
