//! The ingest journal: an append-only log of records made durable by one `fdatasync` per
//! group commit, read back by a background applier and on start-up.
//!
//! The sled store ([`super::sled_store`]) writes an accepted webhook delivery (its claim and
//! its queued run) here instead of into its trees: appending a few KB to a file and syncing
//! it once per batch is what lets the durable ingest run at the speed of the HTTP path, where
//! sled 0.34's transactions (serialised, ~16 B-tree inserts per run) capped it (README,
//! "Webhook ingest"). A background thread then applies the records to the trees, and a
//! segment is deleted once every record in it is applied *and* the trees are flushed. After a
//! crash, whatever is left is applied again when the store opens (the apply is idempotent).
//! The same shape as a database's write-ahead log, or a Kafka partition in front of an index.
//!
//! # Format
//!
//! Segments `<dir>/<n>.log` (`n` zero-padded, ascending; a new one past
//! [`SEGMENT_MAX_BYTES`]). A record is `len: u32 LE`, `crc32(payload): u32 LE`, `payload`
//! (`len` bytes). A record cut short by a crash (a torn tail, never acknowledged: the sync
//! that would have covered it did not return) or whose checksum does not match ends the
//! segment's reading; records after it in that segment are ignored, with a warning unless it
//! is the last segment's tail.
//!
//! # Failure
//!
//! After a failed write or sync, what reached the disk is unknown (Linux may drop dirty pages
//! on an `fsync` error and report it once). The journal then refuses every later append and
//! sync until the process restarts and reads it back (the rule PostgreSQL adopted in 2018).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A segment is closed and a new one started once it holds this many bytes (64 MiB).
pub const SEGMENT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Bytes of a record's header: length and checksum.
const HEADER: usize = 8;

/// Where one record lies: its sequence number (1, 2, … in append order within this process),
/// its segment and its payload's offset and length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub segment: u64,
    pub offset: u64,
    pub len: u32,
}

/// Errors of the journal: the operation and the OS error, or the earlier failure that
/// poisoned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalError(pub String);

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The records a previous process left, read at open ([`Journal::open`]).
pub struct Leftover {
    segments: Vec<PathBuf>,
}

impl Leftover {
    /// Every intact record, segment by segment, in append order (see "Format" for a record
    /// that is not intact). Reads one segment at a time.
    pub fn for_each(
        &self,
        mut f: impl FnMut(Vec<u8>) -> Result<(), JournalError>,
    ) -> Result<usize, JournalError> {
        let mut n = 0;
        for (i, path) in self.segments.iter().enumerate() {
            let mut bytes = Vec::new();
            File::open(path)
                .and_then(|mut file| file.read_to_end(&mut bytes))
                .map_err(|e| io_error("read", path, e))?;
            let mut at = 0usize;
            while at < bytes.len() {
                match frame(&bytes[at..]) {
                    Some(payload) => {
                        let len = payload.len();
                        f(payload.to_vec())?;
                        n += 1;
                        at += HEADER + len;
                    }
                    None => {
                        if i + 1 < self.segments.len() {
                            tracing::warn!(
                                segment = %path.display(),
                                offset = at,
                                "ingest journal: a damaged record in a closed segment; \
                                 the rest of that segment is skipped"
                            );
                        }
                        break;
                    }
                }
            }
        }
        Ok(n)
    }

    /// Delete the segments read (call once their records are applied and made durable
    /// elsewhere).
    pub fn remove(self) -> Result<(), JournalError> {
        for path in &self.segments {
            std::fs::remove_file(path).map_err(|e| io_error("remove", path, e))?;
        }
        Ok(())
    }

    /// How many segments were left.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }
}

/// The payload of the record at the start of `bytes`, if it is whole and its checksum matches.
fn frame(bytes: &[u8]) -> Option<&[u8]> {
    let header = bytes.get(..HEADER)?;
    let len = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(header[4..].try_into().ok()?);
    let payload = bytes.get(HEADER..HEADER.checked_add(len)?)?;
    (crc32fast::hash(payload) == crc).then_some(payload)
}

struct Inner {
    /// The segment being appended to: its number, file and length.
    segment: u64,
    file: File,
    len: u64,
    next_seq: u64,
    /// Appended, not yet synced.
    unsynced: Vec<Entry>,
    /// Closed segments (synced) and the last sequence number each holds.
    closed: Vec<(u64, u64)>,
    /// The last sequence number the current segment holds (0 = none).
    current_last: u64,
    poisoned: Option<String>,
}

/// An open journal. Appends and syncs are serialised by one lock (the group commit calls
/// them from one task); reads ([`Journal::read`]) open the segment by themselves.
pub struct Journal {
    dir: PathBuf,
    inner: Mutex<Inner>,
    /// The segment last read and its open file: the applier reads records in order, so one
    /// open serves a whole segment.
    reader: Mutex<Option<(u64, std::sync::Arc<File>)>>,
}

impl Journal {
    /// Open the journal in `dir` (created 0700 if missing): the records an earlier process
    /// left, to be applied by the caller, and a journal that appends to a new segment after
    /// them.
    pub fn open(dir: &Path) -> Result<(Journal, Leftover), JournalError> {
        crate::secrets::secure_dir(dir).map_err(|e| io_error("create", dir, e))?;
        let mut found: Vec<(u64, PathBuf)> = Vec::new();
        let read = std::fs::read_dir(dir).map_err(|e| io_error("list", dir, e))?;
        for item in read {
            let item = item.map_err(|e| io_error("list", dir, e))?;
            let name = item.file_name();
            let Some(n) = name
                .to_str()
                .and_then(|s| s.strip_suffix(".log"))
                .and_then(|s| s.parse::<u64>().ok())
            else {
                continue;
            };
            found.push((n, item.path()));
        }
        found.sort();
        let next = found.last().map_or(1, |(n, _)| n + 1);
        let file = create_segment(dir, next)?;
        let journal = Journal {
            dir: dir.to_path_buf(),
            inner: Mutex::new(Inner {
                segment: next,
                file,
                len: 0,
                next_seq: 1,
                unsynced: Vec::new(),
                closed: Vec::new(),
                current_last: 0,
                poisoned: None,
            }),
            reader: Mutex::new(None),
        };
        let leftover = Leftover {
            segments: found.into_iter().map(|(_, p)| p).collect(),
        };
        Ok((journal, leftover))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append `payloads` with one write (not durable until [`Journal::sync`]); their entries,
    /// in order. Starts a new segment first when the current one is full (syncing the old
    /// one, so a sync only ever has the current segment to cover).
    pub fn append(&self, payloads: &[Vec<u8>]) -> Result<Vec<Entry>, JournalError> {
        let mut inner = self.lock();
        if let Some(why) = &inner.poisoned {
            return Err(JournalError(why.clone()));
        }
        if inner.len >= SEGMENT_MAX_BYTES {
            self.rotate(&mut inner)?;
        }
        let mut buf = Vec::with_capacity(payloads.iter().map(|p| p.len() + HEADER).sum());
        let mut entries = Vec::with_capacity(payloads.len());
        for p in payloads {
            let len = u32::try_from(p.len())
                .map_err(|_| JournalError("ingest journal: a record over 4 GiB".into()))?;
            let offset = inner.len + (buf.len() + HEADER) as u64;
            buf.extend_from_slice(&len.to_le_bytes());
            buf.extend_from_slice(&crc32fast::hash(p).to_le_bytes());
            buf.extend_from_slice(p);
            let seq = inner.next_seq;
            inner.next_seq += 1;
            entries.push(Entry {
                seq,
                segment: inner.segment,
                offset,
                len,
            });
        }
        if let Err(e) = inner.file.write_all(&buf) {
            let path = segment_path(&self.dir, inner.segment);
            return Err(poison(&mut inner, io_error("write", &path, e)));
        }
        inner.len += buf.len() as u64;
        if let Some(last) = entries.last() {
            inner.current_last = last.seq;
        }
        inner.unsynced.extend_from_slice(&entries);
        Ok(entries)
    }

    /// Make every appended record durable (`fdatasync`); the entries that became durable with
    /// this call, in order.
    pub fn sync(&self) -> Result<Vec<Entry>, JournalError> {
        let mut inner = self.lock();
        if let Some(why) = &inner.poisoned {
            return Err(JournalError(why.clone()));
        }
        if inner.unsynced.is_empty() {
            return Ok(Vec::new());
        }
        if let Err(e) = inner.file.sync_data() {
            let path = segment_path(&self.dir, inner.segment);
            return Err(poison(&mut inner, io_error("sync", &path, e)));
        }
        Ok(std::mem::take(&mut inner.unsynced))
    }

    fn rotate(&self, inner: &mut Inner) -> Result<(), JournalError> {
        let path = segment_path(&self.dir, inner.segment);
        if let Err(e) = inner.file.sync_data() {
            return Err(poison(inner, io_error("sync", &path, e)));
        }
        let next = inner.segment + 1;
        let file = match create_segment(&self.dir, next) {
            Ok(f) => f,
            Err(e) => return Err(poison(inner, e)),
        };
        let last = inner.current_last;
        inner.closed.push((inner.segment, last));
        inner.segment = next;
        inner.file = file;
        inner.len = 0;
        Ok(())
    }

    /// The payload of a record appended by this process (checked against its checksum).
    pub fn read(&self, e: &Entry) -> Result<Vec<u8>, JournalError> {
        use std::os::unix::fs::FileExt;
        let path = segment_path(&self.dir, e.segment);
        let file = {
            let mut reader = self.reader.lock().unwrap_or_else(|p| p.into_inner());
            match &*reader {
                Some((n, f)) if *n == e.segment => f.clone(),
                _ => {
                    let f = std::sync::Arc::new(
                        File::open(&path).map_err(|err| io_error("open", &path, err))?,
                    );
                    *reader = Some((e.segment, f.clone()));
                    f
                }
            }
        };
        let mut buf = vec![0u8; HEADER + e.len as usize];
        file.read_exact_at(&mut buf, e.offset - HEADER as u64)
            .map_err(|err| io_error("read", &path, err))?;
        match frame(&buf) {
            Some(p) if p.len() == e.len as usize => Ok(buf.split_off(HEADER)),
            _ => Err(JournalError(format!(
                "ingest journal: record {} in {} does not match its checksum",
                e.seq,
                path.display()
            ))),
        }
    }

    /// Delete the closed segments whose records all have sequence numbers up to `seq` (call
    /// once they are applied and the applied state is durable). The current segment stays.
    pub fn release_through(&self, seq: u64) -> Result<usize, JournalError> {
        let done: Vec<u64> = {
            let mut inner = self.lock();
            let (done, keep): (Vec<_>, Vec<_>) =
                inner.closed.iter().partition(|(_, last)| *last <= seq);
            inner.closed = keep;
            done.into_iter().map(|(n, _)| n).collect()
        };
        {
            let mut reader = self.reader.lock().unwrap_or_else(|p| p.into_inner());
            if reader.as_ref().is_some_and(|(n, _)| done.contains(n)) {
                *reader = None;
            }
        }
        for n in &done {
            let path = segment_path(&self.dir, *n);
            std::fs::remove_file(&path).map_err(|e| io_error("remove", &path, e))?;
        }
        Ok(done.len())
    }

    /// The segments on disk, the current one included.
    pub fn segments(&self) -> usize {
        self.lock().closed.len() + 1
    }
}

fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:020}.log"))
}

/// A new, empty segment, owner-only, its directory entry synced (so a record synced into it
/// survives a crash with its file).
fn create_segment(dir: &Path, n: u64) -> Result<File, JournalError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = segment_path(dir, n);
    let file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| io_error("create", &path, e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error("sync the directory of", &path, e))?;
    Ok(file)
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> JournalError {
    JournalError(format!(
        "ingest journal: cannot {what} {}: {e}",
        path.display()
    ))
}

fn poison(inner: &mut Inner, e: JournalError) -> JournalError {
    let why =
        format!("{e} (the journal refuses writes until the process restarts and reads it back)");
    inner.poisoned = Some(why.clone());
    JournalError(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(i: usize) -> Vec<u8> {
        format!("record {i} {}", "x".repeat(i % 50)).into_bytes()
    }

    fn leftover_records(l: &Leftover) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        l.for_each(|p| {
            out.push(p);
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn appended_records_read_back_in_this_process_and_after_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let (j, left) = Journal::open(&path).unwrap();
        assert_eq!(left.segments(), 0);
        let a = j.append(&[payload(1), payload(2)]).unwrap();
        let b = j.append(&[payload(3)]).unwrap();
        assert_eq!(
            a.iter().chain(&b).map(|e| e.seq).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(j.read(&a[1]).unwrap(), payload(2));
        assert_eq!(j.sync().unwrap().len(), 3);
        assert!(j.sync().unwrap().is_empty(), "nothing new to sync");
        drop(j);
        let (j2, left) = Journal::open(&path).unwrap();
        assert_eq!(left.segments(), 1);
        assert_eq!(
            leftover_records(&left),
            [payload(1), payload(2), payload(3)]
        );
        left.remove().unwrap();
        assert_eq!(j2.segments(), 1);
        drop(j2);
        let (_j3, left) = Journal::open(&path).unwrap();
        // The segment the second open created (empty) is all that is left.
        assert!(leftover_records(&left).is_empty());
    }

    #[test]
    fn a_torn_tail_ends_the_reading_and_loses_nothing_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let (j, _) = Journal::open(&path).unwrap();
        j.append(&[payload(1), payload(2)]).unwrap();
        j.sync().unwrap();
        drop(j);
        let seg = segment_path(&path, 1);
        // A record cut short: its header and half its payload.
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        let p = payload(3);
        f.write_all(&(p.len() as u32).to_le_bytes()).unwrap();
        f.write_all(&crc32fast::hash(&p).to_le_bytes()).unwrap();
        f.write_all(&p[..p.len() / 2]).unwrap();
        drop(f);
        let (_j, left) = Journal::open(&path).unwrap();
        assert_eq!(leftover_records(&left), [payload(1), payload(2)]);
    }

    #[test]
    fn a_checksum_mismatch_ends_the_segment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let (j, _) = Journal::open(&path).unwrap();
        let e = j.append(&[payload(1), payload(2), payload(3)]).unwrap();
        j.sync().unwrap();
        drop(j);
        let seg = segment_path(&path, 1);
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes[e[1].offset as usize] ^= 0xff;
        std::fs::write(&seg, &bytes).unwrap();
        let (_j, left) = Journal::open(&path).unwrap();
        assert_eq!(leftover_records(&left), [payload(1)]);
    }

    #[test]
    fn full_segments_rotate_and_are_released_once_applied() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let (j, _) = Journal::open(&path).unwrap();
        // Force a rotation without writing 64 MiB: the current segment is marked full.
        let first = j.append(&[payload(1)]).unwrap();
        j.lock().len = SEGMENT_MAX_BYTES;
        let second = j.append(&[payload(2)]).unwrap();
        assert_eq!(first[0].segment + 1, second[0].segment);
        assert_eq!(j.segments(), 2);
        assert_eq!(j.read(&first[0]).unwrap(), payload(1));
        // Not yet applied: kept.
        assert_eq!(j.release_through(0).unwrap(), 0);
        assert_eq!(j.release_through(first[0].seq).unwrap(), 1);
        assert_eq!(j.segments(), 1);
        assert!(!segment_path(&path, first[0].segment).exists());
        assert_eq!(j.read(&second[0]).unwrap(), payload(2));
    }

    #[test]
    fn segments_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let (_j, _) = Journal::open(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o700);
        assert_eq!(mode(&segment_path(&path, 1)), 0o600);
    }
}
