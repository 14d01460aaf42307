//! `berth fetch ARTIFACT --digest D --into DIR`: a model artifact pulled into a staging
//! directory ([`crate::staging`]) and verified; `berth fetch --check --digest D --into DIR`
//! succeeds only when the directory holds it. On Kubernetes the first runs in the staging Job
//! and the second in the init container that holds the model server back.

use crate::agent::oci::Registries;
use crate::report::{Exit, OutputFormat, Ui};
use crate::staging::{self, StageError};
use crate::tasks::async_runtime;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
pub struct FetchArgs {
    /// The artifact: `oci://REGISTRY/REPO:TAG`, an http(s) URL, `file://PATH` or a path.
    #[arg(value_name = "ARTIFACT", required_unless_present = "check")]
    pub artifact: Option<String>,
    /// The digest it must have: `sha256:` and 64 hex digits (for `oci://`, the manifest's).
    #[arg(long, value_name = "DIGEST")]
    pub digest: String,
    /// The staging directory; the artifact goes to `DIR/HEX/`.
    #[arg(long, value_name = "DIR")]
    pub into: PathBuf,
    /// Where to pull the artifact from, in order (repeated): a target's registry mirrors and
    /// then the artifact itself, as the plan's `staging.pull` lists them. Every source is
    /// held to `--digest`. Without it, ARTIFACT alone.
    #[arg(long = "from", value_name = "URI", conflicts_with = "check")]
    pub sources: Vec<String>,
    /// Fetch nothing: succeed only if `DIR` holds the artifact of `--digest`.
    #[arg(long, conflicts_with = "artifact")]
    pub check: bool,
    /// With `--check`: seconds to wait for the artifact to be staged.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.0,
        requires = "check"
    )]
    pub wait: f64,
    /// PEM roots to trust for OCI registries, besides the built-in ones.
    #[arg(long, value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    /// Registry credentials in Docker's `config.json` form (`auths.<registry>.auth`).
    #[arg(long, value_name = "FILE")]
    pub registry_auth: Option<PathBuf>,
    /// A mounted Kubernetes Secret: its `.dockerconfigjson` and `ca.crt`, where present, are
    /// read as `--registry-auth` and `--registry-ca`.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["registry_ca", "registry_auth"])]
    pub registry_secret_dir: Option<PathBuf>,
}

/// `berth fetch`.
pub fn run(args: &FetchArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    if staging::dir_name(&args.digest).is_none() {
        ui.problem(
            &StageError::BadDigest(args.digest.clone()),
            Some("give the digest the spec's variant has, e.g. `sha256:` and 64 hex digits"),
        )?;
        return Ok(Exit::Trouble);
    }
    let Some(runtime) = async_runtime(ui)? else {
        return Ok(Exit::Trouble);
    };
    if args.check {
        let wait = Duration::try_from_secs_f64(args.wait.max(0.0)).unwrap_or(Duration::ZERO);
        let checked = runtime.block_on(staging::wait_for(
            &args.into,
            &args.digest,
            wait,
            Duration::from_secs(2),
        ));
        return match checked {
            Ok(path) => {
                ui.status(&format_args!("`{}` is staged", path.display()))?;
                report(ui, &path, false, None, &args.digest)?;
                Ok(Exit::Clean)
            }
            Err(e) => {
                ui.problem(
                    &e,
                    Some(
                        "the staging job writes it; see its logs (`kubectl logs job/NAME-stage-…`)",
                    ),
                )?;
                Ok(Exit::ErrorsFound)
            }
        };
    }
    // INVARIANT: clap requires ARTIFACT unless --check.
    let Some(artifact) = args.artifact.as_deref() else {
        return Ok(Exit::Trouble);
    };
    let (registries, client) = match clients(registries(args), ui)? {
        Ok(clients) => clients,
        Err(exit) => return Ok(exit),
    };
    let staged = runtime.block_on(staging::stage(
        &args.into,
        artifact,
        &args.sources,
        &args.digest,
        client,
        registries,
    ));
    match staged {
        Ok(staged) => {
            if staged.fetched {
                ui.status(&format_args!(
                    "staged `{artifact}` ({} bytes) into `{}`",
                    staged.bytes,
                    staged.path.display()
                ))?;
            } else {
                ui.status(&format_args!(
                    "`{artifact}` is already staged in `{}`",
                    staged.path.display()
                ))?;
            }
            report(
                ui,
                &staged.path,
                staged.fetched,
                Some(staged.bytes),
                &args.digest,
            )?;
            Ok(Exit::Clean)
        }
        Err(e) => {
            let (hint, exit) = match &e {
                StageError::Fetch(crate::agent::cache::FetchError::Mismatch { .. }) => (
                    "the artifact is not the one the plan pinned: nothing was staged",
                    Exit::ErrorsFound,
                ),
                StageError::Fetch(crate::agent::cache::FetchError::Refused { .. }) => (
                    "nothing was staged; check the artifact's reference and digest",
                    Exit::ErrorsFound,
                ),
                StageError::Io { .. } => (
                    "check the permissions and free space of --into",
                    Exit::Trouble,
                ),
                _ => (
                    "check the registry's address and credentials; what was downloaded is \
                     kept and a rerun resumes",
                    Exit::Trouble,
                ),
            };
            ui.problem(&e, Some(hint))?;
            Ok(exit)
        }
    }
}

/// The registries (or why they cannot be used) and an HTTP client for fetching artifacts,
/// or the exit after saying what is wrong (`berth fetch`, `berth bundle export`).
pub(super) fn clients(
    registries: Result<Registries, String>,
    ui: &mut Ui<'_>,
) -> io::Result<Result<(Registries, reqwest::Client), Exit>> {
    let registries = match registries {
        Ok(r) => r,
        Err(message) => {
            ui.problem(&message, None)?;
            return Ok(Err(Exit::Trouble));
        }
    };
    match reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
    {
        Ok(client) => Ok(Ok((registries, client))),
        Err(e) => {
            ui.problem(&format_args!("cannot make the HTTP client: {e}"), None)?;
            Ok(Err(Exit::Trouble))
        }
    }
}

fn registries(args: &FetchArgs) -> Result<Registries, String> {
    let (ca, auth) = match &args.registry_secret_dir {
        Some(dir) => {
            let present = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
            (present("ca.crt"), present(".dockerconfigjson"))
        }
        None => (args.registry_ca.clone(), args.registry_auth.clone()),
    };
    Registries::from_files(ca.as_deref(), auth.as_deref())
}

fn report(
    ui: &mut Ui<'_>,
    path: &Path,
    fetched: bool,
    bytes: Option<u64>,
    digest: &str,
) -> io::Result<()> {
    if ui.output != OutputFormat::Json {
        return Ok(());
    }
    let mut doc = serde_json::json!({
        "digest": digest,
        "path": path.display().to_string(),
        "fetched": fetched,
    });
    if let Some(bytes) = bytes {
        doc["bytes"] = bytes.into();
    }
    writeln!(ui.out, "{doc}")
}
