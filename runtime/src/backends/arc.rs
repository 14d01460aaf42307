//! Azure Arc-attached targets, the GitOps way: each target's objects are written as a
//! kustomization into its folder of the GitOps repository and committed with the `git` CLI;
//! the cluster's Flux extension reconciles them. One clone per (repository, branch).
//!
//! Pushes are never forced: when someone else pushed to the branch meanwhile, berth starts
//! again from their commit and writes its folders over it (its folders are its own; the rest
//! of their commit is kept). The Flux configuration that makes the cluster watch the repository
//! is [`super::arm`]'s. Repository URLs are printed without their user-info part: they may
//! carry a token.

use crate::backends::k8s::render::{GitOpsTarget, Rendered};
use std::path::Path;
use std::process::Command;

/// What happened to one repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A commit was pushed (its short hash).
    Committed(String),
    Unchanged,
    /// Dry run: the `git diff --stat` of what would be committed.
    WouldCommit(String),
    Failed(String),
}

/// One repository and branch, and the targets written into it.
#[derive(Clone, Debug)]
pub struct RepoReport {
    pub repo: String,
    pub branch: String,
    pub targets: Vec<String>,
    pub outcome: Outcome,
}

/// The record berth keeps at the root of each branch it commits to: which clusters' Flux
/// configurations it made watch this repository and branch, with their targets and folders.
/// `berth apply` reads it to find the clusters no Arc target names any more (their `berth`
/// configuration is deleted, [`super::arm::remove`]) and the folders no target writes any more
/// (removed). Kept in the repository, not on the machine, so any clone of the spec, from any
/// machine, sees what the last apply configured.
pub const RECORD_PATH: &str = ".berth/flux-configurations.json";

/// One cluster of the record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Configured {
    /// The cluster's Azure resource id, as the spec wrote it.
    pub cluster: String,
    pub targets: Vec<String>,
    /// The folders its kustomizations watch.
    pub paths: Vec<String>,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Record {
    clusters: Vec<Configured>,
}

/// Whether two resource ids name the same resource (ARM ids are case-insensitive).
pub fn same_id(a: &str, b: &str) -> bool {
    a.trim_matches('/')
        .eq_ignore_ascii_case(b.trim_matches('/'))
}

/// A clone of one repository's branch, and the targets berth writes into it.
pub struct Group<'a> {
    pub repo: String,
    pub branch: String,
    pub targets: Vec<&'a GitOpsTarget>,
    /// The clone, or why it could not be made.
    checkout: Result<(tempfile::TempDir, std::path::PathBuf), String>,
    /// The clusters the record on the branch lists (empty when it has none).
    pub former: Vec<Configured>,
}

impl Group<'_> {
    /// The clusters of the record that no Arc target of the whole plan names.
    pub fn dropped<'g>(&'g self, all: &[GitOpsTarget]) -> Vec<&'g Configured> {
        self.former
            .iter()
            .filter(|c| !all.iter().any(|t| same_id(&t.cluster, &c.cluster)))
            .collect()
    }
}

/// Clones every repository and branch of `rendered`'s GitOps targets (in plan order) and reads
/// their records.
pub fn checkout(rendered: &Rendered) -> Vec<Group<'_>> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    for target in &rendered.gitops {
        match groups
            .iter_mut()
            .find(|g| g.repo == target.repo && g.branch == target.branch)
        {
            Some(g) => g.targets.push(target),
            None => groups.push(Group {
                repo: target.repo.clone(),
                branch: target.branch.clone(),
                targets: vec![target],
                checkout: Err(String::new()),
                former: Vec::new(),
            }),
        }
    }
    for g in &mut groups {
        g.checkout = clone(&g.repo, &g.branch).map_err(|e| redact_url(&e, &g.repo));
        if let Ok((_, dir)) = &g.checkout {
            match read_record(dir) {
                Ok(record) => g.former = record.clusters,
                Err(e) => g.checkout = Err(e),
            }
        }
    }
    groups
}

/// Writes, commits and pushes every group's targets and its record; `pending` are the
/// clusters of the records whose configuration could not be removed (they stay recorded, so
/// the next apply tries again).
pub fn commit(
    groups: Vec<Group<'_>>,
    plan_id: &str,
    pending: &[String],
    dry_run: bool,
) -> Vec<RepoReport> {
    groups
        .into_iter()
        .map(|g| {
            let outcome = match &g.checkout {
                Err(e) => Outcome::Failed(e.clone()),
                Ok((_, dir)) => commit_repo(dir, &g.branch, &g.targets, plan_id, pending, dry_run)
                    .unwrap_or_else(|e| Outcome::Failed(redact_url(&e, &g.repo))),
            };
            RepoReport {
                repo: redact_url(&g.repo, &g.repo),
                branch: g.branch,
                targets: g.targets.iter().map(|t| t.target.clone()).collect(),
                outcome,
            }
        })
        .collect()
}

/// Clones `branch` of `repo` into a temporary directory (a branch that does not exist yet:
/// the default branch, and a new branch off it).
fn clone(repo: &str, branch: &str) -> Result<(tempfile::TempDir, std::path::PathBuf), String> {
    let work = tempfile::tempdir().map_err(|e| format!("cannot make a work directory: {e}"))?;
    let dir = work.path().join("repo");
    let dir_text = dir.to_string_lossy().into_owned();
    let cloned = git(
        work.path(),
        &[
            "clone",
            "--quiet",
            "--branch",
            branch,
            "--single-branch",
            repo,
            &dir_text,
        ],
    );
    if cloned.is_err() {
        // A new branch: clone the default one and branch off.
        git(work.path(), &["clone", "--quiet", repo, &dir_text])?;
        git(&dir, &["checkout", "--quiet", "-b", branch])?;
    }
    Ok((work, dir))
}

fn read_record(dir: &Path) -> Result<Record, String> {
    let path = dir.join(RECORD_PATH);
    if !path.exists() {
        return Ok(Record::default());
    }
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("cannot read `{RECORD_PATH}`: {e}"))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("`{RECORD_PATH}` in the repository is not berth's record: {e}"))
}

/// The record after this apply: the clusters the targets name now, and those of the record on
/// the branch whose removal is `pending`.
fn next_record(targets: &[&GitOpsTarget], on_branch: Record, pending: &[String]) -> Record {
    let mut clusters: Vec<Configured> = Vec::new();
    for t in targets {
        match clusters
            .iter_mut()
            .find(|c| same_id(&c.cluster, &t.cluster))
        {
            Some(c) => {
                c.targets.push(t.target.clone());
                c.paths.push(t.path.trim_matches('/').to_string());
            }
            None => clusters.push(Configured {
                cluster: t.cluster.clone(),
                targets: vec![t.target.clone()],
                paths: vec![t.path.trim_matches('/').to_string()],
            }),
        }
    }
    for c in on_branch.clusters {
        let named = clusters.iter().any(|n| same_id(&n.cluster, &c.cluster));
        if !named && pending.iter().any(|p| same_id(p, &c.cluster)) {
            clusters.push(c);
        }
    }
    Record { clusters }
}

/// A folder of the record that is safe to remove: relative, made of plain names only, and
/// neither git's nor the record's.
fn safe_folder(path: &str) -> bool {
    let path = Path::new(path);
    !path.as_os_str().is_empty()
        && path.components().all(|c| match c {
            std::path::Component::Normal(name) => name != ".git",
            _ => false,
        })
        && !path.starts_with(".berth")
}

/// Writes the folders and the record (over whatever the branch holds now), then commits and
/// pushes; on a non-fast-forward, starts again from the other commit.
fn commit_repo(
    dir: &Path,
    branch: &str,
    targets: &[&GitOpsTarget],
    plan_id: &str,
    pending: &[String],
    dry_run: bool,
) -> Result<Outcome, String> {
    let refspec = format!("HEAD:refs/heads/{branch}");
    let mut attempt = 0;
    loop {
        attempt += 1;
        let on_branch = read_record(dir)?;
        let record = next_record(targets, on_branch.clone(), pending);
        // Folders an earlier apply wrote for targets no longer here: removed (a folder of a
        // cluster whose configuration is still to be removed is kept: Flux still watches it).
        for old in on_branch.clusters.iter().flat_map(|c| &c.paths) {
            let written = record
                .clusters
                .iter()
                .flat_map(|c| &c.paths)
                .any(|p| p == old);
            let folder = dir.join(old);
            if !written && safe_folder(old) && folder.is_dir() {
                std::fs::remove_dir_all(&folder)
                    .map_err(|e| format!("cannot remove `{old}`: {e}"))?;
            }
        }
        write_folders(dir, targets, plan_id)?;
        write_record(dir, &record)?;
        git(dir, &["add", "--all"])?;
        let stat = git(dir, &["diff", "--cached", "--stat"])?;
        if stat.trim().is_empty() {
            return Ok(Outcome::Unchanged);
        }
        if dry_run {
            return Ok(Outcome::WouldCommit(stat));
        }
        let message = format!("berth: apply plan {plan_id}");
        git(
            dir,
            &[
                "-c",
                "user.name=berth",
                "-c",
                "user.email=berth@localhost",
                "commit",
                "--quiet",
                "-m",
                &message,
            ],
        )?;
        let error = match git(dir, &["push", "--quiet", "origin", &refspec]) {
            Ok(_) => {
                let hash = git(dir, &["rev-parse", "--short", "HEAD"])?;
                return Ok(Outcome::Committed(hash.trim().to_string()));
            }
            Err(e) => e,
        };
        // Someone else pushed since the clone: never force. Start again from their commit
        // and write berth's folders over it (they are berth's: an edit there is replaced,
        // the rest of their commit kept).
        let rejected = [
            "non-fast-forward",
            "fetch first",
            "[rejected]",
            "stale info",
        ]
        .iter()
        .any(|m| error.contains(m));
        if !rejected || attempt == PUSH_ATTEMPTS {
            return Err(error);
        }
        git(dir, &["fetch", "--quiet", "origin", branch])?;
        git(dir, &["reset", "--quiet", "--hard", "FETCH_HEAD"])?;
    }
}

fn write_record(dir: &Path, record: &Record) -> Result<(), String> {
    let path = dir.join(RECORD_PATH);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create `{}`: {e}", parent.display()))?;
    }
    let mut text = serde_json::to_string_pretty(record)
        .map_err(|e| format!("cannot write `{RECORD_PATH}`: {e}"))?;
    text.push('\n');
    std::fs::write(&path, text).map_err(|e| format!("cannot write `{RECORD_PATH}`: {e}"))
}

/// Writes each target's folder afresh: files of an earlier plan that this one no longer
/// writes go.
fn write_folders(dir: &Path, targets: &[&GitOpsTarget], plan_id: &str) -> Result<(), String> {
    for target in targets {
        let folder = dir.join(target.path.trim_matches('/'));
        if folder.exists() {
            std::fs::remove_dir_all(&folder)
                .map_err(|e| format!("cannot clear `{}`: {e}", target.path))?;
        }
        std::fs::create_dir_all(&folder)
            .map_err(|e| format!("cannot create `{}`: {e}", target.path))?;
        for (name, text) in target.files(plan_id) {
            std::fs::write(folder.join(&name), text)
                .map_err(|e| format!("cannot write `{}/{name}`: {e}", target.path))?;
        }
    }
    Ok(())
}

/// Pushes tried before a non-fast-forward is an error.
const PUSH_ATTEMPTS: u32 = 3;

/// Runs `git ARGS` in `dir`; stdout, or stderr as the error.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| format!("cannot run `git`: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`git {}` failed: {}",
            args.first().copied().unwrap_or(""),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `text` with the user-info of `url` (`https://user:token@host/…`) removed wherever it
/// appears.
pub fn redact_url(text: &str, url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return text.to_string();
    };
    let Some((userinfo, host)) = rest.split_once('@') else {
        return text.to_string();
    };
    // An SSH URL's user (`ssh://git@host/…`) is a name, not a secret, and replacing it
    // everywhere would garble the text (`git`); only a password there is redacted.
    let ssh = scheme.eq_ignore_ascii_case("ssh") || scheme.eq_ignore_ascii_case("git+ssh");
    if userinfo.contains('/') || (ssh && !userinfo.contains(':')) {
        return text.to_string();
    }
    text.replace(url, &format!("{scheme}://{host}"))
        .replace(userinfo, "[redacted]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_in_repository_urls_are_removed() {
        let url = "https://bot:ghp_secret@git.example.com/gitops.git";
        let text = format!("fatal: could not read from {url}");
        let clean = redact_url(&text, url);
        assert!(!clean.contains("ghp_secret"), "{clean}");
        assert!(
            clean.contains("https://git.example.com/gitops.git"),
            "{clean}"
        );
        assert_eq!(redact_url("x", "/srv/repo.git"), "x");
        let ssh = "ssh://git@git.example.com/gitops.git";
        assert_eq!(
            redact_url(&format!("`git clone` of {ssh}"), ssh),
            format!("`git clone` of {ssh}")
        );
    }
}
