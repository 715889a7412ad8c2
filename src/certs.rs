//! `sebulba certs`: a private CA and one server certificate for every role's
//! servers, so TLS can be turned on without openssl. The CA key is not kept:
//! to add a name, make a new set.

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
    let files = [
        ("ca.pem", ca.pem()),
        ("server.pem", server.pem()),
        ("server.key", key.serialize_pem()),
    ];
    for (name, pem) in files {
        let path = out.join(name);
        std::fs::write(&path, pem).with_context(|| format!("writing {}", path.display()))?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let key = out.join("server.key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restricting {}", key.display()))?;
    }
    info!(out = %out.display(), ?names, "wrote ca.pem, server.pem, server.key");
    Ok(())
}
