//! Infeasibility is an answer: for a workload not fully placed, what ran out or which
//! requirement no target meets, how much is missing, and the smallest change that would help
//! where it is known. Also the assignment-stage reason for each permitted target left unused.

// INVARIANT: every index is a dense id of the IR being placed (workload < `ir.workloads.len()`,
// target < `ir.targets.len()`, a pool < its target's pools) or a position in a table the solver
// sized from those counts when it built it (`EstateIndex`, `EligibilityMatrix`, `Assignment`'s
// options and slots, the ledgers); nothing from user text indexes here. Indexing is the hot
// path; the property tests and planted estates run it over generated estates.
#![allow(clippy::indexing_slicing)]

use super::Solved;
use super::assign::{Block, NO_POOL};
use super::eligibility::gpu_units;
use super::policy::CapSource;
use super::reasons::{SPREAD_REGION, SPREAD_TARGET, accel, pool_name};
use super::units::{bytes, count, cpus, duration};
use super::verdict::{Reason, Verdict};
use crate::ir::Maturity;
use crate::plan::{Infeasibility, RejectionStage};

/// Why more replicas of a workload could not be placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shortfall {
    /// No target is eligible and permitted.
    NoOption,
    /// This cap (`PolicyContext::caps`) is used up.
    Cap(u32),
    /// Every option is blocked; the most common blocker and the first option it blocks.
    Blocked(Block, usize),
}

/// What the verdict of an unused target reads about its workload, whatever the target.
#[derive(Clone, Copy, Debug)]
pub(crate) enum UnusedContext {
    /// Every replica is placed; options from this index on rank no better than the worst
    /// used (all of them when it wants no replica).
    Full { not_needed_from: usize },
    /// Replicas are missing; the cap that one more replica would exceed, if one does.
    Short { cap: Option<u32> },
}

impl Solved<'_> {
    /// What keeps one more replica of `w` from being placed, at the final assignment.
    pub fn shortfall(&self, w: usize) -> Shortfall {
        let a = &self.assignment;
        if a.options[w].is_empty() {
            return Shortfall::NoOption;
        }
        if let Some(c) = a.cap_block(self.ir, &self.policy, w) {
            return Shortfall::Cap(c);
        }
        // Tally first blockers by kind (isolation partners together), in option order.
        let mut tally: Vec<(u8, usize, Block, usize)> = Vec::new();
        for (i, o) in a.options[w].iter().enumerate() {
            let Some(b) = a.blocker_with(self.ir, &self.index, w, o) else {
                continue;
            };
            let kind = block_kind(b);
            match tally.iter_mut().find(|(k, ..)| *k == kind) {
                Some(entry) => entry.1 += 1,
                None => tally.push((kind, 1, b, i)),
            }
        }
        tally
            .into_iter()
            .max_by(|x, y| x.1.cmp(&y.1).then(y.0.cmp(&x.0)))
            .map_or(Shortfall::Blocked(Block::Capacity, 0), |(_, _, b, i)| {
                Shortfall::Blocked(b, i)
            })
    }

    /// Why a permitted target holds no replica of `w`, given the first of `w`'s options on it.
    ///
    /// `not_needed` only when every replica is placed and the target ranks no better than the
    /// worst-ranked target used; otherwise what keeps one more replica off it (the settled
    /// assignment leaves every such option blocked: see `Assigner::settle`).
    pub fn unused_verdict(&self, w: usize, first_option: Option<usize>) -> Verdict {
        self.unused_verdict_in(&self.unused_context(w), w, first_option)
    }

    /// What [`Self::unused_verdict`] reads about `w` whatever the target: computed once per
    /// workload when a plan walks all its unused targets.
    pub(crate) fn unused_context(&self, w: usize) -> UnusedContext {
        let a = &self.assignment;
        let options = &a.options[w];
        if a.placed(w) >= self.ir.workloads[w].replicas {
            let worst_used = a.slots[w]
                .iter()
                .map(|(i, _)| options[*i as usize].rank())
                .max();
            // Options are sorted by rank: those from here on rank no better than the worst used.
            UnusedContext::Full {
                not_needed_from: worst_used
                    .map_or(0, |worst| options.partition_point(|o| o.rank() < worst)),
            }
        } else {
            UnusedContext::Short {
                cap: a.cap_block(self.ir, &self.policy, w),
            }
        }
    }

    /// [`Self::unused_verdict`] given `w`'s [`UnusedContext`].
    pub(crate) fn unused_verdict_in(
        &self,
        context: &UnusedContext,
        w: usize,
        first_option: Option<usize>,
    ) -> Verdict {
        let a = &self.assignment;
        let options = &a.options[w];
        let Some(first_index) = first_option.filter(|&i| i < options.len()) else {
            return Verdict::reject(Reason::NotNeeded, 0);
        };
        let first = &options[first_index];
        match *context {
            UnusedContext::Full { not_needed_from } => {
                if first_index >= not_needed_from {
                    return Verdict::reject(Reason::NotNeeded, 0);
                }
            }
            UnusedContext::Short { cap: Some(c) } => {
                let reason = self.policy.caps[c as usize].source.reason();
                return Verdict::reject(reason, c);
            }
            UnusedContext::Short { cap: None } => {}
        }
        match a.blocker_with(self.ir, &self.index, w, first) {
            Some(Block::SpreadTarget) => Verdict::reject(Reason::Spread, SPREAD_TARGET),
            Some(Block::SpreadRegion) => Verdict::reject(Reason::Spread, SPREAD_REGION),
            Some(Block::Isolation(p)) => Verdict::reject(Reason::Isolation, p),
            Some(Block::Capacity) => Verdict::reject(Reason::Capacity, first.pool),
            Some(Block::Cpu) => Verdict::reject(Reason::CpuFull, 0),
            Some(Block::Memory) => Verdict::reject(Reason::MemoryFull, 0),
            // Another pool of the target, or a settled assignment that is not: the verifier
            // refuses a `not_needed` that is not true.
            None => Verdict::reject(Reason::NotNeeded, 0),
        }
    }

    /// The plan's explanation of `missing` replicas of `w`.
    pub fn infeasibility(&self, w: usize, missing: u32) -> Infeasibility {
        let mut out = Infeasibility {
            missing_replicas: missing,
            message: String::new(),
            hint: None,
            held_by_window: None,
        };
        match self.shortfall(w) {
            Shortfall::NoOption => self.no_option(w, &mut out),
            Shortfall::Cap(c) => self.cap_shortfall(w, c as usize, missing, &mut out),
            Shortfall::Blocked(b, i) => self.blocked(w, b, i, missing, &mut out),
        }
        out
    }

    fn no_option(&self, w: usize, out: &mut Infeasibility) {
        let row = self.matrix.row(w);
        let ir = self.ir;
        if row.is_empty() {
            out.message = "the spec declares no target".into();
            out.hint = Some("declare a target that offers what the workload requires".into());
            return;
        }
        let policy = row.iter().enumerate().find(|(_, v)| {
            v.reason()
                .is_some_and(|r| r.stage() == RejectionStage::Policy)
        });
        if let Some((t, _)) = policy {
            let rejection = self.rejection(w, t, self.verdict(w, t));
            out.message = "every eligible target is excluded by policy".into();
            out.hint = Some(format!("`{}`: {}", rejection.target, rejection.message));
            return;
        }
        let nearest = row
            .iter()
            .enumerate()
            .filter(|(_, v)| v.reason().is_some_and(|r| r != Reason::NotCandidate))
            .max_by(|(ta, a), (tb, b)| a.reason().cmp(&b.reason()).then(tb.cmp(ta)));
        let Some((t, _)) = nearest else {
            out.message = "no target is a candidate".into();
            out.hint = Some(format!(
                "list eligible targets in `placement {} {{ targets = [...] }}`",
                ir.workloads[w].name
            ));
            return;
        };
        let v = self.verdict(w, t);
        let reason = v.reason().unwrap_or(Reason::NotCandidate);
        let rejection = self.rejection(w, t, v);
        out.message = format!(
            "no target passes eligibility; the closest, `{}`, fails `{}`",
            rejection.target,
            reason.key()
        );
        out.hint = Some(
            self.eligibility_hint(w, reason, v.detail())
                .unwrap_or_else(|| {
                    format!(
                        "`{}` comes closest: {}",
                        rejection.target, rejection.message
                    )
                }),
        );
    }

    /// The specific hints the common eligibility failures deserve.
    fn eligibility_hint(&self, w: usize, reason: Reason, d: u32) -> Option<String> {
        let ir = self.ir;
        let wl = &ir.workloads[w];
        let row = self.matrix.row(w);
        let failing = || {
            row.iter()
                .enumerate()
                .filter(move |(t, v)| {
                    v.reason() == Some(reason) && self.verdict(w, *t).detail() == d
                })
                .map(|(t, _)| t)
        };
        match reason {
            Reason::ServiceMaturity => {
                let req = wl.services.get(d as usize)?;
                let svc = &ir.services.get(req.service.index())?.name;
                let best = failing().max_by(|&a, &b| {
                    self.index
                        .maturity(a, req.service)
                        .cmp(&self.index.maturity(b, req.service))
                        .then(b.cmp(&a))
                })?;
                let m = self.index.maturity(best, req.service);
                Some(if m == Maturity::Absent {
                    format!("no target offers `{svc} >= {}`", req.min)
                } else {
                    format!(
                        "no target offers `{svc} >= {}`: `{}` offers it at {m}",
                        req.min, ir.targets[best].name
                    )
                })
            }
            Reason::DataLatency => {
                let req = wl.data.get(d as usize)?;
                let (t, latency) = failing()
                    .filter_map(|t| {
                        let o = ir.targets[t].data.iter().find(|o| o.name == req.name)?;
                        Some((t, o.latency))
                    })
                    .min_by_key(|(t, l)| (*l, *t))?;
                Some(format!(
                    "no target reaches data set `{}` within {}: the closest, `{}`, is {} away",
                    req.name,
                    duration(req.max_latency.unwrap_or(0)),
                    ir.targets[t].name,
                    duration(latency)
                ))
            }
            Reason::DataUnavailable => {
                let req = wl.data.get(d as usize)?;
                Some(format!(
                    "no target that passes the earlier checks offers data set `{}`",
                    req.name
                ))
            }
            Reason::GpuMemory => {
                let need = wl.resources.gpu_memory?;
                let (t, p, memory) = failing()
                    .flat_map(|t| {
                        self.index
                            .target_pools(t)
                            .iter()
                            .enumerate()
                            .map(move |(p, s)| (t, p, s))
                    })
                    .filter_map(|(t, p, s)| {
                        Some((t, p, self.index.kinds.get(s.kind as usize)?.unit_memory))
                    })
                    .max_by(|a, b| a.2.cmp(&b.2).then(b.0.cmp(&a.0)))?;
                Some(format!(
                    "no pool offers {} per GPU: the largest, `{}` of `{}`, offers {}",
                    bytes(need),
                    pool_name(ir, t, p as u32),
                    ir.targets[t].name,
                    bytes(memory)
                ))
            }
            Reason::GpuCount => {
                let (t, units) = failing()
                    .map(|t| {
                        let p = self.verdict(w, t).detail();
                        let units = self
                            .index
                            .target_pools(t)
                            .get(p as usize)
                            .map_or(0, |s| s.units);
                        (t, units)
                    })
                    .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))?;
                Some(format!(
                    "no fitting pool has {} for one replica: the largest, on `{}`, has {}",
                    count(u64::from(gpu_units(wl)), "GPU"),
                    ir.targets[t].name,
                    units
                ))
            }
            _ => None,
        }
    }

    fn cap_shortfall(&self, w: usize, c: usize, missing: u32, out: &mut Infeasibility) {
        let ir = self.ir;
        let gpu = u64::from(gpu_units(&ir.workloads[w]));
        let need = u64::from(missing) * gpu;
        let cap = &self.policy.caps[c];
        let used = self.assignment.ledger.cap_used[c];
        let raise_to = (used + need).max(cap.max);
        let (message, _) = self.cap_message(c);
        out.message = format!(
            "{message}; {need} more GPU{} needed",
            if need == 1 { "" } else { "s" }
        );
        let from_to = format!("from {} to {}", cap.max, count(raise_to, "GPU"));
        out.hint = Some(match cap.source {
            CapSource::Quota(i) => format!(
                "raise `quota team(\"{}\")` {from_to}",
                ir.policy
                    .quotas
                    .get(i as usize)
                    .map_or("", |q| q.team.as_str()),
            ),
            CapSource::Entitlement(i) => format!(
                "raise the entitlement of `{}` {from_to}",
                ir.policy
                    .entitlements
                    .get(i as usize)
                    .map(|e| e.identity.to_string())
                    .unwrap_or_default(),
            ),
            CapSource::Limit(i) => {
                let window = ir
                    .policy
                    .limits
                    .get(i as usize)
                    .and_then(|l| ir.policy.windows.get(l.window.index()));
                let name = window.map_or(String::new(), |x| x.name.clone());
                let closes = window.map_or(String::new(), |x| {
                    format!(
                        " (it closes at {:02}:{:02} {})",
                        x.end / 60,
                        x.end % 60,
                        x.zone
                    )
                });
                let hint = format!(
                    "plan at an instant outside window `{name}`{closes}, or raise its limit {from_to}"
                );
                out.held_by_window = Some(name);
                hint
            }
        });
    }

    fn blocked(&self, w: usize, block: Block, oi: usize, missing: u32, out: &mut Infeasibility) {
        let ir = self.ir;
        let wl = &ir.workloads[w];
        let a = &self.assignment;
        let Some(o) = a.options[w].get(oi) else {
            out.message = "capacity ran out".into();
            return;
        };
        let t = o.target as usize;
        let target = &ir.targets[t].name;
        let missing64 = u64::from(missing);
        match block {
            Block::Capacity if o.pool != NO_POOL => {
                let noun = self.unit_noun(t, o.pool);
                let accelerator = ir.targets[t]
                    .pools
                    .get(o.pool as usize)
                    .map_or("?", |p| accel(ir, p.accelerator));
                let unit = u64::from(gpu_units(wl));
                let need = missing64 * unit;
                let plural = |n: u64| if n == 1 { "" } else { "s" };
                // The pools only capacity keeps the workload off (not isolation, not spread),
                // fullest free first, then in option order; a replica takes its GPUs from one pool.
                let mut pools: Vec<(u64, usize, u32)> = Vec::new();
                for opt in a.options[w].iter() {
                    if opt.flat_pool == NO_POOL || pools.iter().any(|(_, _, f)| *f == opt.flat_pool)
                    {
                        continue;
                    }
                    if a.blocker_with(ir, &self.index, w, opt) == Some(Block::Capacity) {
                        let free = a
                            .ledger
                            .pool_free
                            .get(opt.flat_pool as usize)
                            .map_or(0, |f| u64::from(*f));
                        pools.push((free, opt.target as usize, opt.pool));
                    }
                }
                pools.sort_by_key(|(free, _, _)| std::cmp::Reverse(*free));
                let (best_free, bt, bp) = pools.first().copied().unwrap_or((0, t, o.pool));
                let best = format!(
                    "pool `{}` of `{}`",
                    pool_name(ir, bt, bp),
                    ir.targets[bt].name
                );
                out.message = if best_free == 0 {
                    format!(
                        "pools ran out: {need} more {accelerator} {noun}{} needed (every fitting pool is full)",
                        plural(need)
                    )
                } else {
                    format!(
                        "pools ran out: {} {} {need} {accelerator} {noun}{}; the most any fitting pool has free is {best_free} ({best})",
                        count(missing64, "replica"),
                        if missing == 1 { "needs" } else { "need" },
                        plural(need)
                    )
                };
                let single = need.saturating_sub(best_free);
                let mut hint = format!(
                    "add {single} {accelerator} {noun}{} to {best}",
                    plural(single)
                );
                // Several pools: each takes one more replica for what it lacks of one
                // replica's units; replicas beyond one per pool cost a whole replica's units.
                let k = pools.len().min(missing as usize);
                if k >= 2 {
                    let added: Vec<u64> = pools[..k].iter().map(|(f, _, _)| unit - f).collect();
                    let several = added.iter().sum::<u64>() + (missing64 - k as u64) * unit;
                    if several < single {
                        let each: Vec<String> = pools[..k]
                            .iter()
                            .zip(&added)
                            .map(|((_, pt, pp), n)| {
                                format!(
                                    "{n} to pool `{}` of `{}`",
                                    pool_name(ir, *pt, *pp),
                                    ir.targets[*pt].name
                                )
                            })
                            .collect();
                        hint.push_str(&format!(
                            ", or {several} in all over {k} pools ({})",
                            each.join(", ")
                        ));
                    }
                }
                if best_free == 0 {
                    hint.push_str(", or to another target that passes eligibility");
                }
                out.hint = Some(hint);
            }
            Block::Capacity | Block::Cpu => {
                let need = missing64 * wl.resources.cpu_millis;
                out.message = format!("targets ran out of CPU: {} more CPUs needed", cpus(need));
                out.hint = Some(format!(
                    "{} more CPUs on a target that passes eligibility (such as `{target}`)",
                    cpus(need)
                ));
            }
            Block::Memory => {
                let need = missing64 * wl.resources.memory;
                out.message = format!("targets ran out of memory: {} more needed", bytes(need));
                out.hint = Some(format!(
                    "{} more memory on a target that passes eligibility (such as `{target}`)",
                    bytes(need)
                ));
            }
            Block::SpreadTarget => {
                let n = wl.placement.per_target.unwrap_or(1).max(1);
                // The targets where the rule is what binds: they hold `n` replicas already.
                let mut targets: Vec<u32> = a.options[w].iter().map(|o| o.target).collect();
                targets.sort_unstable();
                targets.dedup();
                let full = targets
                    .iter()
                    .filter(|&&t| a.on_target(w, t) >= n)
                    .count()
                    .max(1) as u32;
                out.message = format!(
                    "`spread = per_target({n})` keeps the missing replicas off {}",
                    holding(full, "target", n)
                );
                // Never the value already written: each full target takes the missing
                // replicas in equal shares above `n`.
                let more = missing.div_ceil(n);
                out.hint = Some(format!(
                    "allow `per_target({})`, or make {more} more target{} eligible",
                    n + missing.div_ceil(full),
                    if more == 1 { "" } else { "s" }
                ));
            }
            Block::SpreadRegion => {
                let n = wl.placement.per_region.unwrap_or(1).max(1);
                let mut regions: Vec<u32> = a.options[w]
                    .iter()
                    .map(|o| self.index.region[o.target as usize])
                    .collect();
                regions.sort_unstable();
                regions.dedup();
                let full = regions
                    .iter()
                    .filter(|&&r| a.in_region(&self.index, w, r) >= n)
                    .count()
                    .max(1) as u32;
                out.message = format!(
                    "`per_region({n})` keeps the missing replicas out of {}",
                    holding(full, "region", n)
                );
                let more = missing.div_ceil(n);
                out.hint = Some(format!(
                    "allow `per_region({})`, or make targets in {more} more region{} eligible",
                    n + missing.div_ceil(full),
                    if more == 1 { "" } else { "s" }
                ));
            }
            Block::Isolation(p) => {
                let partner = ir.workloads.get(p as usize).map_or("", |x| x.name.as_str());
                out.message = format!(
                    "every pool that fits holds `{partner}`, which `{}` is isolated from",
                    wl.name
                );
                out.hint = Some(format!(
                    "add a fitting pool that `{partner}` does not use, or drop it from `isolate_from`"
                ));
            }
        }
    }
}

/// Blockers grouped for the tally: isolation from any partner counts as one kind.
fn block_kind(b: Block) -> u8 {
    match b {
        Block::Capacity => 0,
        Block::Cpu => 1,
        Block::Memory => 2,
        Block::SpreadTarget => 3,
        Block::SpreadRegion => 4,
        Block::Isolation(_) => 5,
    }
}

/// "1 target, which holds 2 replicas" or "3 targets, which hold 2 replicas each".
fn holding(places: u32, noun: &str, replicas: u32) -> String {
    let (verb, each) = if places == 1 {
        ("holds", "")
    } else {
        ("hold", " each")
    };
    format!(
        "{}, which {verb} {}{each}",
        count(u64::from(places), noun),
        count(u64::from(replicas), "replica")
    )
}
