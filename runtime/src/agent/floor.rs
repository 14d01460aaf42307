//! The admission floor: the target, generation and digest of the last bundle the agent
//! accepted, in a small file beside the state database (`agent.floor`). The database holds
//! the bundle itself; if it is lost to corruption and moved aside, the floor still keeps an
//! older signed bundle, or one for another target, from being accepted in its place (a
//! downgrade the signature alone cannot stop). Written atomically after every acceptance.

use crate::backends::edge::bundle::{Bundle, BundleError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write as _;
use std::path::{Path, PathBuf};

const FILE: &str = "agent.floor";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Floor {
    pub target: String,
    pub generation: u64,
    /// `sha256:` + hex of the bundle's canonical bytes.
    pub digest: String,
}

impl Floor {
    pub fn of(bundle: &Bundle) -> Floor {
        Floor {
            target: bundle.target.clone(),
            generation: bundle.generation,
            digest: digest(bundle),
        }
    }

    /// Whether `offered` may follow the bundle this floor records: the same target (unless
    /// the agent is configured with one), and a newer generation or this very bundle again.
    pub fn admits(
        &self,
        offered: &Bundle,
        configured_target: Option<&str>,
    ) -> Result<(), BundleError> {
        if configured_target.is_none() && offered.target != self.target {
            return Err(BundleError::WrongTarget {
                offered: offered.target.clone(),
                expected: self.target.clone(),
            });
        }
        let same = offered.generation == self.generation && digest(offered) == self.digest;
        if offered.generation <= self.generation && !same {
            return Err(BundleError::NotNewer {
                offered: offered.generation,
                held: self.generation,
            });
        }
        Ok(())
    }
}

fn digest(bundle: &Bundle) -> String {
    format!(
        "sha256:{}",
        berth_compiler::plan::hex(&Sha256::digest(bundle.canonical_bytes()))
    )
}

fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// The floor in `dir`: `None` when there is none yet, or when the file cannot be read as one
/// (logged: the database's bundle, when there is one, still guards admission).
pub fn read(dir: &Path) -> Option<Floor> {
    let bytes = match std::fs::read(path(dir)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::error!(
                "cannot read the admission floor `{}`: {e}",
                path(dir).display()
            );
            return None;
        }
    };
    serde_json::from_slice(&bytes)
        .inspect_err(|e| {
            tracing::error!(
                "the admission floor `{}` is malformed: {e}",
                path(dir).display()
            )
        })
        .ok()
}

/// Writes `floor` in `dir`: a temporary file, synced, renamed over the old one.
pub fn write(dir: &Path, floor: &Floor) -> std::io::Result<()> {
    let tmp = dir.join(format!("{FILE}.tmp"));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(&serde_json::to_vec(floor).unwrap_or_default())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::edge::bundle::BUNDLE_FORMAT;

    fn bundle(target: &str, generation: u64, plan: &str) -> Bundle {
        Bundle {
            format: BUNDLE_FORMAT.into(),
            target: target.into(),
            generation,
            plan_id: plan.into(),
            workloads: vec![],
        }
    }

    #[test]
    fn a_floor_admits_newer_bundles_of_its_target_and_itself() {
        let floor = Floor::of(&bundle("site", 2, "sha256:a"));
        assert!(floor.admits(&bundle("site", 3, "sha256:b"), None).is_ok());
        assert!(
            floor.admits(&bundle("site", 2, "sha256:a"), None).is_ok(),
            "itself again"
        );
        assert!(matches!(
            floor.admits(&bundle("site", 2, "sha256:other"), None),
            Err(BundleError::NotNewer {
                offered: 2,
                held: 2
            })
        ));
        assert!(matches!(
            floor.admits(&bundle("site", 1, "sha256:a"), None),
            Err(BundleError::NotNewer {
                offered: 1,
                held: 2
            })
        ));
        assert!(matches!(
            floor.admits(&bundle("elsewhere", 3, "sha256:b"), None),
            Err(BundleError::WrongTarget { .. })
        ));
        assert!(
            floor
                .admits(&bundle("elsewhere", 3, "sha256:b"), Some("elsewhere"))
                .is_ok()
        );
    }

    #[test]
    fn a_floor_survives_in_its_file_and_a_bad_file_is_no_floor() {
        let dir = tempfile::tempdir().expect("dir");
        assert_eq!(read(dir.path()), None);
        let floor = Floor::of(&bundle("site", 7, "sha256:a"));
        write(dir.path(), &floor).expect("write");
        assert_eq!(read(dir.path()), Some(floor));
        std::fs::write(dir.path().join(FILE), b"{\"target\": 1").expect("garble");
        assert_eq!(read(dir.path()), None);
    }
}
