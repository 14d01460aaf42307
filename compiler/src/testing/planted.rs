//! Planted estates: instances known to be placeable in full, for tests and benchmarks of the
//! assignment ("never leave a replica out when every replica can be placed").
//!
//! [`plant`] takes an estate, places replicas at random — a random order of replicas, each on
//! a random option that still fits, under every constraint the assignment honours (GPU units
//! per pool, CPU and memory per target, caps, spread, isolation) — then cuts the estate down
//! around that placement: every workload asks for the replicas that were planted, every pool
//! keeps the devices the planted replicas use, every target the CPU and memory they use
//! rounded up to a machine size (8 cores, 32 GiB).
//! The planted placement proves the instance placeable in full with no room to spare, without
//! an exact solver, and a random placement looks nothing like the one the heuristic builds
//! (priority order, cheapest first), so the heuristic has to find its own way to a full
//! packing.
//!
//! Not part of the pipeline: nothing in `berth plan` calls it.

use crate::ir::Ir;
use crate::placement::assign::{self, NO_POOL, Opt};
use crate::placement::eligibility::{EligibilityMatrix, gpu_units};
use crate::placement::index::EstateIndex;
use crate::placement::policy::PolicyContext;
use crate::placement::tally::{add_count, count};
use crate::splitmix::SplitMix64;
use jiff::Timestamp;

/// Random options tried per replica before it is left out of the planted placement.
const TRIES: usize = 8;

/// What a target's CPU (millicores) and memory (bytes) are rounded up to around the planted
/// use: GPUs are the scarce resource, as on real estates.
const CPU_STEP: u64 = 8_000;
const MEMORY_STEP: u64 = 32 << 30;

/// What was planted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planted {
    /// Replicas the cut estate asks for, all placed by the planted placement.
    pub replicas: u64,
    /// Per workload, `(target, pool index in the target or u32::MAX, replicas)`.
    pub placement: Vec<Vec<(u32, u32, u32)>>,
}

/// Plants a random full placement in `ir` (planned at `at`) and cuts the estate to it.
pub fn plant(ir: &mut Ir, at: Timestamp, seed: u64) -> Planted {
    let index = EstateIndex::build(ir);
    let mut matrix = EligibilityMatrix::compute(ir, &index);
    let policy = PolicyContext::new(ir, at);
    policy.apply(ir, &index, &mut matrix);
    let options = assign::build_options(ir, &index, &matrix, &policy);
    let mut rng = SplitMix64(seed ^ 0x9_1A27_ED00);

    let mut items: Vec<u32> = Vec::new();
    for (w, opts) in options.iter().enumerate() {
        if !opts.is_empty() {
            items.extend(std::iter::repeat_n(
                w as u32,
                ir.workloads[w].replicas as usize,
            ));
        }
    }
    // Fisher–Yates with the deterministic generator.
    for i in (1..items.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }

    let mut state = State {
        pool_used: vec![0; index.pools.len()],
        cpu_used: vec![0; ir.targets.len()],
        memory_used: vec![0; ir.targets.len()],
        cap_used: vec![0; policy.caps.len()],
        on_target: vec![Vec::new(); ir.workloads.len()],
        on_region: vec![Vec::new(); ir.workloads.len()],
        pools_of: vec![Vec::new(); ir.workloads.len()],
        placed: vec![Vec::new(); ir.workloads.len()],
    };
    let partners = assign::isolation_partners(ir);
    for &w in &items {
        let w = w as usize;
        let opts = &options[w];
        for _ in 0..TRIES {
            let o = opts[(rng.next() % opts.len() as u64) as usize];
            if state.fits(ir, &index, &policy, &partners, w, &o) {
                state.place(ir, &index, &policy, w, &o);
                break;
            }
        }
    }
    cut(ir, &index, &state);
    let mut placement: Vec<Vec<(u32, u32, u32)>> = state.placed;
    for p in &mut placement {
        p.sort_unstable();
    }
    Planted {
        replicas: placement.iter().flatten().map(|p| u64::from(p.2)).sum(),
        placement,
    }
}

/// The planted placement so far and what it uses.
struct State {
    pool_used: Vec<u64>,
    cpu_used: Vec<u64>,
    memory_used: Vec<u64>,
    cap_used: Vec<u64>,
    /// Per workload, `(target, replicas)`.
    on_target: Vec<Vec<(u32, u32)>>,
    /// Per workload, `(region, replicas)`.
    on_region: Vec<Vec<(u32, u32)>>,
    /// Per workload, the flat pools it uses.
    pools_of: Vec<Vec<u32>>,
    /// Per workload, `(target, pool, replicas)`.
    placed: Vec<Vec<(u32, u32, u32)>>,
}

impl State {
    fn fits(
        &self,
        ir: &Ir,
        index: &EstateIndex,
        policy: &PolicyContext,
        partners: &[Vec<u32>],
        w: usize,
        o: &Opt,
    ) -> bool {
        let workload = &ir.workloads[w];
        let units = u64::from(gpu_units(workload));
        let t = o.target as usize;
        let target = &ir.targets[t];
        let region = index.region[t];
        let placement = &workload.placement;
        if placement
            .per_target
            .is_some_and(|n| count(&self.on_target[w], o.target) >= n)
            || placement
                .per_region
                .is_some_and(|n| count(&self.on_region[w], region) >= n)
        {
            return false;
        }
        if self.cpu_used[t] + workload.resources.cpu_millis > target.cpu_millis
            || self.memory_used[t] + workload.resources.memory > target.memory
        {
            return false;
        }
        if units > 0
            && policy.workload_caps[w]
                .iter()
                .any(|&c| self.cap_used[c as usize] + units > policy.caps[c as usize].max)
        {
            return false;
        }
        if o.flat_pool != NO_POOL {
            let p = o.flat_pool as usize;
            if self.pool_used[p] + units > u64::from(index.pools[p].units) {
                return false;
            }
            if partners[w]
                .iter()
                .any(|&v| self.pools_of[v as usize].contains(&o.flat_pool))
            {
                return false;
            }
        }
        true
    }

    fn place(&mut self, ir: &Ir, index: &EstateIndex, policy: &PolicyContext, w: usize, o: &Opt) {
        let workload = &ir.workloads[w];
        let units = u64::from(gpu_units(workload));
        let t = o.target as usize;
        self.cpu_used[t] += workload.resources.cpu_millis;
        self.memory_used[t] += workload.resources.memory;
        if units > 0 {
            for &c in &policy.workload_caps[w] {
                self.cap_used[c as usize] += units;
            }
        }
        if o.flat_pool != NO_POOL {
            self.pool_used[o.flat_pool as usize] += units;
            if !self.pools_of[w].contains(&o.flat_pool) {
                self.pools_of[w].push(o.flat_pool);
            }
        }
        add_count(&mut self.on_target[w], o.target, 1);
        add_count(&mut self.on_region[w], index.region[t], 1);
        match self.placed[w]
            .iter_mut()
            .find(|e| e.0 == o.target && e.1 == o.pool)
        {
            Some(e) => e.2 += 1,
            None => self.placed[w].push((o.target, o.pool, 1)),
        }
    }
}

/// Cuts the estate to the planted placement: replicas, pool devices, CPU and memory.
fn cut(ir: &mut Ir, index: &EstateIndex, state: &State) {
    for (w, workload) in ir.workloads.iter_mut().enumerate() {
        workload.replicas = state.placed[w].iter().map(|e| e.2).sum();
    }
    for (t, target) in ir.targets.iter_mut().enumerate() {
        // Machines come in sizes: CPU to whole groups of cores, memory to whole blocks.
        target.cpu_millis = state.cpu_used[t].next_multiple_of(CPU_STEP);
        target.memory = state.memory_used[t].next_multiple_of(MEMORY_STEP);
        for (p, pool) in target.pools.iter_mut().enumerate() {
            let flat = index.flat_pool(t, p as u32);
            let units = u64::from(index.pools[flat].units);
            let used = state.pool_used[flat];
            // Units per device (MIG instances for a partitioned pool); whole devices are kept.
            let per_device = (units / u64::from(pool.count.max(1))).max(1);
            pool.count = u32::try_from(used.div_ceil(per_device)).unwrap_or(u32::MAX);
        }
    }
}
