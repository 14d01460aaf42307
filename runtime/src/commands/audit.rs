//! `berth audit [--log FILE] [--verify] [--jsonl]`: the audit trail ([`crate::audit`]) shown,
//! verified, or exported as JSON lines for a SIEM.

use crate::audit::{AuditLog, Record};
use crate::report::{Exit, OutputFormat, Ui};
use std::io;
use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct AuditArgs {
    /// The log to read (by default `BERTH_AUDIT_LOG`, else `$XDG_STATE_HOME/berth/audit.redb`;
    /// an edge agent keeps its own in `STATE/audit.redb`).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Check the hash chain: exit 1 naming every edited, removed or cut record.
    #[arg(long)]
    pub verify: bool,
    /// Print every record as one JSON line on stdout (for a SIEM).
    #[arg(long, conflicts_with = "verify")]
    pub jsonl: bool,
}

fn line(r: &Record) -> String {
    format!(
        "{:>5}  {}  {:<15} {:<24} {}{}  {}  {}",
        r.seq,
        r.at,
        r.action.to_string(),
        r.actor,
        r.plan_id.get(..19).unwrap_or(&r.plan_id),
        r.target
            .as_deref()
            .map_or_else(String::new, |t| format!("  target `{t}`")),
        r.outcome,
        if r.detail.is_null() {
            String::new()
        } else {
            r.detail.to_string()
        }
    )
}

pub fn run(args: &AuditArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let log = match args
        .log
        .clone()
        .map(AuditLog::at)
        .or_else(AuditLog::default_location)
    {
        Some(log) => log,
        None => {
            ui.problem(
                &"no audit log: neither `--log`, `BERTH_AUDIT_LOG`, `XDG_STATE_HOME` nor `HOME` is set",
                Some("give the log with `--log FILE`"),
            )?;
            return Ok(Exit::Trouble);
        }
    };
    if args.verify {
        return match log.verify() {
            Err(e) => {
                ui.problem(&e, Some(e.hint()))?;
                Ok(Exit::Trouble)
            }
            Ok(Ok(count)) => {
                if ui.output == OutputFormat::Json {
                    let doc = serde_json::json!({"verified": true, "records": count});
                    writeln!(ui.out, "{doc}")?;
                }
                ui.status(&format_args!(
                    "`{}`: {count} record(s), the chain is intact",
                    log.path().display()
                ))?;
                Ok(Exit::Clean)
            }
            Ok(Err(problems)) => {
                if ui.output == OutputFormat::Json {
                    let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
                    let doc = serde_json::json!({"verified": false, "problems": list});
                    writeln!(ui.out, "{doc}")?;
                }
                for p in &problems {
                    ui.problem(p, None)?;
                }
                ui.hint(&"the log was altered after it was written; compare it with the copy exported to your SIEM")?;
                Ok(Exit::ErrorsFound)
            }
        };
    }
    let (records, problems) = match log.read() {
        Ok(read) => read,
        Err(e) => {
            ui.problem(&e, Some(e.hint()))?;
            return Ok(Exit::Trouble);
        }
    };
    for p in &problems {
        ui.problem(p, Some("`berth audit --verify` checks the whole chain"))?;
    }
    if args.jsonl {
        for r in &records {
            writeln!(ui.out, "{}", serde_json::to_string(r).unwrap_or_default())?;
        }
    } else if ui.output == OutputFormat::Json {
        writeln!(ui.out, "{}", serde_json::json!({ "records": records }))?;
    } else {
        for r in &records {
            ui.status(&line(r))?;
        }
        ui.status(&format_args!(
            "{} record(s) in `{}`",
            records.len(),
            log.path().display()
        ))?;
    }
    Ok(if problems.is_empty() {
        Exit::Clean
    } else {
        Exit::ErrorsFound
    })
}
