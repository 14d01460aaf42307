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

/// Writes, commits and pushes every GitOps target of `rendered`, grouped by repository and
/// branch (in plan order).
pub fn apply(rendered: &Rendered, dry_run: bool) -> Vec<RepoReport> {
    let mut groups: Vec<(String, String, Vec<&GitOpsTarget>)> = Vec::new();
    for target in &rendered.gitops {
        match groups
            .iter_mut()
            .find(|(r, b, _)| *r == target.repo && *b == target.branch)
        {
            Some((_, _, targets)) => targets.push(target),
            None => groups.push((target.repo.clone(), target.branch.clone(), vec![target])),
        }
    }
    groups
        .into_iter()
        .map(|(repo, branch, targets)| {
            let outcome = apply_repo(&repo, &branch, &targets, &rendered.plan_id, dry_run)
                .unwrap_or_else(|e| Outcome::Failed(redact_url(&e, &repo)));
            RepoReport {
                repo: redact_url(&repo, &repo),
                branch,
                targets: targets.iter().map(|t| t.target.clone()).collect(),
                outcome,
            }
        })
        .collect()
}

fn apply_repo(
    repo: &str,
    branch: &str,
    targets: &[&GitOpsTarget],
    plan_id: &str,
    dry_run: bool,
) -> Result<Outcome, String> {
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
    let refspec = format!("HEAD:refs/heads/{branch}");
    let mut attempt = 0;
    loop {
        attempt += 1;
        write_folders(&dir, targets, plan_id)?;
        git(&dir, &["add", "--all"])?;
        let stat = git(&dir, &["diff", "--cached", "--stat"])?;
        if stat.trim().is_empty() {
            return Ok(Outcome::Unchanged);
        }
        if dry_run {
            return Ok(Outcome::WouldCommit(stat));
        }
        let message = format!("berth: apply plan {plan_id}");
        git(
            &dir,
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
        let error = match git(&dir, &["push", "--quiet", "origin", &refspec]) {
            Ok(_) => {
                let hash = git(&dir, &["rev-parse", "--short", "HEAD"])?;
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
        git(&dir, &["fetch", "--quiet", "origin", branch])?;
        git(&dir, &["reset", "--quiet", "--hard", "FETCH_HEAD"])?;
    }
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
    if userinfo.contains('/') {
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
    }
}
