//! The async runtime of the commands that wait on the network or on processes (`berth agent`,
//! `berth apply`, and the commands that read clusters), and the shutdown signal they stop on.

use crate::report::Ui;
use std::io;

/// The async runtime of the agent and of `berth apply` (two workers: the agent mostly waits),
/// or `None` after saying why there is none.
pub fn async_runtime(ui: &mut Ui<'_>) -> io::Result<Option<tokio::runtime::Runtime>> {
    match runtime_with(2) {
        Ok(r) => Ok(Some(r)),
        Err(why) => {
            ui.problem(&why, None)?;
            Ok(None)
        }
    }
}

/// A multi-threaded async runtime of `workers` threads, timers and I/O enabled (the commands
/// that talk to clusters block on it), or why none could be started, for people.
pub fn runtime_with(workers: usize) -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// Completes on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        // Without signal handling the agent runs until killed.
        _ => std::future::pending().await,
    }
}
