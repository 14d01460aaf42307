//! What is at a byte offset of a parsed file: the innermost field key, name, constructor or
//! definition, and the schema and expected type around it (for completion). Walks the
//! syntax tree only; holes (`Error` nodes, `None` names) are skipped, so any text works.

use crate::sema::schema::{self, BlockSchema, Ctor, Field, Shape};
use crate::sema::types::Ty;
use crate::source::Span;
use crate::syntax::ast::{
    Body, Decl, DeclKind, EntryKind, Expr, ExprKind, Ident, ItemKind, MapKey, PolicyItem, RuleKind,
    SourceFileAst, UseItem, UseTree,
};

/// The thing under the cursor.
#[derive(Clone, Debug)]
pub enum Site<'a> {
    /// A field key in a block whose schema is known.
    Key { field: &'static Field, span: Span },
    /// A declaration keyword (`workload`) or policy rule keyword.
    Keyword {
        schema: &'static BlockSchema,
        span: Span,
    },
    /// A name used as a value or imported; `qualifier` is the module path of `std.gpu.H100`
    /// or of a `use` item.
    Name {
        ident: &'a Ident,
        qualifier: Option<String>,
    },
    /// The name of a definition, where it is defined.
    Definition { ident: &'a Ident },
    /// A record constructor: `kubernetes { … }`, `mig { … }`.
    Ctor { ctor: &'static Ctor, span: Span },
}

/// `std.gpu` from the idents written.
fn dotted(path: &[Ident]) -> String {
    let parts: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
    parts.join(".")
}

/// Everything found at an offset.
#[derive(Clone, Debug, Default)]
pub struct Located<'a> {
    pub site: Option<Site<'a>>,
    /// The innermost block around the offset whose schema is known (`None` at top level).
    pub schema: Option<&'static BlockSchema>,
    /// The type expected at the offset when it is inside a field's value.
    pub expected: Option<Ty>,
    /// Whether the offset lies inside any item (otherwise it is at top level).
    pub in_item: bool,
}

/// Finds what is at `offset` in `ast`.
pub fn locate(ast: &SourceFileAst, offset: u32) -> Located<'_> {
    let mut finder = Finder {
        offset,
        found: Located::default(),
        all: None,
    };
    finder.file(ast);
    finder.found
}

/// Every name occurrence of a file (uses, imports and definitions), in source order.
pub fn occurrences(ast: &SourceFileAst) -> Vec<Site<'_>> {
    let mut finder = Finder {
        offset: 0,
        found: Located::default(),
        all: Some(Vec::new()),
    };
    finder.file(ast);
    finder.all.unwrap_or_default()
}

/// Whether `offset` touches `span` (both ends included: a cursor right after a name is on it).
fn touches(span: Span, offset: u32) -> bool {
    span.start <= offset && offset <= span.end
}

/// The type a field's value has, `None` for blocks.
pub fn value_ty(field: &Field) -> Option<Ty> {
    match field.shape {
        Shape::Value(t) | Shape::Labelled(t) | Shape::Bound(t) => Some(t),
        Shape::Block(_) | Shape::LabelledBlock(_) => None,
    }
}

/// The schema of a nested block field.
pub fn block_schema(field: &Field) -> Option<&'static BlockSchema> {
    match field.shape {
        Shape::Block(s) | Shape::LabelledBlock(s) => Some(s),
        _ => None,
    }
}

/// The constructor `name` of a record expected as `ty` (or of any type, when unknown).
pub fn ctor_for(ty: Option<Ty>, name: &str) -> Option<&'static Ctor> {
    let from = |ctors: &'static [Ctor]| ctors.iter().find(|c| c.name == name);
    match ty {
        Some(Ty::OneOf(ctors)) => from(ctors),
        _ => [schema::RUNTIMES, schema::LINKS, schema::DATA_OFFERS]
            .into_iter()
            .find_map(from),
    }
}

/// The record schema of `name { … }` expected as `ty`.
fn record_schema(ty: Option<Ty>, name: &str) -> Option<&'static BlockSchema> {
    match ty {
        Some(Ty::Record(s)) if s.name == name => Some(s),
        Some(Ty::List(inner)) => record_schema(Some(*inner), name),
        _ => ctor_for(ty, name).map(|c| c.body).or_else(|| {
            schema::CATALOGUE_RECORDS
                .iter()
                .chain([&&schema::MIG])
                .find(|s| s.name == name)
                .copied()
        }),
    }
}

/// The schema of a policy rule's body.
fn rule_schema(kind: &RuleKind) -> Option<(&'static BlockSchema, &Body)> {
    match kind {
        RuleKind::Entitle { body, .. } => Some((&schema::ENTITLE, body)),
        RuleKind::Quota { body, .. } => Some((&schema::QUOTA, body)),
        RuleKind::Limit { body, .. } => Some((&schema::LIMIT, body)),
        RuleKind::Approval { body, .. } => Some((&schema::APPROVAL, body)),
        _ => None,
    }
}

/// A `Member` chain of plain names (`std.gpu`), as the idents written.
fn dotted_names(e: &Expr, out: &mut Vec<Ident>) -> bool {
    match &e.kind {
        ExprKind::Name(i) => {
            out.push(i.clone());
            true
        }
        ExprKind::Member { base, field } => {
            let ok = dotted_names(base, out);
            out.push(field.clone());
            ok
        }
        _ => false,
    }
}

/// One walk serves both queries: with `all` set, every position matches and every name
/// site is collected; otherwise only the path to `offset` is followed.
struct Finder<'a> {
    offset: u32,
    found: Located<'a>,
    all: Option<Vec<Site<'a>>>,
}

impl<'a> Finder<'a> {
    fn touches(&self, span: Span) -> bool {
        self.all.is_some() || touches(span, self.offset)
    }

    fn file(&mut self, ast: &'a SourceFileAst) {
        for item in &ast.items {
            if !self.touches(item.span) {
                continue;
            }
            self.found.in_item = true;
            match &item.kind {
                ItemKind::Use(u) => self.use_item(u),
                ItemKind::Const(c) => {
                    self.definition(c.name.as_ref());
                    self.expr(&c.value, None);
                }
                ItemKind::Decl(d) => self.decl(d),
                ItemKind::Policy(p) => self.policy(p),
                ItemKind::Error => {}
            }
        }
    }

    fn site(&mut self, span: Span, site: Site<'a>) {
        if let Some(all) = &mut self.all {
            if matches!(site, Site::Name { .. } | Site::Definition { .. }) {
                all.push(site);
            }
        } else if touches(span, self.offset) {
            self.found.site = Some(site);
        }
    }

    /// Records the key of a field or block entry, when the schema knows the field.
    fn key_site(&mut self, key: &Ident, field: Option<&'static Field>) {
        if let Some(field) = field {
            self.site(
                key.span,
                Site::Key {
                    field,
                    span: key.span,
                },
            );
        }
    }

    fn definition(&mut self, name: Option<&'a Ident>) {
        if let Some(ident) = name {
            self.site(ident.span, Site::Definition { ident });
        }
    }

    fn use_item(&mut self, u: &'a UseItem) {
        match &u.tree {
            UseTree::Single => {
                if let Some((last, init)) = u.path.split_last() {
                    self.site(
                        last.span,
                        Site::Name {
                            ident: last,
                            qualifier: Some(dotted(init)),
                        },
                    );
                }
            }
            UseTree::Group(items) => {
                for ident in items {
                    self.site(
                        ident.span,
                        Site::Name {
                            ident,
                            qualifier: Some(dotted(&u.path)),
                        },
                    );
                }
            }
            UseTree::Glob(_) => {}
        }
    }

    fn decl(&mut self, d: &'a Decl) {
        let schema = schema::decl_schema(d.kind);
        self.site(
            d.keyword_span,
            Site::Keyword {
                schema,
                span: d.keyword_span,
            },
        );
        if let Some(ident) = &d.name {
            // A placement's name is a use of the workload it places.
            let site = if d.kind == DeclKind::Placement {
                Site::Name {
                    ident,
                    qualifier: None,
                }
            } else {
                Site::Definition { ident }
            };
            self.site(ident.span, site);
        }
        self.body(&d.body, Some(schema));
    }

    fn policy(&mut self, p: &'a PolicyItem) {
        self.definition(p.name.as_ref());
        for rule in &p.rules {
            if !self.touches(rule.span) {
                continue;
            }
            match &rule.kind {
                RuleKind::Deny { condition, .. } => self.expr(condition, Some(Ty::Bool)),
                RuleKind::Entitle { subject, .. } | RuleKind::Quota { subject, .. } => {
                    self.expr(subject, None);
                }
                RuleKind::Limit { value, .. } => self.expr(value, None),
                RuleKind::Reclaim {
                    value, condition, ..
                } => {
                    self.expr(value, None);
                    self.expr(condition, Some(Ty::Bool));
                }
                RuleKind::Approval { condition, .. } => self.expr(condition, Some(Ty::Bool)),
                RuleKind::Window { days, .. } => self.expr(days, None),
                RuleKind::Error => {}
            }
            if let Some((schema, body)) = rule_schema(&rule.kind) {
                self.body(body, Some(schema));
            }
        }
    }

    fn body(&mut self, body: &'a Body, schema: Option<&'static BlockSchema>) {
        // The braces themselves belong to the enclosing entry.
        let inside = body.span.start < self.offset && self.offset < body.span.end;
        if self.all.is_none() && !inside {
            return;
        }
        self.found.schema = schema;
        self.found.expected = None;
        for entry in &body.entries {
            if !self.touches(entry.span) {
                continue;
            }
            let field = |key: &Ident| schema.and_then(|s| s.field(&key.name)).map(|(_, f)| f);
            match &entry.kind {
                EntryKind::Field { key, value, .. } | EntryKind::Bound { key, value, .. } => {
                    let field = field(key);
                    self.key_site(key, field);
                    if self.offset > key.span.end {
                        self.found.expected = field.and_then(value_ty);
                    }
                    self.expr(value, field.and_then(value_ty));
                }
                EntryKind::Block { key, body, .. } => {
                    let field = field(key);
                    self.key_site(key, field);
                    self.body(body, field.and_then(block_schema));
                }
                EntryKind::Error => {}
            }
        }
    }

    fn expr(&mut self, e: &'a Expr, ty: Option<Ty>) {
        if !self.touches(e.span) {
            return;
        }
        self.found.expected = ty;
        match &e.kind {
            ExprKind::Name(ident) => self.site(
                ident.span,
                Site::Name {
                    ident,
                    qualifier: None,
                },
            ),
            ExprKind::Member { base, field } => {
                let mut path = Vec::new();
                if dotted_names(base, &mut path) && path.first().is_some_and(|i| i.name == "std") {
                    let qualifier = Some(dotted(&path));
                    self.site(
                        field.span,
                        Site::Name {
                            ident: field,
                            qualifier,
                        },
                    );
                    return;
                }
                self.expr(base, None);
            }
            ExprKind::Call { callee, args } => {
                self.expr(callee, None);
                let arg = match ty {
                    Some(Ty::Call(c)) => Some(c.arg),
                    _ => None,
                };
                for a in args {
                    self.expr(a, arg);
                }
            }
            ExprKind::List(items) => {
                let el = match ty {
                    Some(Ty::List(el)) => Some(*el),
                    _ => None,
                };
                for x in items {
                    self.expr(x, el);
                }
            }
            ExprKind::Map(entries) => {
                for m in entries {
                    let vt = match ty {
                        Some(Ty::Map(_, v)) => Some(*v),
                        Some(Ty::MapRecord(s)) => {
                            s.field(m.key.text()).and_then(|(_, f)| value_ty(f))
                        }
                        _ => None,
                    };
                    if let (MapKey::Name(_), Some(Ty::MapRecord(s))) = (&m.key, ty)
                        && let Some((_, field)) = s.field(m.key.text())
                    {
                        self.site(
                            m.key.span(),
                            Site::Key {
                                field,
                                span: m.key.span(),
                            },
                        );
                    }
                    self.expr(&m.value, vt);
                }
            }
            ExprKind::Record { ctor, body } => {
                if let Some(c) = ctor_for(ty, &ctor.name) {
                    self.site(
                        ctor.span,
                        Site::Ctor {
                            ctor: c,
                            span: ctor.span,
                        },
                    );
                }
                let schema = record_schema(ty, &ctor.name);
                self.body(body, schema);
            }
            ExprKind::Unary { operand, .. } => self.expr(operand, None),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs, None);
                self.expr(rhs, None);
            }
            ExprKind::Lambda { body, .. } => self.expr(body, None),
            ExprKind::Int(_)
            | ExprKind::Decimal(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::Quantity(_)
            | ExprKind::Clock(_)
            | ExprKind::Error => {}
        }
    }
}
