//! The agent's durable state in one redb database (`STATE/agent.redb`): the accepted bundle,
//! the pull's ETag, the telemetry buffer, the processes it started and the verified artifacts.
//!
//! Every change is one ACID transaction, so a `kill -9` at any moment leaves either the state
//! before or the state after it. INVARIANT: an accepted bundle and its `bundle_accepted`
//! event are committed together; an artifact is recorded only after its file was renamed into
//! the cache, which happens only after its digest verified.

use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};
use serde::{Deserialize, Serialize};
use std::path::Path;

const META: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("meta");
const EVENTS: TableDefinition<'static, u64, &[u8]> = TableDefinition::new("events");
const PROCESSES: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("processes");
const ARTIFACTS: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("artifacts");

/// Why the state database could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Another process holds the database's lock.
    #[error("the state database `{path}` is in use by another process")]
    Busy { path: String },
    /// The file is there but is not a readable database (truncated, overwritten, …).
    #[error("the state database `{path}` is corrupt: {message}")]
    Corrupt { path: String, message: String },
    /// The file or its directory cannot be read or written (permissions, a full disk, …).
    #[error("cannot open the state database `{path}`: {message}")]
    Unusable { path: String, message: String },
    /// A read or write of an open database failed.
    #[error("agent state: {0}")]
    Store(String),
}

impl<E: Into<redb::Error>> From<E> for StateError {
    fn from(e: E) -> Self {
        StateError::Store(e.into().to_string())
    }
}

/// redb's errors are large: boxed where they are kept.
fn boxed<E: Into<redb::Error>>(e: E) -> Box<redb::Error> {
    Box::new(e.into())
}

/// The database file of a state directory.
pub const DATABASE: &str = "agent.redb";

/// A corrupt database moved aside by [`State::open_or_recover`].
#[derive(Debug)]
pub struct Recovered {
    pub aside: std::path::PathBuf,
    pub reason: String,
}

pub type Result<T> = std::result::Result<T, StateError>;

/// One telemetry record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The cursor: strictly increasing, never reused.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// `bundle_accepted`, `bundle_rejected`, `workload_started`, `workload_exited`,
    /// `artifact_fetched`, `artifact_rejected`, `reclaim`, `gpu_sample`.
    pub kind: String,
    pub workload: Option<String>,
    pub detail: serde_json::Value,
}

/// An event before it is numbered, with the time it may be kept until unacknowledged.
pub struct NewEvent {
    pub kind: &'static str,
    pub workload: Option<String>,
    pub detail: serde_json::Value,
    pub keep_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    pub pid: u32,
    /// Start time of the process in clock ticks since boot (`/proc/PID/stat` field 22), so a
    /// recycled pid is never mistaken for ours.
    pub start_ticks: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactRecord {
    pub size: u64,
    pub last_used_ms: u64,
}

#[derive(Serialize, Deserialize)]
struct StoredEvent {
    event: Event,
    keep_until_ms: u64,
}

pub struct State {
    db: Database,
    max_events: u64,
    /// When expired events were last swept (ms): a sweep reads every buffered event, so it
    /// runs at most once per [`SWEEP_EVERY_MS`], not on every append.
    last_sweep_ms: std::sync::atomic::AtomicU64,
}

const SWEEP_EVERY_MS: u64 = 10_000;

fn u64_of(bytes: Option<&[u8]>) -> u64 {
    bytes
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, u64::from_le_bytes)
}

impl State {
    /// Opens (or creates) the database in `dir`. `max_events` bounds the telemetry buffer
    /// whatever the workloads' durations allow.
    ///
    /// A file that is not a readable database is [`StateError::Corrupt`] (never a panic):
    /// the caller decides what to do with it ([`State::open_or_recover`]).
    pub fn open(dir: &Path, max_events: u64) -> Result<State> {
        let path = dir.join(DATABASE);
        let unusable = |message: String| StateError::Unusable {
            path: path.display().to_string(),
            message,
        };
        std::fs::create_dir_all(dir).map_err(|e| unusable(e.to_string()))?;
        // redb asserts on some damaged files instead of returning an error: a panic while
        // opening is a corrupt file too. The panic hook is silenced meanwhile (one opener at
        // a time), so the user reads the error, not a panic and its backtrace.
        static HOOK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let serial = HOOK
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let opened =
            std::panic::catch_unwind(|| -> std::result::Result<Database, Box<redb::Error>> {
                let db = Database::create(&path).map_err(boxed)?;
                let tx = db.begin_write().map_err(boxed)?;
                for table in [META, PROCESSES, ARTIFACTS] {
                    tx.open_table(table).map_err(boxed)?;
                }
                tx.open_table(EVENTS).map_err(boxed)?;
                tx.commit().map_err(boxed)?;
                Ok(db)
            });
        std::panic::set_hook(hook);
        drop(serial);
        let corrupt = |message: String| StateError::Corrupt {
            path: path.display().to_string(),
            message,
        };
        let error = match opened {
            Ok(Ok(db)) => {
                return Ok(State {
                    db,
                    max_events,
                    last_sweep_ms: std::sync::atomic::AtomicU64::new(0),
                });
            }
            Ok(Err(e)) => *e,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "the store could not read it".into());
                return Err(corrupt(message));
            }
        };
        Err(match error {
            redb::Error::DatabaseAlreadyOpen => StateError::Busy {
                path: path.display().to_string(),
            },
            redb::Error::Io(e) if e.kind() != std::io::ErrorKind::UnexpectedEof => {
                unusable(e.to_string())
            }
            e @ redb::Error::UpgradeRequired(_) => unusable(e.to_string()),
            e => corrupt(e.to_string()),
        })
    }

    /// Opens the database in `dir`; one that is corrupt is moved aside to
    /// `agent.redb.corrupt-SECONDS` (kept, never deleted: it may be wanted for a post-mortem)
    /// and a fresh one is created in its place. Returns the state and, after a recovery, the
    /// file moved aside and why it was.
    pub fn open_or_recover(
        dir: &Path,
        max_events: u64,
        now_s: u64,
    ) -> Result<(State, Option<Recovered>)> {
        let reason = match State::open(dir, max_events) {
            Err(StateError::Corrupt { message, .. }) => message,
            other => return other.map(|state| (state, None)),
        };
        let path = dir.join(DATABASE);
        let mut aside = dir.join(format!("{DATABASE}.corrupt-{now_s}"));
        let mut n = 1;
        while aside.exists() {
            aside = dir.join(format!("{DATABASE}.corrupt-{now_s}-{n}"));
            n += 1;
        }
        std::fs::rename(&path, &aside).map_err(|e| StateError::Unusable {
            path: path.display().to_string(),
            message: format!("it is corrupt ({reason}) and cannot be moved aside: {e}"),
        })?;
        let state = State::open(dir, max_events)?;
        Ok((state, Some(Recovered { aside, reason })))
    }

    pub fn meta(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(META)?;
        Ok(table.get(key)?.map(|v| v.value().to_vec()))
    }

    pub fn set_meta(&self, key: &str, value: &[u8]) -> Result<()> {
        let tx = self.db.begin_write()?;
        tx.open_table(META)?.insert(key, value)?;
        tx.commit()?;
        Ok(())
    }

    /// Stores an accepted bundle, its ETag and its event in one transaction.
    pub fn accept_bundle(
        &self,
        signed: &[u8],
        etag: Option<&str>,
        event: NewEvent,
        now_ms: u64,
    ) -> Result<()> {
        let tx = self.db.begin_write()?;
        {
            let mut meta = tx.open_table(META)?;
            meta.insert("bundle", signed)?;
            match etag {
                Some(etag) => meta.insert("etag", etag.as_bytes()).map(drop)?,
                None => meta.remove("etag").map(drop)?,
            }
        }
        self.append_in(&tx, event, now_ms)?;
        tx.commit()?;
        Ok(())
    }

    /// Appends one event, dropping (and counting) expired or excess ones first.
    pub fn record(&self, event: NewEvent, now_ms: u64) -> Result<u64> {
        let tx = self.db.begin_write()?;
        let seq = self.append_in(&tx, event, now_ms)?;
        tx.commit()?;
        Ok(seq)
    }

    fn append_in(&self, tx: &redb::WriteTransaction, event: NewEvent, now_ms: u64) -> Result<u64> {
        let mut meta = tx.open_table(META)?;
        let mut events = tx.open_table(EVENTS)?;
        let seq = u64_of(meta.get("next_seq")?.as_ref().map(|v| v.value())).max(1);
        // Drop what outlived its workload's buffer, then the oldest beyond the count bound.
        let mut dropped = 0u64;
        let last = self
            .last_sweep_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        if now_ms < last || now_ms - last >= SWEEP_EVERY_MS {
            self.last_sweep_ms
                .store(now_ms, std::sync::atomic::Ordering::Relaxed);
            let mut expired = Vec::new();
            for row in events.iter()? {
                let (k, v) = row?;
                let stored: Option<StoredEvent> = serde_json::from_slice(v.value()).ok();
                if stored.is_none_or(|s| s.keep_until_ms < now_ms) {
                    expired.push(k.value());
                }
            }
            for k in expired {
                events.remove(k)?;
                dropped += 1;
            }
        }
        while events.len()? >= self.max_events.max(1) {
            if events.pop_first()?.is_none() {
                break;
            }
            dropped += 1;
        }
        if dropped > 0 {
            let total = u64_of(meta.get("dropped")?.as_ref().map(|v| v.value())) + dropped;
            meta.insert("dropped", total.to_le_bytes().as_slice())?;
        }
        let stored = StoredEvent {
            event: Event {
                seq,
                at_ms: now_ms,
                kind: event.kind.to_string(),
                workload: event.workload,
                detail: event.detail,
            },
            keep_until_ms: now_ms.saturating_add(event.keep_ns / 1_000_000),
        };
        let bytes = serde_json::to_vec(&stored).map_err(|e| StateError::Store(e.to_string()))?;
        events.insert(seq, bytes.as_slice())?;
        meta.insert("next_seq", (seq + 1).to_le_bytes().as_slice())?;
        Ok(seq)
    }

    /// Events after `cursor`, at most `limit`, oldest first.
    pub fn events_after(&self, cursor: u64, limit: usize) -> Result<Vec<Event>> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(EVENTS)?;
        let mut out = Vec::new();
        for row in table.range(cursor.saturating_add(1)..)? {
            if out.len() >= limit {
                break;
            }
            let (_, v) = row?;
            if let Ok(stored) = serde_json::from_slice::<StoredEvent>(v.value()) {
                out.push(stored.event);
            }
        }
        Ok(out)
    }

    /// Deletes every event up to and including `cursor`: the control plane has them.
    pub fn acknowledge(&self, cursor: u64) -> Result<u64> {
        let tx = self.db.begin_write()?;
        let mut removed = 0;
        {
            let mut table = tx.open_table(EVENTS)?;
            loop {
                let first = table.first()?.map(|(k, _)| k.value());
                match first {
                    Some(k) if k <= cursor => {
                        table.remove(k)?;
                        removed += 1;
                    }
                    _ => break,
                }
            }
        }
        tx.commit()?;
        Ok(removed)
    }

    /// (events buffered, events dropped so far).
    pub fn telemetry_counts(&self) -> Result<(u64, u64)> {
        let tx = self.db.begin_read()?;
        let buffered = tx.open_table(EVENTS)?.len()?;
        let dropped = u64_of(
            tx.open_table(META)?
                .get("dropped")?
                .as_ref()
                .map(|v| v.value()),
        );
        Ok((buffered, dropped))
    }

    /// Records a started process and its event in one transaction.
    pub fn started(
        &self,
        key: &str,
        record: ProcessRecord,
        event: NewEvent,
        now_ms: u64,
    ) -> Result<()> {
        let tx = self.db.begin_write()?;
        {
            let bytes =
                serde_json::to_vec(&record).map_err(|e| StateError::Store(e.to_string()))?;
            tx.open_table(PROCESSES)?.insert(key, bytes.as_slice())?;
        }
        self.append_in(&tx, event, now_ms)?;
        tx.commit()?;
        Ok(())
    }

    pub fn processes(&self) -> Result<Vec<(String, ProcessRecord)>> {
        self.records(PROCESSES)
    }

    pub fn set_process(&self, key: &str, record: Option<ProcessRecord>) -> Result<()> {
        self.set_record(PROCESSES, key, record)
    }

    pub fn artifacts(&self) -> Result<Vec<(String, ArtifactRecord)>> {
        self.records(ARTIFACTS)
    }

    pub fn set_artifact(&self, digest: &str, record: Option<ArtifactRecord>) -> Result<()> {
        self.set_record(ARTIFACTS, digest, record)
    }

    /// Every record of a keyed table (unreadable rows skipped), in key order.
    fn records<T: serde::de::DeserializeOwned>(
        &self,
        table: TableDefinition<'static, &str, &[u8]>,
    ) -> Result<Vec<(String, T)>> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(table)?;
        let mut out = Vec::new();
        for row in table.iter()? {
            let (k, v) = row?;
            if let Ok(record) = serde_json::from_slice(v.value()) {
                out.push((k.value().to_string(), record));
            }
        }
        Ok(out)
    }

    /// Sets (Some) or removes (None) one record, in its own transaction.
    fn set_record<T: Serialize>(
        &self,
        table: TableDefinition<'static, &str, &[u8]>,
        key: &str,
        record: Option<T>,
    ) -> Result<()> {
        let tx = self.db.begin_write()?;
        {
            let mut table = tx.open_table(table)?;
            match record {
                Some(r) => {
                    let bytes =
                        serde_json::to_vec(&r).map_err(|e| StateError::Store(e.to_string()))?;
                    table.insert(key, bytes.as_slice())?;
                }
                None => {
                    table.remove(key)?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(keep_ns: u64) -> NewEvent {
        NewEvent {
            kind: "workload_started",
            workload: Some("w".into()),
            detail: serde_json::Value::Null,
            keep_ns,
        }
    }

    #[test]
    fn events_are_kept_until_acknowledged_and_overflow_is_counted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = State::open(dir.path(), 3).expect("open");
        for i in 0..5 {
            state.record(event(u64::MAX), 1000 + i).expect("record");
        }
        assert_eq!(state.telemetry_counts().expect("counts"), (3, 2));
        let events = state.events_after(0, 100).expect("read");
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4, 5]);
        assert_eq!(state.acknowledge(4).expect("ack"), 2);
        assert_eq!(state.events_after(0, 100).expect("read").len(), 1);
        drop(state);
        // Reopened: sequence numbers go on, never reused.
        let state = State::open(dir.path(), 3).expect("reopen");
        assert_eq!(state.record(event(u64::MAX), 2000).expect("record"), 6);
    }

    #[test]
    fn a_truncated_database_is_an_error_and_is_moved_aside_then_replaced() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = State::open(dir.path(), 100).expect("open");
        state.set_meta("bundle", &[7; 4096]).expect("write");
        drop(state);
        let path = dir.path().join(DATABASE);
        let bytes = std::fs::read(&path).expect("read");
        for keep in [0, 100, 512, 4096, bytes.len() / 2, bytes.len() - 1] {
            std::fs::write(&path, &bytes[..keep.min(bytes.len())]).expect("truncate");
            match State::open(dir.path(), 100) {
                Err(StateError::Corrupt { .. }) => {}
                // An empty file or a header-only one is a fresh database to redb.
                Ok(_) if keep == 0 => {}
                Ok(state) => assert!(state.meta("bundle").is_ok(), "{keep}"),
                Err(e) => panic!("truncated to {keep}: {e}"),
            }
        }
        std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("truncate");
        let (state, recovered) = State::open_or_recover(dir.path(), 100, 1234).expect("recover");
        let recovered = recovered.expect("moved aside");
        assert_eq!(recovered.aside, dir.path().join("agent.redb.corrupt-1234"));
        assert_eq!(
            std::fs::read(&recovered.aside).expect("kept"),
            &bytes[..bytes.len() / 2]
        );
        assert_eq!(state.meta("bundle").expect("read"), None);
    }

    #[test]
    fn events_past_their_buffer_duration_are_dropped_and_counted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = State::open(dir.path(), 100).expect("open");
        state.record(event(20_000_000_000), 10_000).expect("record");
        state.record(event(20_000_000_000), 25_000).expect("record");
        // Swept at most every 10 s: at 36 s the first (kept until 30 s) goes.
        state.record(event(20_000_000_000), 36_000).expect("record");
        assert_eq!(state.telemetry_counts().expect("counts"), (2, 1));
    }
}
