//! The `fluxo` binary: parses arguments and hands over to [`fluxo::cli`].

use clap::Parser;

/// mimalloc: the engine allocates and frees many small JSON trees per run; glibc's allocator
/// spent most of a dry run consolidating free chunks (see README, "Benchmarks").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FLUXO_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = fluxo::cli::Cli::parse();
    std::process::exit(fluxo::cli::main_with(cli).await);
}
