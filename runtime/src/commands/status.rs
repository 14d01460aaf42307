//! `berth status PLAN|SPEC`: desired vs ready replicas and live GPU allocation of the plan's
//! clusters ([`crate::backends::k8s::status`]), and what each edge target's agent runs
//! ([`crate::backends::edge::status`]).

use super::input::{PlanInputArgs, input_or_exit};
use crate::backends::{edge, k8s};
use crate::report::{Exit, Ui};
use std::io;

#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub plan: PlanInputArgs,
    #[command(flatten)]
    pub edge: edge::status::EdgeStatusArgs,
}

/// `berth status`: live replicas and GPU allocation of the plan's clusters.
pub fn run(args: &StatusArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let input = match input_or_exit(&args.plan, false, ui)? {
        Ok(input) => input,
        Err(exit) => return Ok(exit),
    };
    let edge = match edge::status::Report::collect(&input.ir, &input.plan, &args.edge) {
        Ok(edge) => edge,
        Err(e) => {
            ui.problem(&e, None)?;
            return Ok(Exit::Trouble);
        }
    };
    k8s::status::run(&input.ir, &input.plan, &edge, ui)
}
