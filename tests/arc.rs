//! `berth apply` and `berth status` for Arc targets, end to end through the real binary: the
//! GitOps commit to a real git repository, then the Flux extension and configuration through
//! Azure Resource Manager, here the test double of tests/arm (written from the published
//! REST specification; every PUT body validated against its schema), with a service
//! principal authenticated by the Azure SDK's identity crate against the double's token
//! endpoint, all over HTTPS on 127.0.0.1.

mod arm;
mod git_http;
mod isolated;
mod test_tls;

use arm::{ArmDouble, Fault, On};
use git_http::git;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The instant every plan of these tests is made at.
const AT: &str = "2025-06-04T10:00:00Z";

const CLUSTER: &str =
    "/subscriptions/0000/resourceGroups/ai/providers/Microsoft.Kubernetes/connectedClusters/eu";

fn configuration_path() -> String {
    format!("{CLUSTER}/providers/Microsoft.KubernetesConfiguration/fluxConfigurations/berth")
}

struct Setup {
    arm: ArmDouble,
    dir: tempfile::TempDir,
    repo: String,
    spec: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("temp dir");
        git(
            dir.path(),
            &[
                "init",
                "--quiet",
                "--bare",
                "--initial-branch=main",
                "gitops.git",
            ],
        );
        let repo = dir.path().join("gitops.git").display().to_string();
        let spec = dir.path().join("spec");
        std::fs::create_dir(&spec).expect("mkdir");
        let setup = Setup {
            arm: ArmDouble::start(),
            dir,
            repo,
            spec,
        };
        setup.write_spec("main", 1);
        setup
    }

    fn write_spec(&self, branch: &str, replicas: u32) {
        let text = format!(
            r#"target eu_arc {{
  class        = cloud
  runtime      = arc {{ cluster = "{CLUSTER}"
                      repo = "{repo}"  branch = "{branch}"  path = "clusters/eu"  namespace = "ml" }}
  connectivity = connected
  cpu    = 16
  memory = 64GiB
}}

workload echo {{
  release  = "1"
  image    = "registry.example.com/echo:1"
  class    = production
  identity = service_account("echo")
  replicas = {replicas}
  resources {{ cpu = 1  memory = 1GiB }}
}}
"#,
            repo = self.repo
        );
        std::fs::write(self.spec.join("arc.berth"), text).expect("write spec");
    }

    /// A spec of the Arc targets `(name, cluster, path)`, all on the test repository's `main`,
    /// and the one workload.
    fn write_targets(&self, targets: &[(&str, &str, &str)]) {
        let mut text = String::new();
        for (name, cluster, path) in targets {
            text.push_str(&format!(
                r#"target {name} {{
  class        = cloud
  runtime      = arc {{ cluster = "{cluster}"
                      repo = "{repo}"  branch = "main"  path = "{path}"  namespace = "ml" }}
  connectivity = connected
  cpu    = 16
  memory = 64GiB
}}

"#,
                repo = self.repo
            ));
        }
        text.push_str(
            r#"workload echo {
  release  = "1"
  image    = "registry.example.com/echo:1"
  class    = production
  identity = service_account("echo")
  replicas = 1
  resources { cpu = 1  memory = 1GiB }
}
"#,
        );
        std::fs::write(self.spec.join("arc.berth"), text).expect("write spec");
    }

    /// Runs berth with the double's environment; (exit code, stdout, stderr).
    fn berth(&self, args: &[&str], extra_env: &[(&str, &str)]) -> (i32, String, String) {
        let mut command = isolated::berth();
        command
            .args(args)
            .env("KUBECONFIG", self.dir.path().join("none"))
            .env("GIT_CONFIG_NOSYSTEM", "1");
        for (k, v) in self.arm.env() {
            command.env(k, v);
        }
        for (k, v) in extra_env {
            command.env(k, v);
        }
        let out = command.output().expect("run berth");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        for secret in [arm::CLIENT_SECRET, "do-not-print"] {
            assert!(
                !stdout.contains(secret) && !stderr.contains(secret),
                "a credential was printed:\n{stdout}\n{stderr}"
            );
        }
        (out.status.code().unwrap_or(-1), stdout, stderr)
    }

    /// Plans the spec at a fixed instant (so an unchanged spec gives the same plan id, and
    /// the same files), then applies that plan.
    fn apply(&self, extra: &[&str]) -> (i32, String, String) {
        let spec = self.spec.display().to_string();
        let plan = self.dir.path().join("plan.json").display().to_string();
        let (code, _, err) = self.berth(&["plan", &spec, "--at", AT, "-o", &plan], &[]);
        assert_eq!(code, 0, "{err}");
        let mut args = vec!["apply", plan.as_str(), "--spec", spec.as_str()];
        args.extend_from_slice(extra);
        self.berth(&args, &[])
    }

    fn puts(&self) -> Vec<String> {
        self.arm
            .log()
            .into_iter()
            .filter(|l| l.method == "PUT")
            .map(|l| l.path)
            .collect()
    }
}

#[test]
fn apply_installs_flux_and_configures_it_once_then_changes_nothing() {
    let s = Setup::new();
    let (code, _, err) = s.apply(&["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("arc cluster `eu` (`eu_arc`): Flux extension would create; configuration `berth` would create"),
        "{err}"
    );
    assert!(
        s.puts().is_empty(),
        "a dry run writes nothing: {:?}",
        s.arm.log()
    );

    s.arm.clear_log();
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("committed"), "{err}");
    assert!(
        err.contains("Flux extension created; configuration `berth` created"),
        "{err}"
    );
    let first_calls = s.arm.log().len();
    let config = s
        .arm
        .resource(&configuration_path())
        .expect("configuration stored");
    let props = &config["properties"];
    assert_eq!(props["provisioningState"], "Succeeded");
    assert_eq!(props["sourceKind"], "GitRepository");
    assert_eq!(props["gitRepository"]["url"], json!(s.repo));
    assert_eq!(props["gitRepository"]["repositoryRef"]["branch"], "main");
    let k = &props["kustomizations"]["eu-arc"];
    assert_eq!(k["path"], "./clusters/eu");
    assert_eq!(k["prune"], true);
    // The folder the kustomization names is what berth committed.
    let files = git(
        &s.dir.path().join("gitops.git"),
        &["ls-tree", "-r", "--name-only", "main"],
    );
    assert!(files.contains("clusters/eu/kustomization.yaml"), "{files}");

    s.arm.clear_log();
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("Flux extension present; configuration `berth` unchanged"),
        "{err}"
    );
    assert!(
        s.puts().is_empty(),
        "a re-apply writes nothing: {:?}",
        s.arm.log()
    );
    let again = s.arm.log().len();
    assert!(
        err.contains(&format!("Azure Resource Manager: {again} requests")),
        "{err}"
    );
    eprintln!("ARM requests: first apply {first_calls}, re-apply {again}");
}

#[test]
fn a_changed_branch_is_shown_as_a_field_diff_then_updated() {
    let s = Setup::new();
    assert_eq!(s.apply(&[]).0, 0);
    s.write_spec("release", 1);
    s.arm.clear_log();
    let (code, _, err) = s.apply(&["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("configuration `berth` would update"), "{err}");
    assert!(
        err.contains("properties.gitRepository.repositoryRef.branch: \"main\" → \"release\""),
        "{err}"
    );
    assert!(s.puts().is_empty());
    let (code, out, err) = s.berth(
        &["--output", "json", "apply", s.spec.to_str().expect("utf-8")],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(doc["arc"][0]["configuration"], "updated", "{doc}");
    assert_eq!(doc["arc"][0]["extension"], "unchanged", "{doc}");
    assert!(doc["arm_requests"].as_u64().expect("count") > 0);
    let config = s.arm.resource(&configuration_path()).expect("stored");
    assert_eq!(
        config["properties"]["gitRepository"]["repositoryRef"]["branch"],
        "release"
    );
}

#[test]
fn throttling_conflicts_and_server_errors_are_retried_and_retry_after_is_honoured() {
    let s = Setup::new();
    s.arm
        .fault(On::PutConfiguration, Fault::Throttle { seconds: 1 });
    s.arm.fault(On::PutConfiguration, Fault::Conflict);
    s.arm.fault(On::PutExtension, Fault::ServerError);
    s.arm.set_lro_polls(2);
    let started = Instant::now();
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 honoured"
    );
    let statuses: Vec<(String, u16)> = s
        .arm
        .log()
        .into_iter()
        .filter(|l| l.method == "PUT")
        .map(|l| {
            (
                l.path.rsplit('/').next().unwrap_or("").to_string(),
                l.status,
            )
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("flux".to_string(), 500),
            ("flux".to_string(), 201),
            ("berth".to_string(), 429),
            ("berth".to_string(), 409),
            ("berth".to_string(), 201),
        ]
    );
    let polls = s
        .arm
        .log()
        .iter()
        .filter(|l| l.path.contains("/operations/"))
        .count();
    assert_eq!(
        polls, 6,
        "two operations, each InProgress twice then Succeeded"
    );
}

#[test]
fn an_expired_token_is_replaced_and_a_wrong_secret_is_a_clear_error() {
    let s = Setup::new();
    s.arm.fault(On::GetConfiguration, Fault::ExpireToken);
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(s.arm.tokens_issued(), 2, "a new token after the 401");
    let (code, _, err) = s.berth(
        &["apply", s.spec.to_str().expect("utf-8")],
        &[("AZURE_CLIENT_SECRET", "a-wrong-secret")],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no Azure token"), "{err}");
    assert!(err.contains("AADSTS7000215"), "{err}");
    assert!(!err.contains("a-wrong-secret"), "{err}");
}

#[test]
fn workload_identity_authenticates_with_the_federated_token() {
    let s = Setup::new();
    let token_file = s.dir.path().join("sa-token");
    std::fs::write(&token_file, arm::FEDERATED_TOKEN).expect("write token");
    let token_file = token_file.display().to_string();
    let (code, _, err) = s.berth(
        &["apply", s.spec.to_str().expect("utf-8")],
        &[
            ("AZURE_CLIENT_SECRET", ""),
            ("AZURE_FEDERATED_TOKEN_FILE", &token_file),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("configuration `berth` created"), "{err}");
    assert_eq!(s.arm.tokens_issued(), 1);
}

#[test]
fn a_managed_identity_gets_its_token_from_the_app_service_endpoint() {
    let s = Setup::new();
    let endpoint = format!("{}{}", s.arm.url, arm::MSI_PATH);
    let env = [
        ("AZURE_CLIENT_SECRET", ""),
        ("IDENTITY_ENDPOINT", endpoint.as_str()),
        ("IDENTITY_HEADER", arm::IDENTITY_HEADER),
    ];
    let spec = s.spec.display().to_string();
    let (code, _, err) = s.berth(&["apply", &spec], &env);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("configuration `berth` created"), "{err}");
    assert_eq!(
        s.arm.tokens_issued(),
        1,
        "one token, from the endpoint, reached ARM"
    );
    // A wrong identity header is refused by the endpoint, and said so without the secret.
    let env = [
        ("AZURE_CLIENT_SECRET", ""),
        ("IDENTITY_ENDPOINT", endpoint.as_str()),
        ("IDENTITY_HEADER", "wrong"),
    ];
    let (code, out, err) = s.berth(&["status", &spec], &env);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("not read: no Azure token"), "{out}{err}");
}

#[test]
fn the_azure_cli_credential_runs_az_and_its_token_reaches_arm() {
    let s = Setup::new();
    let token = s.arm.issue_token();
    let bin = s.dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let calls = s.dir.path().join("az-calls");
    let scope = format!("{}/.default", s.arm.url);
    // A stub `az` printing what `az account get-access-token -o json` prints.
    let script = format!(
        r#"#!/bin/sh
echo "$@" >> '{calls}'
if [ "$*" != "account get-access-token -o json --scope {scope}" ]; then
  echo "ERROR: unexpected arguments: $*" >&2; exit 2
fi
cat <<'EOF'
{{
  "accessToken": "{token}",
  "expiresOn": "2099-01-01 00:00:00.000000",
  "expires_on": 4070908800,
  "subscription": "0000",
  "tenant": "{tenant}",
  "tokenType": "Bearer"
}}
EOF
"#,
        calls = calls.display(),
        tenant = arm::TENANT,
    );
    let az = bin.join("az");
    std::fs::write(&az, script).expect("write az");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&az, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [("AZURE_CLIENT_SECRET", ""), ("PATH", path.as_str())];
    let spec = s.spec.display().to_string();
    let (code, out, err) = s.berth(&["apply", &spec], &env);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("configuration `berth` created"), "{err}");
    assert!(!out.contains(&token) && !err.contains(&token));
    let ran = std::fs::read_to_string(&calls).expect("az ran");
    assert!(ran.contains("account get-access-token"), "{ran}");
    assert_eq!(s.arm.tokens_issued(), 1, "no other token was asked for");
    // `az` without a login: its own message, as the Azure CLI credential reports it.
    std::fs::write(
        &az,
        "#!/bin/sh\necho \"ERROR: Please run 'az login' to setup account.\" >&2\nexit 1\n",
    )
    .expect("write az");
    let (code, out, err) = s.berth(&["status", &spec], &env);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("az login"), "{out}{err}");
}

/// The spec's repository replaced by `url`, which git reaches as the test's bare repository
/// (`url.<bare>.insteadOf`), and that rewrite's environment.
fn private_repo(s: &Setup, url: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(s.spec.join("arc.berth")).expect("spec");
    std::fs::write(s.spec.join("arc.berth"), text.replace(&s.repo, url)).expect("spec");
    vec![
        ("GIT_CONFIG_COUNT".to_string(), "1".to_string()),
        (
            "GIT_CONFIG_KEY_0".to_string(),
            format!("url.{}.insteadOf", s.repo),
        ),
        ("GIT_CONFIG_VALUE_0".to_string(), url.to_string()),
    ]
}

fn b64(text: &str) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, text)
}

#[test]
fn private_https_credentials_are_sent_write_only_and_again_only_when_they_change() {
    let s = Setup::new();
    let mut env = private_repo(&s, "https://git.example.com/gitops.git");
    let key_file = s.dir.path().join("https-key");
    std::fs::write(&key_file, "pat-one-do-not-print\n").expect("key");
    env.push(("BERTH_FLUX_HTTPS_USER".into(), "bot".into()));
    env.push((
        "BERTH_FLUX_HTTPS_KEY_FILE".into(),
        key_file.display().to_string(),
    ));
    env.push((
        "XDG_STATE_HOME".into(),
        s.dir.path().join("state").display().to_string(),
    ));
    let run = |env: &[(String, String)], args: &[&str]| {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let spec = s.spec.display().to_string();
        let mut all = args.to_vec();
        all.push(&spec);
        let (code, out, err) = s.berth(&all, &env);
        for secret in [
            "pat-one",
            "pat-two",
            &b64("pat-one-do-not-print"),
            &b64("pat-two-do-not-print"),
        ] {
            assert!(!out.contains(secret) && !err.contains(secret), "{out}{err}");
        }
        (code, out, err)
    };
    let (code, _, err) = run(&env, &["apply"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("configuration `berth` created"), "{err}");
    let sent = s
        .arm
        .protected_settings(&configuration_path())
        .expect("sent");
    assert_eq!(
        sent.get("httpsKey").map(String::as_str),
        Some("pat-one-do-not-print")
    );
    let config = s.arm.resource(&configuration_path()).expect("stored");
    assert_eq!(config["properties"]["gitRepository"]["httpsUser"], "bot");
    assert_eq!(
        config["properties"]["gitRepository"]["url"],
        "https://git.example.com/gitops.git"
    );
    assert!(config["properties"]["configurationProtectedSettings"].is_null());

    // The same credentials again: nothing to write.
    s.arm.clear_log();
    let (code, _, err) = run(&env, &["apply"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("configuration `berth` unchanged"), "{err}");
    assert!(s.puts().is_empty(), "{:?}", s.arm.log());

    // A rotated key: the diff names the field, never the value; the apply sends it.
    std::fs::write(&key_file, "pat-two-do-not-print").expect("key");
    let (code, _, err) = run(&env, &["diff"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("properties.configurationProtectedSettings: sent again"),
        "{err}"
    );
    let (code, out, err) = run(&env, &["--output", "json", "diff"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("configurationProtectedSettings"), "{out}");
    assert!(s.puts().is_empty(), "a dry run writes nothing");
    let (code, _, err) = run(&env, &["apply"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(s.puts().len(), 1, "{:?}", s.arm.log());
    let sent = s
        .arm
        .protected_settings(&configuration_path())
        .expect("sent");
    assert_eq!(
        sent.get("httpsKey").map(String::as_str),
        Some("pat-two-do-not-print")
    );

    // Another machine (no record of what was sent from it): sent once, then not again.
    let elsewhere = s.dir.path().join("elsewhere").display().to_string();
    env.retain(|(k, _)| k != "XDG_STATE_HOME");
    env.push(("XDG_STATE_HOME".into(), elsewhere));
    s.arm.clear_log();
    assert_eq!(run(&env, &["apply"]).0, 0);
    assert_eq!(s.puts().len(), 1);
    s.arm.clear_log();
    assert_eq!(run(&env, &["apply"]).0, 0);
    assert!(s.puts().is_empty());
}

#[test]
fn private_ssh_credentials_carry_the_key_write_only_and_the_known_hosts_readable() {
    let s = Setup::new();
    let mut env = private_repo(&s, "ssh://git@git.example.com/gitops.git");
    let key = s.dir.path().join("id_ed25519");
    let known_hosts = s.dir.path().join("known_hosts");
    let key_text = "-----BEGIN OPENSSH PRIVATE KEY-----\nssh-key-do-not-print\n-----END OPENSSH PRIVATE KEY-----\n";
    std::fs::write(&key, key_text).expect("key");
    std::fs::write(
        &known_hosts,
        "git.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE\n",
    )
    .expect("known hosts");
    env.push(("BERTH_FLUX_SSH_KEY_FILE".into(), key.display().to_string()));
    env.push((
        "BERTH_FLUX_KNOWN_HOSTS_FILE".into(),
        known_hosts.display().to_string(),
    ));
    env.push((
        "XDG_STATE_HOME".into(),
        s.dir.path().join("state").display().to_string(),
    ));
    let env_ref: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let spec = s.spec.display().to_string();
    let (code, out, err) = s.berth(&["apply", &spec], &env_ref);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains(&b64(key_text)) && !err.contains(&b64(key_text)));
    let sent = s
        .arm
        .protected_settings(&configuration_path())
        .expect("sent");
    assert_eq!(
        sent.get("sshPrivateKey").map(String::as_str),
        Some(key_text)
    );
    let config = s.arm.resource(&configuration_path()).expect("stored");
    assert_eq!(
        config["properties"]["gitRepository"]["sshKnownHosts"],
        b64("git.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE\n")
    );
    // SSH credentials for an HTTPS repository: refused, nothing sent.
    let text = std::fs::read_to_string(s.spec.join("arc.berth")).expect("spec");
    std::fs::write(
        s.spec.join("arc.berth"),
        text.replace(
            "ssh://git@git.example.com/gitops.git",
            "https://git.example.com/gitops.git",
        ),
    )
    .expect("spec");
    let mut env = env.clone();
    env.retain(|(k, _)| !k.starts_with("GIT_CONFIG"));
    env.extend([
        ("GIT_CONFIG_COUNT".to_string(), "1".to_string()),
        (
            "GIT_CONFIG_KEY_0".to_string(),
            format!("url.{}.insteadOf", s.repo),
        ),
        (
            "GIT_CONFIG_VALUE_0".to_string(),
            "https://git.example.com/gitops.git".to_string(),
        ),
    ]);
    let env_ref: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (code, _, err) = s.berth(&["apply", &spec], &env_ref);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("SSH source credentials are set but the repository `https://git.example.com/gitops.git` is not an SSH URL"),
        "{err}"
    );
}

#[test]
fn a_forbidden_write_names_the_action_and_the_role() {
    let s = Setup::new();
    s.arm.fault(On::PutConfiguration, Fault::Forbidden);
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("may not `Microsoft.KubernetesConfiguration/fluxConfigurations/write`"),
        "{err}"
    );
    assert!(err.contains("`Contributor`"), "{err}");
}

#[test]
fn a_failed_operation_is_reported_with_its_message() {
    let s = Setup::new();
    assert_eq!(s.apply(&[]).0, 0);
    s.write_spec("release", 1);
    s.arm
        .fail_next_operation("GitRepositoryUnreachable", "authentication required");
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "the operation ended `Failed` (GitRepositoryUnreachable: authentication required)"
        ),
        "{err}"
    );
}

#[test]
fn status_shows_what_flux_reports_through_arm() {
    let s = Setup::new();
    let spec = s.spec.display().to_string();
    let (code, out, err) = s.berth(&["status", &spec], &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("no Flux configuration `berth`"), "{out}");
    assert_eq!(s.apply(&[]).0, 0);
    s.arm.report_flux_status(
        &configuration_path(),
        json!({
            "complianceState": "Non-Compliant",
            "sourceSyncedCommitId": "main@sha1:3f2a1b9c",
            "sourceUpdatedAt": "2026-12-04T10:00:00Z",
            "statuses": [
                {"name": "berth", "namespace": "flux-system", "kind": "GitRepository",
                 "complianceState": "Compliant",
                 "statusConditions": [{"type": "Ready", "status": "True", "message": "stored artifact"}]},
                {"name": "berth-eu-arc", "namespace": "flux-system", "kind": "Kustomization",
                 "complianceState": "Non-Compliant",
                 "statusConditions": [{"type": "Ready", "status": "False",
                    "reason": "BuildFailed", "message": "kustomize build failed: missing resource ml.yaml"}]}
            ]
        }),
    );
    let (code, out, err) = s.berth(&["status", &spec], &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("arc cluster `eu` (`eu_arc`): Flux configuration `berth` Non-Compliant, provisioning Succeeded, source at main@sha1:3f2a1b9c"),
        "{out}"
    );
    assert!(
        out.contains("Kustomization flux-system/berth-eu-arc: Non-Compliant: kustomize build failed: missing resource ml.yaml"),
        "{out}"
    );
    s.arm.report_flux_status(
        &configuration_path(),
        json!({"complianceState": "Compliant", "statuses": []}),
    );
    let (code, out, err) = s.berth(&["--output", "json", "status", &spec], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let doc: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        doc["arc"][0]["configuration"]["compliance_state"],
        "Compliant"
    );
}

#[test]
fn the_double_refuses_what_the_specification_refuses() {
    // The double itself, so that the tests above mean something: a body with a misspelt or
    // read-only field, a missing api-version, a configuration before the extension.
    let s = Setup::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(&s.arm.ca_file).expect("ca"))
                .expect("pem"),
        )
        .build()
        .expect("client");
    let token: Value = rt.block_on(async {
        client
            .post(format!("{}/{}/oauth2/v2.0/token", s.arm.url, arm::TENANT))
            .body(format!(
                "grant_type=client_credentials&client_id={}&client_secret={}&scope={}%2F.default",
                arm::CLIENT_ID,
                arm::CLIENT_SECRET,
                s.arm.url.replace(':', "%3A").replace('/', "%2F")
            ))
            .send()
            .await
            .expect("token")
            .text()
            .await
            .map(|t| serde_json::from_str(&t).expect("json"))
            .expect("body")
    });
    let bearer = token["access_token"].as_str().expect("token").to_string();
    let put = |path: &str, api: &str, body: Value| {
        rt.block_on(async {
            let response = client
                .put(format!("{}{path}?api-version={api}", s.arm.url))
                .bearer_auth(&bearer)
                .body(body.to_string())
                .send()
                .await
                .expect("put");
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            (
                status,
                serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
            )
        })
    };
    let config = configuration_path();
    let (status, body) = put(
        &config,
        arm::FLUX_API,
        json!({"properties": {"sourceKind": "GitRepository"}}),
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("ExtensionNotFound"))
    );
    let extension =
        format!("{CLUSTER}/providers/Microsoft.KubernetesConfiguration/extensions/flux");
    let (status, _) = put(
        &extension,
        arm::EXTENSION_API,
        json!({"properties": {"extensionType": "microsoft.flux"}}),
    );
    assert_eq!(status, 201);
    let (status, body) = put(
        &config,
        arm::FLUX_API,
        json!({"properties": {"sourceKnd": "GitRepository"}}),
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("InvalidRequestContent")),
        "{body}"
    );
    let (status, _) = put(
        &config,
        arm::FLUX_API,
        json!({"properties": {"complianceState": "Compliant"}}),
    );
    assert_eq!(status, 400, "read-only fields are refused");
    let (status, _) = put(
        &config,
        arm::FLUX_API,
        json!({"properties": {"gitRepository": {"timeoutInSeconds": "600"}}}),
    );
    assert_eq!(status, 400, "types are checked");
    let (status, body) = put(&config, "2021-11-01-preview", json!({"properties": {}}));
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("NoRegisteredProviderFound"))
    );
    let (status, _) = put(
        &config,
        arm::FLUX_API,
        json!({"properties": {"scope": "cluster", "namespace": "flux-system"}}),
    );
    assert_eq!(status, 201);
    let (status, body) = put(
        &config,
        arm::FLUX_API,
        json!({"properties": {"namespace": "other"}}),
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("InvalidRequestParameter"))
    );
    // FluxConfigurations_Delete: 202 with the operation to follow, then 204 once it is gone.
    let send = |method: reqwest::Method, url: String| {
        rt.block_on(async {
            let response = client
                .request(method, url)
                .bearer_auth(&bearer)
                .send()
                .await
                .expect("request");
            let status = response.status().as_u16();
            let operation = response
                .headers()
                .get("azure-asyncoperation")
                .map(|v| v.to_str().expect("ascii").to_string());
            let text = response.text().await.unwrap_or_default();
            let body = serde_json::from_str::<Value>(&text).unwrap_or(Value::Null);
            (status, operation, body)
        })
    };
    let at = |query: &str| format!("{}{config}?api-version={}{query}", s.arm.url, arm::FLUX_API);
    let (status, _, body) = send(reqwest::Method::DELETE, at("&forceDelete=maybe"));
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("InvalidRequestParameter"))
    );
    let (status, operation, _) = send(reqwest::Method::DELETE, at(""));
    assert_eq!(status, 202);
    let operation = operation.expect("an Azure-AsyncOperation header");
    let (_, _, live) = send(reqwest::Method::GET, at(""));
    assert_eq!(live["properties"]["provisioningState"], "Deleting");
    let (status, _, op) = send(reqwest::Method::GET, operation);
    assert_eq!(
        (status, op["status"].as_str()),
        (200, Some("Succeeded")),
        "{op}"
    );
    let (status, _, _) = send(reqwest::Method::GET, at(""));
    assert_eq!(status, 404);
    let (status, _, _) = send(reqwest::Method::DELETE, at("&forceDelete=true"));
    assert_eq!(status, 204, "nothing to delete");
    assert!(s.arm.resource(&extension).is_some(), "the extension stays");
}

const US: &str =
    "/subscriptions/0000/resourceGroups/ai/providers/Microsoft.Kubernetes/connectedClusters/us";

fn us_configuration(name: &str) -> String {
    format!("{US}/providers/Microsoft.KubernetesConfiguration/fluxConfigurations/{name}")
}

#[test]
fn a_cluster_no_target_names_any_more_loses_berths_configuration_and_nothing_else() {
    let s = Setup::new();
    s.write_targets(&[
        ("eu_arc", CLUSTER, "clusters/eu"),
        ("us_arc", US, "clusters/us"),
    ]);
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        s.arm.resource(&us_configuration("berth")).is_some(),
        "{err}"
    );
    let record = |s: &Setup| {
        git(
            &s.dir.path().join("gitops.git"),
            &["show", "main:.berth/flux-configurations.json"],
        )
    };
    let first = record(&s);
    assert!(first.contains(US) && first.contains("us_arc"), "{first}");
    // Someone else's configuration on the same cluster: never berth's to touch.
    s.arm.insert(
        &us_configuration("team"),
        json!({"id": us_configuration("team"), "name": "team",
               "properties": {"provisioningState": "Succeeded"}}),
    );

    // The spec drops `us_arc`. A refused delete keeps the cluster in the record.
    s.write_targets(&[("eu_arc", CLUSTER, "clusters/eu")]);
    s.arm.fault(On::DeleteConfiguration, Fault::Forbidden);
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "arc cluster `us` (`us_arc`, no longer in the plan): configuration `berth` not deleted"
        ),
        "{err}"
    );
    assert!(
        err.contains("Microsoft.KubernetesConfiguration/fluxConfigurations/delete"),
        "{err}"
    );
    assert!(
        record(&s).contains(US),
        "kept for the next apply: {}",
        record(&s)
    );

    // A dry run says what would go, and deletes nothing.
    s.arm.clear_log();
    let (code, _, err) = s.apply(&["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "arc cluster `us` (`us_arc`, no longer in the plan): configuration `berth` would delete"
        ),
        "{err}"
    );
    assert!(
        s.arm.log().iter().all(|l| l.method == "GET"),
        "{:?}",
        s.arm.log()
    );

    // The apply deletes it (202, the operation followed), and records it.
    s.arm.clear_log();
    s.arm.set_lro_polls(1);
    let audit = s.dir.path().join("audit.redb");
    let audit_env = [("BERTH_AUDIT_LOG", audit.to_str().expect("utf-8"))];
    let spec = s.spec.display().to_string();
    let (code, out, err) = s.berth(&["--output", "json", "apply", &spec], &audit_env);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(doc["arc_removed"][0]["cluster"], US, "{doc}");
    assert_eq!(doc["arc_removed"][0]["result"], "deleted", "{doc}");
    let deletes: Vec<_> = s
        .arm
        .log()
        .into_iter()
        .filter(|l| l.method == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(deletes[0].path, us_configuration("berth"));
    assert_eq!(deletes[0].status, 202);
    assert!(s.arm.resource(&us_configuration("berth")).is_none());
    assert!(
        s.arm.resource(&us_configuration("team")).is_some(),
        "another's configuration stays"
    );
    assert!(
        s.arm
            .resource(&format!(
                "{US}/providers/Microsoft.KubernetesConfiguration/extensions/flux"
            ))
            .is_some(),
        "the extension stays"
    );
    assert!(
        s.arm.resource(&configuration_path()).is_some(),
        "eu keeps its configuration"
    );
    let now = record(&s);
    assert!(!now.contains(US) && now.contains(CLUSTER), "{now}");
    let files = git(
        &s.dir.path().join("gitops.git"),
        &["ls-tree", "-r", "--name-only", "main"],
    );
    assert!(
        !files.contains("clusters/us/"),
        "the dropped target's folder goes: {files}"
    );
    let (code, trail, err) = s.berth(&["audit", "--jsonl"], &audit_env);
    assert_eq!(code, 0, "{err}");
    assert!(
        trail
            .lines()
            .any(|l| l.contains("\"removed\"") && l.contains("us_arc") && l.contains(US)),
        "{trail}"
    );

    // Nothing left to remove.
    s.arm.clear_log();
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("no longer in the plan"), "{err}");
    assert!(s.arm.log().iter().all(|l| l.method != "DELETE"));
}

#[test]
fn a_target_moved_to_another_cluster_leaves_the_old_one_and_a_repointed_one_is_left_alone() {
    let s = Setup::new();
    s.write_targets(&[
        ("eu_arc", CLUSTER, "clusters/eu"),
        ("us_arc", US, "clusters/us"),
    ]);
    assert_eq!(s.apply(&[]).0, 0);
    // `us_arc` moves to `us2`; meanwhile someone repointed `us`'s `berth` configuration to
    // another repository: not the one berth made from this repository, so it stays.
    let us2 = US.replace("/us", "/us2");
    s.write_targets(&[
        ("eu_arc", CLUSTER, "clusters/eu"),
        ("us_arc", &us2, "clusters/us"),
    ]);
    let mut theirs = s.arm.resource(&us_configuration("berth")).expect("stored");
    theirs["properties"]["gitRepository"]["url"] = json!("https://git.example.com/other.git");
    s.arm.insert(&us_configuration("berth"), theirs);
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "configuration `berth` left alone: it watches `https://git.example.com/other.git`"
        ),
        "{err}"
    );
    assert!(s.arm.resource(&us_configuration("berth")).is_some());
    assert!(s.arm.log().iter().all(|l| l.method != "DELETE"));
    assert!(
        s.arm
            .resource(&format!(
                "{us2}/providers/Microsoft.KubernetesConfiguration/fluxConfigurations/berth"
            ))
            .is_some()
    );
}

#[test]
fn the_commit_holds_the_objects_and_a_changed_plan_commits_again() {
    let s = Setup::new();
    let bare = s.dir.path().join("gitops.git");
    assert_eq!(s.apply(&[]).0, 0);
    let files = git(&bare, &["ls-tree", "-r", "--name-only", "main"]);
    assert_eq!(
        files,
        ".berth/flux-configurations.json\nclusters/eu/kustomization.yaml\nclusters/eu/ml.yaml\n"
    );
    let objects = git(&bare, &["show", "main:clusters/eu/ml.yaml"]);
    assert!(
        objects.contains("kind: Deployment") && objects.contains("replicas: 1"),
        "{objects}"
    );
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(": unchanged"),
        "a re-run commits nothing: {err}"
    );
    s.write_spec("main", 2);
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    let log = git(&bare, &["log", "--format=%s", "main"]);
    assert_eq!(log.lines().count(), 2, "{log}");
    assert!(
        log.lines()
            .all(|l| l.starts_with("berth: apply plan sha256:")),
        "{log}"
    );
    assert!(git(&bare, &["show", "main:clusters/eu/ml.yaml"]).contains("replicas: 2"));
    assert!(
        err.contains("configuration `berth` unchanged"),
        "same source and paths: {err}"
    );
}

/// A `pre-commit` hook (through `core.hooksPath` in berth's environment) that pushes someone
/// else's commit to the branch once, while berth is committing: berth's push is then a
/// non-fast-forward.
fn racing_hook(s: &Setup, file: &str) -> Vec<(String, String)> {
    let other = s.dir.path().join("other");
    git(
        s.dir.path(),
        &["clone", "--quiet", &s.repo, other.to_str().expect("utf-8")],
    );
    let hooks = s.dir.path().join("hooks");
    std::fs::create_dir_all(&hooks).expect("mkdir");
    let hook = hooks.join("pre-commit");
    let mark = s.dir.path().join("raced");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nunset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE GIT_PREFIX\n\
             [ -e '{mark}' ] && exit 0\ntouch '{mark}'\ncd '{other}' || exit 1\n\
             mkdir -p \"$(dirname '{file}')\" && echo 'edited by someone else' >> '{file}'\n\
             git add -A && git -c user.name=other -c user.email=o@example.com commit -qm other \
             && git push -q origin HEAD:main\n",
            mark = mark.display(),
            other = other.display(),
        ),
    )
    .expect("write hook");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    vec![
        ("GIT_CONFIG_COUNT".to_string(), "1".to_string()),
        ("GIT_CONFIG_KEY_0".to_string(), "core.hooksPath".to_string()),
        (
            "GIT_CONFIG_VALUE_0".to_string(),
            hooks.display().to_string(),
        ),
    ]
}

/// Applies a changed plan while someone else pushes an edit of `file`; the bare repository
/// afterwards, having checked that both commits are in its history, berth's on top.
fn raced_apply(s: &Setup, file: &str) -> PathBuf {
    assert_eq!(s.apply(&[]).0, 0);
    let env = racing_hook(s, file);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    s.write_spec("main", 2);
    let (code, _, err) = s.berth(&["apply", s.spec.to_str().expect("utf-8")], &env);
    assert_eq!(code, 0, "{err}");
    let bare = s.dir.path().join("gitops.git");
    let log = git(&bare, &["log", "--format=%s", "main"]);
    let subjects: Vec<&str> = log.lines().collect();
    assert_eq!(subjects.len(), 3, "{log}");
    assert!(
        subjects[0].starts_with("berth: apply plan"),
        "berth's commit on top: {log}"
    );
    assert_eq!(
        subjects[1], "other",
        "the other commit kept, never forced over: {log}"
    );
    assert!(git(&bare, &["show", "main:clusters/eu/ml.yaml"]).contains("replicas: 2"));
    bare
}

#[test]
fn a_push_raced_by_someone_else_is_redone_on_top_never_forced() {
    let s = Setup::new();
    let bare = raced_apply(&s, "README.md");
    assert!(git(&bare, &["show", "main:README.md"]).contains("someone else"));
}

#[test]
fn a_race_that_edits_berths_folder_is_overwritten_not_merged() {
    let s = Setup::new();
    let bare = raced_apply(&s, "clusters/eu/ml.yaml");
    let objects = git(&bare, &["show", "main:clusters/eu/ml.yaml"]);
    assert!(
        !objects.contains("someone else"),
        "berth's folder is exactly its rendering: {objects}"
    );
}
