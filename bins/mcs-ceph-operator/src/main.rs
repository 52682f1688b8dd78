//! `mcs-ceph-operator`: flags in, the library's runtime out (see the library documentation).
#![forbid(unsafe_code)]

use clap::Parser;
use mcs_ceph_operator::cli::{Cli, Command, LogFormat};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            print!("{}", mcs_ceph_operator::cli::crd_yaml()?);
            Ok(())
        }
        Command::Run(args) => {
            let filter = tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
            let builder = tracing_subscriber::fmt().with_env_filter(filter);
            match args.log_format {
                LogFormat::Json => builder.json().init(),
                LogFormat::Text => builder.init(),
            }
            mcs_ceph_operator::cli::run(*args).await?;
            Ok(())
        }
    }
}
