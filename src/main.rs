//! The `fluxo` binary: parses arguments and hands over to [`fluxo::cli`].

use clap::Parser;

/// mimalloc: the engine allocates and frees many small JSON trees per run; glibc's allocator
/// spent most of a dry run consolidating free chunks (see README, "Benchmarks").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Threads of tokio's blocking pool, where sled runs every store call. tokio's default (512)
/// let a load burst start hundreds of threads, each with its stack and allocator cache: peak
/// RSS under `scripts/load.sh` went from ~120 MB to ~440 MB when store calls moved there. The
/// machine's cores are what sled can use; a few more cover calls waiting on a flush.
const BLOCKING_THREADS: usize = 32;

fn main() {
    let cli = fluxo::cli::Cli::parse();
    fluxo::cli::init_logging(cli.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build();
    let code = match runtime {
        Ok(rt) => rt.block_on(fluxo::cli::main_with(cli)),
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            2
        }
    };
    std::process::exit(code);
}
