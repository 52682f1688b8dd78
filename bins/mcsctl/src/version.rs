//! `mcsctl version`: the client's version, and with a cluster the Kubernetes server's and the
//! clusterset components' (clusterset-inspect reads them, clusterset-report groups and draws
//! them).

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use clusterset_inspect::KubeReader;
use clusterset_report::Scope;
use clusterset_report::version::{
    ClientVersion, PART_OF_SELECTOR, VersionReport, components, render_table_in,
};

use crate::Global;
use crate::output::{self, Format};
use crate::progress::Spinner;

/// Options of `mcsctl version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Only the client's version; no cluster is contacted.
    #[arg(long)]
    client: bool,
}

/// The client's version: the workspace version mcsctl was built from.
pub fn client_version() -> ClientVersion {
    ClientVersion {
        version: env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// Runs `mcsctl version`: exit status 1 (after the client's version) when the cluster cannot
/// be reached.
pub fn run(args: &VersionArgs, global: &Global) -> anyhow::Result<ExitCode> {
    let shape = global
        .output
        .shape("version", Format::Table, output::REPORT)?;
    let client_only = VersionReport {
        client_version: client_version(),
        server_version: None,
        components: None,
        scope: None,
    };
    let render =
        |report: &VersionReport| output::render(report, &shape, render_table_in, output::no_names);
    if args.client {
        return output::print(&render(&client_only)?);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let scope = global
        .namespace
        .namespace
        .clone()
        .map_or(Scope::All, Scope::Namespace);
    let server = runtime.block_on(async {
        let connection = global.cluster.connect().await?;
        let reader = KubeReader::new(connection.client, connection.origin);
        let spinner = Spinner::start("reading the server's version and the clusterset Pods");
        let found = tokio::try_join!(
            reader.server_version(),
            reader.pods(&scope, PART_OF_SELECTOR)
        );
        spinner.finish();
        anyhow::Ok(found?)
    });
    match server {
        Ok((server_version, pods)) => output::print(&render(&VersionReport {
            server_version: Some(server_version),
            components: Some(components(&pods)),
            scope: Some(scope.to_string()),
            ..client_only
        })?),
        Err(error) => {
            // As kubectl: the client's version, then why the server's is missing.
            output::print(&render(&client_only)?)?;
            Err(error)
        }
    }
}
