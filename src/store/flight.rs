//! The in-flight log: which run was executing which step when the process died (embedded
//! store, one process per data dir), so a run that kills the process cannot crash-loop it
//! (`app::quarantine`: in flight at two consecutive crashes, it is quarantined).
//!
//! `<data-dir>/in-flight.log`, one line per event, written by this process only:
//!
//! ```text
//! fluxo-in-flight 1                       the header of a process's file
//! c <crashes> <run> <root> <step>         carried: <root>'s <step> was in flight at the last
//!                                         <crashes> consecutive crashes (<run> the last time)
//! q <crashes> <run> <root> <step>         a quarantine this start decided, until it is durable
//! + <run> <root> <step>                   a run starts executing a step
//! - <run> <step>                          it is done with it (succeeded, failed or dropped)
//! clean                                   a stop began: nothing in flight counts (steps
//!                                         the stop lets finish are not written)
//! open                                    the same process runs again after a stop
//! ```
//!
//! **Why a plain file without `fsync` is enough.** Each line is one `write(2)` of a small
//! buffer, made before the step renders its config (and after it returns). Once `write(2)`
//! returns, the bytes are in the kernel's page cache: a process that aborts, panics with
//! `panic = abort`, is OOM-killed or gets SIGKILL a microsecond later loses nothing of them,
//! and the next start reads them back. Only a machine crash (power, kernel panic) loses
//! writes that were not synced, and then the log merely forgets the last crash: the next start
//! counts one crash fewer, never one more (a torn or zeroed tail is skipped line by line). So
//! the fast path pays one small `write(2)` per step start and end (no `fsync`, no store
//! write); the new header at start is synced once.
//!
//! Not a sled tree: sled keeps unflushed writes in buffers inside the process until its
//! flusher writes them (every 500 ms by default), so a SIGKILL loses the last ones, exactly
//! the steps that were in flight. Not the store's run records either: they are written only
//! at steps with side effects (a pure step such as a transform is never recorded before it
//! runs, and a run of pure steps stays `queued` in the store until its end).
//!
//! What the next start learns ([`read_prior`]): nothing after a clean stop (a run in flight at
//! a clean stop is no crash suspect); else each run that had a step started and not done, with
//! how many consecutive crashes that step of that lineage (root run id) was in flight at: the
//! count carried in the header plus one. A run that was merely queued never started a step and
//! is not in the log. The file is rewritten (temporary file, then rename) at every start with
//! the new header, and when it passes [`ROTATE_AT`] bytes with the header and the steps still
//! in flight, so it stays small; a rename is atomic to a process crash.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The file name in the data dir.
pub const FILE: &str = "in-flight.log";
/// The first line of a file.
const HEADER: &str = "fluxo-in-flight 1";
/// Size past which the file is rewritten with what is still in flight.
pub const ROTATE_AT: u64 = 8 * 1024 * 1024;

/// A run that was executing a step when the process died, and how many consecutive crashes
/// its lineage's step was in flight at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspect {
    pub run_id: String,
    /// The lineage's root run id: a resume of the run (a new run id) counts as the same.
    pub root: String,
    pub step: String,
    /// Consecutive crashes this step of this lineage was in flight at (1 = the last one only).
    pub crashes: u32,
    /// A quarantine a previous start decided but may not have made durable (it died first):
    /// quarantine it whatever the limit.
    pub pending: bool,
}

/// What the log says about how the previous process ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prior {
    /// The previous process stopped cleanly (or there was none).
    pub clean: bool,
    /// Runs in flight when it died, with their counts, and quarantines still pending.
    pub suspects: Vec<Suspect>,
}

fn valid_field(s: &str) -> bool {
    !s.is_empty() && s.len() <= 128 && !s.bytes().any(|b| b.is_ascii_whitespace() || b < 0x20)
}

/// Read the log the previous process left in `dir` (none: a clean start). A line that does
/// not parse (a machine crash's torn tail) is skipped.
pub fn read_prior(dir: &Path) -> std::io::Result<Prior> {
    let text = match std::fs::read(dir.join(FILE)) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Prior {
                clean: true,
                suspects: Vec::new(),
            })
        }
        Err(e) => return Err(e),
    };
    Ok(parse(&text))
}

/// [`read_prior`] of a file's text.
pub fn parse(text: &str) -> Prior {
    // (root, step) → (crashes, run, pending)
    let mut carried: BTreeMap<(String, String), (u32, String, bool)> = BTreeMap::new();
    // (run, step) → root, in start order
    let mut flying: BTreeMap<(String, String), (u64, String)> = BTreeMap::new();
    let mut seq = 0u64;
    let mut clean = false;
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f.as_slice() {
            [kind @ ("c" | "q"), n, run, root, step]
                if [run, root, step].iter().all(|s| valid_field(s)) =>
            {
                if let Ok(n) = n.parse::<u32>() {
                    carried.insert(
                        (root.to_string(), step.to_string()),
                        (n, run.to_string(), *kind == "q"),
                    );
                }
            }
            ["+", run, root, step] if [run, root, step].iter().all(|s| valid_field(s)) => {
                seq += 1;
                flying.insert((run.to_string(), step.to_string()), (seq, root.to_string()));
            }
            ["-", run, step] => {
                flying.remove(&(run.to_string(), step.to_string()));
            }
            ["clean"] => {
                clean = true;
                flying.clear();
            }
            ["open"] => clean = false,
            _ => {}
        }
    }
    if clean {
        return Prior {
            clean: true,
            suspects: Vec::new(),
        };
    }
    let mut in_flight: Vec<_> = flying.into_iter().collect();
    in_flight.sort_by_key(|(_, (seq, _))| *seq);
    let mut suspects = Vec::new();
    for ((run, step), (_, root)) in in_flight {
        let before = carried.remove(&(root.clone(), step.clone()));
        let pending = before.as_ref().is_some_and(|(_, _, p)| *p);
        let crashes = before.map_or(0, |(n, _, _)| n).saturating_add(1);
        suspects.push(Suspect {
            run_id: run,
            root,
            step,
            crashes,
            pending,
        });
    }
    // A quarantine decided but perhaps not made durable (the process died during its start).
    for ((root, step), (n, run, pending)) in carried {
        if pending {
            suspects.push(Suspect {
                run_id: run,
                root,
                step,
                crashes: n,
                pending: true,
            });
        }
    }
    Prior {
        clean: false,
        suspects,
    }
}

struct Inner {
    file: File,
    len: u64,
    /// Header lines (`c` and `q`), kept for a rotation.
    header: Vec<String>,
    /// (run, step) → root: the steps in flight now.
    flying: HashMap<(String, String), String>,
    /// A write failed: the log is off for this process (logged once).
    broken: bool,
    /// A stop began ([`FlightLog::close_clean`]): steps are no longer written.
    stopping: bool,
}

/// This process's in-flight log ([`FlightLog::start`]). Shared by every clone of the engine.
pub struct FlightLog {
    path: PathBuf,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for FlightLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightLog")
            .field("path", &self.path)
            .finish()
    }
}

fn header_line(s: &Suspect, quarantine: bool) -> String {
    format!(
        "{} {} {} {} {}\n",
        if quarantine { "q" } else { "c" },
        s.crashes,
        s.run_id,
        s.root,
        s.step
    )
}

/// Write `lines` to a fresh file beside `path` (0600), then rename it over `path`.
fn replace_file(path: &Path, lines: &[String], sync: bool) -> std::io::Result<(File, u64)> {
    let tmp = path.with_extension("log.tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).write(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut file = opts.open(&tmp)?;
    let mut text = String::from(HEADER);
    text.push('\n');
    for l in lines {
        text.push_str(l);
    }
    file.write_all(text.as_bytes())?;
    if sync {
        file.sync_data()?;
    }
    std::fs::rename(&tmp, path)?;
    Ok((file, text.len() as u64))
}

impl FlightLog {
    /// Start this process's log in `dir`, replacing the previous one (read it first with
    /// [`read_prior`]): `carry` are the suspects still counted (in flight at the last
    /// crash), `quarantine` those to quarantine now (kept as pending until
    /// [`FlightLog::settled`]). Synced once.
    pub fn start(dir: &Path, carry: &[Suspect], quarantine: &[Suspect]) -> std::io::Result<Self> {
        let path = dir.join(FILE);
        let header: Vec<String> = carry
            .iter()
            .map(|s| header_line(s, false))
            .chain(quarantine.iter().map(|s| header_line(s, true)))
            .collect();
        let (file, len) = replace_file(&path, &header, true)?;
        Ok(FlightLog {
            path,
            inner: Mutex::new(Inner {
                file,
                len,
                header,
                flying: HashMap::new(),
                broken: false,
                stopping: false,
            }),
        })
    }

    /// The quarantines decided at start are durable: drop them from the header.
    pub fn settled(&self) {
        let mut inner = self.lock();
        inner.header.retain(|l| !l.starts_with("q "));
        self.rotate(&mut inner);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn append(&self, inner: &mut Inner, line: &str) {
        if inner.broken {
            return;
        }
        match inner.file.write_all(line.as_bytes()) {
            Ok(()) => inner.len += line.len() as u64,
            Err(e) => {
                inner.broken = true;
                tracing::error!(
                    path = %self.path.display(),
                    error = %e,
                    "the in-flight log could not be written: a run that kills the process is \
                     not quarantined until the next start"
                );
            }
        }
        if inner.len > ROTATE_AT {
            self.rotate(inner);
        }
    }

    /// Rewrite the file: the header, then the steps in flight now.
    fn rotate(&self, inner: &mut Inner) {
        if inner.broken {
            return;
        }
        let mut lines = inner.header.clone();
        for ((run, step), root) in &inner.flying {
            lines.push(format!("+ {run} {root} {step}\n"));
        }
        if inner.stopping {
            lines.push("clean\n".into());
        }
        match replace_file(&self.path, &lines, false) {
            Ok((file, len)) => {
                inner.file = file;
                inner.len = len;
            }
            Err(e) => tracing::warn!(
                path = %self.path.display(),
                error = %e,
                "the in-flight log could not be rewritten; it keeps growing"
            ),
        }
    }

    /// `run` (of lineage `root`) starts executing `step`; the step is done when the answer
    /// is dropped.
    pub fn step(&self, run: &str, root: &str, step: &str) -> Option<InFlight<'_>> {
        if ![run, root, step].iter().all(|s| valid_field(s)) {
            return None;
        }
        let mut inner = self.lock();
        if inner.stopping {
            return None;
        }
        let line = format!("+ {run} {root} {step}\n");
        inner
            .flying
            .insert((run.to_string(), step.to_string()), root.to_string());
        self.append(&mut inner, &line);
        Some(InFlight {
            log: self,
            run: run.to_string(),
            step: step.to_string(),
        })
    }

    /// A clean stop began (SIGTERM, Ctrl-C, the app quits): the next start finds no crash
    /// suspect, whatever is in flight now or starts while the stop lets runs finish (a run in
    /// flight at a clean stop is not a crash suspect, even when the stop gives up waiting).
    /// Idempotent.
    pub fn close_clean(&self) {
        let mut inner = self.lock();
        if inner.stopping {
            return;
        }
        inner.flying.clear();
        inner.stopping = true;
        // Not through `append`: a rotation now would rewrite the file without this line.
        if !inner.broken {
            if let Err(e) = inner.file.write_all(b"clean\n") {
                tracing::warn!(error = %e, "the in-flight log could not note the clean stop");
            }
        }
    }

    /// This process executes runs again after [`FlightLog::close_clean`] (an embedder that
    /// starts a server again over the same engine): steps are written again.
    pub fn reopen(&self) {
        let mut inner = self.lock();
        if inner.stopping {
            inner.stopping = false;
            self.append(&mut inner, "open\n");
        }
    }

    /// The steps in flight now, as (run, step).
    pub fn in_flight(&self) -> Vec<(String, String)> {
        self.lock().flying.keys().cloned().collect()
    }
}

/// A step in flight ([`FlightLog::step`]): dropping it records the step done.
pub struct InFlight<'a> {
    log: &'a FlightLog,
    run: String,
    step: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut inner = self.log.lock();
        if inner.stopping {
            return;
        }
        let line = format!("- {} {}\n", self.run, self.step);
        inner.flying.remove(&(
            std::mem::take(&mut self.run),
            std::mem::take(&mut self.step),
        ));
        self.log.append(&mut inner, &line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suspect(run: &str, root: &str, step: &str, crashes: u32) -> Suspect {
        Suspect {
            run_id: run.into(),
            root: root.into(),
            step: step.into(),
            crashes,
            pending: false,
        }
    }

    #[test]
    fn a_step_started_and_not_done_is_in_flight_at_the_crash() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read_prior(dir.path()).unwrap().clean,
            "no log: a clean start"
        );
        let log = FlightLog::start(dir.path(), &[], &[]).unwrap();
        drop(log.step("r1", "r1", "a"));
        let _b = log.step("r1", "r1", "b").unwrap();
        let c = log.step("r2", "r0", "c").unwrap();
        drop(c);
        std::mem::forget(_b); // the process dies with `b` in flight
        let prior = read_prior(dir.path()).unwrap();
        assert!(!prior.clean);
        assert_eq!(prior.suspects, vec![suspect("r1", "r1", "b", 1)]);
    }

    #[test]
    fn counts_carry_over_consecutive_crashes_only_and_a_clean_stop_resets_them() {
        let dir = tempfile::tempdir().unwrap();
        // Crash 1 left r1's lineage in `b`; its resume r9 is in `b` at crash 2.
        let log = FlightLog::start(dir.path(), &[suspect("r1", "r1", "b", 1)], &[]).unwrap();
        std::mem::forget(log.step("r9", "r1", "b").unwrap());
        let prior = read_prior(dir.path()).unwrap();
        assert_eq!(prior.suspects, vec![suspect("r9", "r1", "b", 2)]);
        // Carried, but not in flight at this crash: not counted any more.
        let log = FlightLog::start(dir.path(), &[suspect("r1", "r1", "b", 1)], &[]).unwrap();
        std::mem::forget(log.step("r5", "r5", "x").unwrap());
        assert_eq!(
            read_prior(dir.path()).unwrap().suspects,
            vec![suspect("r5", "r5", "x", 1)]
        );
        // A clean stop: nothing counts, whatever was in flight.
        let log = FlightLog::start(dir.path(), &[suspect("r1", "r1", "b", 1)], &[]).unwrap();
        std::mem::forget(log.step("r9", "r1", "b").unwrap());
        log.close_clean();
        let prior = read_prior(dir.path()).unwrap();
        assert!(prior.clean && prior.suspects.is_empty());
    }

    #[test]
    fn steps_during_a_clean_stop_are_not_suspects_until_the_process_runs_again() {
        let dir = tempfile::tempdir().unwrap();
        let log = FlightLog::start(dir.path(), &[], &[]).unwrap();
        let held = log.step("r1", "r1", "a").unwrap();
        log.close_clean();
        // The stop lets r1 finish; it starts another step, and the process dies meanwhile.
        drop(held);
        assert!(log.step("r1", "r1", "b").is_none());
        assert!(read_prior(dir.path()).unwrap().clean);
        log.reopen();
        std::mem::forget(log.step("r2", "r2", "c").unwrap());
        assert_eq!(
            read_prior(dir.path()).unwrap().suspects,
            vec![suspect("r2", "r2", "c", 1)]
        );
    }

    #[test]
    fn a_pending_quarantine_survives_a_crash_at_start_until_settled() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = suspect("r9", "r1", "b", 2);
        let log = FlightLog::start(dir.path(), &[], std::slice::from_ref(&q)).unwrap();
        drop(log);
        q.pending = true;
        assert_eq!(read_prior(dir.path()).unwrap().suspects, vec![q.clone()]);
        let log = FlightLog::start(dir.path(), &[], &[q]).unwrap();
        log.settled();
        assert!(read_prior(dir.path()).unwrap().suspects.is_empty());
    }

    #[test]
    fn a_rotation_keeps_the_header_and_what_is_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let log = FlightLog::start(dir.path(), &[suspect("r1", "r1", "b", 1)], &[]).unwrap();
        let held = log.step("r9", "r1", "b").unwrap();
        let step = "s".repeat(100);
        let mut n = 0u64;
        while n < ROTATE_AT + 4096 {
            drop(log.step("r2", "r2", &step));
            n += 2 * 110;
        }
        let len = std::fs::metadata(dir.path().join(FILE)).unwrap().len();
        assert!(len < ROTATE_AT, "rotated: {len} bytes");
        std::mem::forget(held);
        assert_eq!(
            read_prior(dir.path()).unwrap().suspects,
            vec![suspect("r9", "r1", "b", 2)]
        );
    }

    #[test]
    fn torn_and_garbage_lines_are_skipped() {
        let p = parse("fluxo-in-flight 1\n+ r1 r1 a\n\0\0\0garbage\n+ r2 r2");
        assert_eq!(p.suspects, vec![suspect("r1", "r1", "a", 1)]);
    }
}
