//! `berth approve PLAN --by NAME`: records an approval of a saved plan's placements that
//! await one, in `PLAN.approval.json`, bound to the plan's id (void for any other plan).

use super::input::{
    APPROVAL_FORMAT, ApprovalRecord, Refusal, approval_path, input_problem, not_allowed, read_plan,
};
use crate::files::output;
use crate::report::{Exit, Ui};
use std::io;
use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct ApproveArgs {
    /// The saved plan to approve.
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,
    /// Who approves (must be one of the approvers the policy names, when it names any).
    #[arg(long, value_name = "NAME")]
    pub by: String,
}

/// `berth approve PLAN --by NAME`: writes `PLAN.approval.json`, bound to the plan's id.
pub fn run(args: &ApproveArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let plan = match read_plan(&args.plan) {
        Ok(plan) => plan,
        Err(problem) => return input_problem(&problem, ui),
    };
    let refused = not_allowed(&plan, &args.by);
    if !refused.is_empty() {
        let refusal = Refusal::ApproverNotAllowed {
            approved_by: args.by.clone(),
            workloads: refused,
        };
        ui.problem(&refusal, Some(refusal.hint()))?;
        return Ok(Exit::ErrorsFound);
    }
    let workloads: Vec<String> = plan
        .workloads
        .iter()
        .filter(|w| w.approval.is_some())
        .map(|w| w.workload.clone())
        .collect();
    if workloads.is_empty() {
        ui.status(&"nothing in this plan awaits approval")?;
        return Ok(Exit::Clean);
    }
    let record = ApprovalRecord {
        format: APPROVAL_FORMAT.to_string(),
        plan_id: plan.plan_id.clone(),
        approved_by: args.by.clone(),
        approved_at: jiff::Timestamp::now().to_string(),
        workloads,
    };
    let path = approval_path(&args.plan);
    let text = serde_json::to_string_pretty(&record).unwrap_or_default() + "\n";
    if let Err(e) = output::replace(&path, text.as_bytes(), &[&args.plan]) {
        ui.problem(&e, Some(e.hint()))?;
        return Ok(e.exit());
    }
    ui.status(&format_args!(
        "approved {} workload(s) of plan {} by `{}`: `{}`",
        record.workloads.len(),
        record.plan_id,
        record.approved_by,
        path.display()
    ))?;
    Ok(Exit::Clean)
}
