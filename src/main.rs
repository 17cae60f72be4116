//! The `fluxo` binary: parses arguments and hands over to [`fluxo::cli`].

use clap::Parser;

/// mimalloc: the engine allocates and frees many small JSON trees per run; glibc's allocator
/// spent most of a dry run consolidating free chunks (see README, "Benchmarks").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let cli = fluxo::cli::Cli::parse();
    fluxo::cli::init_logging(cli.log_format);
    std::process::exit(fluxo::cli::main_with(cli).await);
}
