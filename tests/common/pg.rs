//! A throwaway PostgreSQL server for the store tests (`tests/store_conformance.rs`).
//!
//! [`TestPg::start`] finds Debian's server binaries (`initdb`, `pg_ctl`: on `PATH`, else the
//! newest `/usr/lib/postgresql/*/bin`), `initdb`s a cluster in a fresh temporary directory
//! (trust authentication, superuser `fluxo`, UTF-8), and starts it on a free port of
//! 127.0.0.1 with its socket in that directory, and room for 300 connections (every test of a
//! binary may run at once, each with two pools). `fsync` stays on: durability is part of what
//! the store promises. Run as root (CI, the dev containers), every server command runs as the
//! `postgres` user through `runuser`, since PostgreSQL refuses a data directory owned by root.
//!
//! One server serves a whole test binary ([`TestPg::shared`]); each test takes its own
//! database ([`TestPg::fresh_db`]). A static is never dropped, so the shared server is stopped
//! by a watchdog process that waits for the test binary to exit (however it exits) and then
//! stops the server (`pg_ctl stop -m immediate`) and removes the directory. A [`TestPg`] that
//! is dropped stops itself the same way.
//!
//! Missing binaries are a test failure that says to run `scripts/setup.sh test`, never a skip.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use sqlx::Connection;

/// Server options that bound a test cluster's WAL on disk: checkpoints every 16 MiB of WAL, and
/// 2 MiB of recycled segments kept (the defaults are 1 GiB and 80 MiB). Durability is
/// unchanged: `fsync` and full-page writes stay on.
const SMALL_WAL: &str = " -c min_wal_size=2MB -c max_wal_size=16MB";

/// A running PostgreSQL server in a temporary directory.
#[derive(Debug)]
pub struct TestPg {
    /// `data/` (the cluster), `sock/` (its Unix socket), `server.log`.
    root: PathBuf,
    bin: PathBuf,
    port: u16,
    /// Server commands run as `postgres` (this process is root).
    as_postgres: bool,
}

impl TestPg {
    /// The server shared by every test of this binary, started on first use.
    pub fn shared() -> &'static TestPg {
        static SHARED: OnceLock<TestPg> = OnceLock::new();
        SHARED.get_or_init(|| {
            let pg = TestPg::start();
            pg.spawn_watchdog();
            pg
        })
    }

    /// `initdb` and start a new server. Panics (failing the test) with what to do when the
    /// binaries are missing or the server does not start.
    pub fn start() -> TestPg {
        Self::start_with(None)
    }

    /// [`TestPg::start`] with TLS on (`ssl=on`), serving the PEM certificate chain and key
    /// given; plain connections are still accepted (`sslmode` decides).
    pub fn start_tls(cert_pem: &str, key_pem: &str) -> TestPg {
        Self::start_with(Some((cert_pem, key_pem)))
    }

    fn start_with(tls: Option<(&str, &str)>) -> TestPg {
        let bin = find_bin_dir().unwrap_or_else(|| {
            panic!(
                "PostgreSQL's server binaries (initdb, pg_ctl) are not on PATH nor in \
                 /usr/lib/postgresql/*/bin: run `scripts/setup.sh test` (installs Debian's \
                 `postgresql` package)"
            )
        });
        let as_postgres = std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(1)
            == 0;
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "fluxo-pg-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("sock")).expect("create the test server's directory");
        if as_postgres {
            let st = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&root)
                .status()
                .expect("run chown");
            assert!(
                st.success(),
                "chown of {} to postgres failed",
                root.display()
            );
        }
        let mut pg = TestPg {
            root,
            bin,
            port: 0,
            as_postgres,
        };
        let data = pg.root.join("data");
        let out = pg
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "fluxo", "-E", "UTF8", "--locale=C"])
            // 1 MiB WAL segments (the default is 16): with `SMALL_WAL` below, a test cluster
            // keeps a few MiB of WAL rather than up to 1 GiB, on CI machines short of disk.
            .arg("--wal-segsize=1")
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut tls_opts = String::new();
        if let Some((cert, key)) = tls {
            // PostgreSQL refuses a key others can read: 0600, owned by the server's user.
            let (cert_path, key_path) = (data.join("server.crt"), data.join("server.key"));
            std::fs::write(&cert_path, cert).expect("write server.crt");
            std::fs::write(&key_path, key).expect("write server.key");
            std::fs::set_permissions(
                &key_path,
                std::os::unix::fs::PermissionsExt::from_mode(0o600),
            )
            .expect("chmod server.key");
            if pg.as_postgres {
                let st = Command::new("chown")
                    .arg("postgres:postgres")
                    .arg(&cert_path)
                    .arg(&key_path)
                    .status()
                    .expect("run chown");
                assert!(st.success(), "chown of the TLS files failed");
            }
            tls_opts = format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                cert_path.display(),
                key_path.display()
            );
        }
        // A free port: bind, read, release. Another process may take it in between, so retry.
        let mut last = String::new();
        for _ in 0..5 {
            pg.port = free_port();
            let opts = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300{SMALL_WAL}{tls_opts}",
                pg.port,
                pg.root.join("sock").display()
            );
            let out = pg
                .command("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(pg.root.join("server.log"))
                .args(["-o", &opts, "-w", "-t", "60", "start"])
                .stdin(Stdio::null())
                .output()
                .expect("run pg_ctl start");
            if out.status.success() {
                return pg;
            }
            last = format!(
                "{}{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(pg.root.join("server.log")).unwrap_or_default()
            );
        }
        panic!("the test PostgreSQL server did not start: {last}");
    }

    /// Crash the server (`pg_ctl stop -m immediate`: no checkpoint, like a power cut as far
    /// as PostgreSQL is concerned) and start it again on the same port, so it recovers from
    /// its WAL. Open connections are lost.
    pub fn crash_and_restart(&self) {
        self.stop("immediate");
        self.start_again();
    }

    /// Stop the server (`pg_ctl stop -m <mode>`: `fast` rolls back open transactions and
    /// closes every connection, `immediate` is a crash). [`TestPg::start_again`] restarts it.
    pub fn stop(&self, mode: &str) {
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.root.join("data"))
            .args(["stop", "-m", mode, "-w"])
            .stdin(Stdio::null())
            .output()
            .expect("run pg_ctl stop");
        assert!(
            out.status.success(),
            "pg_ctl stop failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Start a stopped server again on its port (recovering from its WAL if it crashed).
    pub fn start_again(&self) {
        let data = self.root.join("data");
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300{SMALL_WAL}",
            self.port,
            self.root.join("sock").display()
        );
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(self.root.join("server.log"))
            .args(["-o", &opts, "-w", "-t", "60", "start"])
            .stdin(Stdio::null())
            .output()
            .expect("run pg_ctl start");
        assert!(
            out.status.success(),
            "the test server did not restart: {}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.root.join("server.log")).unwrap_or_default()
        );
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of the `postgres` database, as the superuser `fluxo`.
    pub fn url(&self) -> String {
        self.db_url("postgres")
    }

    fn db_url(&self, db: &str) -> String {
        format!("postgres://fluxo@127.0.0.1:{}/{db}", self.port)
    }

    /// A new, empty database on this server; its URL.
    pub async fn fresh_db(&self) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!("fluxo_test_{}", N.fetch_add(1, Ordering::SeqCst));
        let mut conn = sqlx::PgConnection::connect(&self.url())
            .await
            .expect("connect to the test server");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .expect("CREATE DATABASE");
        let _ = conn.close().await;
        self.db_url(&name)
    }

    /// A server command (`initdb`, `pg_ctl`), through `runuser -u postgres --` as root.
    fn command(&self, name: &str) -> Command {
        let exe = self.bin.join(name);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.current_dir(&self.root);
        cmd
    }

    /// The shell command that stops the server at once and removes its directory.
    fn stop_script(&self) -> String {
        let pg_ctl = format!(
            "{} -D {} stop -m immediate -w",
            self.bin.join("pg_ctl").display(),
            self.root.join("data").display()
        );
        let pg_ctl = if self.as_postgres {
            format!("runuser -u postgres -- {pg_ctl}")
        } else {
            pg_ctl
        };
        format!(
            "cd / ; {pg_ctl} >/dev/null 2>&1; rm -rf {}",
            self.root.display()
        )
    }

    /// A detached shell (its own process group, so a Ctrl-C of the tests does not take it
    /// down first) that waits for this process to exit, then stops the server.
    // Never waited for on purpose: it outlives this process (and so never becomes a zombie).
    #[allow(clippy::zombie_processes)]
    fn spawn_watchdog(&self) {
        let script = format!(
            "while kill -0 {} 2>/dev/null; do sleep 1; done; {}",
            std::process::id(),
            self.stop_script()
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn the test server's watchdog");
    }
}

impl Drop for TestPg {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .args(["-c", &self.stop_script()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A port of 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local address").port()
}

/// The directory holding `initdb` and `pg_ctl`: `initdb` on `PATH` (symlinks resolved, since
/// Debian links only some binaries into /usr/bin), else the newest
/// `/usr/lib/postgresql/<version>/bin`.
fn find_bin_dir() -> Option<PathBuf> {
    let has_both = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let initdb = dir.join("initdb");
            if initdb.is_file() {
                if let Some(real) = std::fs::canonicalize(&initdb)
                    .ok()
                    .and_then(|p| p.parent().map(Path::to_path_buf))
                {
                    if has_both(&real) {
                        return Some(real);
                    }
                }
                if has_both(&dir) {
                    return Some(dir);
                }
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            has_both(&bin).then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}
