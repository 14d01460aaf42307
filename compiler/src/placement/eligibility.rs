//! Eligibility: which targets can technically run each workload.
//!
//! Every (workload, target) pair is checked, rows in parallel with rayon (each row's targets
//! in parallel chunks too), writing one [`Cell`] per pair into a dense matrix in place:
//! the result does not depend on scheduling. Checks run in a fixed order and the first one
//! that fails is recorded (see `docs/placement.md`):
//!
//! 1. candidate list (`placement W { targets = [...] }`)
//! 2. environment class approved (`environments`)
//! 3. connectivity tolerated (`connectivity`: the worst link the workload tolerates)
//! 4. per pool: accelerator accepted, MIG profile, per-GPU memory, a model variant that fits
//!    (the first in written order); the target fails with the reason of the pool that got
//!    furthest
//! 5. data sets offered and within `max_latency`, in requirement order
//! 6. required services at their minimum maturity, in requirement order
//! 7. CPU, then memory, for one replica
//! 8. one fitting pool with enough GPUs (or MIG slices) for one replica
//!
//! Pool fits depend only on the workload and the pool's kind (accelerator and partition), so
//! they are computed once per workload and kind ([`PoolFit`]); the pair loop only looks them
//! up.

// INVARIANT: every index is a dense id of the IR being placed (workload < `ir.workloads.len()`,
// target < `ir.targets.len()`, a pool < its target's pools) or a position in a table the solver
// sized from those counts when it built it (`EstateIndex`, `EligibilityMatrix`, `Assignment`'s
// options and slots, the ledgers); nothing from user text indexes here. Indexing is the hot
// path; the property tests and planted estates run it over generated estates.
#![allow(clippy::indexing_slicing)]

use super::index::{EstateIndex, Partition, PoolKind, UNKNOWN_NAME};
use super::verdict::{Cell, NO_DETAIL, Reason, Verdict};
use crate::ir::{EnvClass, Ir, Workload};
use rayon::prelude::*;
use std::hash::Hash;

/// Variant index meaning "the workload has no model".
pub const NO_VARIANT: u16 = u16::MAX;

/// How a workload fits pools of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolFit {
    /// Fits, with this variant of its model (or [`NO_VARIANT`]).
    Fits { variant: u16 },
    /// The first requirement such a pool fails: `Accelerator`, `Mig`, `GpuMemory` or
    /// `NoVariant`.
    Fails(Reason),
}

/// One cell per (workload, target) pair, stored once per distinct row, plus each workload's
/// fit per pool kind.
///
/// Eligibility writes it; the policy stage then replaces the cell of eligible pairs it
/// excludes, so a cell always holds the first stage's reason for rejecting the pair. Cells
/// keep the reason only (one byte); [`Self::explain`] recomputes an eligibility verdict with
/// its detail for the rejections a plan lists.
///
/// Rows are stored per class (issue 22): `rows` holds each distinct row once and `row_of[w]`
/// says which is workload `w`'s. Two workloads have the same row id exactly when their rows
/// are equal cell for cell ([`Self::intern`] keeps it so), so a row id can stand for the row
/// in a key. 100,000 workloads of a few hundred kinds over 20,000 targets are a few hundred
/// rows, not 2 GB.
#[derive(Clone, Debug, Default)]
pub struct EligibilityMatrix {
    n_targets: usize,
    /// The distinct rows, `n_targets` cells each.
    rows: Vec<Cell>,
    /// Per workload, the index of its row in `rows`.
    row_of: Vec<u32>,
    fits: FitTable,
}

/// How each workload fits each pool kind.
#[derive(Clone, Debug, Default)]
pub struct FitTable {
    n_kinds: usize,
    fits: Vec<PoolFit>,
}

impl FitTable {
    /// How workload `w` fits pools of kind `k`.
    pub fn fit(&self, w: usize, kind: u32) -> PoolFit {
        self.fits
            .get(w * self.n_kinds + kind as usize)
            .copied()
            .unwrap_or(PoolFit::Fails(Reason::Accelerator))
    }

    pub(crate) fn row(&self, w: usize) -> &[PoolFit] {
        self.fits
            .get(w * self.n_kinds..(w + 1) * self.n_kinds)
            .unwrap_or(&[])
    }
}

/// Pairs per parallel task, at least: enough to amortise a task's cost.
const PAIRS_PER_TASK: usize = 16 * 1024;

impl EligibilityMatrix {
    /// Checks every pair.
    pub fn compute(ir: &Ir, index: &EstateIndex) -> Self {
        let n_targets = ir.targets.len();
        let n_kinds = index.kinds.len();
        let n_workloads = ir.workloads.len();
        let mut fits = vec![PoolFit::Fails(Reason::Accelerator); n_workloads * n_kinds];
        if n_kinds > 0 {
            fits.par_chunks_mut(n_kinds)
                .zip(ir.workloads.par_iter())
                .with_min_len(64)
                .for_each(|(row, w)| {
                    for (fit, kind) in row.iter_mut().zip(&index.kinds) {
                        *fit = pool_fit(ir, index, w, kind);
                    }
                });
        }
        let fits = FitTable { n_kinds, fits };
        if n_targets == 0 {
            return EligibilityMatrix {
                n_targets,
                rows: Vec::new(),
                row_of: vec![0; n_workloads],
                fits,
            };
        }
        // Workloads whose requirements are the same have the same row (issue 22: classes, not
        // pairs): the first of each computes it, the others point at it.
        let keys: Vec<RowKey<'_>> = (0..n_workloads)
            .into_par_iter()
            .with_min_len(256)
            .map(|w| RowKey::of(ir, index, w, fits.row(w)))
            .collect();
        let (row_of, sources) = classes(&super::classes::first_of_class(&keys));
        drop(keys);
        let mut rows = vec![Cell::OK; sources.len() * n_targets];
        // Rows in parallel; a long row (many targets) is itself split into chunks.
        let chunk = n_targets.min(PAIRS_PER_TASK);
        rows.par_chunks_mut(n_targets)
            .zip(sources.par_iter())
            .for_each(|(row, &w)| {
                let ctx = RowContext::new(ir, index, w, fits.row(w));
                row.par_chunks_mut(chunk)
                    .enumerate()
                    .for_each(|(c, cells)| {
                        let first = c * chunk;
                        for (i, cell) in cells.iter_mut().enumerate() {
                            *cell = Cell::from(ctx.check(first + i));
                        }
                    });
            });
        let mut matrix = EligibilityMatrix {
            n_targets,
            rows,
            row_of,
            fits,
        };
        matrix.intern();
        matrix
    }

    /// Refines rows in place (the policy stage): `refine(w, row)` rewrites workload `w`'s row.
    /// `keys[w]` must hold everything `refine` reads about `w` besides its row: workloads with
    /// the same row and equal keys are refined once, for the first of them, and share the
    /// result; a class whose workloads' keys differ is split (each part gets its own copy).
    pub fn refine<K: Hash + Eq + Sync>(
        &mut self,
        keys: &[K],
        refine: impl Fn(usize, &mut [Cell]) + Sync + Send,
    ) {
        let n_targets = self.n_targets;
        if n_targets == 0 {
            return;
        }
        let full: Vec<(u32, &K)> = self.row_of.iter().copied().zip(keys).collect();
        let (row_of, sources) = classes(&super::classes::first_of_class(&full));
        drop(full);
        let mut rows = vec![Cell::OK; sources.len() * n_targets];
        rows.par_chunks_mut(n_targets)
            .zip(sources.par_iter())
            .for_each(|(row, &w)| {
                row.copy_from_slice(self.row(w));
                refine(w, row);
            });
        self.rows = rows;
        self.row_of = row_of;
        self.intern();
    }

    /// Merges equal rows, so that equal row ids mean equal rows (ids in first-use order).
    fn intern(&mut self) {
        let n_targets = self.n_targets;
        if n_targets == 0 {
            return;
        }
        let distinct: Vec<&[Cell]> = self.rows.chunks(n_targets).collect();
        let first = super::classes::first_of_class(&distinct);
        drop(distinct);
        if first.iter().enumerate().all(|(i, &f)| i == f) {
            return;
        }
        let (renumber, keep) = classes(&first);
        let mut rows = Vec::with_capacity(keep.len() * n_targets);
        for &r in &keep {
            rows.extend_from_slice(&self.rows[r * n_targets..(r + 1) * n_targets]);
        }
        for r in &mut self.row_of {
            *r = renumber[*r as usize];
        }
        self.rows = rows;
    }

    /// The first failing eligibility requirement of pair (`w`, `t`), with its detail.
    pub fn explain(&self, ir: &Ir, index: &EstateIndex, w: usize, t: usize) -> Verdict {
        if w >= ir.workloads.len() || t >= ir.targets.len() {
            return Verdict::OK;
        }
        RowContext::new(ir, index, w, self.fits.row(w)).check(t)
    }

    /// The first failing eligibility requirement of pair (`w`, `t`) as if `w`'s placement
    /// listed every target: what the target lacks technically, candidate list aside.
    pub fn explain_beyond_candidates(
        &self,
        ir: &Ir,
        index: &EstateIndex,
        w: usize,
        t: usize,
    ) -> Verdict {
        if w >= ir.workloads.len() || t >= ir.targets.len() {
            return Verdict::OK;
        }
        let mut ctx = RowContext::new(ir, index, w, self.fits.row(w));
        ctx.candidates = None;
        ctx.check(t)
    }

    pub fn n_targets(&self) -> usize {
        self.n_targets
    }

    pub fn get(&self, w: usize, t: usize) -> Cell {
        if t >= self.n_targets {
            return Cell::default();
        }
        self.row(w).get(t).copied().unwrap_or_default()
    }

    pub fn row(&self, w: usize) -> &[Cell] {
        let Some(&r) = self.row_of.get(w) else {
            return &[];
        };
        let r = r as usize;
        self.rows
            .get(r * self.n_targets..(r + 1) * self.n_targets)
            .unwrap_or(&[])
    }

    /// Workload `w`'s row id: equal ids exactly when the rows are equal.
    pub fn row_id(&self, w: usize) -> u32 {
        self.row_of.get(w).copied().unwrap_or(u32::MAX)
    }

    /// How many distinct rows there are (row ids are below this).
    pub fn n_rows(&self) -> usize {
        self.rows.len().checked_div(self.n_targets).unwrap_or(0)
    }

    /// Row `r` by id.
    pub fn row_by_id(&self, r: u32) -> &[Cell] {
        let r = r as usize;
        self.rows
            .get(r * self.n_targets..(r + 1) * self.n_targets)
            .unwrap_or(&[])
    }

    /// How workload `w` fits pools of kind `k`.
    pub fn fit(&self, w: usize, kind: u32) -> PoolFit {
        self.fits.fit(w, kind)
    }

    pub fn fits(&self) -> &FitTable {
        &self.fits
    }

    /// Number of pairs still OK.
    pub fn ok_count(&self) -> usize {
        let per_row: Vec<usize> = self
            .rows
            .par_chunks(self.n_targets.max(1))
            .map(|row| row.iter().filter(|v| v.is_ok()).count())
            .collect();
        self.row_of.iter().map(|&r| per_row[r as usize]).sum()
    }
}

/// From each item's first item of its class (`classes::first_of_class`): each item's class
/// id (classes numbered by their first item, in order) and each class's first item.
fn classes(first: &[usize]) -> (Vec<u32>, Vec<usize>) {
    let mut id = vec![0u32; first.len()];
    let mut sources = Vec::new();
    for (i, &f) in first.iter().enumerate() {
        // INVARIANT: `f <= i`, so `id[f]` is set when `f < i`.
        id[i] = if f == i {
            sources.push(i);
            sources.len() as u32 - 1
        } else {
            id[f]
        };
    }
    (id, sources)
}

/// Everything [`RowContext::check`] reads about a workload: two workloads with equal keys
/// have equal rows. Compared in full (never by hash alone).
#[derive(PartialEq, Eq, Hash)]
struct RowKey<'a> {
    candidates: Option<&'a [crate::ir::TargetId]>,
    environments: &'a [EnvClass],
    connectivity: crate::ir::Connectivity,
    gpu: u32,
    fits: &'a [PoolFit],
    /// The model, for a workload without GPUs (its CPU variant).
    model: Option<crate::ir::ModelId>,
    /// Data set names (interned) with their latency bounds.
    data: Vec<(u32, Option<u64>)>,
    services: Vec<(crate::ir::ServiceId, crate::ir::Maturity)>,
    cpu_millis: u64,
    memory: u64,
}

impl<'a> RowKey<'a> {
    fn of(ir: &'a Ir, index: &'a EstateIndex, wi: usize, fits: &'a [PoolFit]) -> Self {
        let w = &ir.workloads[wi];
        let gpu = gpu_units(w);
        RowKey {
            candidates: w.placement.candidates.as_deref(),
            environments: &w.environments,
            connectivity: w.connectivity,
            gpu,
            fits,
            model: if gpu == 0 { w.model } else { None },
            data: index
                .workload_data(wi)
                .iter()
                .zip(&w.data)
                .map(|(&name, d)| (name, d.max_latency))
                .collect(),
            services: w.services.iter().map(|s| (s.service, s.min)).collect(),
            cpu_millis: w.resources.cpu_millis,
            memory: w.resources.memory,
        }
    }
}

/// What one row's checks need about its workload, computed once per row.
struct RowContext<'a> {
    index: &'a EstateIndex,
    w: &'a Workload,
    wi: usize,
    fits: &'a [PoolFit],
    /// Bit `t` set when target `t` is a candidate; `None`: every target is.
    candidates: Option<Vec<u64>>,
    /// Bit per approved environment class; 0: any.
    env_mask: u8,
    /// For a workload without GPUs that has a model: its CPU variant's artifact (`None`: the
    /// model has no such variant).
    cpu_artifact: Option<Option<&'a str>>,
}

impl<'a> RowContext<'a> {
    fn new(ir: &'a Ir, index: &'a EstateIndex, wi: usize, fits: &'a [PoolFit]) -> Self {
        let w = &ir.workloads[wi];
        let candidates = w.placement.candidates.as_ref().map(|c| {
            let mut bits = vec![0u64; ir.targets.len().div_ceil(64)];
            for t in c {
                if let Some(word) = bits.get_mut(t.index() / 64) {
                    *word |= 1 << (t.index() % 64);
                }
            }
            bits
        });
        let env_mask = w.environments.iter().fold(0u8, |m, e| m | env_bit(*e));
        let cpu_artifact = (gpu_units(w) == 0)
            .then_some(w.model)
            .flatten()
            .map(|model| {
                cpu_variant(ir, w).map(|v| {
                    ir.models
                        .get(model.index())
                        .and_then(|m| m.variants.get(usize::from(v)))
                        .map_or("", |v| v.artifact.as_str())
                })
            });
        RowContext {
            index,
            w,
            wi,
            fits,
            candidates,
            env_mask,
            cpu_artifact,
        }
    }

    /// The first failing requirement of target `t`, or OK.
    fn check(&self, t: usize) -> Verdict {
        let ix = self.index;
        if let Some(bits) = &self.candidates
            && bits
                .get(t / 64)
                .is_none_or(|word| word & (1 << (t % 64)) == 0)
        {
            return Verdict::reject(Reason::NotCandidate, NO_DETAIL);
        }
        if self.env_mask != 0 && self.env_mask & env_bit(ix.class[t]) == 0 {
            return Verdict::reject(Reason::Environment, NO_DETAIL);
        }
        if ix.connectivity[t] < self.w.connectivity {
            return Verdict::reject(Reason::Connectivity, NO_DETAIL);
        }
        let gpu = gpu_units(self.w);
        if gpu > 0 {
            // The furthest any pool gets: a target fails with its best pool's reason.
            let mut best: Option<(Reason, u32)> = None;
            let mut fitting = 0;
            for (p, slot) in ix.target_pools(t).iter().enumerate() {
                match self.fits.get(slot.kind as usize) {
                    Some(PoolFit::Fits { .. }) => fitting += 1,
                    Some(PoolFit::Fails(r)) if best.is_none_or(|(b, _)| *r > b) => {
                        best = Some((*r, p as u32));
                    }
                    _ => {}
                }
            }
            if fitting == 0 {
                let (reason, pool) = best.unwrap_or((Reason::Accelerator, NO_DETAIL));
                return Verdict::reject(reason, pool);
            }
        } else if let (Some(model), Some(artifact)) = (self.w.model, self.cpu_artifact) {
            let Some(artifact) = artifact else {
                return Verdict::reject(Reason::NoVariant, NO_DETAIL);
            };
            if !ix.stages(ix.target_reach[t], model, artifact) {
                return Verdict::reject(Reason::ModelUnreachable, NO_DETAIL);
            }
        }
        for (i, &name) in ix.workload_data(self.wi).iter().enumerate() {
            let offer = if name == UNKNOWN_NAME {
                None
            } else {
                ix.offer(t, name)
            };
            let Some(offer) = offer else {
                return Verdict::reject(Reason::DataUnavailable, i as u32);
            };
            if self.w.data[i]
                .max_latency
                .is_some_and(|max| offer.latency > max)
            {
                return Verdict::reject(Reason::DataLatency, i as u32);
            }
        }
        for (i, req) in self.w.services.iter().enumerate() {
            if ix.maturity(t, req.service) < req.min {
                return Verdict::reject(Reason::ServiceMaturity, i as u32);
            }
        }
        if self.w.resources.cpu_millis > ix.cpu_millis[t] {
            return Verdict::reject(Reason::Cpu, NO_DETAIL);
        }
        if self.w.resources.memory > ix.memory[t] {
            return Verdict::reject(Reason::Memory, NO_DETAIL);
        }
        if gpu > 0 {
            let mut largest: Option<(u32, u32)> = None;
            for (p, slot) in ix.target_pools(t).iter().enumerate() {
                if !matches!(
                    self.fits.get(slot.kind as usize),
                    Some(PoolFit::Fits { .. })
                ) {
                    continue;
                }
                if slot.units >= gpu {
                    return Verdict::OK;
                }
                if largest.is_none_or(|(u, _)| slot.units > u) {
                    largest = Some((slot.units, p as u32));
                }
            }
            return Verdict::reject(Reason::GpuCount, largest.map_or(NO_DETAIL, |(_, p)| p));
        }
        Verdict::OK
    }
}

fn env_bit(e: EnvClass) -> u8 {
    1 << (e as u8)
}

/// How workload `w` fits a pool of `kind`: accelerator, MIG profile, per-GPU memory, then
/// the first model variant (in written order) that runs on the accelerator, fits its
/// memory (or its MIG slice's) and can be staged on the pool's target (its kind's reach:
/// `ModelUnreachable` when variants fit but none can be staged there).
pub fn pool_fit(ir: &Ir, index: &EstateIndex, w: &Workload, kind: &PoolKind) -> PoolFit {
    if !w.accelerators.is_empty() && !w.accelerators.contains(&kind.accelerator) {
        return PoolFit::Fails(Reason::Accelerator);
    }
    match (&w.resources.mig, kind.partition) {
        (_, Partition::UnknownMig) => return PoolFit::Fails(Reason::Mig),
        (Some(wanted), Partition::Mig(i)) => {
            let name = ir
                .accelerators
                .get(kind.accelerator.index())
                .and_then(|a| a.mig_profiles.get(usize::from(i)))
                .map(|m| m.name.as_str());
            if name != Some(wanted.as_str()) {
                return PoolFit::Fails(Reason::Mig);
            }
        }
        // MIG instances come only from a pool partitioned into that profile, and whole GPUs
        // only from a pool that is not partitioned.
        (Some(_), Partition::Whole) | (None, Partition::Mig(_)) => {
            return PoolFit::Fails(Reason::Mig);
        }
        (None, Partition::Whole) => {}
    }
    if w.resources.gpu_memory.is_some_and(|m| m > kind.unit_memory) {
        return PoolFit::Fails(Reason::GpuMemory);
    }
    let Some((id, model)) = w.model.and_then(|m| Some((m, ir.models.get(m.index())?))) else {
        return PoolFit::Fits {
            variant: NO_VARIANT,
        };
    };
    let mut fitting = false;
    for (i, v) in model.variants.iter().enumerate() {
        if (v.accelerators.is_empty() || v.accelerators.contains(&kind.accelerator))
            && v.gpu_memory <= kind.unit_memory
        {
            if index.stages(kind.reach, id, &v.artifact) {
                return PoolFit::Fits { variant: i as u16 };
            }
            fitting = true;
        }
    }
    PoolFit::Fails(if fitting {
        Reason::ModelUnreachable
    } else {
        Reason::NoVariant
    })
}

/// GPUs (or MIG instances) one replica takes from one pool; 0 for a workload without GPUs.
/// A workload that asks for a MIG profile takes at least one instance.
pub fn gpu_units(w: &Workload) -> u32 {
    match w.resources.mig {
        Some(_) => w.resources.gpu.max(1),
        None => w.resources.gpu,
    }
}

/// One replica's size, the key largest-first orders compare: GPU units, then CPU
/// millicores, then memory.
pub fn replica_size(w: &Workload) -> (u32, u64, u64) {
    (gpu_units(w), w.resources.cpu_millis, w.resources.memory)
}

/// The variant a workload without GPUs uses: the first that names no accelerators.
pub fn cpu_variant(ir: &Ir, w: &Workload) -> Option<u16> {
    let model = ir.models.get(w.model?.index())?;
    model
        .variants
        .iter()
        .position(|v| v.accelerators.is_empty())
        .map(|i| i as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Classification, Connectivity, Maturity};
    use crate::testing::ir::{IrBuilder, gib, ms};

    fn verdicts(ir: &Ir) -> Vec<Vec<Option<Reason>>> {
        let index = EstateIndex::build(ir);
        let m = EligibilityMatrix::compute(ir, &index);
        (0..ir.workloads.len())
            .map(|w| m.row(w).iter().map(|v| v.reason()).collect())
            .collect()
    }

    /// Workloads that share a row (same requirements) get exactly the row they would get on
    /// their own, on a dense estate (many shared rows) and the sparse generated one.
    #[test]
    fn shared_rows_are_each_workloads_own_row() {
        use crate::testing::{
            dense,
            ir::{EstateShape, estate},
        };
        let mut shape = dense::DenseShape::new(400, 40);
        shape.requirement_sets = 7;
        for ir in [
            dense::dense_ir(shape),
            estate(
                3,
                EstateShape {
                    workloads: 300,
                    targets: 50,
                },
            ),
        ] {
            let index = EstateIndex::build(&ir);
            let m = EligibilityMatrix::compute(&ir, &index);
            for w in 0..ir.workloads.len() {
                let ctx = RowContext::new(&ir, &index, w, m.fits().row(w));
                for t in 0..ir.targets.len() {
                    assert_eq!(m.get(w, t), Cell::from(ctx.check(t)), "pair ({w}, {t})");
                }
            }
        }
    }

    #[test]
    fn first_failing_requirement_in_order() {
        let ir = IrBuilder::new()
            .model("det", |m| {
                m.variant("fp16", gib(12), &[])
                    .variant("int8", gib(4), &["L4", "JetsonOrinNano"])
            })
            .workload("w", |w| {
                w.gpu(1)
                    .model("det")
                    .connectivity(Connectivity::Intermittent)
                    .environments(&[EnvClass::Factory, EnvClass::Datacenter])
                    .data("imgs", Some(ms(20)), Classification::Confidential)
                    .service("object_store", Maturity::Ga)
                    .cpu_mem(4, gib(16))
            })
            .target("cloud", |t| {
                t.class(EnvClass::Cloud).pool("h100", "H100", 8)
            })
            .target("edge", |t| {
                t.class(EnvClass::Factory)
                    .connectivity(Connectivity::Disconnected)
                    .pool("orin", "JetsonOrinNano", 1)
            })
            .target("t4site", |t| t.class(EnvClass::Factory).pool("t4", "T4", 2))
            .target("far", |t| {
                t.class(EnvClass::Factory)
                    .pool("l4", "L4", 2)
                    .remote_data("imgs", ms(85))
            })
            .target("preview", |t| {
                t.class(EnvClass::Factory)
                    .pool("l4", "L4", 2)
                    .local_data("imgs", ms(2))
                    .service("object_store", Maturity::Preview)
            })
            .target("small", |t| {
                t.class(EnvClass::Factory)
                    .cpu_mem(2, gib(64))
                    .pool("l4", "L4", 2)
                    .local_data("imgs", ms(2))
                    .service("object_store", Maturity::Ga)
            })
            .target("lyon", |t| {
                t.class(EnvClass::Factory)
                    .pool("l4", "L4", 2)
                    .local_data("imgs", ms(2))
                    .service("object_store", Maturity::Ga)
            })
            .build();
        assert_eq!(
            verdicts(&ir)[0],
            vec![
                Some(Reason::Environment),
                Some(Reason::Connectivity),
                Some(Reason::DataUnavailable),
                Some(Reason::DataLatency),
                Some(Reason::ServiceMaturity),
                Some(Reason::Cpu),
                None
            ]
        );
    }

    #[test]
    fn pool_checks_report_the_furthest_pool() {
        let ir = IrBuilder::new()
            .workload("big", |w| {
                w.gpu(4).gpu_memory(gib(20)).accelerators(&["T4", "L4"])
            })
            .workload("slices", |w| w.gpu(2).mig("1g.10gb"))
            .target("t4", |t| t.pool("h100", "H100", 8).pool("t4", "T4", 8))
            .target("l4", |t| t.pool("l4", "L4", 2))
            .target("mig", |t| t.mig_pool("a100", "A100", 1, "1g.10gb"))
            .target("bare", |t| t)
            .build();
        let v = verdicts(&ir);
        use Reason::*;
        assert_eq!(
            v[0],
            vec![
                Some(GpuMemory),
                Some(GpuCount),
                Some(Accelerator),
                Some(Accelerator)
            ]
        );
        assert_eq!(v[1], vec![Some(Mig), Some(Mig), None, Some(Accelerator)]);
        let index = EstateIndex::build(&ir);
        let m = EligibilityMatrix::compute(&ir, &index);
        assert_eq!(
            m.explain(&ir, &index, 0, 0).detail(),
            1,
            "the T4 pool got further than the H100 one"
        );
    }

    #[test]
    fn variants_in_written_order() {
        let ir = IrBuilder::new()
            .model("det", |m| {
                m.variant("fp16", gib(12), &[])
                    .variant("int8", gib(4), &["L4", "JetsonOrinNano"])
            })
            .workload("w", |w| w.gpu(1).model("det"))
            .target("orin", |t| t.pool("orin", "JetsonOrinNano", 1))
            .target("dc", |t| t.pool("l40s", "L40S", 1))
            .target("t4", |t| {
                t.pool("tiny", "JetsonOrinNano", 1).pool("t4", "T4", 1)
            })
            .build();
        let index = EstateIndex::build(&ir);
        let m = EligibilityMatrix::compute(&ir, &index);
        let fit = |t: usize, p: usize| m.fit(0, index.target_pools(t)[p].kind);
        assert_eq!(fit(0, 0), PoolFit::Fits { variant: 1 });
        assert_eq!(fit(1, 0), PoolFit::Fits { variant: 0 });
        assert_eq!(fit(2, 1), PoolFit::Fits { variant: 0 });
    }

    #[test]
    fn empty_estates() {
        let ir = IrBuilder::new().workload("w", |w| w).build();
        let index = EstateIndex::build(&ir);
        assert_eq!(EligibilityMatrix::compute(&ir, &index).row(0), &[]);
        let ir = IrBuilder::new().target("t", |t| t).build();
        let index = EstateIndex::build(&ir);
        assert_eq!(EligibilityMatrix::compute(&ir, &index).ok_count(), 0);
    }
}
