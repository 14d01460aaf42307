//! Editor queries over one spec, for the language server: hover text, definitions and
//! references, completions, the outline, semantic token classes and quick fixes.
//!
//! Pure, like the rest of the compiler: the runtime's `berth lsp` owns the documents, the
//! clock and the protocol, and converts positions; everything here speaks byte offsets and
//! [`Span`]s. Every query works on any text (a broken file still has a tree with holes) and
//! answers `None` or nothing rather than failing.

pub mod locate;

/// The embedded standard library's files (their ids and names), which definitions may
/// point into.
pub use crate::sema::stdlib;

use crate::diagnostics::Diagnostic;
use crate::driver::{self, Compilation};
use crate::ir;
use crate::plan::WorkloadStatus;
use crate::sema;
use crate::sema::resolve::{Def, Names, ScopeRef, USER_NS};
use crate::sema::schema::{self, BlockSchema, Field, Presence};
use crate::sema::types::{RefKind, Ty};
use crate::source::{FileId, SourceMap, Span};
use crate::syntax::ast::{DeclKind, EntryKind, Ident, Item, ItemKind, SourceFileAst};
use crate::syntax::token::Token;
use crate::syntax::{Parsed, lex};
use jiff::Timestamp;
use locate::{Site, locate, occurrences};

/// One spec (the files of one directory) compiled, ready for queries.
pub struct Analysis {
    pub sources: SourceMap,
    pub compilation: Compilation,
    std: Vec<Parsed>,
    catalogue: sema::Catalogue,
}

/// Hover text (Markdown) and the span it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hover {
    pub markdown: String,
    pub span: Span,
}

/// What a completion proposes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionKind {
    Field,
    EnumMember,
    /// A definition of the spec or the standard library.
    Name,
    Constructor,
    Keyword,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub label: String,
    pub kind: CompletionKind,
    /// The type, one line.
    pub detail: String,
    /// Markdown.
    pub doc: String,
}

/// What an outline entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    Const,
    Model,
    Workload,
    Target,
    Placement,
    Policy,
    Field,
    Block,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub kind: SymbolKind,
    /// The whole item or entry.
    pub span: Span,
    /// Its name.
    pub name_span: Span,
    pub children: Vec<Symbol>,
}

/// The class of a token for semantic highlighting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TokenClass {
    Keyword,
    /// A name that is being defined (item, constant, policy).
    Definition,
    /// A field key.
    Property,
    Number,
    String,
    Comment,
    Operator,
}

impl TokenClass {
    /// Every class, in the order the language server announces them.
    pub const ALL: &'static [TokenClass] = &[
        TokenClass::Keyword,
        TokenClass::Definition,
        TokenClass::Property,
        TokenClass::Number,
        TokenClass::String,
        TokenClass::Comment,
        TokenClass::Operator,
    ];
}

/// A replacement a "did you mean" diagnostic proposes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuickFix {
    pub title: String,
    pub span: Span,
    pub replacement: String,
}

impl Analysis {
    /// Compiles every file of `sources` as one spec.
    pub fn new(sources: SourceMap) -> Analysis {
        let compilation = driver::check_spec(&sources, &driver::all_files(&sources));
        Analysis {
            sources,
            compilation,
            std: stdlib::parse(),
            catalogue: sema::catalogue(),
        }
    }

    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.compilation.diagnostics
    }

    fn ast(&self, file: FileId) -> Option<&SourceFileAst> {
        if stdlib::is_std(file) {
            return self.std.iter().map(|p| &p.ast).find(|a| a.file == file);
        }
        self.compilation
            .parsed
            .iter()
            .map(|p| &p.ast)
            .find(|a| a.file == file)
    }

    /// Runs `f` with the names of the spec and the standard library.
    fn with_names<R>(&self, f: impl FnOnce(&Names<'_>) -> R) -> R {
        let std_asts: Vec<(&'static str, &SourceFileAst)> = stdlib::FILES
            .iter()
            .zip(&self.std)
            .map(|(f, p)| (f.module, &p.ast))
            .collect();
        let user: Vec<&SourceFileAst> = self.compilation.parsed.iter().map(|p| &p.ast).collect();
        let mut ignored = Vec::new();
        let names = Names::collect(&std_asts, &user, &mut ignored);
        f(&names)
    }

    /// The scope names of `file` are looked up in.
    fn scope(&self, file: FileId) -> ScopeRef {
        if let Some(i) = file.0.checked_sub(stdlib::STD_FILE_BASE) {
            return ScopeRef { ns: i + 1, unit: i };
        }
        let position = self
            .compilation
            .parsed
            .iter()
            .position(|p| p.ast.file == file)
            .unwrap_or(0);
        ScopeRef {
            ns: USER_NS,
            unit: (stdlib::FILES.len() + position) as u32,
        }
    }

    /// What the name at `site` refers to, and where that is defined (past any import).
    fn resolve(&self, names: &Names<'_>, file: FileId, site: &Site<'_>) -> Option<(Def, Span)> {
        let (def, _) = match site {
            Site::Name {
                ident,
                qualifier: Some(module),
            } => names.lookup_qualified(module, &ident.name),
            Site::Name { ident, .. } | Site::Definition { ident } => {
                names.lookup(self.scope(file), &ident.name)
            }
            _ => None,
        }?;
        Some((def, names.def_name(def).1))
    }

    /// Where the name at `offset` is defined: a span in the spec or in a standard-library
    /// file (see [`stdlib::file`]).
    pub fn definition(&self, file: FileId, offset: u32) -> Option<Span> {
        let ast = self.ast(file)?;
        let site = locate(ast, offset).site?;
        self.with_names(|names| self.resolve(names, file, &site).map(|(_, span)| span))
    }

    /// Every occurrence of the definition named at `offset`, the definition included, in
    /// file and source order.
    pub fn references(&self, file: FileId, offset: u32) -> Vec<Span> {
        let Some(ast) = self.ast(file) else {
            return Vec::new();
        };
        let Some(site) = locate(ast, offset).site else {
            return Vec::new();
        };
        self.with_names(|names| {
            let Some((def, def_span)) = self.resolve(names, file, &site) else {
                return Vec::new();
            };
            let mut out = vec![def_span];
            for parsed in &self.compilation.parsed {
                let f = parsed.ast.file;
                for s in occurrences(&parsed.ast) {
                    if self.resolve(names, f, &s).is_some_and(|(d, _)| d == def) {
                        out.push(site_span(&s));
                    }
                }
            }
            out.sort();
            out.dedup();
            out
        })
    }

    /// Hover text at `offset`. With `plan_at`, hovering a workload also places the spec at
    /// that instant and says where the workload goes and why every other target does not.
    pub fn hover(&self, file: FileId, offset: u32, plan_at: Option<Timestamp>) -> Option<Hover> {
        let ast = self.ast(file)?;
        let located = locate(ast, offset);
        let site = located.site.clone()?;
        let markdown = match &site {
            Site::Key { field, .. } => field_markdown(field),
            Site::Keyword { schema, .. } => format!("**{}**\n\n{}", schema.name, schema.doc),
            Site::Ctor { ctor, .. } => format!("**{}** {{ … }}\n\n{}", ctor.name, ctor.doc),
            Site::Name { ident, .. } | Site::Definition { ident } => {
                let resolved = self.with_names(|names| {
                    self.resolve(names, file, &site).map(|(def, _)| {
                        let (item, def_file) = def_item(names, def);
                        (def, item.docs.join("\n"), def_file)
                    })
                });
                match resolved {
                    Some((def, docs, def_file)) => {
                        self.def_markdown(ident, def, &docs, def_file, plan_at)
                    }
                    None => enum_member_markdown(located.expected, &ident.name)?,
                }
            }
        };
        Some(Hover {
            markdown,
            span: site_span(&site),
        })
    }

    fn def_markdown(
        &self,
        ident: &Ident,
        def: Def,
        docs: &str,
        def_file: FileId,
        plan_at: Option<Timestamp>,
    ) -> String {
        let mut out = format!("**{}** `{}`", def.noun(), ident.name);
        if let Some(std) = stdlib::file(def_file) {
            out.push_str(&format!(" (from `{}`)", std.module));
        }
        if !docs.is_empty() {
            out.push_str("\n\n");
            out.push_str(docs);
        }
        if let Some(a) = self
            .catalogue
            .accelerators
            .iter()
            .find(|a| a.name == ident.name && stdlib::is_std(def_file))
        {
            out.push_str("\n\n");
            out.push_str(&accelerator_markdown(a));
        }
        if let (Def::Workload(_), Some(at)) = (def, plan_at) {
            out.push_str("\n\n");
            out.push_str(&self.placement_markdown(&ident.name, at));
        }
        out
    }

    /// Where the plan at `at` places workload `name`, and why each other target is rejected.
    pub fn placement_markdown(&self, name: &str, at: Timestamp) -> String {
        // The IR of this analysis, not the sources compiled again: a hover pays for the
        // placement alone.
        let Some(ir) = &self.compilation.ir else {
            return "**placement**: not planned while the spec has errors".into();
        };
        let planned = match driver::plan_ir(ir, &self.sources, at) {
            Ok(planned) => planned,
            Err(driver::PlanFailure::Spec(_)) => {
                return "**placement**: not planned while the spec has errors".into();
            }
            Err(driver::PlanFailure::Unverified { .. }) => {
                return "**placement**: the engine's plan failed verification (a bug)".into();
            }
        };
        let Some(w) = planned.plan.workloads.iter().find(|w| w.workload == name) else {
            return "**placement**: not in the plan".into();
        };
        let status = match w.status {
            WorkloadStatus::Placed => "placed",
            WorkloadStatus::Partial => "partially placed",
            WorkloadStatus::Unplaced => "not placed",
        };
        let mut out = format!(
            "**placement** at {at}: {status}, {} replica(s)\n",
            w.replicas
        );
        for p in &w.placements {
            let pool = match (&p.pool, &p.accelerator) {
                (Some(pool), Some(acc)) => format!(", pool `{pool}` ({acc})"),
                (Some(pool), None) => format!(", pool `{pool}`"),
                _ => String::new(),
            };
            out.push_str(&format!(
                "- on `{}`{pool}: {} replica(s)\n",
                p.target, p.replicas
            ));
        }
        if let Some(why) = &w.unplaced {
            out.push_str(&format!(
                "- missing {}: {}\n",
                why.missing_replicas, why.message
            ));
        }
        if !w.rejected.is_empty() {
            out.push_str("\n**rejected**\n");
            for r in &w.rejected {
                let others = if r.others > 0 {
                    format!(" (and {} more)", r.others)
                } else {
                    String::new()
                };
                out.push_str(&format!("- `{}`: {}{others}\n", r.target, r.message));
            }
        }
        out
    }

    /// Completions at `offset`. `line_prefix` is the text of the line up to the cursor: a
    /// half-typed `key = ` has no value in the tree yet, so the key is read from the text.
    pub fn completions(&self, file: FileId, offset: u32, line_prefix: &str) -> Vec<Completion> {
        let Some(ast) = self.ast(file) else {
            return Vec::new();
        };
        let located = locate(ast, offset);
        let typed_key = typed_key(line_prefix);
        let expected = match (located.expected, located.schema, typed_key) {
            (Some(ty), _, _) => Some(ty),
            (None, Some(schema), Some(key)) => {
                schema.field(key).and_then(|(_, f)| locate::value_ty(f))
            }
            _ => None,
        };
        if let Some(ty) = expected {
            return self.value_completions(file, ty);
        }
        match located.schema {
            Some(schema) if typed_key.is_none() => field_completions(schema),
            Some(_) => Vec::new(),
            None if !located.in_item || line_prefix.trim().is_empty() => keyword_completions(),
            None => Vec::new(),
        }
    }

    fn value_completions(&self, file: FileId, ty: Ty) -> Vec<Completion> {
        let mut out = Vec::new();
        match ty {
            Ty::Enum(e) => {
                for m in e.members() {
                    out.push(Completion {
                        label: (*m).into(),
                        kind: CompletionKind::EnumMember,
                        detail: e.name().into(),
                        doc: String::new(),
                    });
                }
            }
            Ty::Bool => {
                for b in ["true", "false"] {
                    out.push(keyword(b));
                }
            }
            Ty::List(el) => return self.value_completions(file, *el),
            Ty::OneOf(ctors) => {
                for c in ctors {
                    out.push(Completion {
                        label: c.name.into(),
                        kind: CompletionKind::Constructor,
                        detail: ty.describe(),
                        doc: c.doc.into(),
                    });
                }
            }
            Ty::Ref(RefKind::Accelerator) => {
                for a in &self.catalogue.accelerators {
                    out.push(Completion {
                        label: a.name.clone(),
                        kind: CompletionKind::Name,
                        detail: "accelerator (std.gpu)".into(),
                        doc: accelerator_markdown(a),
                    });
                }
            }
            Ty::Ref(RefKind::Service) => {
                for s in &self.catalogue.services {
                    out.push(Completion {
                        label: s.name.clone(),
                        kind: CompletionKind::Name,
                        detail: "service (std.services)".into(),
                        doc: s.doc.clone(),
                    });
                }
            }
            Ty::Ref(kind) => {
                out.extend(self.names_in_scope(file, |d| def_ref_kind(d) == Some(kind)))
            }
            _ => out.extend(self.names_in_scope(file, |d| matches!(d, Def::Const(_)))),
        }
        out
    }

    fn names_in_scope(&self, file: FileId, wanted: impl Fn(Def) -> bool) -> Vec<Completion> {
        let scope = self.scope(file);
        self.with_names(|names| {
            names
                .visible(scope, &wanted)
                .into_iter()
                .filter_map(|n| names.lookup(scope, n).map(|(d, _)| (n, d)))
                .map(|(n, d)| Completion {
                    label: n.into(),
                    kind: CompletionKind::Name,
                    detail: d.noun().into(),
                    doc: def_item(names, d).0.docs.join("\n"),
                })
                .collect()
        })
    }

    /// The outline of `file`.
    pub fn symbols(&self, file: FileId) -> Vec<Symbol> {
        self.ast(file)
            .map(|ast| ast.items.iter().filter_map(item_symbol).collect())
            .unwrap_or_default()
    }
}

/// The span a site covers.
fn site_span(site: &Site<'_>) -> Span {
    match site {
        Site::Key { span, .. } | Site::Keyword { span, .. } | Site::Ctor { span, .. } => *span,
        Site::Name { ident, .. } | Site::Definition { ident } => ident.span,
    }
}

/// The item defining `def` and its file.
// INVARIANT: a `Def`'s index is its definition's position in the table of `names` it names.
#[allow(clippy::indexing_slicing)]
fn def_item<'a>(names: &Names<'a>, def: Def) -> (&'a Item, FileId) {
    let item = match def {
        Def::Const(i) => names.consts[i as usize].item,
        Def::Model(i) => names.models[i as usize].item,
        Def::Workload(i) => names.workloads[i as usize].item,
        Def::Target(i) => names.targets[i as usize].item,
        Def::Policy(i) => names.policies[i as usize].item,
    };
    (item, item.span.file)
}

fn def_ref_kind(def: Def) -> Option<RefKind> {
    match def {
        Def::Model(_) => Some(RefKind::Model),
        Def::Workload(_) => Some(RefKind::Workload),
        Def::Target(_) => Some(RefKind::Target),
        Def::Const(_) | Def::Policy(_) => None,
    }
}

/// The key of a half-typed `key = …` on the cursor's line.
fn typed_key(line_prefix: &str) -> Option<&str> {
    let (key, _) = line_prefix.rsplit_once('=')?;
    let key = key.trim_end();
    let start = key
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let key = &key[start..];
    (!key.is_empty()).then_some(key)
}

fn field_markdown(field: &Field) -> String {
    let ty = match field.shape {
        schema::Shape::Block(s) | schema::Shape::LabelledBlock(s) => {
            format!("a `{} {{ … }}` block", s.name)
        }
        _ => locate::value_ty(field).map_or_else(String::new, |t| t.describe()),
    };
    let presence = match field.presence {
        Presence::Required => "required".to_string(),
        Presence::Optional => "optional".to_string(),
        Presence::Default(d) => format!("default: {d}"),
        Presence::Repeated => "any number of times".to_string(),
        Presence::AtLeastOne => "at least once".to_string(),
    };
    format!(
        "**{}**: {ty} ({presence})\n\n`{}`\n\n{}",
        field.name,
        field.shape.example(field.name),
        field.doc
    )
}

fn enum_member_markdown(expected: Option<Ty>, name: &str) -> Option<String> {
    let Some(Ty::Enum(e)) = expected else {
        return None;
    };
    e.members().contains(&name).then(|| {
        let all: Vec<String> = e.members().iter().map(|m| format!("`{m}`")).collect();
        format!("**{}** `{name}`\n\nmembers: {}", e.name(), all.join(", "))
    })
}

/// Sizes as the catalogue writes them: decimal gigabytes when exact.
fn size(bytes: u64) -> String {
    const GB: u64 = 1_000_000_000;
    if bytes.is_multiple_of(GB) {
        format!("{}GB", bytes / GB)
    } else {
        format!("{bytes} bytes")
    }
}

fn accelerator_markdown(a: &ir::Accelerator) -> String {
    let mut out = format!(
        "vendor: `{}` · family: `{}` · memory: {}",
        a.vendor,
        a.family,
        size(a.memory)
    );
    if !a.mig_profiles.is_empty() {
        let profiles: Vec<String> = a
            .mig_profiles
            .iter()
            .map(|p| format!("`{}` ×{}", p.name, p.instances))
            .collect();
        out.push_str(&format!("\n\nMIG: {}", profiles.join(", ")));
    }
    out
}

fn field_completions(schema: &BlockSchema) -> Vec<Completion> {
    schema
        .fields
        .iter()
        .map(|f| Completion {
            label: f.name.into(),
            kind: CompletionKind::Field,
            detail: field_markdown(f)
                .lines()
                .next()
                .unwrap_or_default()
                .replace("**", ""),
            doc: f.doc.into(),
        })
        .collect()
}

fn keyword(word: &str) -> Completion {
    Completion {
        label: word.into(),
        kind: CompletionKind::Keyword,
        detail: String::new(),
        doc: String::new(),
    }
}

fn keyword_completions() -> Vec<Completion> {
    let mut out: Vec<Completion> = ["use", "const", "policy"]
        .into_iter()
        .map(keyword)
        .collect();
    for kind in [
        DeclKind::Model,
        DeclKind::Workload,
        DeclKind::Target,
        DeclKind::Placement,
    ] {
        let schema = schema::decl_schema(kind);
        out.push(Completion {
            doc: schema.doc.into(),
            ..keyword(kind.keyword())
        });
    }
    out
}

fn item_symbol(item: &Item) -> Option<Symbol> {
    let (name, kind, children) = match &item.kind {
        ItemKind::Const(c) => (c.name.as_ref()?, SymbolKind::Const, Vec::new()),
        ItemKind::Decl(d) => {
            let kind = match d.kind {
                DeclKind::Model => SymbolKind::Model,
                DeclKind::Workload => SymbolKind::Workload,
                DeclKind::Target => SymbolKind::Target,
                DeclKind::Placement => SymbolKind::Placement,
            };
            (d.name.as_ref()?, kind, body_symbols(&d.body))
        }
        ItemKind::Policy(p) => (p.name.as_ref()?, SymbolKind::Policy, Vec::new()),
        ItemKind::Use(_) | ItemKind::Error => return None,
    };
    Some(Symbol {
        name: name.name.clone(),
        kind,
        span: item.span,
        name_span: name.span,
        children,
    })
}

fn body_symbols(body: &crate::syntax::ast::Body) -> Vec<Symbol> {
    body.entries
        .iter()
        .filter_map(|e| {
            let (key, label, kind, children) = match &e.kind {
                EntryKind::Field { key, label, .. } => (key, label, SymbolKind::Field, Vec::new()),
                EntryKind::Bound { key, .. } => (key, &None, SymbolKind::Field, Vec::new()),
                EntryKind::Block { key, label, body } => {
                    (key, label, SymbolKind::Block, body_symbols(body))
                }
                EntryKind::Error => return None,
            };
            let name = match label {
                Some(l) => format!("{} {}", key.name, l.name),
                None => key.name.clone(),
            };
            Some(Symbol {
                name,
                kind,
                span: e.span,
                name_span: key.span,
                children,
            })
        })
        .collect()
}

/// Token classes of `text` (file `file`), in source order, for semantic highlighting.
/// Contextual words count as keywords where they start an item, a rule or follow `=` (`in`).
pub fn semantic_tokens(
    file: FileId,
    text: &str,
    ast: Option<&SourceFileAst>,
) -> Vec<(Span, TokenClass)> {
    let lexed = lex(file, text);
    let mut keywords: Vec<Span> = Vec::new();
    let mut definitions: Vec<Span> = Vec::new();
    let mut properties: Vec<Span> = Vec::new();
    if let Some(ast) = ast {
        for item in &ast.items {
            match &item.kind {
                ItemKind::Decl(d) => {
                    keywords.push(d.keyword_span);
                    definitions.extend(d.name.as_ref().map(|n| n.span));
                    collect_keys(&d.body, &mut properties);
                }
                ItemKind::Policy(p) => {
                    keywords.push(p.keyword_span);
                    definitions.extend(p.name.as_ref().map(|n| n.span));
                }
                ItemKind::Const(c) => definitions.extend(c.name.as_ref().map(|n| n.span)),
                ItemKind::Use(_) | ItemKind::Error => {}
            }
        }
    }
    let mut out: Vec<(Span, TokenClass)> = lexed
        .tokens
        .iter()
        .filter_map(|(tok, span)| {
            let class = match tok {
                Token::Ident(_) if keywords.contains(span) => TokenClass::Keyword,
                Token::Ident(_) if definitions.contains(span) => TokenClass::Definition,
                Token::Ident(_) if properties.binary_search(span).is_ok() => TokenClass::Property,
                Token::Ident(_) | Token::Invalid => return None,
                Token::Int(_) | Token::Decimal(_) | Token::Quantity(_) | Token::Clock(_) => {
                    TokenClass::Number
                }
                Token::Str(_) => TokenClass::String,
                Token::Use
                | Token::Const
                | Token::True
                | Token::False
                | Token::And
                | Token::Or
                | Token::Not
                | Token::In
                | Token::When
                | Token::During => TokenClass::Keyword,
                _ => TokenClass::Operator,
            };
            Some((*span, class))
        })
        .collect();
    out.extend(lexed.comments.iter().map(|c| (c.span, TokenClass::Comment)));
    out.sort_by_key(|(s, _)| (s.start, s.end));
    out
}

fn collect_keys(body: &crate::syntax::ast::Body, out: &mut Vec<Span>) {
    for e in &body.entries {
        match &e.kind {
            EntryKind::Field { key, .. } | EntryKind::Bound { key, .. } => out.push(key.span),
            EntryKind::Block { key, body, .. } => {
                out.push(key.span);
                collect_keys(body, out);
            }
            EntryKind::Error => {}
        }
    }
    out.sort();
}

/// The replacement a "did you mean `x`?" help proposes, applied to the primary span.
pub fn quick_fix(d: &Diagnostic) -> Option<QuickFix> {
    let help = d.help.as_deref()?;
    let rest = help.strip_prefix("did you mean `")?;
    let (replacement, _) = rest.split_once('`')?;
    if d.primary.span.is_empty() {
        return None;
    }
    Some(QuickFix {
        title: format!("replace with `{replacement}`"),
        span: d.primary.span,
        replacement: replacement.into(),
    })
}

#[cfg(test)]
mod tests;
