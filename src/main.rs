//! The `fluxo` binary: parses arguments and hands over to [`fluxo::cli`].

use clap::Parser;

/// mimalloc: the engine allocates and frees many small JSON trees per run; glibc's allocator
/// spent most of a dry run consolidating free chunks (see README, "Benchmarks"). Built with
/// `no_thp` (Cargo.toml): mimalloc otherwise asks Linux for transparent huge pages on its
/// arenas (`madvise`), so every 2 MB page touched counts whole in the resident set: an idle
/// `fluxo serve` held 84 MB (64 MB of them huge pages) against 50 MB without, and its peak
/// under the webhook load 187-199 MB against 164-167 MB, at the same throughput.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Threads of tokio's blocking pool, where sled runs every store call: twice the cores (at
/// least 4). tokio's default (512) let a load burst start hundreds of threads, each with its
/// stack and allocator cache; measured with `scripts/load.sh` on 2 cores (sled new keys, 6 s):
/// 512 threads 440 MB peak RSS, 32 threads 306 MB and 4,004 req/s, 8 threads 175 MB and
/// 4,349 req/s, 4 threads 148 MB and 4,785 req/s (sled's work is CPU-bound: more threads only
/// contend). `FLUXO_BLOCKING_THREADS` overrides it.
fn blocking_threads() -> usize {
    std::env::var("FLUXO_BLOCKING_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
            (2 * cores).max(4)
        })
}

fn main() {
    let cli = fluxo::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(blocking_threads())
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            std::process::exit(2);
        }
    };
    let traces = match fluxo::cli::init_logging(
        cli.log_format,
        cli.otlp_endpoint.as_deref(),
        runtime.handle().clone(),
    ) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let code = runtime.block_on(fluxo::cli::main_with(cli));
    // The runtime's workers still run: the exporter's last HTTP call goes through them.
    if let Some(guard) = traces {
        guard.shutdown();
    }
    std::process::exit(code);
}
