//! The `ceph` CLI as the cluster's admin, for the machine's [`CephMonAdmin`] port: the admin
//! key of Rook's Secret written as a private keyring ([`ceph_cli_from_secret`]), or an admin
//! the caller brings ([`AdminSource`]).

use std::path::PathBuf;
use std::sync::Arc;

use ceph_address_plan::rook;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use mon_failover::CephMonAdmin;
use mon_failover_io::CephCli;

use super::error::{MigrationError, api_error};

/// The Secret with the cluster's admin key.
pub const MON_SECRET: &str = "rook-ceph-mon";

/// A private directory holding the admin keyring and a `ceph.conf`, removed when dropped.
#[derive(Debug)]
pub struct AdminFiles {
    dir: tempfile::TempDir,
}

impl AdminFiles {
    /// The `ceph.conf`.
    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("ceph.conf")
    }

    /// The keyring.
    pub fn keyring(&self) -> PathBuf {
        self.dir.path().join("keyring")
    }
}

fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone())
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The client name and key of the cluster's admin in Rook's `rook-ceph-mon` Secret:
/// `ceph-username`/`ceph-secret` when present (Rook's current keys), else `client.admin` with
/// `admin-secret` (older Rook).
pub fn admin_key(secret: &Secret) -> Result<(String, String), MigrationError> {
    if let Some(key) = secret_value(secret, "ceph-secret") {
        let name =
            secret_value(secret, "ceph-username").unwrap_or_else(|| "client.admin".to_owned());
        return Ok((name, key));
    }
    if let Some(key) = secret_value(secret, "admin-secret") {
        return Ok(("client.admin".to_owned(), key));
    }
    Err(MigrationError::Shape(format!(
        "the Secret {MON_SECRET} has neither ceph-secret nor admin-secret"
    )))
}

fn write_private(path: &std::path::Path, text: &str) -> Result<(), MigrationError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let io = |source| MigrationError::Io {
        context: format!("writing {}", path.display()),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)
}

/// The `ceph` CLI as the cluster's admin: reads the key from the `rook-ceph-mon` Secret of
/// `namespace`, writes it as a keyring (mode 0600, in a private temporary directory, with a
/// `ceph.conf` naming `mon_host`) and returns the adapter with the files, which live as long
/// as the returned [`AdminFiles`].
pub async fn ceph_cli_from_secret(
    client: Client,
    namespace: &str,
    mon_host: &str,
) -> Result<(CephCli, AdminFiles), MigrationError> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let secret = secrets.get(MON_SECRET).await.map_err(api_error(format!(
        "reading Secret {namespace}/{MON_SECRET}"
    )))?;
    let (name, key) = admin_key(&secret)?;
    let dir = tempfile::Builder::new()
        .prefix("mcs-ceph-admin-")
        .tempdir()
        .map_err(|source| MigrationError::Io {
            context: "creating a private directory for the admin keyring".to_owned(),
            source,
        })?;
    let files = AdminFiles { dir };
    write_private(&files.keyring(), &format!("[{name}]\n\tkey = {key}\n"))?;
    write_private(
        &files.conf(),
        &format!("[global]\n\tmon_host = {mon_host}\n"),
    )?;
    let cli = CephCli::new(files.conf())
        .keyring(files.keyring())
        .client_name(name);
    Ok((cli, files))
}

/// Where the migration's mon admin (`ceph quorum_status`, `ceph mon remove`) comes from.
#[derive(Clone)]
pub enum AdminSource {
    /// The `ceph` CLI as the cluster's admin, with the key of Rook's `rook-ceph-mon` Secret
    /// ([`ceph_cli_from_secret`]), reaching the mons listed in `rook-ceph-mon-endpoints`.
    RookSecret,
    /// This admin for every cluster (tests, or a caller that brings its own).
    Fixed(Arc<dyn CephMonAdmin>),
}

impl std::fmt::Debug for AdminSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RookSecret => f.write_str("RookSecret"),
            Self::Fixed(_) => f.write_str("Fixed(..)"),
        }
    }
}

impl AdminSource {
    /// The mon admin for the cluster in `namespace` whose mons `mon_host` lists, and the files
    /// it reads (they must live as long as the admin is used).
    pub(super) async fn admin(
        &self,
        client: &Client,
        namespace: &str,
        mon_host: &str,
    ) -> Result<(Arc<dyn CephMonAdmin>, Option<AdminFiles>), MigrationError> {
        match self {
            Self::Fixed(admin) => Ok((Arc::clone(admin), None)),
            Self::RookSecret => {
                if mon_host.is_empty() {
                    return Err(MigrationError::Shape(format!(
                        "{} lists no mon endpoint to reach Ceph at",
                        rook::MON_ENDPOINTS_CONFIG_MAP
                    )));
                }
                let (cli, files) =
                    ceph_cli_from_secret(client.clone(), namespace, mon_host).await?;
                Ok((Arc::new(cli), Some(files)))
            }
        }
    }
}
