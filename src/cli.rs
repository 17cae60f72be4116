//! The `fluxo` command line (SPEC §6): a thin clap front end over the library.
//!
//! Exit codes: 0 ok, 1 a run failed (or timed out), 2 bad input or usage. Every bad input gets
//! a message naming what and where, and nothing is written.

use std::io::{IsTerminal, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::Value;

use crate::app::memory::entry_json;
use crate::clock::{Clock, SystemClock};
use crate::connections::ConnectionStore as _;
use crate::run::{Mode, RunRecord, RunStatus, Trigger};
use crate::runtime::{Engine, RecoverPolicy, RunRequest};
use crate::steps::Registry;
use crate::store::{MemoryStore, RunQuery, RunStore, SledConfig, SledStore, Store};
use crate::workflow::{self, Compiled, Problem, Severity};

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: a run failed or timed out.
pub const EXIT_RUN_FAILED: i32 = 1;
/// Exit code: bad input or usage.
pub const EXIT_BAD_INPUT: i32 = 2;

/// Fluxo: automations that are safe to re-run.
#[derive(Debug, Parser)]
#[command(name = "fluxo", version, about, long_about = None)]
pub struct Cli {
    /// Data directory (sled store of memory keys and run history). Default: the platform's
    /// app-data dir, or $FLUXO_DATA_DIR.
    #[arg(long, global = true, env = "FLUXO_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Log format on stderr: `text` for people, `json` (one object per line, with the
    /// request, run and workflow ids of its spans as fields) for log collectors. The level is
    /// $FLUXO_LOG (default `warn`; e.g. `info`, `fluxo=debug`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "FLUXO_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Export OpenTelemetry traces (a span per run, step and HTTP attempt) to this OTLP/HTTP
    /// collector, e.g. `http://localhost:4318` (`/v1/traces` is appended when the URL has no
    /// path). Off when unset. Incoming W3C `traceparent` headers on webhooks and the run API
    /// become the runs' parents; outbound HTTP calls carry one.
    #[arg(
        long,
        global = true,
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL"
    )]
    pub otlp_endpoint: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Start logging to stderr in `format`, at the level `$FLUXO_LOG` gives (default `warn`), and
/// with `otlp_endpoint` the export of traces ([`crate::traces`]; their HTTP calls run on
/// `runtime`). The guard must be shut down before the process exits (it exports the last
/// spans). Errors: an unusable endpoint (nothing is installed then).
pub fn init_logging(
    format: LogFormat,
    otlp_endpoint: Option<&str>,
    runtime: tokio::runtime::Handle,
) -> Result<Option<crate::traces::TracesGuard>, String> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("FLUXO_LOG").unwrap_or_else(|_| "warn".into());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .boxed(),
    };
    let registry = tracing_subscriber::registry().with(fmt.with_filter(filter));
    match otlp_endpoint.map(str::trim).filter(|e| !e.is_empty()) {
        None => {
            registry.init();
            Ok(None)
        }
        Some(endpoint) => {
            let (traces, guard) = crate::traces::layer(endpoint, runtime)?;
            registry.with(traces).init();
            Ok(Some(guard))
        }
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a workflow file once (live, or --dry-run).
    Run(RunArgs),
    /// Validate workflow files: errors and linter warnings with step ids and paths.
    Validate(ValidateArgs),
    /// Run history.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Memory keys.
    #[command(subcommand)]
    Memory(MemoryCommand),
    /// Connections: the accounts connector steps act as, kept encrypted in
    /// `<data-dir>/connections.enc` (secrets are never printed).
    #[command(subcommand)]
    Connections(ConnectionsCommand),
    /// Print the step-kind catalog (descriptors and config JSON Schemas) as JSON.
    StepKinds,
    /// Start the sandbox destination (a small CRM/ledger honouring Idempotency-Key) and the
    /// vendor fakes (HubSpot, Stripe, Slack, Google Sheets, an OAuth server).
    Sandbox(SandboxArgs),
    /// Start the HTTP server: webhooks with dedupe at the door, the REST API, the browser UI.
    Serve(ServeArgs),
    /// Prove a workflow is safe to re-run: replay an event against a private sandbox (twice,
    /// after a timeout-after-write, as a new event, failed then replayed) and print a table.
    Check(CheckArgs),
    /// Rewrite workflow files in the file format saves use (small objects on one line, keys
    /// in their order, whole positions as integers), so hand edits and saves diff cleanly.
    /// The version is not bumped. `--check`: change nothing, exit 1 if a file would change.
    Fmt(FmtArgs),
    /// The shared PostgreSQL database of a scale-out deployment.
    #[command(subcommand)]
    Db(DbCommand),
    /// Print a shell completion script: `fluxo completions bash > /etc/bash_completion.d/fluxo`
    /// (zsh: into a directory on `$fpath` as `_fluxo`; fish: `~/.config/fish/completions/`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the HTTP API's OpenAPI 3.1 document (what `GET /api/v1/openapi.json` serves);
    /// the UI's client types are generated from it (`cd ui && npm run gen:api`).
    #[command(hide = true)]
    Openapi,
    /// Write the man pages (`fluxo.1` and one per subcommand, `fluxo-serve.1`, …) into a
    /// directory (`make man`).
    #[command(hide = true)]
    Man {
        /// Where to write them (created if missing).
        #[arg(long, default_value = "target/man")]
        out: PathBuf,
    },
}

fn cmd_completions(shell: clap_complete::Shell) -> CliResult {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "fluxo", &mut std::io::stdout());
    Ok(EXIT_OK)
}

fn cmd_man(out: &Path) -> CliResult {
    use clap::CommandFactory;
    let io = |e: std::io::Error| {
        CliError::bad_input(format!("cannot write man pages to {}: {e}", out.display()))
    };
    std::fs::create_dir_all(out).map_err(io)?;
    let cmd = Cli::command();
    clap_mangen::generate_to(cmd, out).map_err(io)?;
    println!("man pages written to {}", out.display());
    Ok(EXIT_OK)
}

/// `fluxo db`.
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Create or upgrade the schema (the migrations embedded in this binary; safe to run from
    /// several processes at once: one applies them, the others wait). `fluxo serve --store`
    /// runs them too.
    Migrate {
        /// The database: `postgres://user:password@host:port/database`.
        #[arg(long, env = "FLUXO_STORE", hide_env_values = true)]
        store: String,
    },
}

/// `fluxo check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Workflow file (JSON). A workflow that fans out is checked with its targets, read from
    /// `<target id>.json` beside it.
    pub workflow: PathBuf,
    /// The event: inline JSON, `@file.json`, or `-` for stdin. For a scheduled workflow that
    /// fans out: one item of the source its poll lists (e.g. a payment).
    #[arg(long, short, value_name = "JSON|@FILE|-")]
    pub event: String,
    /// Dot path of the event's business id, changed to make the "new event" variant; repeat or
    /// comma-separate for several (e.g. `issue.id,issue.number`). Default: the id paths the
    /// workflow's own keys read (a dedupe key, a claim key, an idempotency key: `input.issue.id`
    /// → `issue.id`), plus `id` and `data.object.id` where the event has them.
    #[arg(long = "id-path", value_name = "PATH", value_delimiter = ',')]
    pub id_path: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `fluxo serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:8787", env = "FLUXO_ADDR")]
    pub addr: SocketAddr,
    /// Folder of workflow files, the source of truth (PUT writes the file).
    #[arg(long, default_value = "workflows", env = "FLUXO_WORKFLOWS")]
    pub workflows: PathBuf,
    /// API token for /api/v1 (default: `<data-dir>/token`, generated on first start). On the
    /// command line it is visible to every user of the machine (`ps`): prefer `--token-file`
    /// or `FLUXO_TOKEN`.
    #[arg(long, env = "FLUXO_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A file holding the API token (its first line; surrounding white space is trimmed), as
    /// systemd credentials and Docker secrets provide one. Errors: unreadable or empty.
    #[arg(long, env = "FLUXO_TOKEN_FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    #[command(flatten)]
    pub connections_key: ConnectionsKeyArgs,
    /// Runs executed at once.
    #[arg(long, default_value_t = 8, env = "FLUXO_WORKERS")]
    pub workers: usize,
    /// Priority of executing runs against taking deliveries: the workers' threads run at this
    /// nice value (0 = the same priority as the HTTP server, 19 = the lowest; Linux only).
    /// Above 0, executions also yield to a burst: while 8 or more deliveries wait at the door
    /// at once and the CPU is contended (Linux's CPU pressure), one worker takes new runs and
    /// the others wait (which also spares a shared database). With 10, a burst of webhooks is
    /// accepted (durably) first and executed from the queue; a server with CPU to spare
    /// executes at full speed either way.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i32).range(0..=19), env = "FLUXO_RUN_NICE")]
    pub run_nice: i32,
    /// The store: the embedded sled store in the data dir (default), or a shared PostgreSQL
    /// database (`postgres://user:password@host:port/database`) that any number of `fluxo
    /// serve` processes use at once (the schema is migrated at start).
    #[arg(long, env = "FLUXO_STORE", hide_env_values = true)]
    pub store: Option<String>,
    /// Seconds a run taken from a shared PostgreSQL queue stays leased without a heartbeat;
    /// a dead process's runs are recovered by another process after it.
    #[arg(long, default_value_t = 30, env = "FLUXO_LEASE_S", value_parser = clap::value_parser!(u64).range(1..))]
    pub lease_s: u64,
    /// Who may read GET /metrics: `token` (the API token, the default), `loopback` (anyone
    /// when listening on a loopback address, else the token; never behind a reverse proxy on
    /// the same host, whose requests all come from loopback) or `none` (always open).
    #[arg(long, value_enum, default_value_t = crate::app::MetricsAuth::Token, env = "FLUXO_METRICS_AUTH")]
    pub metrics_auth: crate::app::MetricsAuth,
    /// Request body limit in bytes (413 above it).
    #[arg(long, default_value_t = crate::server::DEFAULT_BODY_LIMIT, env = "FLUXO_BODY_LIMIT")]
    pub body_limit: usize,
    /// Keep the newest N finished runs per workflow.
    #[arg(long, default_value_t = 10_000, env = "FLUXO_RETENTION_RUNS")]
    pub retention_runs: usize,
    /// Keep finished runs for D days (default: no age limit).
    #[arg(long, env = "FLUXO_RETENTION_DAYS")]
    pub retention_days: Option<u32>,
    /// Built browser UI to serve at / (default: ui/dist when it exists).
    #[arg(long, env = "FLUXO_UI")]
    pub ui: Option<PathBuf>,
    /// sled page cache in MiB.
    #[arg(long, default_value_t = SledConfig::DEFAULT_CACHE_CAPACITY_BYTES / (1024 * 1024), env = "FLUXO_CACHE_MB")]
    pub cache_mb: u64,
    /// Runs a dead process left running: `resume-safe` resumes those whose in-flight step is
    /// safe to repeat (the rest become interrupted, with the reason); `none` marks them all
    /// interrupted for a person to resume.
    #[arg(long, value_enum, default_value_t = RecoverArg::ResumeSafe, env = "FLUXO_RECOVER")]
    pub recover: RecoverArg,
    /// A run that was executing when the process died this many times in a row (e.g. a step
    /// that makes it abort) is quarantined at the next start: recorded failed (error code
    /// `quarantined`, the step named) and never executed again automatically; resume it once
    /// the cause is fixed. 0: never.
    #[arg(long, default_value_t = crate::app::quarantine::DEFAULT_QUARANTINE_AFTER, env = "FLUXO_QUARANTINE_AFTER")]
    pub quarantine_after: u32,
    /// Seconds a client may take to send a request's headers (also the keep-alive idle
    /// time); then the connection is closed.
    #[arg(long, default_value_t = crate::server::listen::DEFAULT_HEADER_READ_TIMEOUT.as_secs(), env = "FLUXO_HEADER_TIMEOUT_S", value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_s: u64,
    /// Seconds a request body may stall between two chunks; then 408 and the connection is
    /// closed.
    #[arg(long, default_value_t = crate::server::listen::DEFAULT_BODY_READ_TIMEOUT.as_secs(), env = "FLUXO_BODY_TIMEOUT_S", value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_s: u64,
    /// Most connections open at once; more wait to be accepted.
    #[arg(long, default_value_t = crate::server::listen::DEFAULT_MAX_CONNECTIONS, env = "FLUXO_MAX_CONNECTIONS", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,
    /// Seconds a whole request body may take, from the end of its head; then 408 and the
    /// connection is closed.
    #[arg(long, default_value_t = crate::server::listen::DEFAULT_BODY_DEADLINE.as_secs(), env = "FLUXO_BODY_DEADLINE_S", value_parser = clap::value_parser!(u64).range(1..))]
    pub body_deadline_s: u64,
    /// Least average rate of a request body in bytes/s, once --body-rate-grace-s has passed;
    /// slower is 408 and the connection is closed (0: no minimum).
    #[arg(long, default_value_t = crate::server::listen::DEFAULT_BODY_MIN_RATE, env = "FLUXO_BODY_MIN_RATE")]
    pub body_min_rate: u64,
    /// Seconds a request body may take before --body-min-rate applies.
    #[arg(long, default_value_t = crate::server::listen::DEFAULT_BODY_RATE_GRACE.as_secs(), env = "FLUXO_BODY_RATE_GRACE_S")]
    pub body_rate_grace_s: u64,
    /// Most connections open at once from one client address while the server is crowded
    /// (the reserved connections in use); a newer one sheds the address's oldest request body
    /// in progress, or is refused (503).
    #[arg(long, default_value_t = crate::server::listen::DEFAULT_MAX_CONNECTIONS_PER_IP, env = "FLUXO_MAX_CONNECTIONS_PER_IP", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections_per_ip: usize,
    /// Most request bodies in progress (slow bodies) from one client address; a newer one
    /// sheds the address's oldest (503).
    #[arg(long, default_value_t = crate::server::listen::DEFAULT_MAX_SLOW_BODIES_PER_IP, env = "FLUXO_MAX_SLOW_BODIES_PER_IP", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_slow_bodies_per_ip: usize,
    /// Connections request bodies in progress never take, kept for the API, health checks
    /// and fast webhooks (at most half of --max-connections is used).
    #[arg(long, default_value_t = crate::server::listen::DEFAULT_RESERVED_CONNECTIONS, env = "FLUXO_RESERVED_CONNECTIONS")]
    pub reserved_connections: usize,
    /// Never print a token this start generates, only the file it is saved in: for a service
    /// whose output ends in a journal (the packaged fluxo.service sets it).
    #[arg(long, env = "FLUXO_HIDE_TOKEN")]
    pub hide_token: bool,
}

/// `--recover`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecoverArg {
    ResumeSafe,
    None,
}

impl From<RecoverArg> for RecoverPolicy {
    fn from(a: RecoverArg) -> Self {
        match a {
            RecoverArg::ResumeSafe => RecoverPolicy::ResumeSafe,
            RecoverArg::None => RecoverPolicy::None,
        }
    }
}

/// `fluxo run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Workflow file (JSON).
    pub workflow: PathBuf,
    /// Input: inline JSON, `@file.json`, or `-` for stdin. Default `{}`.
    #[arg(long, short, value_name = "JSON|@FILE|-")]
    pub input: Option<String>,
    /// Simulate every side effect: no request leaves, no store byte changes.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the run record as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `fluxo fmt`.
#[derive(Debug, Args)]
pub struct FmtArgs {
    /// Workflow files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// List the files that are not formatted and exit 1; write nothing.
    #[arg(long)]
    pub check: bool,
}

/// `fluxo validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Workflow files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Print problems as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `fluxo runs …`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first.
    List(RunsListArgs),
    /// Show one run.
    Show {
        run_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Replay a run: a new run with the original input, linked by replay_of.
    Replay {
        run_id: String,
        /// Simulate instead of acting.
        #[arg(long)]
        dry_run: bool,
        /// Run the definition the original run recorded instead of the current file.
        #[arg(long)]
        original: bool,
        /// Where the current workflow files are (default ./workflows).
        #[arg(long, default_value = "workflows")]
        workflows: PathBuf,
        /// Run a corrected payload instead of the original input: inline JSON, `@file.json`,
        /// or `-` for stdin (recorded as `input_edited`).
        #[arg(long, value_name = "JSON|@FILE|-")]
        input: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Resume a failed, timed-out or interrupted run: a new run of its recorded definition
    /// that reuses the steps that succeeded and executes from the failed or in-flight step.
    Resume {
        run_id: String,
        /// Execute from this step instead (its upstream steps must all have succeeded).
        #[arg(long = "from", value_name = "STEP")]
        from_step: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Resume or replay every failed live run matching the filters, as history's "select all
    /// failed" does: prints what would happen; with --yes does it, executing the new runs here
    /// with a progress bar. Dry runs are never replayed live; at most 10,000 runs.
    Bulk(RunsBulkArgs),
}

/// `fluxo runs bulk`: the filters of `POST /runs/bulk` ([`crate::app::runs::RunFilter`]).
#[derive(Debug, Args)]
pub struct RunsBulkArgs {
    /// Only runs of this workflow id.
    #[arg(long)]
    pub workflow: Option<String>,
    /// failed, timed_out or interrupted (default: all three)
    #[arg(long)]
    pub status: Option<String>,
    /// live or dry (dry runs are counted and excluded either way)
    #[arg(long)]
    pub mode: Option<String>,
    /// api, manual, webhook, schedule, replay, resume, fan_out, cli
    #[arg(long)]
    pub trigger: Option<String>,
    /// Exact idempotency/event key.
    #[arg(long)]
    pub key: Option<String>,
    /// Created at or after: RFC 3339 or unix ms.
    #[arg(long)]
    pub since: Option<String>,
    /// Created before: RFC 3339 or unix ms.
    #[arg(long)]
    pub until: Option<String>,
    /// A run id, a key or a value inside the run, exact or prefix.
    #[arg(long)]
    pub q: Option<String>,
    /// Only runs that failed for this reason (`HTTP 500 at create`, as history groups them).
    #[arg(long)]
    pub error: Option<String>,
    /// The definition a replay runs: `current` (the workflow file) or `original` (the run's
    /// recorded one). Resumes always run the recorded one.
    #[arg(long, default_value = "current")]
    pub version: String,
    /// Where the current workflow files are.
    #[arg(long, default_value = "workflows")]
    pub workflows: PathBuf,
    /// Act: start the runs and execute them (without it, only the preview is printed).
    #[arg(long)]
    pub yes: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `fluxo runs list`.
#[derive(Debug, Args)]
pub struct RunsListArgs {
    #[arg(long)]
    pub workflow: Option<String>,
    /// queued, running, succeeded, failed, timed_out, interrupted, skipped
    #[arg(long)]
    pub status: Option<String>,
    /// live or dry
    #[arg(long)]
    pub mode: Option<String>,
    /// Exact idempotency/event key.
    #[arg(long)]
    pub key: Option<String>,
    /// Run id or key prefix.
    #[arg(long)]
    pub q: Option<String>,
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    #[arg(long)]
    pub cursor: Option<String>,
    #[arg(long)]
    pub json: bool,
}

/// `fluxo memory …`.
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Read one key.
    Get { namespace: String, key: String },
    /// List namespaces, or the keys of one namespace.
    List {
        namespace: Option<String>,
        #[arg(long, default_value = "")]
        prefix: String,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Delete one key (manual compensation after checking the destination).
    Delete { namespace: String, key: String },
}

/// The key of the connections store (`fluxo serve`, `fluxo connections`).
#[derive(Debug, Clone, Default, Args)]
pub struct ConnectionsKeyArgs {
    /// A file holding the connections store's key (its first line: 64 hex characters or base64
    /// of 32 bytes). Default: the key in $FLUXO_CONNECTIONS_KEY (same forms), else
    /// `<data-dir>/connections.key`, generated on first use.
    #[arg(long, env = "FLUXO_CONNECTIONS_KEY_FILE", value_name = "PATH")]
    pub connections_key_file: Option<PathBuf>,
}

impl ConnectionsKeyArgs {
    fn choice(&self) -> crate::connections::key::KeyChoice {
        crate::connections::key::KeyChoice::from_env(self.connections_key_file.clone())
    }
}

/// `fluxo connections …`.
#[derive(Debug, Subcommand)]
pub enum ConnectionsCommand {
    /// List the connections, each secret masked (`••••3456`).
    List {
        /// Print them as JSON (the API's view: secrets masked).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        key: ConnectionsKeyArgs,
    },
    /// Add or replace a connection. Its secret (a token, a password, a webhook URL) is read
    /// from --token-file or from standard input (the first line), never from an argument,
    /// which every user of the machine sees (`ps`).
    Add(ConnectionsAddArgs),
    /// Remove a connection.
    Remove {
        /// The connection id.
        id: String,
        #[command(flatten)]
        key: ConnectionsKeyArgs,
    },
    /// Test a connection: run its app's test request (a cheap read) as it. Exit 0 when the
    /// app accepted the credentials, 1 when it refused them or could not be reached.
    Test {
        /// The connection id.
        id: String,
        /// Print the result as JSON (`{ok, status, message}`).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        key: ConnectionsKeyArgs,
    },
}

/// `--kind` of `fluxo connections add`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CredentialKindArg {
    /// A bearer token (an API key, a private-app token, a Slack bot token).
    Bearer,
    /// HTTP Basic: `--username`, and the password as the secret.
    Basic,
    /// A secret URL that is itself the credential (a Slack incoming webhook).
    WebhookUrl,
}

/// `fluxo connections add`.
#[derive(Debug, Args)]
pub struct ConnectionsAddArgs {
    /// The connection id: `[a-z0-9][a-z0-9_-]{0,63}` (what a step's `connection` names).
    #[arg(long)]
    pub id: String,
    /// The connector's app id (`hubspot`, `stripe`, `slack`).
    #[arg(long)]
    pub app: String,
    /// The credential's kind (OAuth 2 connections are made through the app's flow).
    #[arg(long, value_enum, default_value_t = CredentialKindArg::Bearer)]
    pub kind: CredentialKindArg,
    /// A file holding the secret (its first line, trimmed). Without it the secret is the first
    /// line of standard input, which must not be a terminal.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// The user name of a `basic` credential.
    #[arg(long)]
    pub username: Option<String>,
    /// A person's label (`HubSpot (sales)`).
    #[arg(long)]
    pub name: Option<String>,
    /// Replaces the connector's base URL (a sandbox fake, a regional host).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    #[command(flatten)]
    pub key: ConnectionsKeyArgs,
}

/// `fluxo sandbox`.
#[derive(Debug, Args)]
pub struct SandboxArgs {
    #[arg(long, default_value = "127.0.0.1:8788")]
    pub addr: SocketAddr,
}

/// A failure that ends the command with an exit code and a message.
#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    pub message: String,
}

impl CliError {
    fn bad_input(message: impl Into<String>) -> Self {
        CliError {
            code: EXIT_BAD_INPUT,
            message: message.into(),
        }
    }
}

type CliResult = Result<i32, CliError>;

/// Run the CLI; returns the process exit code.
pub async fn main_with(cli: Cli) -> i32 {
    match dispatch(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", e.message);
            e.code
        }
    }
}

async fn dispatch(cli: Cli) -> CliResult {
    let data_dir = cli.data_dir.clone();
    match cli.command {
        Command::Run(a) => cmd_run(data_dir, a).await,
        Command::Validate(a) => cmd_validate(a),
        Command::Runs(c) => cmd_runs(data_dir, c).await,
        Command::Memory(c) => cmd_memory(data_dir, c).await,
        Command::Connections(ConnectionsCommand::Test { id, json, key }) => {
            cmd_connection_test(data_dir, &id, json, &key).await
        }
        Command::Connections(c) => cmd_connections(data_dir, c),
        Command::StepKinds => {
            println!("{}", pretty(&Registry::builtin().catalog()));
            Ok(EXIT_OK)
        }
        Command::Sandbox(a) => cmd_sandbox(a).await,
        Command::Serve(a) => cmd_serve(data_dir, a).await,
        Command::Db(DbCommand::Migrate { store }) => cmd_db_migrate(&store).await,
        Command::Completions { shell } => cmd_completions(shell),
        Command::Man { out } => cmd_man(&out),
        Command::Openapi => {
            println!("{}", pretty(&crate::server::openapi::document()));
            Ok(EXIT_OK)
        }
        Command::Check(a) => cmd_check(a).await,
        Command::Fmt(a) => cmd_fmt(a),
    }
}

/// The data directory: the flag, else the platform's app-data dir.
pub fn resolve_data_dir(flag: Option<PathBuf>) -> Result<PathBuf, CliError> {
    if let Some(d) = flag {
        return Ok(d);
    }
    directories::ProjectDirs::from("dev", "fluxo", "fluxo")
        .map(|p| p.data_dir().to_path_buf())
        .ok_or_else(|| CliError::bad_input("no home directory to put data in: pass --data-dir DIR"))
}

/// Open the sled store of a data dir, with a clear message when another process holds it.
pub fn open_store(flag: Option<PathBuf>) -> Result<Arc<SledStore>, CliError> {
    open_store_with(flag, 64)
}

/// [`open_store`] with a page cache of `cache_mb` MiB.
pub fn open_store_with(flag: Option<PathBuf>, cache_mb: u64) -> Result<Arc<SledStore>, CliError> {
    let dir = resolve_data_dir(flag)?;
    // Owner-only (0700): it holds the store, the settings' secrets and the API token.
    crate::secrets::secure_dir(&dir).map_err(|e| {
        CliError::bad_input(format!("cannot create data dir {}: {e}", dir.display()))
    })?;
    let mut config = SledConfig::new(dir.join("store"));
    config.cache_capacity_bytes = cache_mb.saturating_mul(1024 * 1024);
    SledStore::open(&config).map(Arc::new).map_err(|e| {
        let msg = e.to_string();
        let hint = if msg.contains("lock") || msg.contains("WouldBlock") || msg.contains("temporarily unavailable") {
            " (is `fluxo serve` or the app using this data dir? use its HTTP API, or pass another --data-dir)"
        } else {
            ""
        };
        CliError::bad_input(format!("cannot open the store in {}: {msg}{hint}", dir.display()))
    })
}

/// Parse `--input`: inline JSON, `@file`, or `-` for stdin.
pub fn read_input(arg: Option<&str>) -> Result<Value, CliError> {
    let (text, origin) = match arg {
        None => return Ok(Value::Object(Default::default())),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| CliError::bad_input(format!("--input: cannot read stdin: {e}")))?;
            (s, "stdin".to_string())
        }
        Some(a) if a.starts_with('@') => {
            let path = &a[1..];
            let s = std::fs::read_to_string(path)
                .map_err(|e| CliError::bad_input(format!("--input: cannot read `{path}`: {e}")))?;
            (s, format!("`{path}`"))
        }
        Some(a) => (a.to_string(), "the --input argument".to_string()),
    };
    serde_json::from_str(&text).map_err(|e| {
        CliError::bad_input(format!(
            "--input: {origin} is not JSON (line {}, column {}): {e}",
            e.line(),
            e.column()
        ))
    })
}

fn load_workflow(path: &Path, registry: &Registry) -> Result<Compiled, CliError> {
    workflow::load_file(path, registry)
        .map_err(|problems| CliError::bad_input(format_problems(path, &problems)))
}

fn format_problems(path: &Path, problems: &[Problem]) -> String {
    let mut s = format!("{} is not a valid workflow:", path.display());
    for p in problems {
        s.push_str(&format!("\n  {p}"));
    }
    s
}

async fn cmd_run(data_dir: Option<PathBuf>, a: RunArgs) -> CliResult {
    let registry = Registry::builtin();
    let input = read_input(a.input.as_deref())?;
    let wf = load_workflow(&a.workflow, &registry)?;
    let store = open_store(data_dir)?;
    let engine = Engine::new(
        store.clone() as Arc<dyn Store>,
        Arc::new(SystemClock) as Arc<dyn Clock>,
    );
    let mode = if a.dry_run { Mode::Dry } else { Mode::Live };
    let progress = std::io::stderr().is_terminal() && !a.json;
    if progress {
        eprintln!(
            "running {} ({}){}",
            wf.id(),
            mode.as_str(),
            if a.dry_run {
                ": nothing will be sent or stored"
            } else {
                ""
            }
        );
    }
    let run = engine
        .run(&wf, RunRequest::new(input, Trigger::Cli, mode))
        .await
        .map_err(|e| CliError {
            code: EXIT_RUN_FAILED,
            message: format!("run history could not be written: {e}"),
        })?;
    flush(&store).await;
    if a.json {
        println!(
            "{}",
            pretty(&serde_json::to_value(&run).unwrap_or(Value::Null))
        );
    } else {
        for w in &wf.warnings {
            eprintln!("{w}");
        }
        print_run(&run);
    }
    Ok(exit_for(&run))
}

async fn flush(store: &SledStore) {
    if let Err(e) = store.flush().await {
        eprintln!("warning: flushing the store failed: {e}");
    }
}

fn exit_for(run: &RunRecord) -> i32 {
    if run.status == RunStatus::Succeeded {
        EXIT_OK
    } else {
        EXIT_RUN_FAILED
    }
}

/// The readable run view: a header and a step table (status, attempts, duration, output excerpt).
pub fn print_run(run: &RunRecord) {
    println!(
        "run {}  {}  workflow {} v{}  {}  {} ms",
        run.id,
        run.status,
        run.workflow_id,
        run.workflow_version,
        run.mode.as_str(),
        run.duration_ms.unwrap_or(0)
    );
    if let Some(r) = &run.replay_of {
        println!(
            "replay of {r}{}",
            if run.input_edited {
                " (input edited)"
            } else {
                ""
            }
        );
    }
    if let Some(r) = &run.resume_of {
        println!("resume of {r} (lineage {})", run.root());
    }
    for (what, ids) in [
        ("replayed by", &run.replayed_by),
        ("resumed by", &run.resumed_by),
    ] {
        if !ids.is_empty() {
            println!("{what} {}", ids.join(", "));
        }
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "step",
        "kind",
        "status",
        "port",
        "attempts",
        "ms",
        "output / error",
    ]);
    for s in &run.steps {
        let detail = match (&s.error, &s.output) {
            (Some(e), _) => format!("{}: {}", e.code, e.message),
            (None, Some(o)) => excerpt(o, 70),
            _ => String::new(),
        };
        t.add_row(vec![
            s.step_id.clone(),
            s.kind.clone(),
            match &s.reused_from {
                Some(r) => format!("reused from {r}"),
                None => format!("{:?}", s.status).to_lowercase(),
            },
            s.ports.join(","),
            s.attempts.len().to_string(),
            s.duration_ms.to_string(),
            detail,
        ]);
    }
    println!("{t}");
    for w in &run.warnings {
        println!("warning: {w}");
    }
    if let Some(e) = &run.error {
        let status = e
            .http_status
            .map(|s| format!(" (HTTP {s})"))
            .unwrap_or_default();
        println!(
            "error in step `{}`: {}: {}{status}",
            e.step, e.code, e.message
        );
    }
}

fn excerpt(v: &Value, max: usize) -> String {
    let s = v.to_string();
    if s.chars().count() <= max {
        s
    } else {
        format!("{}…", s.chars().take(max).collect::<String>())
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn cmd_validate(a: ValidateArgs) -> CliResult {
    let registry = Registry::builtin();
    let mut any_error = false;
    let mut report = Vec::new();
    for f in &a.files {
        let (compiled, problems) = match std::fs::read_to_string(f) {
            Ok(text) => workflow::check_text(&text, &registry),
            Err(e) => (
                None,
                vec![Problem::error(
                    "io",
                    f.display().to_string(),
                    None,
                    format!("cannot read: {e}"),
                )],
            ),
        };
        let secrets = compiled
            .as_ref()
            .map(|c| workflow::env::secrets_read_json(&c.workflow))
            .unwrap_or_else(|| Value::Array(Vec::new()));
        let errors = problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count();
        any_error |= errors > 0;
        if a.json {
            report.push(serde_json::json!({
                "file": f, "valid": errors == 0, "problems": problems, "secrets": secrets
            }));
        } else {
            let warnings = problems.len() - errors;
            let verdict = if errors == 0 { "ok" } else { "INVALID" };
            println!(
                "{}: {verdict} ({errors} error(s), {warnings} warning(s))",
                f.display()
            );
            for p in &problems {
                println!("  {p}");
            }
            if let Some(c) = &compiled {
                for (name, steps) in workflow::env::secrets_read(&c.workflow) {
                    let by = if steps.is_empty() {
                        "read by no step".to_string()
                    } else {
                        format!("read by {}", steps.join(", "))
                    };
                    println!("  secret env.{name}: {by}");
                }
            }
        }
    }
    if a.json {
        println!("{}", pretty(&Value::Array(report)));
    }
    Ok(if any_error { EXIT_BAD_INPUT } else { EXIT_OK })
}

async fn cmd_runs(data_dir: Option<PathBuf>, c: RunsCommand) -> CliResult {
    let dir = resolve_data_dir(data_dir.clone())?;
    let store = open_store(data_dir)?;
    match c {
        RunsCommand::Bulk(a) => cmd_runs_bulk(store, dir, a).await,
        RunsCommand::List(a) => {
            let status = a
                .status
                .as_deref()
                .map(|s| RunStatus::parse(s).ok_or_else(|| CliError::bad_input(format!("--status: `{s}` is not one of queued, running, succeeded, failed, timed_out, interrupted, skipped"))))
                .transpose()?;
            let mode = match a.mode.as_deref() {
                None => None,
                Some("live") => Some(Mode::Live),
                Some("dry") => Some(Mode::Dry),
                Some(m) => {
                    return Err(CliError::bad_input(format!(
                        "--mode: `{m}` is not live or dry"
                    )))
                }
            };
            if let Some(c) = &a.cursor {
                crate::store::check_cursor(c)
                    .map_err(|why| CliError::bad_input(format!("--cursor: `{c}`: {why}")))?;
            }
            let q = RunQuery {
                workflow: a.workflow,
                status,
                mode,
                key: a.key,
                q: a.q,
                limit: a.limit.clamp(1, 500),
                cursor: a.cursor,
                ..Default::default()
            };
            let page = store
                .list_runs(&q)
                .await
                .map_err(|e| CliError::bad_input(e.to_string()))?;
            if a.json {
                println!(
                    "{}",
                    pretty(&serde_json::to_value(&page).unwrap_or(Value::Null))
                );
                return Ok(EXIT_OK);
            }
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED);
            t.set_header(vec![
                "run", "workflow", "status", "mode", "trigger", "key", "created", "ms", "error",
            ]);
            for r in &page.runs {
                t.add_row(vec![
                    r.id.clone(),
                    r.workflow_id.clone(),
                    r.status.to_string(),
                    r.mode.as_str().to_string(),
                    r.trigger.as_str().to_string(),
                    r.idempotency_key.clone().unwrap_or_default(),
                    crate::clock::rfc3339(r.created_at.0),
                    r.duration_ms.map(|d| d.to_string()).unwrap_or_default(),
                    // The code only (`quarantined`, `http_status`, …): `runs show` has the rest.
                    r.error_code.clone().unwrap_or_default(),
                ]);
            }
            println!("{t}");
            if let Some(c) = page.next_cursor {
                println!("more: --cursor {c}");
            }
            Ok(EXIT_OK)
        }
        RunsCommand::Show { run_id, json } => {
            let run = get_run(&store, &run_id).await?;
            if json {
                println!(
                    "{}",
                    pretty(&serde_json::to_value(&run).unwrap_or(Value::Null))
                );
            } else {
                print_run(&run);
            }
            Ok(EXIT_OK)
        }
        RunsCommand::Replay {
            run_id,
            dry_run,
            original,
            workflows,
            input,
            json,
        } => {
            let edited = input.as_deref().map(|i| read_input(Some(i))).transpose()?;
            let registry = Registry::builtin();
            let run = get_run(&store, &run_id).await?;
            let wf = if original {
                workflow::check_value(&run.snapshot, &registry)
                    .0
                    .ok_or_else(|| CliError::bad_input("the run's snapshot no longer validates"))?
            } else {
                let path = workflows.join(format!("{}.json", run.workflow_id));
                load_workflow(&path, &registry)?
            };
            let engine = Engine::new(
                store.clone() as Arc<dyn Store>,
                Arc::new(SystemClock) as Arc<dyn Clock>,
            );
            let mode = if dry_run { Mode::Dry } else { Mode::Live };
            let new = engine
                .link_replay(&run, &wf, mode, edited)
                .await
                .map_err(|e| CliError {
                    code: EXIT_RUN_FAILED,
                    message: format!("run history could not be written: {e}"),
                })?;
            finish_run(&store, engine.execute(&wf, new).await, json).await
        }
        RunsCommand::Resume {
            run_id,
            from_step,
            json,
        } => {
            let run = get_run(&store, &run_id).await?;
            let engine = Engine::new(
                store.clone() as Arc<dyn Store>,
                Arc::new(SystemClock) as Arc<dyn Clock>,
            );
            let (wf, new, orig) = engine
                .resume_run(&run, from_step.as_deref())
                .await
                .map_err(|e| CliError::bad_input(format!("cannot resume run `{run_id}`: {e}")))?;
            store.put_run(&orig).await.map_err(|e| CliError {
                code: EXIT_RUN_FAILED,
                message: format!("run history could not be written: {e}"),
            })?;
            finish_run(&store, engine.execute(&wf, new).await, json).await
        }
    }
}

/// `fluxo runs bulk`: the app's bulk preview, then (`--yes`) the bulk action over the previewed
/// set (`until` = the preview's `as_of`) and each new run executed in this process, in order,
/// with a progress bar on a terminal. Exit 1 when a run could not be started or a new run did
/// not succeed.
async fn cmd_runs_bulk(store: Arc<SledStore>, dir: PathBuf, a: RunsBulkArgs) -> CliResult {
    use crate::app::runs::{preview_bulk, start_bulk, BulkAction, BulkRequest, RunFilter};
    let app_err =
        |e: crate::app::AppError| CliError::bad_input(format!("{}: {}", e.code, e.message));
    let engine = Engine::new(
        store.clone() as Arc<dyn Store>,
        Arc::new(SystemClock) as Arc<dyn Clock>,
    );
    let workflows = workflow::dir::WorkflowDir::load(&a.workflows, engine.registry().clone())
        .map_err(|e| {
            CliError::bad_input(format!(
                "cannot read workflows folder {}: {e}",
                a.workflows.display()
            ))
        })?;
    let options = crate::app::ServerOptions {
        data_dir: Some(dir),
        ..Default::default()
    };
    // The app over this data dir, without a listener or workers: the new runs are executed
    // below, one after another. The queue's receiving end is kept (and unused) meanwhile.
    let (state, _queue) = crate::app::AppState::open(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        engine,
        workflows,
        String::new(),
        options,
    )
    .await
    .map_err(|e| CliError::bad_input(format!("cannot open the app: {e}")))?;
    let mut req = BulkRequest {
        filter: RunFilter {
            workflow: a.workflow,
            status: a.status,
            mode: a.mode,
            trigger: a.trigger,
            key: a.key,
            since: a.since.map(Value::String),
            until: a.until.map(Value::String),
            q: a.q,
            error: a.error,
            duplicates: None,
        },
        version: Some(a.version),
    };
    let preview = preview_bulk(&state, &req).await.map_err(app_err)?;
    let headline = format!(
        "{} failed run{} matched: {} live ({} to resume, {} to replay, {} skipped), {} dry \
         excluded",
        preview.matched,
        if preview.matched == 1 { "" } else { "s" },
        preview.live,
        preview.resume,
        preview.replay,
        preview.skipped,
        preview.dry_excluded
    );
    if !a.yes {
        if a.json {
            println!(
                "{}",
                pretty(&serde_json::to_value(&preview).unwrap_or(Value::Null))
            );
        } else {
            println!("{headline}");
            println!("nothing done: add --yes to resume and replay them");
        }
        return Ok(EXIT_OK);
    }
    if !a.json {
        println!("{headline}");
    }
    // Exactly the previewed set: runs that fail after the preview are not taken.
    req.filter.until = Some(Value::String(preview.as_of.clone()));
    let done = start_bulk(&state, &req).await.map_err(app_err)?;
    let started: Vec<(String, String)> = done
        .runs
        .iter()
        .filter(|r| matches!(r.action, BulkAction::Resume | BulkAction::Replay))
        .filter_map(|r| Some((r.run_id.clone(), r.new_run_id.clone()?)))
        .collect();
    let bar = if std::io::stderr().is_terminal() && !a.json {
        indicatif::ProgressBar::new(started.len() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs [{elapsed}] {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut outcomes = Vec::with_capacity(started.len());
    for (original, new) in &started {
        bar.set_message(new.clone());
        crate::app::worker::execute_queued(&state, new).await;
        let status = match store.get_run(new).await {
            Ok(Some(r)) => r.status,
            _ => RunStatus::Queued,
        };
        outcomes.push((original.clone(), new.clone(), status));
        bar.inc(1);
    }
    bar.finish_and_clear();
    flush(&store).await;
    let failed = outcomes
        .iter()
        .filter(|(_, _, s)| *s != RunStatus::Succeeded)
        .count();
    if a.json {
        let mut v = serde_json::to_value(&done).unwrap_or(Value::Null);
        v["executed"] = serde_json::json!(outcomes
            .iter()
            .map(|(o, n, s)| serde_json::json!({"run_id": o, "new_run_id": n, "status": s}))
            .collect::<Vec<_>>());
        println!("{}", pretty(&v));
    } else {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header(vec!["failed run", "action", "new run", "status"]);
        for item in &done.runs {
            let status = outcomes
                .iter()
                .find(|(o, _, _)| *o == item.run_id)
                .map(|(_, _, s)| s.to_string())
                .or_else(|| item.reason.clone())
                .unwrap_or_default();
            t.add_row(vec![
                item.run_id.clone(),
                serde_json::to_value(item.action)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                item.new_run_id.clone().unwrap_or_default(),
                status,
            ]);
        }
        println!("{t}");
        println!(
            "{} started, {} succeeded, {} did not, {} could not be started",
            outcomes.len(),
            outcomes.len() - failed,
            failed,
            done.errors
        );
    }
    Ok(if failed > 0 || done.errors > 0 {
        EXIT_RUN_FAILED
    } else {
        EXIT_OK
    })
}

/// Flush, print a finished run (or its JSON record) and answer its exit code.
async fn finish_run(
    store: &SledStore,
    done: Result<RunRecord, crate::store::StoreError>,
    json: bool,
) -> CliResult {
    let new = done.map_err(|e| CliError {
        code: EXIT_RUN_FAILED,
        message: format!("run history could not be written: {e}"),
    })?;
    flush(store).await;
    if json {
        println!(
            "{}",
            pretty(&serde_json::to_value(&new).unwrap_or(Value::Null))
        );
    } else {
        print_run(&new);
    }
    Ok(exit_for(&new))
}

async fn get_run(store: &SledStore, id: &str) -> Result<RunRecord, CliError> {
    store
        .get_run(id)
        .await
        .map_err(|e| CliError::bad_input(e.to_string()))?
        .ok_or_else(|| CliError::bad_input(format!("no run `{id}` in this data dir")))
}

async fn cmd_memory(data_dir: Option<PathBuf>, c: MemoryCommand) -> CliResult {
    let store = open_store(data_dir)?;
    let now = SystemClock.now_ms();
    let err = |e: crate::store::StoreError| CliError::bad_input(e.to_string());
    match c {
        MemoryCommand::Get { namespace, key } => {
            match store.read(&namespace, &key, now).await.map_err(err)? {
                Some(e) => {
                    println!("{}", pretty(&entry_json(&e)));
                    Ok(EXIT_OK)
                }
                None => Err(CliError::bad_input(format!(
                    "no key `{key}` in namespace `{namespace}` (or it expired)"
                ))),
            }
        }
        MemoryCommand::List {
            namespace: None, ..
        } => {
            for ns in store.namespaces().await.map_err(err)? {
                println!("{ns}");
            }
            Ok(EXIT_OK)
        }
        MemoryCommand::List {
            namespace: Some(ns),
            prefix,
            limit,
        } => {
            let entries = store
                .list(&ns, &prefix, None, limit, now)
                .await
                .map_err(err)?;
            println!(
                "{}",
                pretty(&Value::Array(entries.iter().map(entry_json).collect()))
            );
            Ok(EXIT_OK)
        }
        MemoryCommand::Delete { namespace, key } => {
            let deleted = store.delete(&namespace, &key, now).await.map_err(err)?;
            flush(&store).await;
            println!("{}", serde_json::json!({"deleted": deleted}));
            Ok(EXIT_OK)
        }
    }
}

/// Open the connections store of a data dir (see [`crate::connections::key`] for the key),
/// or `None` when it has none yet and `create` is false (nothing is generated then).
fn open_connections(
    data_dir: Option<PathBuf>,
    key: &ConnectionsKeyArgs,
    create: bool,
) -> Result<Option<crate::connections::file::FileConnections>, CliError> {
    use crate::connections::file::{FileConnections, FILE};
    let dir = resolve_data_dir(data_dir)?;
    if !create && !dir.join(FILE).exists() {
        return Ok(None);
    }
    crate::secrets::secure_dir(&dir).map_err(|e| {
        CliError::bad_input(format!("cannot create data dir {}: {e}", dir.display()))
    })?;
    FileConnections::open_in(&dir, &key.choice())
        .map(Some)
        .map_err(|e| CliError::bad_input(format!("cannot open the connections store: {e}")))
}

/// The secret of `fluxo connections add`: the first line of `--token-file`, else of stdin
/// (refused when stdin is a terminal: pipe it). Errors name the source, never the secret.
fn read_connection_secret(token_file: Option<&Path>) -> Result<String, CliError> {
    let (text, origin) = match token_file {
        Some(path) => (
            std::fs::read_to_string(path).map_err(|e| {
                CliError::bad_input(format!(
                    "cannot read the secret from {} (--token-file): {e}",
                    path.display()
                ))
            })?,
            format!("{} (--token-file)", path.display()),
        ),
        None => {
            if std::io::stdin().is_terminal() {
                return Err(CliError::bad_input(
                    "the secret is read from --token-file or standard input, and stdin is a                      terminal: pipe it (`fluxo connections add … < token.txt`) or give                      --token-file (never an argument: `ps` shows those)",
                ));
            }
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| CliError::bad_input(format!("cannot read stdin: {e}")))?;
            (s, "standard input".to_string())
        }
    };
    let secret = text.lines().next().unwrap_or("").trim().to_string();
    if secret.is_empty() {
        return Err(CliError::bad_input(format!(
            "{origin} holds no secret: its first line is empty"
        )));
    }
    Ok(secret)
}

fn cmd_connections(data_dir: Option<PathBuf>, c: ConnectionsCommand) -> CliResult {
    use crate::app::connections as app;
    let failed = |e: crate::app::AppError| CliError::bad_input(e.message);
    match c {
        ConnectionsCommand::List { json, key } => {
            let views = match open_connections(data_dir, &key, false)? {
                Some(store) => app::list_in(&store).map_err(failed)?,
                None => Vec::new(),
            };
            if json {
                println!("{}", pretty(&serde_json::json!({ "connections": views })));
                return Ok(EXIT_OK);
            }
            if views.is_empty() {
                println!("no connections (add one with `fluxo connections add`)");
                return Ok(EXIT_OK);
            }
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED);
            t.set_header(vec!["id", "app", "name", "credential", "base url"]);
            for v in &views {
                let cred = v["credential"].as_object().cloned().unwrap_or_default();
                let fields: Vec<String> = cred
                    .iter()
                    .filter(|(k, _)| *k != "kind")
                    .map(|(k, x)| match x {
                        Value::String(s) => format!("{k}={s}"),
                        other => format!("{k}={other}"),
                    })
                    .collect();
                let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
                t.add_row(vec![
                    text("id"),
                    text("app"),
                    text("name"),
                    format!(
                        "{} {}",
                        cred.get("kind").and_then(Value::as_str).unwrap_or_default(),
                        fields.join(" ")
                    ),
                    text("base_url"),
                ]);
            }
            println!("{t}");
            Ok(EXIT_OK)
        }
        ConnectionsCommand::Add(a) => {
            // Checked before the secret is read or a key generated.
            crate::connections::validate_id(&a.id)
                .map_err(|e| CliError::bad_input(format!("--{e}")))?;
            if a.username.is_some() && a.kind != CredentialKindArg::Basic {
                return Err(CliError::bad_input(
                    "--username goes with --kind basic only",
                ));
            }
            let secret = read_connection_secret(a.token_file.as_deref())?;
            let credential = match a.kind {
                CredentialKindArg::Bearer => serde_json::json!({"kind": "bearer", "token": secret}),
                CredentialKindArg::Basic => serde_json::json!({
                    "kind": "basic",
                    "username": a.username.clone().ok_or_else(|| CliError::bad_input(
                        "--username is needed with --kind basic (the password is the secret)"
                    ))?,
                    "password": secret,
                }),
                CredentialKindArg::WebhookUrl => {
                    serde_json::json!({"kind": "webhook_url", "url": secret})
                }
            };
            let body = serde_json::json!({
                "app": a.app,
                "name": a.name,
                "credential": credential,
                "base_url": a.base_url,
            });
            let store = open_connections(data_dir, &a.key, true)?
                .ok_or_else(|| CliError::bad_input("no connections store"))?;
            let v = app::put_in(&store, &a.id, &body).map_err(|e| {
                // `--id`, `--app`, `--base-url`: the flags that gave the member.
                CliError::bad_input(match e.message.split_once(' ') {
                    Some((m, _)) if ["id", "app", "base_url"].contains(&m) => {
                        format!("--{}", e.message.replacen("base_url", "base-url", 1))
                    }
                    _ => e.message,
                })
            })?;
            println!(
                "connection `{}` saved in {} ({} credential; key {})",
                a.id,
                store.path().display(),
                v["credential"]["kind"].as_str().unwrap_or_default(),
                store.key_id()
            );
            Ok(EXIT_OK)
        }
        ConnectionsCommand::Remove { id, key } => {
            let Some(store) = open_connections(data_dir, &key, false)? else {
                return Err(CliError::bad_input(format!("no connection `{id}`")));
            };
            app::remove_in(&store, &id).map_err(failed)?;
            println!("connection `{id}` removed");
            Ok(EXIT_OK)
        }
        ConnectionsCommand::Test { id, json, key } => {
            // Async: dispatched to `cmd_connection_test` before this.
            let _ = (id, json, key);
            Err(CliError::bad_input(
                "internal: test is dispatched elsewhere",
            ))
        }
    }
}

/// `fluxo connections test <id>`: [`crate::app::connections::test_with`] over the live
/// transport (its outbound rules).
async fn cmd_connection_test(
    data_dir: Option<PathBuf>,
    id: &str,
    json: bool,
    key: &ConnectionsKeyArgs,
) -> CliResult {
    let Some(store) = open_connections(data_dir, key, false)? else {
        return Err(CliError::bad_input(format!(
            "no connection `{id}` (no connections yet)"
        )));
    };
    let conn = store
        .get(id)
        .map_err(|e| CliError::bad_input(e.to_string()))?
        .ok_or_else(|| CliError::bad_input(format!("no connection `{id}`")))?;
    let http = crate::steps::http::LiveHttp::new();
    let v = crate::app::connections::test_with(&conn, &http, None).await;
    if json {
        println!("{}", pretty(&v));
    } else {
        println!("{}", v["message"].as_str().unwrap_or_default());
    }
    Ok(if v["ok"] == Value::Bool(true) {
        EXIT_OK
    } else {
        EXIT_RUN_FAILED
    })
}

async fn cmd_sandbox(a: SandboxArgs) -> CliResult {
    let handle = crate::sandbox::Sandbox::start(a.addr)
        .await
        .map_err(|e| CliError::bad_input(format!("cannot listen on {}: {e}", a.addr)))?;
    println!("sandbox destination listening on {}", handle.url());
    println!("  e.g. export FLUXO_ENV_CRM_URL={}", handle.url());
    println!(
        "  request log: {}/_sandbox/log   records: {}/_sandbox/records",
        handle.url(),
        handle.url()
    );
    println!(
        "  vendor fakes: {u}/hubspot {u}/stripe {u}/slack {u}/sheets (OAuth: {u}/oauth; \
         tokens: GET {u}/_sandbox/vendors)",
        u = handle.url()
    );
    let _ = tokio::signal::ctrl_c().await;
    handle.shutdown().await;
    Ok(EXIT_OK)
}

/// Connect to a shared PostgreSQL store and migrate its schema. The URL (it may hold a
/// password) is never printed.
async fn open_pg(url: &str) -> Result<crate::store::PgStore, CliError> {
    let pg = connect_pg(url).await?;
    pg.migrate()
        .await
        .map_err(|e| CliError::bad_input(format!("--store: {e}")))?;
    Ok(pg)
}

/// Connect to a PostgreSQL store (no migration).
async fn connect_pg(url: &str) -> Result<crate::store::PgStore, CliError> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(CliError::bad_input(
            "--store: expected a postgres:// or postgresql:// URL",
        ));
    }
    crate::store::PgStore::connect(url)
        .await
        .map_err(|e| match e {
            crate::store::StoreError::Invalid(_) => CliError::bad_input(format!("--store: {e}")),
            _ => CliError::bad_input(format!("--store: cannot connect: {e}")),
        })
}

/// The banner's store line: where runs, claims and Memory live, and whether this process
/// shares them. A PostgreSQL URL is shown as host, port and database only (never its user or
/// password).
fn store_line(url: Option<&str>, data_dir: &Path, lease_s: u64) -> String {
    match url {
        None => format!(
            "sled in {} (this process only; --store postgres://… to share one database)",
            data_dir.join("store").display()
        ),
        Some(url) => match url.parse::<sqlx::postgres::PgConnectOptions>() {
            Ok(o) => format!(
                "PostgreSQL {}:{}/{} (shared with every process on it; leases of {lease_s} s)",
                o.get_host(),
                o.get_port(),
                o.get_database().unwrap_or("(the user's default database)")
            ),
            Err(_) => "PostgreSQL".to_string(),
        },
    }
}

/// `fluxo db migrate`: applies the migrations the database lacks and says which.
async fn cmd_db_migrate(url: &str) -> CliResult {
    let pg = connect_pg(url).await?;
    let failed = |e: crate::store::StoreError| CliError::bad_input(format!("--store: {e}"));
    let applied = pg.migrate().await.map_err(failed)?;
    let latest = pg
        .applied_migrations()
        .await
        .map_err(failed)?
        .last()
        .copied();
    let latest = latest.map_or("none".to_string(), |v| format!("{v:04}"));
    if applied.is_empty() {
        println!("the database schema is up to date (latest migration {latest})");
    } else {
        let list: Vec<String> = applied.iter().map(|v| format!("{v:04}")).collect();
        println!(
            "applied migration{} {}; the database schema is up to date (latest migration \
             {latest})",
            if list.len() == 1 { "" } else { "s" },
            list.join(", ")
        );
    }
    Ok(EXIT_OK)
}

/// The API token in `path` (`--token-file`): its first line, trimmed. Errors: the file cannot
/// be read, or holds no token.
fn read_token_file(path: &Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::bad_input(format!(
            "cannot read the API token from {} (--token-file): {e}",
            path.display()
        ))
    })?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        return Err(CliError::bad_input(format!(
            "{} (--token-file) holds no token: its first line is empty",
            path.display()
        )));
    }
    Ok(token)
}

async fn cmd_serve(data_dir: Option<PathBuf>, a: ServeArgs) -> CliResult {
    use crate::server::{self, auth, ServerOptions};
    let dir = resolve_data_dir(data_dir.clone())?;
    let store: Arc<dyn Store> = match &a.store {
        Some(url) => Arc::new(open_pg(url).await?),
        None => open_store_with(data_dir, a.cache_mb)?,
    };
    let engine = Engine::new(store.clone(), Arc::new(SystemClock) as Arc<dyn Clock>);
    let registry = engine.registry().clone();
    let workflows = workflow::dir::WorkflowDir::load(&a.workflows, registry).map_err(|e| {
        CliError::bad_input(format!(
            "cannot read workflows folder {}: {e}",
            a.workflows.display()
        ))
    })?;
    // A token on the command line shows in `ps` (an environment variable does not).
    let token_in_argv = std::env::args().any(|x| x == "--token" || x.starts_with("--token="));
    let given = match &a.token_file {
        Some(path) => Some(read_token_file(path)?),
        None => a.token.clone(),
    };
    if let Some(n) = given
        .as_deref()
        .map(|t| t.trim().chars().count())
        .filter(|n| (1..crate::app::settings::MIN_TOKEN_CHARS).contains(n))
    {
        return Err(CliError::bad_input(format!(
            "the API token given (--token, FLUXO_TOKEN or --token-file) has {n} characters; at \
             least {} are needed (leave it out for a generated one of 64, or use `openssl rand \
             -hex 32`)",
            crate::app::settings::MIN_TOKEN_CHARS
        )));
    }
    let (token, source) = auth::resolve_token(given, &dir).map_err(|e| {
        CliError::bad_input(format!(
            "cannot write the API token in {}: {e}",
            dir.display()
        ))
    })?;
    // The connections store, checked now: a wrong key or a damaged file stops the start
    // (nothing runs without the connections it was given, and the file is left as it is).
    let connections = open_connections(Some(dir.clone()), &a.connections_key, true)?
        .ok_or_else(|| CliError::bad_input("no connections store"))?;
    let connections_line = format!(
        "{} in {} (key {}: {})",
        connections.list().map(|l| l.len()).unwrap_or(0),
        connections.path().display(),
        connections.key_id(),
        connections.key_source()
    );
    engine.set_connections(Arc::new(connections));
    let ui_dir =
        a.ui.or_else(|| Some(PathBuf::from("ui/dist")).filter(|d| d.join("index.html").exists()));
    let options = ServerOptions {
        body_limit_bytes: a.body_limit,
        workers: a.workers,
        door_busy_at: if a.run_nice > 0 {
            crate::app::door_first::DOOR_BUSY_AT
        } else {
            0
        },
        run_on: match crate::app::worker::run_runtime(a.run_nice) {
            Ok(handle) => handle,
            Err(e) => {
                tracing::warn!(error = %e, "runs execute beside the server at its priority");
                None
            }
        },
        lease: std::time::Duration::from_secs(a.lease_s),
        metrics_auth: a.metrics_auth,
        retention: crate::store::Retention {
            max_runs_per_workflow: Some(a.retention_runs),
            max_age_ms: a.retention_days.map(|d| d as i64 * 86_400_000),
        },
        ui_dir: ui_dir.clone(),
        data_dir: Some(dir.clone()),
        recover: a.recover.into(),
        quarantine_after: a.quarantine_after,
        token_given: source == auth::TokenSource::Given,
        limits: crate::server::listen::ConnLimits {
            header_read_timeout: std::time::Duration::from_secs(a.header_timeout_s),
            body_read_timeout: std::time::Duration::from_secs(a.body_timeout_s),
            max_connections: a.max_connections,
            body_deadline: std::time::Duration::from_secs(a.body_deadline_s),
            body_min_rate: a.body_min_rate,
            body_rate_grace: std::time::Duration::from_secs(a.body_rate_grace_s),
            max_connections_per_ip: a.max_connections_per_ip,
            max_slow_bodies_per_ip: a.max_slow_bodies_per_ip,
            reserved_connections: a.reserved_connections,
        },
    };
    let listener = tokio::net::TcpListener::bind(a.addr)
        .await
        .map_err(|e| CliError::bad_input(format!("cannot listen on {}: {e}", a.addr)))?;
    let entries = workflows.list();
    let invalid: Vec<String> = entries
        .iter()
        .filter(|e| e.compiled.is_none())
        .map(|e| e.id.clone())
        .collect();
    let unsigned = crate::steps::webhook_trigger::unsigned_webhooks(&workflows);
    let running = server::start(listener, engine, workflows, token.clone(), options)
        .await
        .map_err(|e| CliError::bad_input(format!("cannot start: {e}")))?;
    if a.addr.ip().is_unspecified() {
        // Every interface: the URLs below are this machine's own (loopback); other machines
        // use its name or address.
        println!(
            "fluxo serve listening on {} (every interface; on this machine {})",
            running.addr,
            running.url()
        );
    } else {
        println!("fluxo serve listening on {}", running.url());
    }
    println!(
        "  workflows: {} in {}",
        entries.len(),
        a.workflows.display()
    );
    for id in &invalid {
        println!("  warning: workflow `{id}` does not validate; it will not run until fixed");
    }
    // Beyond loopback, unsigned webhooks are open to the network: say so.
    if !a.addr.ip().is_loopback() {
        if let Some(n) = crate::steps::webhook_trigger::unsigned_notice(&unsigned, &running.url()) {
            println!("  warning: {n}");
        }
    }
    println!("  data dir:  {}", dir.display());
    println!("  connections: {connections_line}");
    println!(
        "  store:     {}",
        store_line(a.store.as_deref(), &dir, a.lease_s)
    );
    let token_file = dir.join("token");
    // The token is shown once, when this start generated it (as Jupyter and n8n show a new
    // token's URL): a token read from the file or given by --token/FLUXO_TOKEN is never
    // printed again, since stdout often ends in a log or a journal; the lines say where it is.
    let in_force = running.state.token();
    let shown = match source {
        // On a shared database the token in force is the one every process shares (the first
        // to start seeded it); the app copied it to this data dir (`app::settings::join_shared`).
        _ if in_force != token => {
            println!(
                "  API token: shared by every process on the database, copied to {} (mode 0600)",
                token_file.display()
            );
            false
        }
        auth::TokenSource::Generated if a.hide_token => {
            println!(
                "  API token: generated, saved in {} (mode 0600); not printed (--hide-token)",
                token_file.display()
            );
            false
        }
        auth::TokenSource::Generated => {
            match &ui_dir {
                Some(_) => println!(
                    "  API token: generated, saved in {} (mode 0600); shown this once, in the \
                     browser UI's address below",
                    token_file.display()
                ),
                None => println!(
                    "  API token: generated, saved in {} (mode 0600); shown this once: {token}",
                    token_file.display()
                ),
            }
            true
        }
        auth::TokenSource::File => {
            println!("  API token: in {}", token_file.display());
            false
        }
        auth::TokenSource::Given => {
            match &a.token_file {
                Some(path) => println!("  API token: as given in {}", path.display()),
                None => println!("  API token: as given (--token / FLUXO_TOKEN)"),
            }
            if token_in_argv {
                println!(
                    "  warning: --token shows the token to every user of this machine (ps, \
                     /proc/<pid>/cmdline); prefer --token-file or FLUXO_TOKEN"
                );
            }
            false
        }
    };
    match &ui_dir {
        // Like Jupyter's tokenised URL: the fragment never reaches the server's logs; the UI
        // keeps the token and removes it from the address bar.
        Some(_) if shown => println!("  browser UI: {}/#token={token}", running.url()),
        Some(_) => println!(
            "  browser UI: {}/ (append #token=<API token>, or paste it when asked)",
            running.url()
        ),
        None => println!("  browser UI: not built (make ui)"),
    }
    println!("  webhooks:  POST {}/hooks/<workflow_id>", running.url());
    server::shutdown_signal().await;
    eprintln!("shutting down: finishing running runs...");
    running.shutdown().await;
    Ok(EXIT_OK)
}

/// `fluxo fmt`: each file parsed as a workflow and written back in the file format
/// ([`crate::workflow::model::file_format`]); exit 0, 1 with `--check` when one would change,
/// 2 for a file that cannot be read or is not a workflow (named, nothing written).
fn cmd_fmt(a: FmtArgs) -> CliResult {
    let mut unformatted = Vec::new();
    for path in &a.files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::bad_input(format!("cannot read `{}`: {e}", path.display())))?;
        let wf: crate::workflow::Workflow = serde_json::from_str(&text).map_err(|e| {
            CliError::bad_input(format!(
                "{} is not a workflow (line {}, column {}): {e}",
                path.display(),
                e.line(),
                e.column()
            ))
        })?;
        let formatted = wf.to_file_string();
        if formatted == text {
            continue;
        }
        unformatted.push(path.display().to_string());
        if !a.check {
            crate::workflow::dir::write_atomic(path, formatted.as_bytes()).map_err(|e| {
                CliError::bad_input(format!("cannot write `{}`: {e}", path.display()))
            })?;
        }
    }
    for f in &unformatted {
        println!(
            "{}{f}",
            if a.check {
                "not formatted: "
            } else {
                "formatted "
            }
        );
    }
    Ok(if a.check && !unformatted.is_empty() {
        EXIT_RUN_FAILED
    } else {
        EXIT_OK
    })
}

/// `fluxo check`: runs on a throw-away data dir (`--data-dir` is not used) and a private
/// sandbox; exit 0 when every row passes, 1 when one fails, 2 for bad input.
async fn cmd_check(a: CheckArgs) -> CliResult {
    use crate::check::{CheckError, CheckOptions};
    let text = std::fs::read_to_string(&a.workflow)
        .map_err(|e| CliError::bad_input(format!("cannot read `{}`: {e}", a.workflow.display())))?;
    let definition: Value = serde_json::from_str(&text).map_err(|e| {
        CliError::bad_input(format!(
            "{} is not JSON (line {}, column {}): {e}",
            a.workflow.display(),
            e.line(),
            e.column()
        ))
    })?;
    let event = read_input(Some(&a.event))
        .map_err(|e| CliError::bad_input(e.message.replacen("--input", "--event", 1)))?;
    // A progress line on a terminal (not with --json, not in a pipe): each scenario starts on
    // a clean store and a check takes seconds.
    let bar = (std::io::stderr().is_terminal() && !a.json).then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.set_message(format!(
            "checking {} against a private sandbox",
            a.workflow.display()
        ));
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        bar
    });
    let file = a.workflow.display().to_string();
    let on_progress = |p: crate::check::CheckProgress| {
        if let Some(bar) = &bar {
            bar.set_message(format!(
                "checking {file}: scenario {}, {} event{} delivered",
                p.scenarios,
                p.deliveries,
                if p.deliveries == 1 { "" } else { "s" }
            ));
        }
    };
    let mut targets = std::collections::BTreeMap::new();
    for id in crate::check::fan_out_targets(&definition) {
        let path = a.workflow.with_file_name(format!("{id}.json"));
        let text = std::fs::read_to_string(&path).map_err(|e| {
            CliError::bad_input(format!(
                "{} fans out to `{id}`: cannot read {} ({e}); the check runs the item runs \
                 too, from the file beside the checked one",
                a.workflow.display(),
                path.display()
            ))
        })?;
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            CliError::bad_input(format!(
                "{} is not JSON (line {}, column {}): {e}",
                path.display(),
                e.line(),
                e.column()
            ))
        })?;
        targets.insert(id, value);
    }
    let options = CheckOptions {
        id_paths: a.id_path,
        targets,
    };
    let report =
        crate::check::check_with_progress(&definition, &event, &options, &on_progress).await;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let report = report.map_err(|e| match e {
        CheckError::Invalid(problems) => {
            CliError::bad_input(format_problems(&a.workflow, &problems))
        }
        other => CliError::bad_input(other.to_string()),
    })?;
    if a.json {
        println!(
            "{}",
            pretty(&serde_json::to_value(&report).unwrap_or(Value::Null))
        );
    } else {
        print_check(&report);
    }
    Ok(if report.passed {
        EXIT_OK
    } else {
        EXIT_RUN_FAILED
    })
}

/// The check table: each check with what was expected, what was seen, pass or fail.
pub fn print_check(report: &crate::check::CheckReport) {
    println!(
        "fluxo check {} v{}: {} pointed at a private sandbox; new-event ids: {}",
        report.workflow_id,
        report.workflow_version,
        if report.env.is_empty() && report.connections.is_empty() {
            "no env variables".to_string()
        } else {
            report
                .env
                .iter()
                .map(|n| format!("env.{n}"))
                .chain(report.connections.iter().map(|c| format!("connection {c}")))
                .collect::<Vec<_>>()
                .join(", ")
        },
        report.id_paths.join(", ")
    );
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_content_arrangement(comfy_table::ContentArrangement::Dynamic);
    if t.width().is_none() {
        t.set_width(150);
    }
    t.set_header(vec!["check", "expected", "seen", "result"]);
    for r in &report.checks {
        t.add_row(vec![
            r.check.clone(),
            r.expected.clone(),
            r.seen.clone(),
            r.verdict.label().to_string(),
        ]);
    }
    println!("{t}");
    // Each failed row: why, in one sentence, and what to change.
    for r in report.failures() {
        println!("FAIL {}", r.check);
        if let Some(why) = &r.why {
            println!("  why: {why}");
        }
        if let Some(fix) = &r.fix {
            println!("  fix: {fix}");
        }
    }
    for w in &report.warnings {
        println!("lint: {w}");
    }
    for n in &report.notes {
        println!("note: {n}");
    }
    let failed = report.failures().count();
    let total = report.checks.len();
    if report.passed {
        println!("{total} of {total} checks passed: safe to re-run");
    } else {
        println!(
            "{failed} of {total} checks failed: {} is not safe to re-run",
            report.workflow_id
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_line_names_the_database_never_its_credentials() {
        let pg = store_line(
            Some("postgres://fluxo:s3cret-pw@db.internal:6543/runs?sslmode=require"),
            Path::new("/var/lib/fluxo"),
            30,
        );
        assert_eq!(
            pg,
            "PostgreSQL db.internal:6543/runs (shared with every process on it; leases of 30 s)"
        );
        assert!(!pg.contains("s3cret") && !pg.contains("fluxo:"), "{pg}");
        let sled = store_line(None, Path::new("/var/lib/fluxo"), 30);
        assert!(
            sled.starts_with("sled in /var/lib/fluxo/store (this process only"),
            "{sled}"
        );
    }
}
