//! `berth approve PLAN --by NAME`: records an approval of a saved plan's placements that
//! await one, in `PLAN.approval.json`, bound to the plan's id (void for any other plan).

use super::input::{APPROVAL_FORMAT, ApprovalRecord, InputProblem, approval_path, input_problem};
use crate::report::{Exit, Ui};
use berth_compiler::plan::Plan;
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
    let plan: Plan = match crate::files::read_plan_file(&args.plan)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(plan) => plan,
        Err(error) => {
            return input_problem(
                &InputProblem::ReadPlan {
                    path: args.plan.clone(),
                    error,
                },
                ui,
            );
        }
    };
    let mut workloads = Vec::new();
    for w in &plan.workloads {
        let Some(approval) = &w.approval else {
            continue;
        };
        if !approval.approvers.is_empty() && !approval.approvers.contains(&args.by) {
            ui.problem(
                &format_args!(
                    "`{}` may not approve `{}`: policy `{}` names {}",
                    args.by,
                    w.workload,
                    approval.policy,
                    approval
                        .approvers
                        .iter()
                        .map(|a| format!("`{a}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Some("approve with `--by` one of the approvers the policy names"),
            )?;
            return Ok(Exit::ErrorsFound);
        }
        workloads.push(w.workload.clone());
    }
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
    if let Err(e) = std::fs::write(&path, text) {
        ui.problem(
            &format_args!("cannot write `{}`: {e}", path.display()),
            Some("check that the plan's directory is writable"),
        )?;
        return Ok(Exit::Trouble);
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
