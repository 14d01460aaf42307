//! `berth top PLAN|SPEC`: live GPU allocation across every target of a plan
//! ([`super::top_snapshot`]: what is read, and the tables), refreshing on a terminal
//! ([`super::top_view`]), once with `--once`, or one JSON document with `--output json`.

use super::input::{PlanInput, PlanInputArgs, input_or_exit};
use super::top_snapshot::{render, snapshot};
use crate::backends::edge::status::EdgeStatusArgs;
use crate::report::{Exit, OutputFormat, Ui};
use std::collections::BTreeMap;
use std::io;

#[derive(Debug, Clone, clap::Args)]
pub struct TopArgs {
    #[command(flatten)]
    pub plan: PlanInputArgs,
    #[command(flatten)]
    pub edge: EdgeStatusArgs,
    #[command(flatten)]
    pub dcgm: DcgmArgs,
    /// Print the tables once (what a pipe or `--output json` gets anyway).
    #[arg(long)]
    pub once: bool,
    /// Seconds between refreshes of the terminal view.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub interval: f64,
    /// An allocation whose GPUs are busy less than this (percent) is flagged idle.
    #[arg(long, value_name = "PERCENT", default_value_t = 5.0)]
    pub idle_below: f64,
}

/// Each kubeconfig context's DCGM exporter URL.
pub type Exporters = BTreeMap<String, String>;

/// Where each cluster's GPU utilisation is read (`berth top`, `berth reclaim`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DcgmArgs {
    /// A DCGM exporter's metrics for a cluster: `CONTEXT=URL` (repeatable); its
    /// `DCGM_FI_DEV_GPU_UTIL` per pod gives the cluster's utilisation.
    #[arg(long, value_name = "CONTEXT=URL")]
    pub dcgm: Vec<String>,
}

impl DcgmArgs {
    /// The exporter URL of each kubeconfig context; a malformed entry is reported (exit 2).
    pub fn endpoints(&self, ui: &mut Ui<'_>) -> io::Result<Result<Exporters, Exit>> {
        let mut dcgm = BTreeMap::new();
        for entry in &self.dcgm {
            match entry.split_once('=') {
                Some((context, url)) if !context.is_empty() && !url.is_empty() => {
                    dcgm.insert(context.to_string(), url.to_string());
                }
                _ => {
                    ui.problem(
                        &format_args!("`--dcgm {entry}` is not `CONTEXT=URL`"),
                        Some("name the kubeconfig context and the exporter's metrics URL, e.g. `--dcgm prod=http://10.0.0.5:9400/metrics`"),
                    )?;
                    return Ok(Err(Exit::Trouble));
                }
            }
        }
        Ok(Ok(dcgm))
    }
}

/// The plan to work with and each cluster's exporter (`berth top`, `berth reclaim`); a
/// problem with either is reported and ends the command.
pub fn input_and_exporters(
    plan: &PlanInputArgs,
    dcgm: &DcgmArgs,
    ui: &mut Ui<'_>,
) -> io::Result<Result<(PlanInput, Exporters), Exit>> {
    let input = match input_or_exit(plan, false, ui)? {
        Ok(input) => input,
        Err(exit) => return Ok(Err(exit)),
    };
    Ok(dcgm.endpoints(ui)?.map(|dcgm| (input, dcgm)))
}

/// `berth top`.
pub fn run(args: &TopArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let (input, dcgm) = match input_and_exporters(&args.plan, &args.dcgm, ui)? {
        Ok(found) => found,
        Err(exit) => return Ok(exit),
    };
    let gather = || snapshot(&input.ir, &input.plan, &args.edge, &dcgm, args.idle_below);
    let interactive =
        !args.once && ui.output == OutputFormat::Human && super::top_view::on_a_terminal();
    if interactive {
        return super::top_view::run(gather, args.interval, ui);
    }
    let snap = match gather() {
        Ok(snap) => snap,
        Err(message) => {
            ui.problem(&message, None)?;
            return Ok(Exit::Trouble);
        }
    };
    match ui.output {
        OutputFormat::Json => writeln!(ui.out, "{}", serde_json::to_string(&snap)?)?,
        _ => ui.out.write_all(render(&snap).as_bytes())?,
    }
    Ok(if snap.unreachable() {
        Exit::ErrorsFound
    } else {
        Exit::Clean
    })
}
