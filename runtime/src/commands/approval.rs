//! Approvals are signatures: an approver signs, with an ed25519 key (`berth keys generate`),
//! the plan id, the workloads approved, when and until when. `berth approve` writes them
//! into the plan's approval file; `apply` (and every command that puts a plan to work)
//! accepts a workload awaiting approval only when an approval in that file verifies under a
//! key its policy names (directly, or by a name its trust file maps to keys), is for this
//! plan, lists the workload and has not expired.
//!
//! The policy's `approvers` hold public keys (`berth-ed25519-public:HEX`) or names; a name
//! is looked up in the policy's `trust` file (lines `NAME PUBLIC-KEY`, `#` comments), read
//! relative to the spec's directory at the time of approving and applying: adding or
//! removing an approver changes the trust file, not the plan.

use crate::backends::edge::bundle::keys;
use berth_compiler::plan::{ApprovalRequired, Plan, hex};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The approval file's format.
pub const APPROVALS_FORMAT: &str = "berth.approvals/v2";

/// What an approver signs (serialised in this field order: the signed bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalClaim {
    /// The approved plan's id: the approval is void for any other plan.
    pub plan_id: String,
    /// The workloads approved (those that awaited approval when it was signed).
    pub workloads: Vec<String>,
    /// The approver's public key (`berth-ed25519-public:HEX`).
    pub approver: String,
    /// RFC 3339, UTC.
    pub approved_at: String,
    /// RFC 3339, UTC; none: the approval holds as long as the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

impl ApprovalClaim {
    fn signed_bytes(&self) -> Vec<u8> {
        // INVARIANT: a struct of strings and lists, no maps: serialisation is deterministic.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn sign(self, key: &SigningKey) -> SignedApproval {
        let signature = key.sign(&self.signed_bytes());
        SignedApproval {
            claim: self,
            signature: format!("ed25519:{}", hex(&signature.to_bytes())),
        }
    }
}

/// A claim and its signature (`ed25519:HEX` over the claim's bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedApproval {
    pub claim: ApprovalClaim,
    pub signature: String,
}

impl SignedApproval {
    /// The approver's key when the signature verifies under it.
    fn verified_key(&self) -> Option<VerifyingKey> {
        let key = keys::parse_public(&self.claim.approver)?;
        let bytes = keys::from_hex(self.signature.strip_prefix("ed25519:")?)?;
        let signature = Signature::from_slice(&bytes).ok()?;
        key.verify(&self.claim.signed_bytes(), &signature)
            .ok()
            .map(|()| key)
    }
}

/// A plan's approval file: every approval given to it, one per approver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalFile {
    pub format: String,
    pub approvals: Vec<SignedApproval>,
}

impl ApprovalFile {
    pub fn new() -> ApprovalFile {
        ApprovalFile {
            format: APPROVALS_FORMAT.into(),
            approvals: Vec::new(),
        }
    }

    /// Adds `approval`, replacing an earlier one by the same key.
    pub fn add(&mut self, approval: SignedApproval) {
        self.approvals
            .retain(|a| a.claim.approver != approval.claim.approver);
        self.approvals.push(approval);
    }
}

impl Default for ApprovalFile {
    fn default() -> Self {
        ApprovalFile::new()
    }
}

/// Names to keys, from a policy's trust file.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    names: BTreeMap<String, Vec<VerifyingKey>>,
}

/// Why a trust file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read the trust file `{path}`: {error}")]
    Read { path: PathBuf, error: String },
    #[error("`{path}`:{line}: {problem}")]
    Line {
        path: PathBuf,
        line: usize,
        problem: String,
    },
    #[error("policy `{policy}` names approver `{name}`, but it has no `trust` file")]
    NoTrustFile { policy: String, name: String },
    #[error("approver `{name}` of policy `{policy}` is not in the trust file `{path}`")]
    UnknownName {
        policy: String,
        name: String,
        path: String,
    },
    #[error("approver `{text}` of policy `{policy}` is not a valid public key")]
    BadKey { policy: String, text: String },
    #[error(
        "policy `{policy}` names approvers through the trust file `{path}`, and no spec was given"
    )]
    NeedsSpec { policy: String, path: String },
}

impl TrustError {
    pub fn hint(&self) -> &'static str {
        match self {
            TrustError::Read { .. } | TrustError::Line { .. } => {
                "a trust file holds lines `NAME berth-ed25519-public:HEX` (a `.pub` file's text); `#` starts a comment"
            }
            TrustError::NoTrustFile { .. } | TrustError::UnknownName { .. } => {
                "list each approver's public key in the policy's `trust` file, or write the key itself in `approvers`"
            }
            TrustError::BadKey { .. } => {
                "a public key is the text of the `.pub` file `berth keys generate` writes"
            }
            TrustError::NeedsSpec { .. } => {
                "add `--spec DIR`, the spec the plan was made from: its trust file is read from there"
            }
        }
    }
}

impl Trust {
    /// Parses a trust file's text (`path` for messages).
    pub fn parse(path: &Path, text: &str) -> Result<Trust, TrustError> {
        let mut names: BTreeMap<String, Vec<VerifyingKey>> = BTreeMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let problem = |problem: String| TrustError::Line {
                path: path.to_path_buf(),
                line: index + 1,
                problem,
            };
            let mut words = line.split_whitespace();
            let (Some(name), Some(key), None) = (words.next(), words.next(), words.next()) else {
                return Err(problem("expected `NAME PUBLIC-KEY`, two words".to_string()));
            };
            let key = keys::parse_public(key)
                .ok_or_else(|| problem(format!("`{key}` is not a public key")))?;
            names.entry(name.to_string()).or_default().push(key);
        }
        Ok(Trust { names })
    }

    /// Reads `relative` under `spec_dir`.
    pub fn read(spec_dir: &Path, relative: &str) -> Result<Trust, TrustError> {
        let path = spec_dir.join(relative);
        let text = std::fs::read_to_string(&path).map_err(|e| TrustError::Read {
            path: path.clone(),
            error: e.to_string(),
        })?;
        Trust::parse(&path, &text)
    }

    /// The name a key goes by, if any.
    fn name_of(&self, key: &VerifyingKey) -> Option<&str> {
        self.names
            .iter()
            .find(|(_, ks)| ks.contains(key))
            .map(|(n, _)| n.as_str())
    }
}

/// A workload's approval rule, resolved.
#[derive(Debug, Clone)]
struct Awaiting {
    policy: String,
    /// The policy's approvers as written.
    approvers: Vec<String>,
    /// The keys they stand for (`None`: the policy names no approver, so any key's verified
    /// signature approves).
    keys: Option<Vec<VerifyingKey>>,
}

impl Awaiting {
    fn accepts(&self, key: &VerifyingKey) -> bool {
        self.keys.as_ref().is_none_or(|k| k.contains(key))
    }

    fn not_by(&self, workload: &str) -> NotAnApprover {
        NotAnApprover {
            workload: workload.to_string(),
            policy: self.policy.clone(),
            approvers: self.approvers.clone(),
        }
    }
}

/// Who may approve each workload awaiting approval, resolved once per plan.
#[derive(Debug, Clone, Default)]
pub struct Approvers {
    workloads: BTreeMap<String, Awaiting>,
    /// Every trust file read, for naming keys in messages.
    trust: Trust,
}

impl Approvers {
    /// Resolves the approvers of every workload of `plan` awaiting approval; trust files are
    /// read under `spec_dir` (none given: only keys written in the policy resolve).
    pub fn resolve(plan: &Plan, spec_dir: Option<&Path>) -> Result<Approvers, TrustError> {
        let mut files: BTreeMap<String, Trust> = BTreeMap::new();
        let mut out = Approvers::default();
        for w in &plan.workloads {
            let Some(rule) = &w.approval else { continue };
            let keys = if rule.approvers.is_empty() {
                None
            } else {
                Some(resolve_rule(rule, spec_dir, &mut files)?)
            };
            out.workloads.insert(
                w.workload.clone(),
                Awaiting {
                    policy: rule.policy.clone(),
                    approvers: rule.approvers.clone(),
                    keys,
                },
            );
        }
        for trust in files.into_values() {
            for (name, keys) in trust.names {
                out.trust.names.entry(name).or_default().extend(keys);
            }
        }
        Ok(out)
    }

    /// How a key is shown: its name in a trust file, else `ed25519:` and its first 16 hex
    /// digits.
    pub fn display(&self, key_text: &str) -> String {
        match keys::parse_public(key_text) {
            Some(key) => match self.trust.name_of(&key) {
                Some(name) => format!("`{name}` ({})", keys::fingerprint(&key)),
                None => keys::fingerprint(&key),
            },
            None => format!("`{key_text}`"),
        }
    }

    /// The workloads awaiting approval that `key` may approve, and those it may not (with
    /// who may).
    pub fn split(&self, key: &VerifyingKey) -> (Vec<String>, Vec<NotAnApprover>) {
        let mut may = Vec::new();
        let mut may_not = Vec::new();
        for (workload, awaiting) in &self.workloads {
            if awaiting.accepts(key) {
                may.push(workload.clone());
            } else {
                may_not.push(awaiting.not_by(workload));
            }
        }
        (may, may_not)
    }

    /// Checks every approval of `file` against the plan `plan_id` at `now`: the workloads
    /// approved, and why each approval (or part of one) was not accepted.
    pub fn check(&self, plan_id: &str, file: &ApprovalFile, now: jiff::Timestamp) -> Checked {
        let mut checked = Checked::default();
        for approval in &file.approvals {
            let claim = &approval.claim;
            let who = self.display(&claim.approver);
            let Some(key) = approval.verified_key() else {
                checked
                    .problems
                    .push(ApprovalProblem::Forged { approver: who });
                continue;
            };
            if claim.plan_id != plan_id {
                checked.problems.push(ApprovalProblem::OtherPlan {
                    approver: who,
                    plan_id: claim.plan_id.clone(),
                });
                continue;
            }
            let expired = match &claim.expires_at {
                None => None,
                Some(at) => match at.parse::<jiff::Timestamp>() {
                    Ok(t) if t > now => None,
                    _ => Some(at.clone()),
                },
            };
            if let Some(expired_at) = expired {
                checked.problems.push(ApprovalProblem::Expired {
                    approver: who,
                    expired_at,
                });
                continue;
            }
            for workload in &claim.workloads {
                match self.workloads.get(workload) {
                    Some(awaiting) if awaiting.accepts(&key) => {
                        checked.approved.insert(workload.clone(), who.clone());
                    }
                    Some(awaiting) => {
                        checked.problems.push(ApprovalProblem::NotAnApprover {
                            approver: who.clone(),
                            not: awaiting.not_by(workload),
                        });
                    }
                    // A workload that no longer awaits approval: nothing to accept.
                    None => {}
                }
            }
        }
        checked
    }
}

fn resolve_rule(
    rule: &ApprovalRequired,
    spec_dir: Option<&Path>,
    files: &mut BTreeMap<String, Trust>,
) -> Result<Vec<VerifyingKey>, TrustError> {
    let mut out = Vec::new();
    for approver in &rule.approvers {
        if keys::looks_public(approver) {
            out.push(
                keys::parse_public(approver).ok_or_else(|| TrustError::BadKey {
                    policy: rule.policy.clone(),
                    text: approver.clone(),
                })?,
            );
            continue;
        }
        let Some(relative) = &rule.trust else {
            return Err(TrustError::NoTrustFile {
                policy: rule.policy.clone(),
                name: approver.clone(),
            });
        };
        let Some(dir) = spec_dir else {
            return Err(TrustError::NeedsSpec {
                policy: rule.policy.clone(),
                path: relative.clone(),
            });
        };
        if !files.contains_key(relative) {
            files.insert(relative.clone(), Trust::read(dir, relative)?);
        }
        let keys = files
            .get(relative)
            .and_then(|t| t.names.get(approver))
            .ok_or_else(|| TrustError::UnknownName {
                policy: rule.policy.clone(),
                name: approver.clone(),
                path: relative.clone(),
            })?;
        out.extend(keys.iter().copied());
    }
    Ok(out)
}

/// A workload a key may not approve, and who may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAnApprover {
    pub workload: String,
    pub policy: String,
    pub approvers: Vec<String>,
}

impl fmt::Display for NotAnApprover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let approvers: Vec<String> = self
            .approvers
            .iter()
            .map(|a| match keys::parse_public(a) {
                Some(k) => keys::fingerprint(&k),
                None => format!("`{a}`"),
            })
            .collect();
        write!(
            f,
            "`{}`: policy `{}` names {}",
            self.workload,
            self.policy,
            approvers.join(", ")
        )
    }
}

/// Why an approval in the file was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalProblem {
    /// The signature does not verify under the key the approval names.
    Forged { approver: String },
    /// Signed for another plan.
    OtherPlan { approver: String, plan_id: String },
    Expired {
        approver: String,
        expired_at: String,
    },
    /// The key is not among the approvers of a workload it approves.
    NotAnApprover {
        approver: String,
        not: NotAnApprover,
    },
}

impl fmt::Display for ApprovalProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApprovalProblem::Forged { approver } => write!(
                f,
                "the approval signed as {approver} does not verify under that key (altered or forged)"
            ),
            ApprovalProblem::OtherPlan { approver, plan_id } => write!(
                f,
                "the approval by {approver} is for plan `{plan_id}`, not this one"
            ),
            ApprovalProblem::Expired {
                approver,
                expired_at,
            } => write!(f, "the approval by {approver} expired at `{expired_at}`"),
            ApprovalProblem::NotAnApprover { approver, not } => {
                write!(f, "{approver} may not approve {not}")
            }
        }
    }
}

/// What an approval file gives a plan.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    /// Workloads approved, each with who approved it.
    pub approved: BTreeMap<String, String>,
    pub problems: Vec<ApprovalProblem>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn claim(plan_id: &str, by: &SigningKey, expires_at: Option<&str>) -> ApprovalClaim {
        ApprovalClaim {
            plan_id: plan_id.into(),
            workloads: vec!["ranker".into()],
            approver: keys::public_text(&by.verifying_key()),
            approved_at: "2026-12-04T10:00:00Z".into(),
            expires_at: expires_at.map(Into::into),
        }
    }

    fn approvers(allowed: &SigningKey) -> Approvers {
        let mut a = Approvers::default();
        a.workloads.insert(
            "ranker".into(),
            Awaiting {
                policy: "gov".into(),
                approvers: vec!["leads".into()],
                keys: Some(vec![allowed.verifying_key()]),
            },
        );
        a.trust
            .names
            .insert("leads".into(), vec![allowed.verifying_key()]);
        a
    }

    fn check_one(approval: SignedApproval, allowed: &SigningKey) -> Checked {
        let mut file = ApprovalFile::new();
        file.add(approval);
        let now: jiff::Timestamp = "2026-12-04T12:00:00Z".parse().expect("time");
        approvers(allowed).check("sha256:p", &file, now)
    }

    #[test]
    fn a_signed_approval_by_an_approver_approves() {
        let lead = key(1);
        let checked = check_one(claim("sha256:p", &lead, None).sign(&lead), &lead);
        assert_eq!(checked.problems, []);
        assert!(checked.approved["ranker"].starts_with("`leads` (ed25519:"));
    }

    #[test]
    fn forged_foreign_expired_and_mismatched_approvals_are_refused_by_name() {
        let (lead, other) = (key(1), key(2));
        // Altered after signing: the workloads list grew.
        let mut altered = claim("sha256:p", &lead, None).sign(&lead);
        altered.claim.workloads.push("other".into());
        // Signed by another key but claiming to be the lead's.
        let mut impostor = claim("sha256:p", &other, None).sign(&other);
        impostor.claim.approver = keys::public_text(&lead.verifying_key());
        let cases = [
            (altered, "does not verify"),
            (impostor, "does not verify"),
            (
                claim("sha256:p", &other, None).sign(&other),
                "may not approve `ranker`: policy `gov` names `leads`",
            ),
            (
                claim("sha256:p", &lead, Some("2026-12-04T11:00:00Z")).sign(&lead),
                "expired at `2026-12-04T11:00:00Z`",
            ),
            (
                claim("sha256:q", &lead, None).sign(&lead),
                "is for plan `sha256:q`",
            ),
        ];
        for (approval, expected) in cases {
            let checked = check_one(approval, &lead);
            assert!(checked.approved.is_empty(), "{expected}");
            let text = checked
                .problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            assert!(text.contains(expected), "{text} lacks {expected}");
        }
        // Not yet expired: accepted.
        let later = claim("sha256:p", &lead, Some("2026-12-05T00:00:00Z")).sign(&lead);
        assert_eq!(check_one(later, &lead).problems, []);
    }

    #[test]
    fn a_policy_naming_no_approver_accepts_any_verified_signature() {
        let anyone = key(9);
        let mut open = approvers(&key(1));
        if let Some(a) = open.workloads.get_mut("ranker") {
            a.keys = None;
        }
        let mut file = ApprovalFile::new();
        file.add(claim("sha256:p", &anyone, None).sign(&anyone));
        let now: jiff::Timestamp = "2026-12-04T12:00:00Z".parse().expect("time");
        assert!(
            open.check("sha256:p", &file, now)
                .approved
                .contains_key("ranker")
        );
        // Still a signature: altered, it approves nothing.
        file.approvals[0].claim.approved_at = "2020-01-01T00:00:00Z".into();
        assert!(open.check("sha256:p", &file, now).approved.is_empty());
    }

    #[test]
    fn trust_files_name_keys_and_say_where_they_are_wrong() {
        let path = Path::new("approvers.trust");
        let text = format!(
            "# leads\nleads {}  # ana\nleads {}\n\nfinops {}\n",
            keys::public_text(&key(1).verifying_key()),
            keys::public_text(&key(2).verifying_key()),
            keys::public_text(&key(3).verifying_key()),
        );
        let trust = Trust::parse(path, &text).expect("trust");
        assert_eq!(trust.names["leads"].len(), 2);
        assert_eq!(trust.name_of(&key(3).verifying_key()), Some("finops"));
        let bad = Trust::parse(path, "leads\n").expect_err("one word");
        assert_eq!(
            bad.to_string(),
            "`approvers.trust`:1: expected `NAME PUBLIC-KEY`, two words"
        );
        let bad = Trust::parse(path, "\nleads berth-ed25519-public:zz\n").expect_err("bad key");
        assert!(
            bad.to_string().starts_with("`approvers.trust`:2: "),
            "{bad}"
        );
    }
}
