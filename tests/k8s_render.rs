//! Rendering the examples' plans into Kubernetes objects: insta snapshots of the YAML, and
//! validation of every object against the official Kubernetes schemas (`kubernetes-validate`,
//! installed by `.ci/run`).

use berth_compiler::driver;
use berth_compiler::source::SourceMap;
use berth_runtime::backends::k8s::render::{self, Rendered};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The plan instant of every snapshot (a Saturday morning, outside the peak-hours window).
const AT: &str = "2025-06-07T10:00:00Z";

/// The example spec in `dir`, its files named as from the repository root.
fn example(dir: &Path) -> (berth_compiler::ir::Ir, berth_compiler::plan::Plan) {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("example name");
    spec_at(dir, &format!("examples/{name}"))
}

/// The spec in `dir`, its files named `PREFIX/FILE`.
fn spec_at(dir: &Path, prefix: &str) -> (berth_compiler::ir::Ir, berth_compiler::plan::Plan) {
    let name = prefix;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read example")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "berth"))
        .collect();
    files.sort();
    let mut sources = SourceMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read source");
        let base = file
            .file_name()
            .and_then(|n| n.to_str())
            .expect("file name");
        sources.add(format!("{prefix}/{base}"), text);
    }
    let planned = driver::plan(&sources, AT.parse().expect("instant"))
        .unwrap_or_else(|_| panic!("example `{name}` plans"));
    (planned.ir, planned.plan)
}

fn yaml_of(rendered: &Rendered) -> String {
    let mut out = String::new();
    for (path, text) in render::yaml_files(rendered) {
        out.push_str(&format!("### {path}\n{text}"));
    }
    for target in &rendered.gitops {
        for (name, text) in target.files(&rendered.plan_id) {
            out.push_str(&format!(
                "### gitops {} ({}) {}/{name}\n{text}",
                target.repo, target.branch, target.path
            ));
        }
    }
    for other in &rendered.others {
        out.push_str(&format!(
            "### not handled: `{}` on `{}` ({})\n",
            other.workload, other.target, other.runtime
        ));
    }
    out
}

#[test]
fn examples_render() {
    insta::glob!("../examples", "*/README.md", |readme| {
        let dir = readme.parent().expect("example dir");
        let (ir, plan) = example(dir);
        let rendered = render::render(&ir, &plan);
        assert_eq!(rendered, render::render(&ir, &plan), "deterministic");
        insta::assert_snapshot!(yaml_of(&rendered));
    });
}

/// Every rendered object is valid against the Kubernetes 1.35 schemas (strict: unknown
/// fields are errors).
#[test]
fn rendered_objects_match_the_kubernetes_schemas() {
    let validator = "kubernetes-validate";
    if Command::new(validator).arg("--version").output().is_err() {
        let message = format!("`{validator}` is not installed (pip install kubernetes-validate)");
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
        eprintln!("skipped: {message}");
        return;
    }
    let out = tempfile::tempdir().expect("temp dir");
    let mut paths = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut examples: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    examples.sort();
    for dir in examples {
        let (ir, plan) = example(&dir);
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_string();
        let rendered = render::render(&ir, &plan);
        // The GitOps folders' objects too (not their kustomization.yaml: not an API object).
        let gitops = rendered.gitops.iter().flat_map(|t| {
            t.files(&rendered.plan_id)
                .into_iter()
                .filter(|(name, _)| name != "kustomization.yaml")
                .map(|(name, text)| (format!("arc/{}/{name}", t.target), text))
        });
        for (rel, text) in render::yaml_files(&rendered).into_iter().chain(gitops) {
            let path = out.path().join(&name).join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, text).expect("write");
            paths.push(path);
        }
    }
    assert!(!paths.is_empty(), "the examples render some objects");
    validate(validator, &paths);
}

/// A target offering the NIM Operator (`tests/data/nim`): `ngc://` and `hf://` artifacts are
/// cached by `NIMCache`s whose volume the Deployments mount; the OCI artifact with a digest is
/// still staged by `berth fetch`. The NIMCaches are validated against the operator's schema
/// by the real API server in `tests/k8s_cluster.rs`; every other object here against the
/// Kubernetes schemas.
#[test]
fn nim_operator_targets_render_nimcaches() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nim");
    let (ir, plan) = spec_at(&dir, "tests/data/nim");
    let rendered = render::render(&ir, &plan);
    assert_eq!(rendered, render::render(&ir, &plan), "deterministic");
    let yaml = yaml_of(&rendered);
    insta::assert_snapshot!(yaml);
    let objects = &rendered.clusters[0].manifests;
    let kinds = |kind: render::Kind| objects.iter().filter(|m| m.kind == kind).count();
    assert_eq!(
        kinds(render::Kind::NimCache),
        2,
        "one cache per ngc/hf placement"
    );
    assert_eq!(
        kinds(render::Kind::PersistentVolumeClaim),
        1,
        "berth's own volume for the OCI artifact only"
    );
    let validator = "kubernetes-validate";
    if Command::new(validator).arg("--version").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "`{validator}` is not installed"
        );
        eprintln!("skipped: `{validator}` is not installed");
        return;
    }
    let out = tempfile::tempdir().expect("temp dir");
    let mut paths = Vec::new();
    for (i, m) in objects.iter().enumerate() {
        if m.kind == render::Kind::NimCache {
            continue;
        }
        let path = out.path().join(format!("{i}.yaml"));
        std::fs::write(&path, render::to_yaml(&m.object)).expect("write");
        paths.push(path);
    }
    validate(validator, &paths);
}

/// Where no NIM Operator runs, an `ngc://` or `hf://` artifact is not staged by berth even
/// with a digest (`berth fetch` cannot fetch those schemes: the model server pulls it at
/// start from `BERTH_MODEL_ARTIFACT`); the OCI artifact with a digest still is.
#[test]
fn artifacts_berth_cannot_fetch_get_no_staging_job() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/nim");
    let text = std::fs::read_to_string(dir.join("nim.berth")).expect("spec");
    let digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    let text = text
        .replace("nim_operator: ga, ", "")
        .replace("services = [nim_operator >= ga]", "services = []")
        .replace(
            "size = 16GiB",
            &format!("size = 16GiB\n    digest = \"{digest}\""),
        );
    assert!(!text.contains("nim_operator:"), "the operator is gone");
    let spec = tempfile::tempdir().expect("temp dir");
    std::fs::write(spec.path().join("nim.berth"), text).expect("write spec");
    let (ir, plan) = spec_at(spec.path(), "tests/data/no-nim");
    let rendered = render::render(&ir, &plan);
    let objects = &rendered.clusters[0].manifests;
    let kinds = |kind: render::Kind| objects.iter().filter(|m| m.kind == kind).count();
    assert_eq!(kinds(render::Kind::NimCache), 0);
    assert_eq!(
        kinds(render::Kind::PersistentVolumeClaim),
        1,
        "berth's own volume for the OCI artifact only"
    );
    let jobs: Vec<&str> = objects
        .iter()
        .filter(|m| m.kind == render::Kind::Job)
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(
        jobs.len(),
        1,
        "one staging Job, the OCI artifact's: {jobs:?}"
    );
    assert!(jobs[0].starts_with("rerank-stage-"), "{jobs:?}");
    let llm = objects
        .iter()
        .find(|m| m.kind == render::Kind::Deployment && m.name == "llm")
        .expect("the llm Deployment");
    let pod = &llm.object["spec"]["template"]["spec"];
    assert!(
        pod["initContainers"].is_null(),
        "nothing to wait for: {pod}"
    );
    let env = pod["containers"][0]["env"].as_array().expect("env");
    let var = |name: &str| {
        env.iter()
            .find(|e| e["name"] == name)
            .and_then(|e| e["value"].as_str())
    };
    assert_eq!(
        var("BERTH_MODEL_ARTIFACT"),
        Some("ngc://nim/meta/llama-3.1-8b-instruct:hf")
    );
    assert_eq!(var("BERTH_MODEL_DIGEST"), Some(digest));
}

/// Runs `validator` strictly over `paths` against the Kubernetes 1.35 schemas.
fn validate(validator: &str, paths: &[PathBuf]) {
    let result = Command::new(validator)
        .args(["--kubernetes-version", "1.35.0", "--strict", "--quiet"])
        .args(paths)
        .output()
        .expect("run the validator");
    let text = String::from_utf8_lossy(&result.stdout).to_string()
        + &String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "schema validation failed:\n{text}");
}
