//! `mcsctl`: the clusterset command line.
#![forbid(unsafe_code)]

mod crds;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The clusterset command line: Multi-Cluster Services for Ceph on Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "mcsctl", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print CustomResourceDefinitions generated from the mcs-types crate.
    ///
    /// By default prints the ServiceExport and ServiceImport CRDs (multicluster.x-k8s.io,
    /// mcs-api v0.5.0, versions v1alpha1 and v1beta1) as multi-document YAML.
    ///
    /// Examples:
    ///   mcsctl crds | kubectl apply --server-side -f -
    ///   mcsctl crds --about | kubectl apply --server-side -f -
    #[command(verbatim_doc_comment)]
    Crds(crds::CrdsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crds(args) => crds::render(&args),
    };
    match result {
        Ok(output) => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(output.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => ExitCode::SUCCESS,
                // A closed pipe (`mcsctl crds | head`) is not an error worth a message.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: cannot write output: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
