//! Name resolution: which names exist, in which namespace, and what each refers to.
//!
//! All files of a spec share one namespace (the spec directory); `use` imports are per file.
//! Each standard-library module (`std.gpu`, `std.services`, `std.environments`) is a
//! namespace of its own, reached through `use` or a qualified path `std.gpu.H100`.
//! Lookup order in a file: its explicit imports, the namespace, then its glob imports
//! (`use std.gpu.*`), so a definition always wins over a glob.
//!
//! Hash maps here serve lookups only; nothing iterates them into output (suggestions sort
//! their candidates).

// INVARIANT: namespace and unit ids are positions this module gave when it pushed them
// (`namespaces`, `units`), a `Def`'s index is its definition's position in the table it names,
// and a `use` path is never empty (the parser gives one segment at least); byte counts index
// 256-entry tables by a `u8`.
#![allow(clippy::indexing_slicing)]

use super::error::SemaError;
use crate::source::{FileId, Span};
use crate::syntax::ast::{
    ConstItem, Decl, DeclKind, Ident, Item, ItemKind, PolicyItem, SourceFileAst, UseItem, UseTree,
};
use std::collections::HashMap;

/// What a name refers to. Indices are into [`Names`]' lists, which are in source order
/// (user files in the order given, items in the order written).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Def {
    Const(u32),
    Model(u32),
    Workload(u32),
    Target(u32),
    Policy(u32),
}

impl Def {
    /// `constant`, `model`, … for messages.
    pub fn noun(self) -> &'static str {
        match self {
            Def::Const(_) => "constant",
            Def::Model(_) => "model",
            Def::Workload(_) => "workload",
            Def::Target(_) => "target",
            Def::Policy(_) => "policy",
        }
    }
}

/// Where a name is looked up: a namespace and the file whose imports apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScopeRef {
    pub ns: u32,
    pub unit: u32,
}

/// The namespace of user files.
pub const USER_NS: u32 = 0;

#[derive(Debug, Default)]
pub struct Namespace<'a> {
    pub names: HashMap<&'a str, (Def, Span)>,
}

/// One file: its namespace and its imports.
#[derive(Debug)]
pub struct Unit<'a> {
    pub file: FileId,
    pub ns: u32,
    pub imports: HashMap<&'a str, (Def, Span)>,
    /// Namespaces imported with `use …*`.
    pub globs: Vec<u32>,
}

#[derive(Debug)]
pub struct ConstDef<'a> {
    pub name: &'a Ident,
    pub item: &'a Item,
    pub value: &'a crate::syntax::ast::Expr,
    pub scope: ScopeRef,
}

#[derive(Debug)]
pub struct DeclDef<'a> {
    pub name: &'a Ident,
    pub item: &'a Item,
    pub decl: &'a Decl,
    pub scope: ScopeRef,
}

#[derive(Debug)]
pub struct PolicyDef<'a> {
    pub name: &'a Ident,
    pub item: &'a Item,
    pub policy: &'a PolicyItem,
    pub scope: ScopeRef,
}

/// A standard-library module.
#[derive(Clone, Copy, Debug)]
pub struct Module {
    /// `std.gpu`.
    pub path: &'static str,
    pub ns: u32,
}

/// Every definition of the spec and the standard library, and the scopes to find them.
#[derive(Debug, Default)]
pub struct Names<'a> {
    pub namespaces: Vec<Namespace<'a>>,
    pub units: Vec<Unit<'a>>,
    pub modules: Vec<Module>,
    pub consts: Vec<ConstDef<'a>>,
    pub models: Vec<DeclDef<'a>>,
    pub workloads: Vec<DeclDef<'a>>,
    pub targets: Vec<DeclDef<'a>>,
    pub placements: Vec<DeclDef<'a>>,
    pub policies: Vec<PolicyDef<'a>>,
}

impl<'a> Names<'a> {
    /// Collects the definitions of the standard library (`std`: module path and parsed file)
    /// and of the user's files, reporting duplicates, then resolves every `use`.
    pub fn collect(
        std: &[(&'static str, &'a SourceFileAst)],
        user: &[&'a SourceFileAst],
        errors: &mut Vec<SemaError>,
    ) -> Names<'a> {
        let mut names = Names {
            namespaces: vec![Namespace::default()],
            ..Names::default()
        };
        for (path, ast) in std {
            let ns = names.namespaces.len() as u32;
            names.namespaces.push(Namespace::default());
            names.modules.push(Module { path, ns });
            names.add_unit(ast, ns, errors);
        }
        for ast in user {
            names.add_unit(ast, USER_NS, errors);
        }
        let asts: Vec<&'a SourceFileAst> = std
            .iter()
            .map(|(_, a)| *a)
            .chain(user.iter().copied())
            .collect();
        for (unit, ast) in asts.iter().enumerate() {
            names.resolve_uses(unit as u32, ast, errors);
        }
        names
    }

    fn add_unit(&mut self, ast: &'a SourceFileAst, ns: u32, errors: &mut Vec<SemaError>) {
        let unit = self.units.len() as u32;
        self.units.push(Unit {
            file: ast.file,
            ns,
            imports: HashMap::new(),
            globs: Vec::new(),
        });
        let scope = ScopeRef { ns, unit };
        let user = ns == USER_NS;
        for item in &ast.items {
            match &item.kind {
                ItemKind::Const(ConstItem {
                    name: Some(name),
                    value,
                }) => {
                    let def = Def::Const(self.consts.len() as u32);
                    self.consts.push(ConstDef {
                        name,
                        item,
                        value,
                        scope,
                    });
                    self.define(ns, name, def, errors);
                }
                ItemKind::Decl(decl) if user => {
                    let Some(name) = &decl.name else { continue };
                    let d = DeclDef {
                        name,
                        item,
                        decl,
                        scope,
                    };
                    let def = match decl.kind {
                        DeclKind::Model => {
                            self.models.push(d);
                            Def::Model(self.models.len() as u32 - 1)
                        }
                        DeclKind::Workload => {
                            self.workloads.push(d);
                            Def::Workload(self.workloads.len() as u32 - 1)
                        }
                        DeclKind::Target => {
                            self.targets.push(d);
                            Def::Target(self.targets.len() as u32 - 1)
                        }
                        // A placement names a workload; it defines nothing.
                        DeclKind::Placement => {
                            self.placements.push(d);
                            continue;
                        }
                    };
                    self.define(ns, name, def, errors);
                }
                ItemKind::Policy(policy) if user => {
                    let Some(name) = &policy.name else { continue };
                    let def = Def::Policy(self.policies.len() as u32);
                    self.policies.push(PolicyDef {
                        name,
                        item,
                        policy,
                        scope,
                    });
                    self.define(ns, name, def, errors);
                }
                _ => {}
            }
        }
    }

    fn define(&mut self, ns: u32, name: &'a Ident, def: Def, errors: &mut Vec<SemaError>) {
        let names = &mut self.namespaces[ns as usize].names;
        if let Some((_, first)) = names.get(name.name.as_str()) {
            errors.push(SemaError::DuplicateDefinition {
                name: name.name.clone(),
                first: *first,
                second: name.span,
            });
        } else {
            names.insert(&name.name, (def, name.span));
        }
    }

    fn module(&self, path: &str) -> Option<Module> {
        self.modules.iter().find(|m| m.path == path).copied()
    }

    fn resolve_uses(&mut self, unit: u32, ast: &'a SourceFileAst, errors: &mut Vec<SemaError>) {
        for item in &ast.items {
            if let ItemKind::Use(u) = &item.kind {
                self.resolve_use(unit, u, errors);
            }
        }
    }

    fn resolve_use(&mut self, unit: u32, u: &'a UseItem, errors: &mut Vec<SemaError>) {
        let (module_path, items): (&[Ident], Vec<&'a Ident>) = match &u.tree {
            UseTree::Single => match u.path.split_last() {
                Some((last, init)) => (init, vec![last]),
                None => return,
            },
            UseTree::Group(items) => (&u.path, items.iter().collect()),
            UseTree::Glob(_) => (&u.path, Vec::new()),
        };
        if module_path.is_empty() {
            return;
        }
        let path: Vec<&str> = module_path.iter().map(|i| i.name.as_str()).collect();
        let path = path.join(".");
        let span = module_path[0]
            .span
            .to(module_path[module_path.len() - 1].span);
        let Some(module) = self.module(&path) else {
            // `use std.gpu`: the whole path is a module.
            if let UseTree::Single = u.tree {
                let full: Vec<&str> = u.path.iter().map(|i| i.name.as_str()).collect();
                let full = full.join(".");
                if self.module(&full).is_some() {
                    let last = u.path[u.path.len() - 1].span;
                    errors.push(SemaError::ModuleImport {
                        path: full,
                        span: u.path[0].span.to(last),
                    });
                    return;
                }
            }
            let candidates: Vec<&str> = self.modules.iter().map(|m| m.path).collect();
            errors.push(SemaError::UnknownModule {
                suggestion: suggest(&path, candidates.iter().copied()),
                path,
                span,
            });
            return;
        };
        if let UseTree::Glob(_) = u.tree {
            let globs = &mut self.units[unit as usize].globs;
            if !globs.contains(&module.ns) {
                globs.push(module.ns);
            }
            return;
        }
        for ident in items {
            let found = self.namespaces[module.ns as usize]
                .names
                .get(ident.name.as_str())
                .copied();
            let Some((def, _)) = found else {
                let mut candidates: Vec<&str> = self.namespaces[module.ns as usize]
                    .names
                    .keys()
                    .copied()
                    .collect();
                candidates.sort_unstable();
                errors.push(SemaError::UnknownImport {
                    module: path.clone(),
                    name: ident.name.clone(),
                    span: ident.span,
                    suggestion: suggest(&ident.name, candidates.into_iter()),
                });
                continue;
            };
            let ns = self.units[unit as usize].ns;
            if let Some((_, first)) = self.namespaces[ns as usize].names.get(ident.name.as_str()) {
                errors.push(SemaError::DuplicateDefinition {
                    name: ident.name.clone(),
                    first: *first,
                    second: ident.span,
                });
                continue;
            }
            let imports = &mut self.units[unit as usize].imports;
            match imports.get(ident.name.as_str()) {
                // The same item imported twice is harmless.
                Some((prev, _)) if *prev == def => {}
                Some((_, first)) => errors.push(SemaError::DuplicateDefinition {
                    name: ident.name.clone(),
                    first: *first,
                    second: ident.span,
                }),
                None => {
                    imports.insert(&ident.name, (def, ident.span));
                }
            }
        }
    }

    /// What `name` means in `scope`, with the span of its definition (or import).
    pub fn lookup(&self, scope: ScopeRef, name: &str) -> Option<(Def, Span)> {
        let unit = &self.units[scope.unit as usize];
        if let Some(found) = unit.imports.get(name) {
            return Some(*found);
        }
        if let Some(found) = self.namespaces[scope.ns as usize].names.get(name) {
            return Some(*found);
        }
        unit.globs
            .iter()
            .find_map(|ns| self.namespaces[*ns as usize].names.get(name).copied())
    }

    /// An item of a standard-library module, by module path and name.
    pub fn lookup_qualified(&self, module: &str, name: &str) -> Option<(Def, Span)> {
        let m = self.module(module)?;
        self.namespaces[m.ns as usize].names.get(name).copied()
    }

    /// Whether `path` (`std.gpu`) is a standard-library module.
    pub fn is_module(&self, path: &str) -> bool {
        self.module(path).is_some()
    }

    /// The standard-library module that defines `name`, for "add `use …`" help.
    pub fn module_defining(
        &self,
        name: &str,
        wanted: impl Fn(Def) -> bool,
    ) -> Option<&'static str> {
        self.modules.iter().find_map(|m| {
            self.namespaces[m.ns as usize]
                .names
                .get(name)
                .filter(|(d, _)| wanted(*d))
                .map(|_| m.path)
        })
    }

    /// Every name visible in `scope` whose definition passes `wanted`, sorted.
    pub fn visible(&self, scope: ScopeRef, wanted: impl Fn(Def) -> bool) -> Vec<&'a str> {
        self.visible_where(scope, |_, def| wanted(def))
    }

    /// The names visible in `scope` that could be suggested for the unknown name of `typo`,
    /// in no particular order ([`Typo::best`] does not depend on it): only those pass that
    /// [`Typo::could_be`] close to it, so that an error does not gather and sort every name
    /// of a large spec.
    pub fn suggestible(&self, scope: ScopeRef, typo: &Typo<'_>) -> Vec<&'a str> {
        self.visible_unsorted(scope, |name, _| typo.could_be(name))
    }

    /// The names of every standard-library module, visible or not, that could be suggested
    /// for the unknown name of `typo` (see [`Names::suggestible`]).
    pub fn module_suggestible(&self, typo: &Typo<'_>) -> Vec<&'a str> {
        self.modules
            .iter()
            .flat_map(|m| self.namespaces[m.ns as usize].names.keys().copied())
            .filter(|n| typo.could_be(n))
            .collect()
    }

    /// Every name visible in `scope` for which `keep(name, definition)` holds, sorted.
    pub fn visible_where(&self, scope: ScopeRef, keep: impl Fn(&str, Def) -> bool) -> Vec<&'a str> {
        let mut out = self.visible_unsorted(scope, keep);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The names of [`Names::visible_where`], unsorted, a name visible in two ways twice.
    fn visible_unsorted(&self, scope: ScopeRef, keep: impl Fn(&str, Def) -> bool) -> Vec<&'a str> {
        let unit = &self.units[scope.unit as usize];
        unit.imports
            .iter()
            .chain(self.namespaces[scope.ns as usize].names.iter())
            .chain(
                unit.globs
                    .iter()
                    .flat_map(|ns| self.namespaces[*ns as usize].names.iter()),
            )
            .filter(|(n, (d, _))| keep(n, *d))
            .map(|(n, _)| *n)
            .collect()
    }

    /// The name and span of a definition.
    pub fn def_name(&self, def: Def) -> (&'a str, Span) {
        let i = |x: &'a Ident| (x.name.as_str(), x.span);
        match def {
            Def::Const(c) => i(self.consts[c as usize].name),
            Def::Model(m) => i(self.models[m as usize].name),
            Def::Workload(w) => i(self.workloads[w as usize].name),
            Def::Target(t) => i(self.targets[t as usize].name),
            Def::Policy(p) => i(self.policies[p as usize].name),
        }
    }
}

/// "Did you mean" for one unknown name: the candidate closest to it, if it is close enough to
/// be a likely typo. Distances are counted in [`EDIT`]s, and a look-alike costs less than any
/// edit: a case-only difference costs nothing, and a name that differs only by confusable
/// characters (`O`/`0`, `l`/`1`/`I`, `S`/`5`, `B`/`8`, `Z`/`2`, `rn`/`m`, `vv`/`w`: the same
/// [`skeleton`]) costs [`LOOK_ALIKE`], so `H1OO` finds `H100` where two plain edits would be
/// too many. Beyond that, the distance is the smaller of the plain edit distance and the
/// edit distance between skeletons plus [`LOOK_ALIKE`]. A candidate is close enough within a
/// third of the name's length in edits (at least one). Ties go to the alphabetically first
/// candidate, so the answer is deterministic whatever the order of the candidates.
///
/// A spec with thousands of unknown names has thousands of names in scope, so candidates are
/// first screened with [`Typo::could_be`], a cheap lower bound of the distance; only the
/// few that pass pay for the distance itself.
pub struct Typo<'n> {
    name: &'n str,
    lower: String,
    /// The name's [`skeleton`].
    skeleton: String,
    /// The farthest a suggestion may be, in units of [`EDIT`].
    limit: usize,
    /// How often each ASCII byte occurs in the name, and in its skeleton; `None` for a name
    /// that is not ASCII or too long for the counts.
    letters: Option<([u8; 128], [u8; 128])>,
}

/// The cost of one plain edit (insert, delete, substitute, transpose).
pub const EDIT: usize = 4;
/// The cost of writing a look-alike: characters that differ but read the same.
pub const LOOK_ALIKE: usize = 1;

/// `name` as it reads: confusable characters mapped to one of their class (`0`, `O` and `o`
/// to `o`; `1`, `l` and `I` to `l`; `5`, `S`, `s`; `8`, `B`, `b`; `2`, `Z`, `z`), `rn` to `m`
/// and `vv` to `w`, everything else lowercase.
pub fn skeleton(name: &str) -> impl Iterator<Item = char> + '_ {
    let mut chars = name.chars().peekable();
    std::iter::from_fn(move || {
        let c = chars.next()?;
        Some(match c {
            'r' if chars.next_if_eq(&'n').is_some() => 'm',
            'v' if chars.next_if_eq(&'v').is_some() => 'w',
            c if c.is_ascii() => char::from(skeleton_byte(c as u8)),
            c => c.to_lowercase().next().unwrap_or(c),
        })
    })
}

/// The skeleton of one ASCII character, outside the pairs `rn` and `vv`.
fn skeleton_byte(b: u8) -> u8 {
    match b {
        b'0' | b'O' | b'o' => b'o',
        b'1' | b'l' | b'I' => b'l',
        b'5' | b'S' | b's' => b's',
        b'8' | b'B' | b'b' => b'b',
        b'2' | b'Z' | b'z' => b'z',
        b => b.to_ascii_lowercase(),
    }
}

/// The [`skeleton`] of an ASCII name, byte by byte, without allocating.
fn skeleton_bytes(name: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let b = *name.get(i)?;
        let next = name.get(i + 1).copied();
        i += 1;
        Some(match (b, next) {
            (b'r', Some(b'n')) | (b'v', Some(b'v')) => {
                i += 1;
                if b == b'r' { b'm' } else { b'w' }
            }
            _ => skeleton_byte(b),
        })
    })
}

/// How often each ASCII byte occurs in `chars`; `None` past 255 of one byte or a non-ASCII
/// character.
fn ascii_counts(chars: impl Iterator<Item = char>) -> Option<[u8; 128]> {
    let mut counts = [0u8; 128];
    for c in chars {
        let slot = counts.get_mut(c as usize)?;
        *slot = slot.checked_add(1)?;
    }
    Some(counts)
}

/// The bag distance of an ASCII `candidate` from a name counted in `letters`: the larger of
/// the characters one has and the other lacks, as multisets. Every edit changes each side by
/// at most one (a transposition by none), so it bounds the edit distance from below.
fn bag_distance(letters: &[u8; 128], len: usize, candidate: impl Iterator<Item = u8>) -> usize {
    let mut unmatched = *letters;
    let (mut common, mut other) = (0, 0);
    for b in candidate {
        other += 1;
        let count = &mut unmatched[usize::from(b & 0x7f)];
        if *count > 0 {
            *count -= 1;
            common += 1;
        }
    }
    (len - common).max(other - common)
}

impl<'n> Typo<'n> {
    pub fn new(name: &'n str) -> Self {
        let skeleton: String = skeleton(name).collect();
        let letters = (name.is_ascii() && name.len() <= usize::from(u8::MAX))
            .then(|| Some((ascii_counts(name.chars())?, ascii_counts(skeleton.chars())?)))
            .flatten();
        Typo {
            name,
            lower: name.to_lowercase(),
            skeleton,
            limit: EDIT * (name.chars().count() / 3).max(1),
            letters,
        }
    }

    /// False only where `candidate` cannot be suggested: see [`Typo::lower_bound`].
    pub fn could_be(&self, candidate: &str) -> bool {
        self.lower_bound(candidate) <= self.limit
    }

    /// A lower bound of the distance [`Typo::distance`] gives `candidate`: 0 for a case-only
    /// difference, else the smaller of [`Typo::bounds`]; 0 (no bound) where there is none.
    fn lower_bound(&self, candidate: &str) -> usize {
        if candidate.eq_ignore_ascii_case(self.name) {
            return 0;
        }
        self.bounds(candidate)
            .map_or(0, |(plain, alike)| plain.min(alike))
    }

    /// Lower bounds of the two terms of [`Typo::distance`] for ASCII names: the bag distance
    /// of the names in [`EDIT`]s, and that of their skeletons plus [`LOOK_ALIKE`]. `None`
    /// where either name is not ASCII.
    fn bounds(&self, candidate: &str) -> Option<(usize, usize)> {
        let (letters, skeleton) = self.letters.as_ref()?;
        if !candidate.is_ascii() {
            return None;
        }
        let bytes = candidate.as_bytes();
        let plain = bag_distance(letters, self.name.len(), bytes.iter().copied());
        let alike = bag_distance(skeleton, self.skeleton.len(), skeleton_bytes(bytes));
        Some((EDIT * plain, EDIT * alike + LOOK_ALIKE))
    }

    /// How far `candidate` is from the name (see [`Typo`]): exact when within the limit,
    /// above the limit otherwise. A term whose bound is already past the limit, or cannot
    /// beat the other, is not computed.
    pub fn distance(&self, candidate: &str) -> usize {
        if candidate.to_lowercase() == self.lower {
            return 0;
        }
        let (plain_bound, alike_bound) = self.bounds(candidate).unwrap_or((0, 0));
        let plain = if plain_bound <= self.limit {
            EDIT * strsim::damerau_levenshtein(self.name, candidate)
        } else {
            self.limit + 1
        };
        if alike_bound > self.limit || alike_bound >= plain {
            return plain;
        }
        let skeleton: String = skeleton(candidate).collect();
        let alike = EDIT * strsim::damerau_levenshtein(&self.skeleton, &skeleton) + LOOK_ALIKE;
        plain.min(alike)
    }

    /// The closest candidate, if any is close enough.
    pub fn best<'c>(&self, candidates: impl Iterator<Item = &'c str>) -> Option<String> {
        self.best_where(candidates, |_| true)
    }

    /// The closest candidate for which `fits` holds, if any is close enough. `fits` is asked
    /// only of candidates that would be picked, so an expensive test costs little.
    pub fn best_where<'c>(
        &self,
        candidates: impl Iterator<Item = &'c str>,
        mut fits: impl FnMut(&'c str) -> bool,
    ) -> Option<String> {
        // The candidates that could be close enough, by their bound, smallest first: once
        // the bound exceeds the best distance found, nothing further can replace it.
        let mut by_bound: Vec<Vec<&str>> = vec![Vec::new(); self.limit + 1];
        for c in candidates.filter(|c| *c != self.name) {
            if let Some(bucket) = by_bound.get_mut(self.lower_bound(c)) {
                bucket.push(c);
            }
        }
        let mut best: Option<(usize, &str)> = None;
        for (bound, c) in by_bound
            .into_iter()
            .enumerate()
            .flat_map(|(bound, bucket)| bucket.into_iter().map(move |c| (bound, c)))
        {
            if best.is_some_and(|(bd, _)| bound > bd) {
                break;
            }
            let d = self.distance(c);
            if d > self.limit {
                continue;
            }
            let better = match best {
                None => true,
                Some((bd, bc)) => d < bd || (d == bd && c < bc),
            };
            if better && fits(c) {
                best = Some((d, c));
            }
        }
        best.map(|(_, c)| c.to_string())
    }
}

/// The candidate closest to `name`, if it is close enough to be a likely typo (see [`Typo`]).
pub fn suggest<'c>(name: &str, candidates: impl Iterator<Item = &'c str>) -> Option<String> {
    Typo::new(name).best(candidates)
}

#[cfg(test)]
mod tests {
    use super::suggest;
    use proptest::prelude::*;

    /// [`suggest`] without the screening of [`super::Typo`]: what it must always agree with.
    fn suggest_unscreened<'c>(
        name: &str,
        candidates: impl Iterator<Item = &'c str>,
    ) -> Option<String> {
        use super::{EDIT, LOOK_ALIKE, skeleton};
        let lower = name.to_lowercase();
        let name_skeleton: String = skeleton(name).collect();
        let limit = EDIT * (name.chars().count() / 3).max(1);
        let mut best: Option<(usize, &str)> = None;
        for c in candidates {
            if c == name {
                continue;
            }
            let d = if c.to_lowercase() == lower {
                0
            } else {
                let c_skeleton: String = skeleton(c).collect();
                let plain = EDIT * strsim::damerau_levenshtein(name, c);
                let alike =
                    EDIT * strsim::damerau_levenshtein(&name_skeleton, &c_skeleton) + LOOK_ALIKE;
                plain.min(alike)
            };
            if d > limit {
                continue;
            }
            if best.is_none_or(|(bd, bc)| d < bd || (d == bd && c < bc)) {
                best = Some((d, c));
            }
        }
        best.map(|(_, c)| c.to_string())
    }

    proptest! {
        /// The cheap lower bound never drops a candidate the full distance would pick,
        /// whatever the order of the candidates (ASCII, case, and non-ASCII names).
        #[test]
        fn screening_never_changes_the_suggestion(
            name in "[a-cA-C_0-2IlOo5SBZmnrvw\u{212A}é]{0,9}",
            candidates in proptest::collection::vec("[a-cA-C_0-2IlOo5SBZmnrvw\u{212A}é]{0,9}", 0..24),
        ) {
            let screened = suggest(&name, candidates.iter().map(String::as_str));
            let full = suggest_unscreened(&name, candidates.iter().map(String::as_str));
            prop_assert_eq!(&screened, &full);
            let reversed = suggest(&name, candidates.iter().rev().map(String::as_str));
            prop_assert_eq!(reversed, full);
            // A test asked only of the candidates that would be picked filters like any other.
            let even = |c: &str| c.len().is_multiple_of(2);
            let fitting = super::Typo::new(&name)
                .best_where(candidates.iter().map(String::as_str), even);
            let filtered = suggest_unscreened(
                &name,
                candidates.iter().map(String::as_str).filter(|c| even(c)),
            );
            prop_assert_eq!(fitting, filtered);
        }
    }

    #[test]
    fn suggestions_are_close_and_deterministic() {
        let c = ["replicas", "release", "resources"];
        assert_eq!(
            suggest("replica", c.iter().copied()).as_deref(),
            Some("replicas")
        );
        assert_eq!(
            suggest("l4", ["L4", "L40S"].into_iter()).as_deref(),
            Some("L4")
        );
        assert_eq!(suggest("zzzzzz", c.iter().copied()), None);
        assert_eq!(
            suggest("ab", ["ac", "ab_", "aa"].into_iter()).as_deref(),
            Some("aa")
        );
    }

    #[test]
    fn look_alikes_cost_less_than_edits() {
        let gpus = ["A100", "H100", "H200", "L4", "L40S", "B200"];
        // Two plain edits, too many for four characters; two look-alikes are not.
        assert_eq!(
            suggest("H1OO", gpus.iter().copied()).as_deref(),
            Some("H100")
        );
        assert_eq!(
            suggest("HlOO", gpus.iter().copied()).as_deref(),
            Some("H100")
        );
        assert_eq!(
            suggest("L4OS", gpus.iter().copied()).as_deref(),
            Some("L40S")
        );
        assert_eq!(
            suggest("8200", gpus.iter().copied()).as_deref(),
            Some("B200")
        );
        assert_eq!(
            suggest("H2OO", gpus.iter().copied()).as_deref(),
            Some("H200")
        );
        assert_eq!(suggest("H2ZZ", gpus.iter().copied()).as_deref(), None);
        // A look-alike beats a plain edit: `A1O0` reads as `A100` (one look-alike), while
        // `H1O0` would need a plain edit as well.
        assert_eq!(
            suggest("A1O0", gpus.iter().copied()).as_deref(),
            Some("A100")
        );
        // `rn` reads as `m`, `vv` as `w`.
        assert_eq!(
            suggest("rnodel_cache", ["model_cache", "object_store"].into_iter()).as_deref(),
            Some("model_cache")
        );
        assert_eq!(
            suggest("vvorkload", ["workload", "target"].into_iter()).as_deref(),
            Some("workload")
        );
        // Not every difference is a look-alike.
        assert_eq!(suggest("H1XX", gpus.iter().copied()), None);
    }
}
