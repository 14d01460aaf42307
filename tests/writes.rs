//! Every command that writes a file the user names (`plan -o`, `render -o`, `approve`,
//! `keys generate`, `fmt`) takes the same care of what is already there: regular files only
//! (devices, FIFOs, directories refused), never a source of the spec (by any name: `..`,
//! symlinks, hard links), read-only files refused, mode, owner and hard links kept, keys never
//! overwritten nor orphaned; and read errors say what is really wrong (a dangling symlink).
//! Real `berth` processes on real files in temporary directories.

mod isolated;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// An instant at which the training example's placements await approval.
const AT: &str = "2025-06-07T10:00:00Z";

fn berth(dir: &Path, args: &[&str]) -> Output {
    isolated::berth()
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("the berth binary runs")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("berth exits normally")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A temporary directory with a copy of example `name` in `DIR/spec`.
fn with_example(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = dir.path().join("spec");
    fs::create_dir(&spec).expect("spec dir");
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    for entry in fs::read_dir(from).expect("example") {
        let path = entry.expect("entry").path();
        if path
            .extension()
            .is_some_and(|e| e == "berth" || e == "trust")
        {
            fs::copy(&path, spec.join(path.file_name().expect("name"))).expect("copy");
        }
    }
    dir
}

/// The training example's demo approver key.
fn approver_key() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/training-and-inference/keys/ml-platform-leads.key")
        .display()
        .to_string()
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success());
}

fn is_root() -> bool {
    let probe = tempfile::tempfile().expect("temp file");
    probe.metadata().expect("stat").uid() == 0
}

/// Asserts that `out` is a refusal (exit 1) whose message contains `message`.
#[track_caller]
fn refused(out: &Output, message: &str) {
    let err = stderr(out);
    assert_eq!(code(out), 1, "{err}");
    assert!(err.contains(message), "expected `{message}` in:\n{err}");
    assert!(
        err.contains("help: "),
        "a refusal comes with a hint:\n{err}"
    );
}

#[test]
fn plan_out_refuses_devices_fifos_and_directories() {
    let dir = with_example("quickstart");
    // As root, a berth that regressed would replace the machine's `/dev/null` (this happened
    // once while checking that this test fails without the fix): root tests on a device node
    // of their own, `null` (1, 3) in the temporary directory; others on `/dev/null`, which
    // they cannot replace.
    let device = if is_root() {
        let status = Command::new("mknod")
            .args(["-m", "666"])
            .arg(dir.path().join("null"))
            .args(["c", "1", "3"])
            .status()
            .expect("mknod");
        assert!(status.success());
        "null"
    } else {
        "/dev/null"
    };
    let out = berth(dir.path(), &["plan", "spec", "-o", device]);
    refused(
        &out,
        &format!("`{device}` is a character device, not a regular file"),
    );
    let device = dir.path().join(device);
    let kind = fs::symlink_metadata(device).expect("stat").file_type();
    assert!(kind.is_char_device(), "still a device");
    // A FIFO is refused without being opened (opening it for writing would block).
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let out = berth(dir.path(), &["plan", "spec", "-o", "pipe"]);
    refused(&out, "`pipe` is a named pipe (FIFO), not a regular file");
    assert!(
        fs::symlink_metadata(&fifo)
            .expect("stat")
            .file_type()
            .is_fifo()
    );
    let out = berth(dir.path(), &["plan", "spec", "-o", "spec"]);
    refused(&out, "`spec` is a directory, not a file");
}

#[test]
fn plan_out_never_writes_over_a_source_of_the_spec_by_any_name() {
    let dir = with_example("quickstart");
    let source = dir.path().join("spec/quickstart.berth");
    let original = fs::read(&source).expect("read");
    fs::hard_link(&source, dir.path().join("hard.json")).expect("hard link");
    symlink("spec/quickstart.berth", dir.path().join("soft.json")).expect("symlink");
    for name in [
        "spec/quickstart.berth",
        "./spec/../spec/quickstart.berth",
        "hard.json",
        "soft.json",
    ] {
        let out = berth(dir.path(), &["plan", "spec", "-o", name]);
        refused(&out, "is a source file of the spec");
        assert_eq!(fs::read(&source).expect("read"), original, "{name}");
    }
    assert!(
        fs::symlink_metadata(dir.path().join("soft.json"))
            .expect("stat")
            .file_type()
            .is_symlink()
    );
}

#[test]
fn plan_out_follows_symlinks_and_refuses_dangling_ones_and_read_only_files() {
    let dir = with_example("quickstart");
    fs::create_dir(dir.path().join("plans")).expect("dir");
    symlink("plans/real.json", dir.path().join("plan.json")).expect("symlink");
    fs::write(dir.path().join("plans/real.json"), "old").expect("write");
    let out = berth(dir.path(), &["plan", "spec", "-o", "plan.json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let link = fs::symlink_metadata(dir.path().join("plan.json")).expect("stat");
    assert!(link.file_type().is_symlink(), "the link is kept");
    let saved = fs::read_to_string(dir.path().join("plans/real.json")).expect("read");
    assert!(saved.contains("\"plan_id\""), "{saved}");

    symlink("gone/nowhere.json", dir.path().join("dangling.json")).expect("symlink");
    let out = berth(dir.path(), &["plan", "spec", "-o", "dangling.json"]);
    refused(
        &out,
        "`dangling.json` is a symbolic link to `gone/nowhere.json`, which does not exist",
    );
    assert!(!dir.path().join("gone").exists());

    let locked = dir.path().join("locked.json");
    fs::write(&locked, "keep me").expect("write");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o444)).expect("chmod");
    let out = berth(dir.path(), &["plan", "spec", "-o", "locked.json"]);
    refused(&out, "`locked.json` is read-only");
    assert_eq!(fs::read_to_string(&locked).expect("read"), "keep me");

    let out = berth(dir.path(), &["plan", "spec", "-o", "no/such/dir/plan.json"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the directory `no/such/dir` does not exist"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn plan_out_keeps_an_existing_plans_mode_and_owner() {
    let dir = with_example("quickstart");
    let plan = dir.path().join("plan.json");
    fs::write(&plan, "old").expect("write");
    fs::set_permissions(&plan, fs::Permissions::from_mode(0o640)).expect("chmod");
    let root = is_root();
    if root {
        std::os::unix::fs::chown(&plan, Some(4242), Some(4343)).expect("chown");
    }
    let out = berth(dir.path(), &["plan", "spec", "-o", "plan.json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let meta = fs::metadata(&plan).expect("stat");
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    if root {
        assert_eq!((meta.uid(), meta.gid()), (4242, 4343));
    }
}

#[test]
fn fmt_keeps_hard_links_owner_and_mode_and_refuses_read_only_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    fs::create_dir(dir.path().join("src")).expect("dir");
    let messy = dir.path().join("src/a.berth");
    fs::write(&messy, "const   x = 1\n").expect("write");
    fs::set_permissions(&messy, fs::Permissions::from_mode(0o640)).expect("chmod");
    let other = dir.path().join("other-name");
    fs::hard_link(&messy, &other).expect("hard link");
    let root = is_root();
    if root {
        std::os::unix::fs::chown(&messy, Some(4242), Some(4343)).expect("chown");
    }
    let out = berth(dir.path(), &["fmt", "src"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(fs::read_to_string(&messy).expect("read"), "const x = 1\n");
    let (a, b) = (
        fs::metadata(&messy).expect("stat"),
        fs::metadata(&other).expect("stat"),
    );
    assert_eq!(a.ino(), b.ino(), "the two names are still one file");
    assert_eq!(a.nlink(), 2);
    assert_eq!(a.permissions().mode() & 0o7777, 0o640);
    if root {
        assert_eq!((a.uid(), a.gid()), (4242, 4343));
    }

    // One link: replaced atomically, and the owner is still kept.
    fs::remove_file(&other).expect("unlink");
    fs::write(&messy, "const   y = 2\n").expect("write");
    let out = berth(dir.path(), &["fmt", "src"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let a = fs::metadata(&messy).expect("stat");
    assert_eq!(fs::read_to_string(&messy).expect("read"), "const y = 2\n");
    assert_eq!(a.permissions().mode() & 0o7777, 0o640);
    if root {
        assert_eq!((a.uid(), a.gid()), (4242, 4343));
    }

    let locked = dir.path().join("src/b.berth");
    fs::write(&locked, "const   z = 3\n").expect("write");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o444)).expect("chmod");
    let out = berth(dir.path(), &["fmt", "src"]);
    refused(&out, "`src/b.berth` is read-only");
    assert_eq!(
        fs::read_to_string(&locked).expect("read"),
        "const   z = 3\n"
    );
}

#[test]
fn keys_are_never_orphaned_and_prefixes_are_literal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = berth(dir.path(), &["keys", "generate", "cp.2025"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let secret = fs::metadata(dir.path().join("cp.2025.key")).expect("cp.2025.key");
    assert_eq!(secret.permissions().mode() & 0o777, 0o600);
    assert!(dir.path().join("cp.2025.pub").is_file());
    assert!(!dir.path().join("cp.key").exists());

    // The public half exists: nothing is written, not even the secret.
    fs::write(dir.path().join("edge.pub"), "someone else's").expect("write");
    let out = berth(dir.path(), &["keys", "generate", "edge"]);
    refused(&out, "`edge.pub` already exists");
    assert!(!dir.path().join("edge.key").exists(), "no orphan secret");
    assert_eq!(
        fs::read_to_string(dir.path().join("edge.pub")).expect("read"),
        "someone else's"
    );
    // A dangling symlink is a name that exists too.
    symlink("/nowhere", dir.path().join("lab.key")).expect("symlink");
    let out = berth(dir.path(), &["keys", "generate", "lab"]);
    refused(&out, "`lab.key` already exists");
    assert!(!dir.path().join("lab.pub").exists());
}

#[test]
fn approve_and_render_refuse_what_is_not_theirs_to_write() {
    let dir = with_example("training-and-inference");
    let out = berth(dir.path(), &["plan", "spec", "--at", AT, "-o", "plan.json"]);
    assert!(code(&out) <= 1, "{}", stderr(&out));
    let key = approver_key();
    let approve = ["approve", "plan.json", "--key", &key, "--spec", "spec"];
    mkfifo(&dir.path().join("plan.approval.json"));
    let out = berth(dir.path(), &approve);
    refused(&out, "`plan.approval.json` is a named pipe (FIFO)");
    fs::remove_file(dir.path().join("plan.approval.json")).expect("rm");
    let out = berth(dir.path(), &approve);
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    let out = berth(dir.path(), &["render", "spec", "-o", "out"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let yaml = first_yaml(&dir.path().join("out"));
    let source = dir.path().join("spec/workloads.berth");
    let original = fs::read(&source).expect("read");
    fs::remove_file(&yaml).expect("rm");
    fs::hard_link(&source, &yaml).expect("hard link");
    let out = berth(dir.path(), &["render", "spec", "-o", "out"]);
    refused(&out, "is a source file of the spec");
    assert_eq!(fs::read(&source).expect("read"), original);
    // The saved plan is an input of `render PLAN --spec DIR` too.
    fs::remove_file(&yaml).expect("rm");
    fs::hard_link(dir.path().join("plan.json"), &yaml).expect("hard link");
    let out = berth(
        dir.path(),
        &["render", "plan.json", "--spec", "spec", "-o", "out"],
    );
    refused(&out, "is a file this command reads (`plan.json`)");
    fs::remove_file(&yaml).expect("rm");
    mkfifo(&yaml);
    let out = berth(dir.path(), &["render", "spec", "-o", "out"]);
    refused(&out, "is a named pipe (FIFO), not a regular file");
}

fn first_yaml(dir: &Path) -> PathBuf {
    let mut found: Vec<PathBuf> = walk(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    found.sort();
    found.into_iter().next().expect("a rendered YAML file")
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut all = Vec::new();
    for entry in fs::read_dir(dir).expect("list") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            all.extend(walk(&path));
        } else {
            all.push(path);
        }
    }
    all
}

#[test]
fn dangling_symlinks_are_named_as_such_when_reading() {
    let dir = tempfile::tempdir().expect("temp dir");
    fs::create_dir(dir.path().join("spec")).expect("dir");
    fs::write(dir.path().join("spec/a.berth"), "const x = 1\n").expect("write");
    symlink("moved.berth", dir.path().join("spec/b.berth")).expect("symlink");
    for path in ["spec", "spec/b.berth"] {
        let out = berth(dir.path(), &["check", path]);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{err}");
        assert!(
            err.contains("b.berth` is a symbolic link to `moved.berth`, which does not exist"),
            "{err}"
        );
        assert!(!err.contains("cannot search directory"), "{err}");
    }
}
