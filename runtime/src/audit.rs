//! The audit trail: who planned, approved, applied, reclaimed or accepted what, when, for
//! which plan, with what outcome — an append-only, hash-chained log in one redb database.
//!
//! Each record carries the hash of the record before it (`prev`) and its own (`hash`,
//! sha256 over its JSON with `hash` empty); a head (last sequence number and hash) is stored
//! beside the records in the same transaction. [`AuditLog::verify`] recomputes every hash,
//! follows the chain from record 1 and compares the end with the head, so an edited record,
//! one removed or replaced, and records cut from the end are each found and named. What it
//! cannot see is a writer who rewrites the whole chain and the head consistently: keep an
//! external copy (`berth audit --jsonl` into a SIEM) and compare heads to catch that.
//!
//! Must never: lose or rewrite a record already committed; print credentials (records hold
//! names, key fingerprints and plan ids, never tokens).

use redb::{Database, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RECORDS: TableDefinition<'static, u64, &[u8]> = TableDefinition::new("records");
const HEAD: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("head");

/// The `prev` of the first record.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// What was done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// A plan written to a file (`berth plan -o`).
    PlanSaved,
    /// A signed approval added to a plan's approval file.
    Approved,
    /// A plan applied to one target.
    Applied,
    /// A workload's idle GPUs reclaimed.
    Reclaimed,
    /// An edge agent accepted a signed bundle.
    BundleAccepted,
    /// What berth had set up for a target removed (the Flux configuration of an Arc cluster no
    /// target names any more).
    Removed,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::PlanSaved => "plan_saved",
            Action::Approved => "approved",
            Action::Applied => "applied",
            Action::Reclaimed => "reclaimed",
            Action::BundleAccepted => "bundle_accepted",
            Action::Removed => "removed",
        })
    }
}

/// What a caller records.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Who: the identity in use (a kubeconfig user, a key's name and fingerprint, the agent).
    pub actor: String,
    pub action: Action,
    pub plan_id: String,
    pub target: Option<String>,
    /// `ok`, or what went wrong.
    pub outcome: String,
    pub detail: serde_json::Value,
}

/// One record of the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub seq: u64,
    /// RFC 3339, UTC.
    pub at: String,
    pub actor: String,
    pub action: Action,
    pub plan_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub detail: serde_json::Value,
    /// The previous record's hash ([`GENESIS`] for the first).
    pub prev: String,
    /// `sha256:` over this record's JSON with `hash` empty.
    pub hash: String,
}

impl Record {
    /// The hash this record's content gives.
    pub fn content_hash(&self) -> String {
        let mut bare = self.clone();
        bare.hash = String::new();
        // INVARIANT: serde_json writes a struct's fields in declaration order and a `Value`'s
        // maps in one order, so re-serialising a parsed record gives the bytes hashed.
        let bytes = serde_json::to_vec(&bare).unwrap_or_default();
        format!(
            "sha256:{}",
            berth_compiler::plan::hex(&Sha256::digest(&bytes))
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Head {
    seq: u64,
    hash: String,
}

/// Why the log could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("the audit log `{path}` is in use by another process")]
    Busy { path: String },
    #[error("cannot open the audit log `{path}`: {message}")]
    Open { path: String, message: String },
    #[error("the audit log `{path}`: {message}")]
    Store { path: String, message: String },
}

impl AuditError {
    pub fn hint(&self) -> &'static str {
        match self {
            AuditError::Busy { .. } => "another berth is writing it; try again",
            AuditError::Open { .. } => {
                "set `BERTH_AUDIT_LOG` (or `--log`) to a file in a directory you can write"
            }
            AuditError::Store { .. } => "`berth audit --verify` says what is wrong with it",
        }
    }
}

/// What `verify` finds wrong, naming the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditProblem {
    /// A record that does not parse.
    Unreadable { seq: u64, error: String },
    /// A record whose hash is not its content's: edited after it was written.
    Edited { seq: u64 },
    /// A record stored under another number than it says.
    Misnumbered { key: u64, seq: u64 },
    /// A record whose `prev` is not the hash of the one before: one was removed or replaced.
    Unchained { seq: u64 },
    /// A number missing between two records.
    Missing { seq: u64 },
    /// The records end before the head says they do: cut from the end.
    Truncated { last: u64, head: u64 },
    /// The head names another hash than the last record's.
    HeadMismatch { seq: u64 },
}

impl fmt::Display for AuditProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditProblem::Unreadable { seq, error } => {
                write!(f, "record {seq} is not a record: {error}")
            }
            AuditProblem::Edited { seq } => {
                write!(f, "record {seq} was edited: its hash is not its content's")
            }
            AuditProblem::Misnumbered { key, seq } => {
                write!(f, "record {seq} is stored as record {key}")
            }
            AuditProblem::Unchained { seq } => write!(
                f,
                "record {seq} does not follow record {}: a record was removed or replaced",
                seq - 1
            ),
            AuditProblem::Missing { seq } => write!(f, "record {seq} is missing"),
            AuditProblem::Truncated { last, head } => write!(
                f,
                "the log ends at record {last} but its head says {head}: records were cut from its end"
            ),
            AuditProblem::HeadMismatch { seq } => write!(
                f,
                "the head names another hash than record {seq}'s: the head or the record was rewritten"
            ),
        }
    }
}

/// An audit log file.
#[derive(Clone, Debug)]
pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    pub fn at(path: impl Into<PathBuf>) -> AuditLog {
        AuditLog { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The log commands write to: `BERTH_AUDIT_LOG`, else `$XDG_STATE_HOME/berth/audit.redb`,
    /// else `$HOME/.local/state/berth/audit.redb`; `None` with neither set.
    pub fn default_location() -> Option<AuditLog> {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        if let Some(path) = var("BERTH_AUDIT_LOG") {
            return Some(AuditLog::at(PathBuf::from(path)));
        }
        let state = var("XDG_STATE_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
        Some(AuditLog::at(state.join("berth/audit.redb")))
    }

    fn store_error(&self, e: impl fmt::Display) -> AuditError {
        AuditError::Store {
            path: self.path.display().to_string(),
            message: e.to_string(),
        }
    }

    /// Opens the database, waiting (at most 10 s) while another process holds it.
    fn open(&self, create: bool) -> Result<Database, AuditError> {
        let path = self.path.display().to_string();
        if create && let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| AuditError::Open {
                path: path.clone(),
                message: e.to_string(),
            })?;
        }
        if !create && !self.path.exists() {
            return Err(AuditError::Open {
                path,
                message: "no such file".into(),
            });
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut wait = Duration::from_millis(10);
        loop {
            match Database::create(&self.path) {
                Ok(db) => return Ok(db),
                Err(redb::DatabaseError::DatabaseAlreadyOpen) if Instant::now() < deadline => {
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_millis(200));
                }
                Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                    return Err(AuditError::Busy { path });
                }
                Err(e) => {
                    return Err(AuditError::Open {
                        path,
                        message: e.to_string(),
                    });
                }
            }
        }
    }

    /// Appends `entry` as the next record, chained to the last, in one transaction.
    pub fn append(&self, entry: Entry) -> Result<Record, AuditError> {
        let db = self.open(true)?;
        let txn = db.begin_write().map_err(|e| self.store_error(e))?;
        let record = {
            let mut head_table = txn.open_table(HEAD).map_err(|e| self.store_error(e))?;
            let head: Option<Head> = head_table
                .get("head")
                .map_err(|e| self.store_error(e))?
                .and_then(|v| serde_json::from_slice(v.value()).ok());
            let (seq, prev) = head.map_or((1, GENESIS.to_string()), |h| (h.seq + 1, h.hash));
            let now = jiff::Timestamp::now();
            let mut record = Record {
                seq,
                at: now
                    .round(jiff::Unit::Millisecond)
                    .unwrap_or(now)
                    .to_string(),
                actor: entry.actor,
                action: entry.action,
                plan_id: entry.plan_id,
                target: entry.target,
                outcome: entry.outcome,
                detail: entry.detail,
                prev,
                hash: String::new(),
            };
            record.hash = record.content_hash();
            let bytes = serde_json::to_vec(&record).map_err(|e| self.store_error(e))?;
            let mut records = txn.open_table(RECORDS).map_err(|e| self.store_error(e))?;
            records
                .insert(seq, bytes.as_slice())
                .map_err(|e| self.store_error(e))?;
            let head = serde_json::to_vec(&Head {
                seq,
                hash: record.hash.clone(),
            })
            .map_err(|e| self.store_error(e))?;
            head_table
                .insert("head", head.as_slice())
                .map_err(|e| self.store_error(e))?;
            record
        };
        txn.commit().map_err(|e| self.store_error(e))?;
        Ok(record)
    }

    /// Every record in order (the unreadable ones as problems).
    pub fn read(&self) -> Result<(Vec<Record>, Vec<AuditProblem>), AuditError> {
        let (records, problems, _) = self.read_all()?;
        Ok((records, problems))
    }

    #[allow(clippy::type_complexity)]
    fn read_all(&self) -> Result<(Vec<Record>, Vec<AuditProblem>, Option<Head>), AuditError> {
        let db = self.open(false)?;
        let txn = db.begin_read().map_err(|e| self.store_error(e))?;
        let mut records = Vec::new();
        let mut problems = Vec::new();
        match txn.open_table(RECORDS) {
            Ok(table) => {
                for item in table.iter().map_err(|e| self.store_error(e))? {
                    let (key, value) = item.map_err(|e| self.store_error(e))?;
                    match serde_json::from_slice::<Record>(value.value()) {
                        Ok(record) => {
                            if record.seq != key.value() {
                                problems.push(AuditProblem::Misnumbered {
                                    key: key.value(),
                                    seq: record.seq,
                                });
                            }
                            records.push(record);
                        }
                        Err(e) => problems.push(AuditProblem::Unreadable {
                            seq: key.value(),
                            error: e.to_string(),
                        }),
                    }
                }
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {}
            Err(e) => return Err(self.store_error(e)),
        }
        let head = match txn.open_table(HEAD) {
            Ok(table) => table
                .get("head")
                .map_err(|e| self.store_error(e))?
                .and_then(|v| serde_json::from_slice(v.value()).ok()),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(self.store_error(e)),
        };
        Ok((records, problems, head))
    }

    /// Checks the chain: the number of records, or every problem found.
    pub fn verify(&self) -> Result<Result<u64, Vec<AuditProblem>>, AuditError> {
        let (records, mut problems, head) = self.read_all()?;
        Ok(
            match verify_chain(&records, head.as_ref().map(|h| (h.seq, h.hash.as_str()))) {
                Ok(n) if problems.is_empty() => Ok(n),
                Ok(_) => Err(problems),
                Err(found) => {
                    problems.extend(found);
                    Err(problems)
                }
            },
        )
    }
}

/// The chain's problems: hashes, links, numbering from 1, and the end against the head.
pub fn verify_chain(
    records: &[Record],
    head: Option<(u64, &str)>,
) -> Result<u64, Vec<AuditProblem>> {
    let mut problems = Vec::new();
    let mut expected_seq = 1;
    let mut prev = GENESIS.to_string();
    for record in records {
        while expected_seq < record.seq {
            problems.push(AuditProblem::Missing { seq: expected_seq });
            expected_seq += 1;
        }
        if record.content_hash() != record.hash {
            problems.push(AuditProblem::Edited { seq: record.seq });
        }
        if record.prev != prev {
            problems.push(AuditProblem::Unchained { seq: record.seq });
        }
        prev.clone_from(&record.hash);
        expected_seq = record.seq + 1;
    }
    let last = records.last().map_or(0, |r| r.seq);
    match head {
        Some((seq, _)) if seq > last => problems.push(AuditProblem::Truncated { last, head: seq }),
        Some((seq, hash)) if seq == last && hash != prev => {
            problems.push(AuditProblem::HeadMismatch { seq });
        }
        None if last > 0 => problems.push(AuditProblem::Truncated { last, head: 0 }),
        _ => {}
    }
    if problems.is_empty() {
        Ok(last)
    } else {
        Err(problems)
    }
}

/// Who is acting, for records that have no better identity: `BERTH_ACTOR`, else the
/// operating system user.
pub fn local_actor() -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    var("BERTH_ACTOR")
        .or_else(|| var("USER").map(|u| format!("user:{u}")))
        .or_else(|| var("LOGNAME").map(|u| format!("user:{u}")))
        .unwrap_or_else(|| "user:unknown".to_string())
}

/// Appends to the default log; a failure is returned as a message for a warning (the act
/// itself has happened and is not undone).
pub fn record(entry: Entry) -> Option<String> {
    let log = AuditLog::default_location()?;
    log.append(entry)
        .err()
        .map(|e| format!("audit: the record was not written: {e}"))
}

/// [`record`], its warning (if any) said at once.
pub fn record_or_warn(entry: Entry, ui: &mut crate::report::Ui<'_>) -> std::io::Result<()> {
    match record(entry) {
        Some(warning) => ui.status(&warning),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u32) -> Entry {
        Entry {
            actor: format!("user:test{n}"),
            action: Action::Applied,
            plan_id: "sha256:p".into(),
            target: Some("lyon".into()),
            outcome: "ok".into(),
            detail: serde_json::json!({"n": n}),
        }
    }

    #[test]
    fn appended_records_chain_and_verify() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = AuditLog::at(dir.path().join("a/audit.redb"));
        for n in 0..3 {
            log.append(entry(n)).expect("append");
        }
        let (records, problems) = log.read().expect("read");
        assert!(problems.is_empty());
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(records[0].prev, GENESIS);
        assert_eq!(records[1].prev, records[0].hash);
        assert_eq!(log.verify().expect("open"), Ok(3));
    }

    #[test]
    fn edits_removals_and_cut_ends_are_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = AuditLog::at(dir.path().join("audit.redb"));
        for n in 0..4 {
            log.append(entry(n)).expect("append");
        }
        let (records, _) = log.read().expect("read");
        let head = |r: &[Record]| r.last().map(|l| (l.seq, l.hash.clone()));
        let (hs, hh) = head(&records).expect("head");
        // Edited.
        let mut edited = records.clone();
        edited[1].outcome = "failed".into();
        assert_eq!(
            verify_chain(&edited, Some((hs, &hh))),
            Err(vec![AuditProblem::Edited { seq: 2 }])
        );
        // Edited and re-hashed: the next record no longer follows it.
        edited[1].hash = edited[1].content_hash();
        assert_eq!(
            verify_chain(&edited, Some((hs, &hh))),
            Err(vec![AuditProblem::Unchained { seq: 3 }])
        );
        // Removed from the middle.
        let mut removed = records.clone();
        removed.remove(2);
        assert_eq!(
            verify_chain(&removed, Some((hs, &hh))),
            Err(vec![
                AuditProblem::Missing { seq: 3 },
                AuditProblem::Unchained { seq: 4 }
            ])
        );
        // Cut from the end.
        assert_eq!(
            verify_chain(&records[..3], Some((hs, &hh))),
            Err(vec![AuditProblem::Truncated { last: 3, head: 4 }])
        );
        assert_eq!(verify_chain(&records, Some((hs, &hh))), Ok(4));
    }
}
