//! `mcsctl version`: the client's version, and with a cluster the Kubernetes server's and the
//! clusterset components' (clusterset-inspect reads them, clusterset-report groups and draws
//! them).

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use clusterset_report::Scope;
use clusterset_report::output::{Format, no_names, render};
use clusterset_report::version::{ClientVersion, VersionReport, render_table_in};

use crate::progress::Spinner;
use crate::{Global, output};

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
        .shape("version", Format::Table, Format::REPORT)?;
    let client_only = VersionReport::of_client(client_version());
    let render = |report: &VersionReport| render(report, &shape, render_table_in, no_names);
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
        let (reader, _) = crate::connect(&global.cluster, &global.namespace).await?;
        let spinner = Spinner::start("reading the server's version and the clusterset Pods");
        let server = clusterset_inspect::version::read(&reader, &scope).await;
        spinner.finish();
        anyhow::Ok(server?)
    });
    match server {
        Ok(server) => output::print(&render(&VersionReport::of_cluster(
            client_version(),
            server.version,
            &server.pods,
            &scope,
        ))?),
        Err(error) => {
            // As kubectl: the client's version, then why the server's is missing.
            output::print(&render(&client_only)?)?;
            Err(error)
        }
    }
}
