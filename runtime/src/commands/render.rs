//! `berth render PLAN|SPEC -o DIR`: the plan's Kubernetes objects as YAML, one file per
//! cluster and namespace, and each Arc target's GitOps files, written under `DIR`.

use super::input::{PlanInputArgs, input_or_exit};
use crate::backends::k8s;
use crate::files::output;
use crate::report::{Exit, OutputFormat, Ui};
use std::io;
use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub plan: PlanInputArgs,
    /// Directory the YAML files are written to (`CONTEXT/NAMESPACE.yaml`).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: PathBuf,
}

/// `berth render`: YAML per cluster and namespace under `--out`.
pub fn run(args: &RenderArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let input = match input_or_exit(&args.plan, false, ui)? {
        Ok(input) => input,
        Err(exit) => return Ok(exit),
    };
    let rendered = k8s::render::render(&input.ir, &input.plan);
    let mut files = k8s::render::yaml_files(&rendered);
    for target in &rendered.gitops {
        for (name, text) in target.files(&rendered.plan_id) {
            files.push((format!("arc/{}/{name}", target.target), text));
        }
    }
    let mut written = Vec::new();
    for (rel, text) in &files {
        let path = args.out.join(rel);
        if let Err(e) = output::create_dirs_and_replace(&path, text.as_bytes(), &input.inputs) {
            ui.problem(&e, Some(e.hint()))?;
            return Ok(e.exit());
        }
        written.push(path.display().to_string());
    }
    for other in &rendered.others {
        ui.status(&format_args!(
            "note: `{}` on `{}` ({}) is not handled by this backend",
            other.workload, other.target, other.runtime
        ))?;
    }
    let objects: usize = rendered.clusters.iter().map(|c| c.manifests.len()).sum();
    ui.status(&format_args!(
        "rendered {objects} object(s) into {} file(s) under `{}`",
        written.len(),
        args.out.display()
    ))?;
    if ui.output == OutputFormat::Json {
        let doc = serde_json::json!({
            "plan_id": rendered.plan_id,
            "files": written,
            "objects": objects,
            "not_handled": rendered.others.iter().map(|o| serde_json::json!({
                "workload": o.workload, "target": o.target, "runtime": o.runtime,
            })).collect::<Vec<_>>(),
        });
        writeln!(ui.out, "{doc}")?;
    }
    Ok(Exit::Clean)
}
