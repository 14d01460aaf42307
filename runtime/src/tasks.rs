//! The async runtime of the commands that wait on the network or on processes (`berth agent`,
//! and `berth apply` for edge and local targets), and the shutdown signal they stop on.

use crate::report::Ui;
use std::io;

/// The async runtime of the agent and of `berth apply` (two workers: the agent mostly waits),
/// or `None` after saying why there is none.
pub fn async_runtime(ui: &mut Ui<'_>) -> io::Result<Option<tokio::runtime::Runtime>> {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            ui.problem(&format_args!("cannot start the async runtime: {e}"), None)?;
            Ok(None)
        }
    }
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
