//! `berth keys generate PREFIX`: the control plane's ed25519 key pair for signing bundles
//! (the secret file 0600, never overwritten, never printed).

use crate::backends::edge::bundle::keys;
use crate::report::{Exit, Ui};
use std::io;
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Make an ed25519 key pair for signing bundles: PREFIX.key (secret, mode 0600, never
    /// printed) and PREFIX.pub (give it to agents as --trust). Refused if either exists.
    Generate {
        /// Path prefix of the two files, e.g. `keys/control-plane`.
        #[arg(value_name = "PREFIX")]
        prefix: PathBuf,
    },
}

/// Runs `berth keys generate PREFIX`.
pub fn run(command: KeysCommand, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let KeysCommand::Generate { prefix } = command;
    let written = keys::generate().and_then(|key| keys::write_pair(&prefix, &key));
    match written {
        Ok((secret, public)) => {
            ui.status(&format_args!(
                "wrote the secret key to `{}` (mode 0600) and the public key to `{}`",
                secret.display(),
                public.display()
            ))?;
            Ok(Exit::Clean)
        }
        Err(keys::KeyError::Write(e)) => {
            ui.problem(&e, Some(e.hint()))?;
            Ok(e.exit())
        }
        Err(e) => {
            ui.problem(&e, None)?;
            Ok(Exit::Trouble)
        }
    }
}
