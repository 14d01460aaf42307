//! `berth plan` end to end through the command line, as a user runs it (issue 22): parse,
//! check, plan, verify and write the JSON plan of a generated spec, timed from outside the
//! process — wall time, CPU time (user + system, all threads) and peak resident memory of the
//! `berth` process (through GNU time, `/usr/bin/time`), and the size of the plan it wrote.
//!
//! ```sh
//! cargo build --release -p berth-runtime --bin berth
//! cargo bench -p berth-runtime --bench plan_cli -- dense 10000 2000 3
//! cargo bench -p berth-runtime --bench plan_cli -- dense 100000 20000 1
//! cargo bench -p berth-runtime --bench plan_cli -- mixed 100000 0 3   # front-end spec, LINES
//! cargo bench -p berth-runtime --bench plan_cli -- dense 10000 2000 --write DIR  # spec only
//! ```
//!
//! Shapes: `dense W T` — `testing::dense` (similar GPU clusters, nearly every workload fits
//! nearly every target); `mixed LINES` — the front-end benchmark's generated spec
//! (`testing::specs`, every kind of rule, sparse). The binary is `BERTH` if set, else
//! `target/release/berth`. The spec is written to a temporary directory first (not timed).

use berth_compiler::testing::{dense, specs};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    // `--write DIR`: write the spec to DIR and stop (for profiling `berth plan DIR` by hand).
    let write_to = all
        .iter()
        .position(|a| a == "--write")
        .and_then(|i| all.get(i + 1))
        .map(PathBuf::from);
    let args: Vec<String> = all
        .iter()
        .filter(|a| !a.starts_with("--") && Some(PathBuf::from(a)) != write_to)
        .cloned()
        .collect();
    let shape = args.first().map_or("dense", String::as_str);
    let n = |i: usize, default: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let files = match shape {
        "dense" => dense::dense_spec(dense::DenseShape::new(n(1, 10_000), n(2, 2_000))),
        "mixed" => specs::spec_files(n(1, 100_000), 100)
            .into_iter()
            .enumerate()
            .map(|(i, t)| (format!("part_{i:04}.berth"), t))
            .collect(),
        other => {
            eprintln!("unknown shape `{other}` (dense W T [RUNS] | mixed LINES _ [RUNS])");
            std::process::exit(2);
        }
    };
    let runs = n(3, 3).max(1);
    if let Some(dir) = write_to {
        std::fs::create_dir_all(&dir).expect("spec directory");
        for (name, text) in &files {
            std::fs::write(dir.join(name), text).expect("spec file");
        }
        println!("{} files written to {}", files.len(), dir.display());
        return;
    }
    let berth = std::env::var_os("BERTH").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/berth"),
        PathBuf::from,
    );
    if !berth.exists() {
        eprintln!(
            "no berth binary at {} (cargo build --release -p berth-runtime --bin berth, or set BERTH)",
            berth.display()
        );
        std::process::exit(2);
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let spec = dir.path().join("spec");
    std::fs::create_dir(&spec).expect("spec directory");
    let mut bytes = 0;
    for (name, text) in &files {
        bytes += text.len();
        std::fs::write(spec.join(name), text).expect("spec file");
    }
    println!(
        "{shape} {:?}: {} files, {:.1} MB of spec",
        &args[1..args.len().min(3)],
        files.len(),
        bytes as f64 / 1e6
    );
    let out = dir.path().join("plan.json");
    let mut best: Option<Duration> = None;
    for run in 0..runs {
        let stdout = std::fs::File::create(&out).expect("plan file");
        let start = Instant::now();
        let usage_file = dir.path().join("usage");
        let child = Command::new("/usr/bin/time")
            .args(["-f", "%U %S %M", "-o"])
            .arg(&usage_file)
            .arg(&berth)
            .args(["plan", "--at", dense::AT, "--output", "json"])
            .arg(&spec)
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("berth runs");
        let (status, usage) = wait4(child, &usage_file);
        let wall = start.elapsed();
        let size = std::fs::metadata(&out).map_or(0, |m| m.len());
        let cpu = usage.user + usage.system;
        println!(
            "run {}: exit {status}, {:.2?} wall, {:.2?} CPU ({:.2?} user + {:.2?} system), peak {} MB, plan JSON {:.1} MB",
            run + 1,
            wall,
            cpu,
            usage.user,
            usage.system,
            usage.max_rss_kib / 1024,
            size as f64 / 1e6
        );
        best = Some(best.map_or(wall, |b| b.min(wall)));
    }
    if let Ok(plan) = std::fs::read(&out)
        && let Ok(plan) = serde_json::from_slice::<serde_json::Value>(&plan)
    {
        let workloads = plan["workloads"].as_array().map_or(&[][..], Vec::as_slice);
        let wanted: u64 = workloads
            .iter()
            .filter_map(|w| w["replicas"].as_u64())
            .sum();
        let placed: u64 = workloads
            .iter()
            .flat_map(|w| w["placements"].as_array().into_iter().flatten())
            .filter_map(|p| p["replicas"].as_u64())
            .sum();
        let rejections: usize = workloads
            .iter()
            .filter_map(|w| w["rejected"].as_array().map(Vec::len))
            .sum();
        println!(
            "plan: {placed} of {wanted} replicas placed, {rejections} rejections listed; best wall {:.2?}",
            best.unwrap_or_default()
        );
    }
}

struct Usage {
    user: Duration,
    system: Duration,
    max_rss_kib: u64,
}

/// Waits for `child`, run under GNU time (`/usr/bin/time -f "%U %S %M" -o FILE`), and returns
/// its exit code and resource usage.
fn wait4(mut child: std::process::Child, usage_file: &std::path::Path) -> (i32, Usage) {
    let mut stderr = child.stderr.take().expect("stderr piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let status = child.wait().expect("wait for berth");
    let err = reader.join().unwrap_or_default();
    let code = status.code().unwrap_or(-1);
    if code != 0 {
        eprint!("{err}");
    }
    let text = std::fs::read_to_string(usage_file).unwrap_or_default();
    let fields: Vec<&str> = text
        .lines()
        .last()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let secs = |i: usize| {
        Duration::from_secs_f64(fields.get(i).and_then(|f| f.parse().ok()).unwrap_or(0.0))
    };
    (
        code,
        Usage {
            user: secs(0),
            system: secs(1),
            max_rss_kib: fields.get(2).and_then(|f| f.parse().ok()).unwrap_or(0),
        },
    )
}
