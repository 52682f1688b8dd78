//! `mcs-ceph-operator`: flags in, the library's runtime out (see the library documentation).
#![forbid(unsafe_code)]

use clap::Parser;
use mcs_ceph_operator::cli::{Cli, Command};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            print!("{}", mcs_ceph_operator::cli::crd_yaml()?);
            Ok(())
        }
        Command::Run(args) => {
            clusterset_daemon::init_logging(args.log_format);
            mcs_ceph_operator::cli::run(*args).await?;
            Ok(())
        }
    }
}
