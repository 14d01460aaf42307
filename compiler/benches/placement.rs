//! Placement at scale: a generated estate (default 10,000 workloads × 2,000 targets, i.e.
//! 20 million pairs) planned end to end, with the time of each stage, the eligibility stage
//! on one and two threads, and the peak resident memory.
//!
//! `cargo bench -p berth-compiler --bench placement [-- WORKLOADS TARGETS [RUNS]]`

use berth_compiler::placement::{self, eligibility::EligibilityMatrix, index::EstateIndex};
use berth_compiler::plan::WorkloadStatus;
use berth_compiler::source::SourceMap;
use berth_compiler::testing::ir::{EstateShape, estate};
use std::time::{Duration, Instant};
use support::{best, cpu_time, peak_rss};

mod support;

fn main() {
    let args = support::numeric_args();
    let workloads = args.first().copied().unwrap_or(10_000);
    let targets = args.get(1).copied().unwrap_or(2_000);
    let runs = args.get(2).copied().unwrap_or(3).max(1);

    let t0 = Instant::now();
    let ir = estate(1, EstateShape { workloads, targets });
    println!(
        "estate: {workloads} workloads × {targets} targets = {} pairs (generated in {:.2?})",
        workloads * targets,
        t0.elapsed()
    );
    let at: jiff::Timestamp = "2025-06-04T10:00:00Z".parse().expect("instant");
    let sources = SourceMap::new();

    let index = EstateIndex::build(&ir);
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("thread pool");
        let c = cpu_time();
        let times: Vec<Duration> = (0..runs)
            .map(|_| {
                pool.install(|| {
                    let t = Instant::now();
                    let m = EligibilityMatrix::compute(&ir, &index);
                    let d = t.elapsed();
                    std::hint::black_box(m.ok_count());
                    d
                })
            })
            .collect();
        println!(
            "eligibility, {threads} thread(s): {:.3?} wall (best of {runs}), {:.2?} CPU per run",
            best(&times),
            (cpu_time() - c) / runs as u32
        );
    }

    let mut times = Vec::new();
    let mut cpu = Vec::new();
    let mut plan = None;
    for _ in 0..runs {
        let (t, c) = (Instant::now(), cpu_time());
        let p = placement::plan(&ir, &sources, at, "sha256:bench", "bench");
        times.push(t.elapsed());
        cpu.push(cpu_time() - c);
        plan = Some(p);
    }
    let plan = plan.expect("at least one run");
    println!(
        "plan end to end ({} rayon threads): best {:.3?} wall; runs {:.3?} wall, {:.2?} CPU",
        rayon::current_num_threads(),
        best(&times),
        times,
        cpu
    );

    // Stage by stage, once, on the global pool.
    let t = Instant::now();
    let index = EstateIndex::build(&ir);
    let t_index = t.elapsed();
    let t = Instant::now();
    let mut matrix = EligibilityMatrix::compute(&ir, &index);
    let t_elig = t.elapsed();
    let eligible = matrix.ok_count();
    let t = Instant::now();
    let policy = placement::policy::PolicyContext::new(&ir, at);
    policy.apply(&ir, &index, &mut matrix);
    let t_policy = t.elapsed();
    let permitted = matrix.ok_count();
    let t = Instant::now();
    let assignment = placement::assign::assign(&ir, &index, &matrix, &policy);
    let t_assign = t.elapsed();
    let options: usize = assignment.options.iter().map(|o| o.len()).sum();
    let solved = placement::Solved {
        ir: &ir,
        sources: &sources,
        index,
        matrix,
        policy,
        assignment,
    };
    let t = Instant::now();
    let assembled = solved.plan(at, "sha256:bench", "bench");
    let t_assemble = t.elapsed();
    let t = Instant::now();
    std::hint::black_box(berth_compiler::plan::plan_id(&assembled));
    let t_id = t.elapsed();
    println!("assembly {t_assemble:.3?} (of which plan id {t_id:.3?})");
    println!(
        "stages: index {t_index:.3?}, eligibility {t_elig:.3?}, policy {t_policy:.3?}, assignment {t_assign:.3?}"
    );
    println!("pairs: {eligible} eligible, {permitted} permitted, {options} options");

    let placed = plan
        .workloads
        .iter()
        .filter(|w| w.status == WorkloadStatus::Placed)
        .count();
    let partial = plan
        .workloads
        .iter()
        .filter(|w| w.status == WorkloadStatus::Partial)
        .count();
    let replicas: u32 = plan
        .workloads
        .iter()
        .flat_map(|w| &w.placements)
        .map(|p| p.replicas)
        .sum();
    let wanted: u32 = plan.workloads.iter().map(|w| w.replicas).sum();
    let rejections: usize = plan.workloads.iter().map(|w| w.rejected.len()).sum();
    let t = Instant::now();
    let json = serde_json::to_vec(&plan).expect("json");
    println!(
        "plan: {placed} placed, {partial} partial, {} unplaced; {replicas} of {wanted} replicas; {rejections} rejections listed; JSON {} MB (serialised in {:.3?})",
        plan.workloads.len() - placed - partial,
        json.len() / 1_000_000,
        t.elapsed()
    );
    // The verifier, as `berth plan` runs it before writing the plan.
    let (t, c) = (Instant::now(), cpu_time());
    let verdict = berth_compiler::verify::verify(&ir, &plan, at);
    println!(
        "verify: {:.3?} wall, {:.2?} CPU, {}",
        t.elapsed(),
        cpu_time() - c,
        match &verdict {
            Ok(_) => "verified".to_owned(),
            Err(v) => format!("{} violations (first: {})", v.len(), v[0]),
        }
    );
    println!("peak memory (VmHWM): {}", peak_rss());
}
