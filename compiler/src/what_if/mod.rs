//! What-if files: a `.berth` file whose items change a base spec by name, for
//! `berth plan SPEC --what-if FILE` (`docs/language.md`, "What-if files").
//!
//! On the parsed files, before semantics: an item of the what-if file with the kind and name
//! of a base item amends it entry by entry (a field replaces the field of the same key and
//! label; a block with the same key and label is amended the same way, recursively; anything
//! else is added), a `policy` amends the base policy of its name rule by rule (a rule replaces
//! the rule with the same subject: `deny` by reason, `entitle` and `quota` by subject, `window`
//! by name, `limit` by selector and window, `reclaim` by selector, `approval` by condition),
//! and an item the base does not have is added. `target NAME { offline = true }` takes a base
//! target out of the spec, and out of every candidate and fallback list.
//!
//! The result is ordinary parsed files, checked by semantics like any spec: every diagnostic
//! points at the base file or the what-if file where the offending text is. Entries moved into
//! a base item are resolved with that file's imports, so the what-if file's `use` items are
//! added to each base file it amends (names that file already imports left out).

mod error;

pub use error::WhatIfError;

use crate::diagnostics::Diagnostic;
use crate::source::{FileId, SourceMap, Span};
use crate::syntax::Parsed;
use crate::syntax::ast::{
    Body, Decl, DeclKind, Entry, EntryKind, Expr, ExprKind, Ident, Item, ItemKind, PolicyItem,
    Rule, RuleKind, UseItem, UseTree,
};

/// Applies the what-if file `what_if` to the base files `base`: the files semantics then
/// checks as one spec, and what is wrong with the changes themselves.
pub fn apply(
    sources: &SourceMap,
    mut base: Vec<Parsed>,
    mut what_if: Parsed,
) -> (Vec<Parsed>, Vec<Diagnostic>) {
    let mut errors = Vec::new();
    let items = std::mem::take(&mut what_if.ast.items);
    let imports: Vec<UseItem> = items
        .iter()
        .filter_map(|i| match &i.kind {
            ItemKind::Use(u) => Some(u.clone()),
            _ => None,
        })
        .collect();
    let mut amended: Vec<FileId> = Vec::new();
    let mut offline: Vec<String> = Vec::new();
    for item in items {
        let kept = match &item.kind {
            ItemKind::Decl(decl) => match offline_target(decl, &mut errors) {
                Offline::Misused => false,
                Offline::Yes(name) => {
                    if find_decl(&mut base, DeclKind::Target, &name).is_none() {
                        errors.push(WhatIfError::NoSuchTarget {
                            name,
                            span: decl.name.as_ref().map_or(item.span, |n| n.span),
                        });
                    } else {
                        offline.push(name);
                    }
                    false
                }
                Offline::No => match decl
                    .name
                    .as_ref()
                    .and_then(|n| find_decl(&mut base, decl.kind, &n.name))
                {
                    Some((file, target)) => {
                        amend_body(&mut target.body, &decl.body);
                        amended.push(file);
                        false
                    }
                    None => true,
                },
            },
            ItemKind::Policy(policy) => match policy
                .name
                .as_ref()
                .and_then(|n| find_policy(&mut base, &n.name))
            {
                Some((file, target)) => {
                    amend_rules(sources, target, policy);
                    amended.push(file);
                    false
                }
                None => true,
            },
            ItemKind::Use(_) | ItemKind::Const(_) | ItemKind::Error => true,
        };
        if kept {
            what_if.ast.items.push(item);
        }
    }
    for parsed in &mut base {
        if amended.contains(&parsed.ast.file) {
            add_imports(&mut parsed.ast.items, &imports);
        }
    }
    if !offline.is_empty() {
        for parsed in base.iter_mut().chain(std::iter::once(&mut what_if)) {
            take_offline(&mut parsed.ast.items, &offline);
        }
    }
    base.push(what_if);
    (base, errors.iter().map(Diagnostic::from).collect())
}

/// Whether a what-if item takes a target offline.
enum Offline {
    /// No `offline` entry: an ordinary change.
    No,
    /// `target NAME { offline = true }`.
    Yes(String),
    /// `offline` where it cannot be (reported; the item changes nothing).
    Misused,
}

fn offline_target(decl: &Decl, errors: &mut Vec<WhatIfError>) -> Offline {
    let Some((entry, value)) = decl.body.entries.iter().find_map(|e| match &e.kind {
        EntryKind::Field {
            key,
            label: None,
            value,
        } if key.name == "offline" => Some((e, value)),
        _ => None,
    }) else {
        return Offline::No;
    };
    let Some(name) = decl.name.as_ref() else {
        return Offline::Misused;
    };
    let error = if decl.kind != DeclKind::Target {
        WhatIfError::OfflineNotTarget {
            kind: decl.kind.keyword(),
            span: entry.span,
        }
    } else if value.kind != ExprKind::Bool(true) {
        WhatIfError::OfflineNotTrue { span: value.span }
    } else if let Some(other) = decl.body.entries.iter().find(|e| e.span != entry.span) {
        WhatIfError::OfflineWithChanges {
            target: name.name.clone(),
            span: other.span,
        }
    } else {
        return Offline::Yes(name.name.clone());
    };
    errors.push(error);
    Offline::Misused
}

/// The base file and declaration of kind `kind` named `name`.
fn find_decl<'a>(
    base: &'a mut [Parsed],
    kind: DeclKind,
    name: &str,
) -> Option<(FileId, &'a mut Decl)> {
    base.iter_mut().find_map(|p| {
        let file = p.ast.file;
        p.ast.items.iter_mut().find_map(|i| match &mut i.kind {
            ItemKind::Decl(d)
                if d.kind == kind && d.name.as_ref().is_some_and(|n| n.name == name) =>
            {
                Some((file, d))
            }
            _ => None,
        })
    })
}

fn find_policy<'a>(base: &'a mut [Parsed], name: &str) -> Option<(FileId, &'a mut PolicyItem)> {
    base.iter_mut().find_map(|p| {
        let file = p.ast.file;
        p.ast.items.iter_mut().find_map(|i| match &mut i.kind {
            ItemKind::Policy(policy) if policy.name.as_ref().is_some_and(|n| n.name == name) => {
                Some((file, policy))
            }
            _ => None,
        })
    })
}

/// An entry's identity within its body: its key and label.
fn entry_key(e: &Entry) -> Option<(&str, Option<&str>)> {
    match &e.kind {
        EntryKind::Field { key, label, .. } | EntryKind::Block { key, label, .. } => {
            Some((&key.name, label.as_ref().map(|l| l.name.as_str())))
        }
        EntryKind::Bound { key, .. } => Some((&key.name, None)),
        EntryKind::Error => None,
    }
}

/// `base` with every entry of `change`: a block into the block of the same key and label,
/// recursively; any other entry over the entry of the same key and label; the rest added.
fn amend_body(base: &mut Body, change: &Body) {
    for entry in &change.entries {
        let Some(key) = entry_key(entry) else {
            continue;
        };
        let existing = base.entries.iter_mut().find(|e| entry_key(e) == Some(key));
        match (existing, &entry.kind) {
            (Some(old), EntryKind::Block { body, .. }) => match &mut old.kind {
                EntryKind::Block { body: old_body, .. } => amend_body(old_body, body),
                _ => *old = entry.clone(),
            },
            (Some(old), _) => *old = entry.clone(),
            (None, _) => base.entries.push(entry.clone()),
        }
    }
}

/// A rule's subject, as the text the source gives it (blanks left out): what a what-if rule
/// replaces.
fn rule_key(sources: &SourceMap, rule: &Rule) -> Option<String> {
    let text = |span: Span| -> String {
        sources
            .get(span.file)
            .map(|f| f.slice(span).split_whitespace().collect())
            .unwrap_or_default()
    };
    Some(match &rule.kind {
        RuleKind::Deny { reason, .. } => format!("deny {}", reason.value),
        RuleKind::Entitle { subject, .. } => format!("entitle {}", text(subject.span)),
        RuleKind::Quota { subject, .. } => format!("quota {}", text(subject.span)),
        RuleKind::Window { name, .. } => format!("window {}", name.name),
        RuleKind::Limit {
            selector,
            value,
            window,
            ..
        } => format!(
            "limit {} {} {}",
            selector.name,
            text(value.span),
            window.name
        ),
        RuleKind::Approval { condition, .. } => format!("approval {}", text(condition.span)),
        RuleKind::Reclaim {
            selector, value, ..
        } => format!("reclaim {} {}", selector.name, text(value.span)),
        RuleKind::Error => return None,
    })
}

fn amend_rules(sources: &SourceMap, base: &mut PolicyItem, change: &PolicyItem) {
    for rule in &change.rules {
        let Some(key) = rule_key(sources, rule) else {
            continue;
        };
        match base
            .rules
            .iter_mut()
            .find(|r| rule_key(sources, r).as_ref() == Some(&key))
        {
            Some(old) => *old = rule.clone(),
            None => base.rules.push(rule.clone()),
        }
    }
}

/// The names a file imports, and the modules it imports whole.
fn imported(items: &[Item]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut names = Vec::new();
    let mut globs = Vec::new();
    for item in items {
        let ItemKind::Use(u) = &item.kind else {
            continue;
        };
        let path: Vec<String> = u.path.iter().map(|i| i.name.clone()).collect();
        match &u.tree {
            UseTree::Single => names.extend(path.last().cloned()),
            UseTree::Group(list) => names.extend(list.iter().map(|i| i.name.clone())),
            UseTree::Glob(_) => globs.push(path),
        }
    }
    (names, globs)
}

/// `imports` added to `items`, less what `items` already import.
fn add_imports(items: &mut Vec<Item>, imports: &[UseItem]) {
    let (names, globs) = imported(items);
    let mut added = Vec::new();
    for u in imports {
        let path: Vec<String> = u.path.iter().map(|i| i.name.clone()).collect();
        let tree = match &u.tree {
            UseTree::Glob(span) => {
                if globs.contains(&path) {
                    continue;
                }
                UseTree::Glob(*span)
            }
            UseTree::Single => {
                let module = path.split_last().map(|(_, init)| init.to_vec());
                if path.last().is_some_and(|n| names.contains(n))
                    || module.is_some_and(|m| globs.contains(&m))
                {
                    continue;
                }
                UseTree::Single
            }
            UseTree::Group(list) => {
                let left: Vec<Ident> = list
                    .iter()
                    .filter(|i| !names.contains(&i.name) && !globs.contains(&path))
                    .cloned()
                    .collect();
                if left.is_empty() {
                    continue;
                }
                UseTree::Group(left)
            }
        };
        let span = u.path.first().map_or(Span::default(), |i| i.span);
        added.push(Item {
            docs: Vec::new(),
            kind: ItemKind::Use(UseItem {
                path: u.path.clone(),
                tree,
            }),
            span,
        });
    }
    items.splice(0..0, added);
}

/// Removes the targets named `offline` and every mention of them in a placement's `targets`
/// and `fallback` lists.
fn take_offline(items: &mut Vec<Item>, offline: &[String]) {
    items.retain(|i| match &i.kind {
        ItemKind::Decl(d) if d.kind == DeclKind::Target => {
            !d.name.as_ref().is_some_and(|n| offline.contains(&n.name))
        }
        _ => true,
    });
    for item in items.iter_mut() {
        let ItemKind::Decl(d) = &mut item.kind else {
            continue;
        };
        if d.kind != DeclKind::Placement {
            continue;
        }
        for entry in &mut d.body.entries {
            if let EntryKind::Field {
                key,
                label: None,
                value:
                    Expr {
                        kind: ExprKind::List(list),
                        ..
                    },
            } = &mut entry.kind
                && (key.name == "targets" || key.name == "fallback")
            {
                list.retain(|e| !matches!(&e.kind, ExprKind::Name(n) if offline.contains(&n.name)));
            }
        }
    }
}
