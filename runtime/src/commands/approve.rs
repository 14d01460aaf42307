//! `berth approve PLAN --key KEY [--expires 24h] [--spec DIR]`: signs, with an approver's
//! ed25519 key, the plan id, the workloads awaiting approval that the key may approve and the
//! expiry, and adds the signed approval to `PLAN.approval.json` (replacing an earlier one by
//! the same key). What is accepted, and why not: [`super::approval`].

use super::approval::{ApprovalClaim, ApprovalFile, Approvers};
use super::input::{approval_path, input_problem, read_approvals, read_plan};
use crate::backends::edge::bundle::keys;
use crate::files::output;
use crate::report::{Exit, Ui};
use std::io;
use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct ApproveArgs {
    /// The saved plan to approve.
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,
    /// The approver's secret key (`PREFIX.key`, `berth keys generate`): the approval is its
    /// signature, accepted only where the policy names its public key.
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// How long the approval holds (`90m`, `24h`, `7d`); by default as long as the plan.
    #[arg(long, value_name = "DURATION")]
    pub expires: Option<String>,
    /// The spec the plan was made from: where the policy's trust file is read, when its
    /// approvers are names rather than keys.
    #[arg(long, value_name = "DIR")]
    pub spec: Option<PathBuf>,
}

/// `24h` → that long from `now`.
fn expiry(text: &str, now: jiff::Timestamp) -> Result<jiff::Timestamp, String> {
    let span: jiff::Span = text
        .parse()
        .map_err(|e| format!("`{text}` is not a duration: {e}"))?;
    let duration = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|e| format!("`{text}` is not a duration: {e}"))?;
    if !duration.is_positive() {
        return Err(format!("`{text}` is not a positive duration"));
    }
    now.checked_add(duration)
        .map_err(|e| format!("`{text}` from now is not a time: {e}"))
}

pub fn run(args: &ApproveArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let plan = match read_plan(&args.plan) {
        Ok(plan) => plan,
        Err(problem) => return input_problem(&problem, ui),
    };
    if plan.workloads.iter().all(|w| w.approval.is_none()) {
        ui.status(&"nothing in this plan awaits approval")?;
        return Ok(Exit::Clean);
    }
    let now = jiff::Timestamp::now();
    let expires_at = match args.expires.as_deref().map(|t| expiry(t, now)).transpose() {
        Ok(at) => at,
        Err(e) => {
            ui.problem(
                &e,
                Some("a duration is a number and a unit: `90m`, `24h`, `7d`"),
            )?;
            return Ok(Exit::Trouble);
        }
    };
    let key = match keys::read_signing(&args.key) {
        Ok(key) => key,
        Err(e) => {
            ui.problem(
                &e,
                Some("--key takes the `.key` file `berth keys generate PREFIX` wrote"),
            )?;
            return Ok(Exit::Trouble);
        }
    };
    let approvers = match Approvers::resolve(&plan, args.spec.as_deref()) {
        Ok(approvers) => approvers,
        Err(e) => {
            ui.problem(&e, Some(e.hint()))?;
            return Ok(match e {
                super::approval::TrustError::NeedsSpec { .. }
                | super::approval::TrustError::Read { .. } => Exit::Trouble,
                _ => Exit::ErrorsFound,
            });
        }
    };
    let (may, may_not) = approvers.split(&key.verifying_key());
    let public = keys::public_text(&key.verifying_key());
    let who = approvers.display(&public);
    if may.is_empty() {
        let list: Vec<String> = may_not.iter().map(ToString::to_string).collect();
        ui.problem(
            &format_args!("{who} may not approve {}", list.join("; ")),
            Some("approve with the key of an approver the policy names (directly or in its trust file)"),
        )?;
        return Ok(Exit::ErrorsFound);
    }
    let path = approval_path(&args.plan);
    let mut file = match read_approvals(&path) {
        Ok(file) => file.unwrap_or_default(),
        Err(error) => {
            // What is not a regular file is refused by the write below, not replaced.
            if path.is_file() {
                ui.status(&format_args!(
                    "replacing `{}`, which held no approvals berth accepts: {error}",
                    path.display()
                ))?;
            }
            ApprovalFile::new()
        }
    };
    let approval = ApprovalClaim {
        plan_id: plan.plan_id.clone(),
        workloads: may.clone(),
        approver: public,
        approved_at: now.round(jiff::Unit::Second).unwrap_or(now).to_string(),
        expires_at: expires_at.map(|t| t.round(jiff::Unit::Second).unwrap_or(t).to_string()),
    }
    .sign(&key);
    let claim = approval.claim.clone();
    let until = claim
        .expires_at
        .as_deref()
        .map_or_else(String::new, |t| format!(" until `{t}`"));
    file.add(approval);
    let text = serde_json::to_string_pretty(&file).unwrap_or_default() + "\n";
    if let Err(e) = output::replace(&path, text.as_bytes(), &[&args.plan]) {
        ui.problem(&e, Some(e.hint()))?;
        return Ok(e.exit());
    }
    let entry = crate::audit::Entry {
        actor: format!("key:{}", who.replace('`', "")),
        action: crate::audit::Action::Approved,
        plan_id: plan.plan_id.clone(),
        target: None,
        outcome: "ok".into(),
        detail: serde_json::json!({
            "workloads": claim.workloads,
            "expires_at": claim.expires_at,
            "approver": claim.approver,
        }),
    };
    crate::audit::record_or_warn(entry, ui)?;
    let list: Vec<String> = may.iter().map(|w| format!("`{w}`")).collect();
    ui.status(&format_args!(
        "approved {} of plan {} as {who}{until}: `{}`",
        list.join(", "),
        plan.plan_id,
        path.display()
    ))?;
    for not in &may_not {
        ui.status(&format_args!("still awaiting another approver: {not}"))?;
    }
    Ok(Exit::Clean)
}

#[cfg(test)]
mod tests {
    use super::expiry;

    #[test]
    fn expiries_are_durations_from_now() {
        let now: jiff::Timestamp = "2026-12-04T10:00:00Z".parse().expect("time");
        let at = |t: &str| expiry(t, now).map(|t| t.to_string());
        assert_eq!(at("24h").as_deref(), Ok("2026-12-05T10:00:00Z"));
        assert_eq!(at("7d").as_deref(), Ok("2026-12-11T10:00:00Z"));
        assert_eq!(at("90m").as_deref(), Ok("2026-12-04T11:30:00Z"));
        assert!(at("soon").is_err());
        assert!(at("-1h").is_err());
        assert!(at("0s").is_err());
    }
}
