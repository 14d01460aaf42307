//! The `berth` binary cargo built for these tests, run with its state under the tests' own
//! temporary directory (`CARGO_TARGET_TMPDIR`) instead of the user's `~/.local/state`: the
//! audit trail and the Flux source fingerprints a test writes never reach a real user's, nor
//! theirs a test.

use std::process::Command;

/// `berth`, its state directory (`XDG_STATE_HOME`: audit trail, fingerprints) under the
/// tests' temporary directory. A test that needs one of its own sets `XDG_STATE_HOME` or
/// `BERTH_AUDIT_LOG` on the command after.
pub fn berth() -> Command {
    let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("berth-state");
    let mut command = Command::new(env!("CARGO_BIN_EXE_berth"));
    command.env("XDG_STATE_HOME", state);
    command
}
