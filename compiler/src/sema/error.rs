//! Everything semantics can find wrong, as data, and how each becomes a [`Diagnostic`].

use crate::diagnostics::{Code, Diagnostic};
use crate::source::Span;

/// A semantic error: names, schema, types or a semantic check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SemaError {
    // ---------------------------------------------------------------- names
    UnknownName {
        name: String,
        span: Span,
        /// `a target`, `a name`.
        expected: String,
        suggestion: Option<String>,
        /// A standard-library module that has the name (`std.gpu`).
        in_module: Option<String>,
        /// The module that has the suggestion, when the suggestion is a name of the standard
        /// library this file does not import (`H1OO`: `H100`, in `std.gpu`).
        suggestion_module: Option<String>,
    },
    DuplicateDefinition {
        name: String,
        first: Span,
        second: Span,
    },
    UnknownModule {
        path: String,
        span: Span,
        suggestion: Option<String>,
    },
    UnknownImport {
        module: String,
        name: String,
        span: Span,
        suggestion: Option<String>,
    },
    ConstCycle {
        name: String,
        span: Span,
        /// The other constants of the cycle, in order.
        through: Vec<(String, Span)>,
    },
    WrongKindOfReference {
        name: String,
        span: Span,
        expected: String,
        /// `target`, `model`, `constant`.
        found: String,
        def: Span,
    },
    ModuleImport {
        path: String,
        span: Span,
    },

    // ---------------------------------------------------------------- schema and types
    UnknownField {
        field: String,
        block: &'static str,
        span: Span,
        suggestion: Option<String>,
        fields: String,
    },
    MissingField {
        field: &'static str,
        /// `workload `vision``, `resources`.
        block: String,
        span: Span,
        example: String,
    },
    DuplicateField {
        field: String,
        first: Span,
        second: Span,
    },
    TypeMismatch {
        expected: String,
        found: String,
        span: Span,
        help: Option<String>,
        /// The constant through which the value came, and where it is defined.
        via: Option<(String, Span)>,
    },
    UnknownMember {
        name: String,
        /// With its article: `an environment class`.
        enumeration: String,
        members: String,
        span: Span,
        suggestion: Option<String>,
    },
    UnitMismatch {
        /// `compare`, `add`, `subtract`, `multiply`, `divide`.
        verb: &'static str,
        lhs: String,
        rhs: String,
        lhs_span: Span,
        rhs_span: Span,
    },
    Overflow {
        span: Span,
    },
    InexactValue {
        span: Span,
        what: String,
        help: Option<String>,
    },
    UnorderedComparison {
        what: String,
        op: &'static str,
        span: Span,
    },
    WrongEntryShape {
        field: String,
        span: Span,
        expected: String,
    },
    InvalidBound {
        field: String,
        op: &'static str,
        span: Span,
    },
    UnknownPath {
        root: &'static str,
        field: String,
        span: Span,
        suggestion: Option<String>,
        fields: String,
    },
    NotBoolean {
        found: String,
        span: Span,
    },
    UnknownTimeZone {
        zone: String,
        span: Span,
        suggestion: Option<String>,
    },
    InvalidDays {
        span: Span,
        suggestion: Option<String>,
    },
    InvalidMethod {
        span: Span,
        message: String,
        help: String,
    },
    NonConstantArithmetic {
        op: &'static str,
        span: Span,
    },
    UnknownConstructor {
        ctor: String,
        span: Span,
        expected: String,
        suggestion: Option<String>,
    },
    OutOfRange {
        value: String,
        span: Span,
        range: &'static str,
    },
    InvalidCall {
        span: Span,
        message: String,
        help: Option<String>,
    },
    InvalidRuleCondition {
        rule: &'static str,
        span: Span,
        form: &'static str,
    },
    UnknownSelector {
        name: String,
        span: Span,
        suggestion: Option<String>,
    },
    InvalidClockRange {
        span: Span,
        reason: &'static str,
    },
    InvalidTaint {
        text: String,
        span: Span,
    },
    DivisionByZero {
        span: Span,
    },
    InvalidInstant {
        text: String,
        span: Span,
    },
    InvalidPublicKey {
        span: Span,
    },

    // ---------------------------------------------------------------- semantic checks
    VariantTooLarge {
        variant: String,
        need: String,
        span: Span,
        /// The largest accelerator it may run on and its memory.
        largest: (String, String),
        listed: bool,
    },
    ZeroCount {
        field: String,
        span: Span,
    },
    GpuWithoutAccelerator {
        workload: String,
        span: Span,
        model: Option<String>,
    },
    NegativeQuantity {
        span: Span,
        expected: String,
    },
    InvalidDigest {
        digest: String,
        span: Span,
        reason: &'static str,
    },
    InvalidMirror {
        text: String,
        span: Span,
        reason: &'static str,
    },
    DuplicatePlacement {
        workload: String,
        first: Span,
        second: Span,
    },
    UnknownMigProfile {
        profile: String,
        span: Span,
        /// Whose profiles were searched: `L4` or `any accelerator`.
        of: String,
        available: Vec<String>,
        suggestion: Option<String>,
    },
    FallbackNotCandidate {
        target: String,
        span: Span,
        targets: Span,
    },
    DuplicateEntry {
        what: String,
        name: String,
        first: Span,
        second: Span,
    },
    IsolateFromSelf {
        workload: String,
        span: Span,
    },
    DuplicateRule {
        what: &'static str,
        subject: String,
        first: Span,
        second: Span,
    },
    TelemetryChoice {
        span: Span,
        both: bool,
    },
    MigWithoutGpu {
        span: Span,
    },
}

fn did_you_mean(d: Diagnostic, suggestion: &Option<String>) -> Diagnostic {
    match suggestion {
        Some(s) => d.help(format!("did you mean `{s}`?")),
        None => d,
    }
}

impl SemaError {
    pub fn diagnostic(&self) -> Diagnostic {
        use SemaError as E;
        match self {
            E::UnknownName {
                name,
                span,
                expected,
                suggestion,
                in_module,
                suggestion_module,
            } => {
                let d = Diagnostic::error(Code::UnknownName, format!("unknown name `{name}`"), *span)
                    .primary_label(format!("expected {expected}"));
                match (in_module, suggestion, suggestion_module) {
                    (Some(m), _, _) => d.help(format!(
                        "`{name}` is in `{m}`: add `use {m}.{name}` to this file"
                    )),
                    (None, Some(s), Some(m)) => d.help(format!(
                        "did you mean `{s}`? it is in `{m}`: add `use {m}.{s}` to this file"
                    )),
                    (None, s, None) => did_you_mean(d, s),
                    (None, None, Some(_)) => d,
                }
            }
            E::DuplicateDefinition {
                name,
                first,
                second,
            } => Diagnostic::error(
                Code::DuplicateDefinition,
                format!("`{name}` is defined more than once"),
                *second,
            )
            .primary_label("defined again here")
            .label(*first, "first defined here")
            .help("names are shared by every file of the spec: rename one of them"),
            E::UnknownModule {
                path,
                span,
                suggestion,
            } => did_you_mean(
                Diagnostic::error(Code::UnknownModule, format!("unknown module `{path}`"), *span)
                    .primary_label("no such module")
                    .note("the modules are `std.gpu`, `std.services` and `std.environments`"),
                suggestion,
            ),
            E::UnknownImport {
                module,
                name,
                span,
                suggestion,
            } => did_you_mean(
                Diagnostic::error(
                    Code::UnknownImport,
                    format!("`{module}` has no item `{name}`"),
                    *span,
                )
                .primary_label(format!("not in `{module}`")),
                suggestion,
            ),
            E::ConstCycle {
                name,
                span,
                through,
            } => {
                let mut d = Diagnostic::error(
                    Code::ConstCycle,
                    format!("constant `{name}` depends on itself"),
                    *span,
                )
                .primary_label("the cycle starts here");
                for (n, s) in through {
                    d = d.label(*s, format!("`{n}` is part of the cycle"));
                }
                d.help("a constant's value cannot refer back to it, directly or through others")
            }
            E::WrongKindOfReference {
                name,
                span,
                expected,
                found,
                def,
            } => Diagnostic::error(
                Code::WrongKindOfReference,
                format!("expected {expected}, found {found} `{name}`"),
                *span,
            )
            .primary_label(format!("this is {}", with_article(found)))
            .label(*def, format!("`{name}` is defined here")),
            E::ModuleImport { path, span } => Diagnostic::error(
                Code::ModuleImport,
                format!("`{path}` is a module, not an item"),
                *span,
            )
            .help(format!(
                "import its items: `use {path}.{{A, B}}` or `use {path}.*`"
            )),

            E::UnknownField {
                field,
                block,
                span,
                suggestion,
                fields,
            } => {
                let d = Diagnostic::error(
                    Code::UnknownField,
                    format!("`{field}` is not a field of {block}"),
                    *span,
                )
                .primary_label("unknown field");
                match suggestion {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None if fields.is_empty() => d.note(format!("{block} has no fields")),
                    None => d.note(format!("the fields of {block} are {fields}")),
                }
            }
            E::MissingField {
                field,
                block,
                span,
                example,
            } => Diagnostic::error(
                Code::MissingField,
                format!("{block} is missing the required field `{field}`"),
                *span,
            )
            .help(format!("add `{example}`")),
            E::DuplicateField {
                field,
                first,
                second,
            } => Diagnostic::error(
                Code::DuplicateField,
                format!("field `{field}` is given twice"),
                *second,
            )
            .primary_label("given again here")
            .label(*first, "first given here")
            .help("remove one of them"),
            E::TypeMismatch {
                expected,
                found,
                span,
                help,
                via,
            } => {
                let mut d = Diagnostic::error(
                    Code::TypeMismatch,
                    format!("expected {expected}, found {found}"),
                    *span,
                );
                if let Some((name, def)) = via {
                    d = d
                        .primary_label(format!("`{name}` is {found}"))
                        .label(*def, format!("`{name}` is defined here"));
                }
                match help {
                    Some(h) => d.help(h.clone()),
                    None => d,
                }
            }
            E::UnknownMember {
                name,
                enumeration,
                members,
                span,
                suggestion,
            } => {
                let d = Diagnostic::error(
                    Code::UnknownMember,
                    format!("`{name}` is not {enumeration}"),
                    *span,
                )
                .note(format!("{enumeration} is one of {members}"));
                did_you_mean(d, suggestion)
            }
            E::UnitMismatch {
                verb,
                lhs,
                rhs,
                lhs_span,
                rhs_span,
            } => {
                let message = match *verb {
                    "compare" => format!("cannot compare {lhs} with {rhs}"),
                    "add" => format!("cannot add {lhs} and {rhs}"),
                    "subtract" => format!("cannot subtract {rhs} from {lhs}"),
                    "multiply" => format!("cannot multiply {lhs} by {rhs}"),
                    _ => format!("cannot divide {lhs} by {rhs}"),
                };
                Diagnostic::error(Code::UnitMismatch, message, lhs_span.to(*rhs_span))
                    .label(*lhs_span, format!("this is {lhs}"))
                    .label(*rhs_span, format!("this is {rhs}"))
            }
            E::Overflow { span } => Diagnostic::error(
                Code::Overflow,
                "arithmetic overflow: the value does not fit in 64 bits",
                *span,
            ),
            E::InexactValue { span, what, help } => {
                let d = Diagnostic::error(Code::InexactValue, what.clone(), *span);
                match help {
                    Some(h) => d.help(h.clone()),
                    None => d,
                }
            }
            E::UnorderedComparison { what, op, span } => Diagnostic::error(
                Code::UnorderedComparison,
                format!("{what} cannot be compared with `{op}`"),
                *span,
            )
            .help("they are not ordered: use `==` or `!=`"),
            E::WrongEntryShape {
                field,
                span,
                expected,
            } => Diagnostic::error(
                Code::WrongEntryShape,
                format!("`{field}` is not written this way"),
                *span,
            )
            .help(format!("write `{expected}`")),
            E::InvalidBound { field, op, span } => Diagnostic::error(
                Code::InvalidBound,
                format!("`{field}` takes an upper bound, not `{op}`"),
                *span,
            )
            .help(format!("write `{field} <= …`")),
            E::UnknownPath {
                root,
                field,
                span,
                suggestion,
                fields,
            } => {
                let d = Diagnostic::error(
                    Code::UnknownPath,
                    format!("`{field}` is not a field of {root}"),
                    *span,
                )
                .primary_label("unknown field");
                match suggestion {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.note(format!("conditions can use {fields}")),
                }
            }
            E::NotBoolean { found, span } => Diagnostic::error(
                Code::NotBoolean,
                format!("expected a condition, found {found}"),
                *span,
            )
            .help("a condition is a comparison, `x in list`, `list.any(x -> …)`, or `and`/`or`/`not` of conditions"),
            E::UnknownTimeZone {
                zone,
                span,
                suggestion,
            } => {
                let d = Diagnostic::error(
                    Code::UnknownTimeZone,
                    format!("unknown time zone `{zone}`"),
                    *span,
                )
                .primary_label("not an IANA time zone name");
                match suggestion {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.help("use a name such as `Europe/Paris`, `America/New_York` or `UTC`"),
                }
            }
            E::InvalidDays { span, suggestion } => {
                let d = Diagnostic::error(Code::InvalidDays, "invalid window days", *span)
                    .note("days are `weekdays`, `weekends`, `daily` or a list such as `[mon, tue]`");
                did_you_mean(d, suggestion)
            }
            E::InvalidMethod {
                span,
                message,
                help,
            } => Diagnostic::error(Code::InvalidMethod, message.clone(), *span).help(help.clone()),
            E::NonConstantArithmetic { op, span } => Diagnostic::error(
                Code::NonConstantArithmetic,
                format!("`{op}` needs constant operands in a condition"),
                *span,
            )
            .help("conditions compare `workload.…` and `target.…` values; compute constants only"),
            E::UnknownConstructor {
                ctor,
                span,
                expected,
                suggestion,
            } => did_you_mean(
                Diagnostic::error(
                    Code::UnknownConstructor,
                    format!("`{ctor}` is not a valid constructor here"),
                    *span,
                )
                .note(format!("expected {expected}")),
                suggestion,
            ),
            E::OutOfRange { value, span, range } => Diagnostic::error(
                Code::OutOfRange,
                format!("`{value}` is out of range"),
                *span,
            )
            .note(format!("the value must be {range}")),
            E::InvalidCall {
                span,
                message,
                help,
            } => {
                let d = Diagnostic::error(Code::InvalidCall, message.clone(), *span);
                match help {
                    Some(h) => d.help(h.clone()),
                    None => d,
                }
            }
            E::InvalidRuleCondition { rule, span, form } => Diagnostic::error(
                Code::InvalidRuleCondition,
                format!("unsupported condition for `{rule}`"),
                *span,
            )
            .help(format!("write `{form}`")),
            E::UnknownSelector {
                name,
                span,
                suggestion,
            } => did_you_mean(
                Diagnostic::error(
                    Code::UnknownSelector,
                    format!("unknown selector `{name}`"),
                    *span,
                )
                .note("rules select workloads by `class`, `kind` or `team`"),
                suggestion,
            ),
            E::InvalidClockRange { span, reason } => {
                Diagnostic::error(Code::InvalidClockRange, "invalid clock range", *span)
                    .primary_label(*reason)
            }
            E::InvalidTaint { text, span } => Diagnostic::error(
                Code::InvalidTaint,
                format!("invalid taint `{text}`"),
                *span,
            )
            .help("write `\"key=value:Effect\"` or `\"key:Effect\"`, with the effect `NoSchedule`, `PreferNoSchedule` or `NoExecute`"),
            E::DivisionByZero { span } => {
                Diagnostic::error(Code::DivisionByZero, "division by zero", *span)
            }
            E::InvalidPublicKey { span } => Diagnostic::error(
                Code::InvalidPublicKey,
                "this approver is not a valid public key",
                *span,
            )
            .primary_label("expected `berth-ed25519-public:` and 64 hexadecimal digits")
            .help("paste the whole text of the `.pub` file `berth keys generate` wrote"),
            E::InvalidInstant { text, span } => Diagnostic::error(
                Code::InvalidInstant,
                format!("`{text}` is not an instant"),
                *span,
            )
            .primary_label("not an RFC 3339 time")
            .help("write a time with its offset, such as `2026-12-31T00:00:00Z`"),

            E::VariantTooLarge {
                variant,
                need,
                span,
                largest,
                listed,
            } => {
                let (acc, mem) = largest;
                let scope = if *listed {
                    "any accelerator it lists"
                } else {
                    "any known accelerator"
                };
                Diagnostic::error(
                    Code::VariantTooLarge,
                    format!("variant `{variant}` needs {need} per GPU, more than {scope} has"),
                    *span,
                )
                .note(format!("the largest is `{acc}` with {mem}"))
            }
            E::ZeroCount { field, span } => Diagnostic::error(
                Code::ZeroCount,
                format!("`{field}` must be at least 1"),
                *span,
            ),
            E::GpuWithoutAccelerator {
                workload,
                span,
                model,
            } => {
                let d = Diagnostic::error(
                    Code::GpuWithoutAccelerator,
                    format!("workload `{workload}` needs GPUs but accepts no accelerator"),
                    *span,
                );
                match model {
                    Some(m) => d.help(format!(
                        "add `accelerators = [...]` or `gpu_memory` to the workload, or to a variant of model `{m}`"
                    )),
                    None => d.help("add `accelerators = [...]` to the workload, or `gpu_memory` to its resources"),
                }
            }
            E::NegativeQuantity { span, expected } => Diagnostic::error(
                Code::NegativeQuantity,
                format!("expected {expected}, found a negative value"),
                *span,
            )
            .primary_label("cannot be negative"),
            E::InvalidDigest {
                digest,
                span,
                reason,
            } => Diagnostic::error(
                Code::InvalidDigest,
                format!("invalid digest `{digest}`"),
                *span,
            )
            .primary_label(*reason)
            .help("a digest is `sha256:` followed by 64 lowercase hex digits"),
            E::InvalidMirror { text, span, reason } => Diagnostic::error(
                Code::InvalidMirror,
                format!("invalid registry mirror `{text}`"),
                *span,
            )
            .primary_label(*reason)
            .help("a mirror is `oci://HOST[:PORT]` or `oci://HOST[:PORT]/PATH`, e.g. `oci://registry.plant.local:5000/models`"),
            E::DuplicatePlacement {
                workload,
                first,
                second,
            } => Diagnostic::error(
                Code::DuplicatePlacement,
                format!("workload `{workload}` has more than one placement"),
                *second,
            )
            .primary_label("second placement")
            .label(*first, "first placement")
            .help("merge them into one `placement` block"),
            E::UnknownMigProfile {
                profile,
                span,
                of,
                available,
                suggestion,
            } => {
                let d = Diagnostic::error(
                    Code::UnknownMigProfile,
                    format!("`{of}` has no MIG profile `{profile}`"),
                    *span,
                );
                let d = if available.is_empty() {
                    d.note(format!("`{of}` does not support MIG"))
                } else {
                    let list: Vec<String> = available.iter().map(|p| format!("`{p}`")).collect();
                    d.note(format!("its profiles are {}", list.join(", ")))
                };
                did_you_mean(d, suggestion)
            }
            E::FallbackNotCandidate {
                target,
                span,
                targets,
            } => Diagnostic::error(
                Code::FallbackNotCandidate,
                format!("fallback `{target}` is not one of the placement's targets"),
                *span,
            )
            .label(*targets, "the candidate targets")
            .help(format!("add `{target}` to `targets`, or remove it from `fallback`")),
            E::DuplicateEntry {
                what,
                name,
                first,
                second,
            } => Diagnostic::error(
                Code::DuplicateEntry,
                format!("{what} `{name}` is given twice"),
                *second,
            )
            .primary_label("given again here")
            .label(*first, "first given here"),
            E::IsolateFromSelf { workload, span } => Diagnostic::error(
                Code::IsolateFromSelf,
                format!("workload `{workload}` cannot be isolated from itself"),
                *span,
            ),
            E::DuplicateRule {
                what,
                subject,
                first,
                second,
            } => Diagnostic::error(
                Code::DuplicateRule,
                format!("more than one {what} for {subject}"),
                *second,
            )
            .primary_label("second rule")
            .label(*first, "first rule")
            .help("merge them into one rule"),
            E::TelemetryChoice { span, both } => {
                let d = Diagnostic::error(
                    Code::TelemetryChoice,
                    "telemetry needs exactly one of `export` and `buffer`",
                    *span,
                );
                if *both {
                    d.primary_label("both are given")
                } else {
                    d.primary_label("neither is given")
                        .help("write `telemetry { export = live }` or `telemetry { buffer = 24h }`")
                }
            }
            E::MigWithoutGpu { span } => Diagnostic::error(
                Code::MigWithoutGpu,
                "a MIG profile needs a GPU count",
                *span,
            )
            .help("`gpu` counts MIG instances when `mig` is set: add `gpu = 1`"),
        }
    }
}

/// `a target`, `an accelerator`, `a constant`.
fn with_article(noun: &str) -> String {
    let article = if noun.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {noun}")
}
