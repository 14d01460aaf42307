//! The types of the language and the values semantics computes with.
//!
//! Every field of every block has a [`Ty`] (see `schema`). Values are exact: integers and
//! quantities are `i128` in base units (bytes, nanoseconds, bits per second, micro-units of
//! money), decimals are a mantissa and a scale. Arithmetic is checked: a result that leaves
//! the 64-bit range is an overflow diagnostic, a quantity that would need a fraction of its
//! base unit (`1.5ns`) an inexactness diagnostic. No floating point anywhere.

use super::resolve::{Def, ScopeRef};
use super::schema::{BlockSchema, CallSchema, Ctor};
use crate::syntax::ast::{Expr, Ident};
use crate::syntax::token::{Dimension, Num};

/// What a reference names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RefKind {
    Model,
    Target,
    Workload,
    Accelerator,
    Service,
}

impl RefKind {
    /// `a model`, `an accelerator`.
    pub fn with_article(self) -> &'static str {
        match self {
            RefKind::Model => "a model",
            RefKind::Target => "a target",
            RefKind::Workload => "a workload",
            RefKind::Accelerator => "an accelerator",
            RefKind::Service => "a service",
        }
    }

    pub fn noun(self) -> &'static str {
        match self {
            RefKind::Model => "model",
            RefKind::Target => "target",
            RefKind::Workload => "workload",
            RefKind::Accelerator => "accelerator",
            RefKind::Service => "service",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            RefKind::Model => "models",
            RefKind::Target => "targets",
            RefKind::Workload => "workloads",
            RefKind::Accelerator => "accelerators",
            RefKind::Service => "services",
        }
    }
}

/// An enumeration of the language: its members are bare names (`ga`, `factory`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EnumTy {
    EnvClass,
    Connectivity,
    Maturity,
    Kind,
    Class,
    Access,
    Classification,
    Format,
    Precision,
    Weekday,
    Objective,
    Export,
}

impl EnumTy {
    pub const ALL: &'static [EnumTy] = &[
        EnumTy::EnvClass,
        EnumTy::Connectivity,
        EnumTy::Maturity,
        EnumTy::Kind,
        EnumTy::Class,
        EnumTy::Access,
        EnumTy::Classification,
        EnumTy::Format,
        EnumTy::Precision,
        EnumTy::Weekday,
        EnumTy::Objective,
        EnumTy::Export,
    ];

    /// How the enumeration is called in messages.
    pub fn name(self) -> &'static str {
        match self {
            EnumTy::EnvClass => "environment class",
            EnumTy::Connectivity => "connectivity",
            EnumTy::Maturity => "maturity",
            EnumTy::Kind => "workload kind",
            EnumTy::Class => "workload class",
            EnumTy::Access => "access mode",
            EnumTy::Classification => "classification",
            EnumTy::Format => "model format",
            EnumTy::Precision => "precision",
            EnumTy::Weekday => "day",
            EnumTy::Objective => "objective",
            EnumTy::Export => "telemetry export",
        }
    }

    /// The members, lowest first for ordered enumerations. Those shared with the IR are
    /// spelled exactly as the IR's `as_str` (a test checks it).
    pub fn members(self) -> &'static [&'static str] {
        match self {
            EnumTy::EnvClass => &[
                "cloud",
                "datacenter",
                "factory",
                "branch",
                "edge",
                "airgapped",
            ],
            EnumTy::Connectivity => &["disconnected", "intermittent", "connected"],
            EnumTy::Maturity => &["absent", "preview", "ga"],
            EnumTy::Kind => &["service", "batch", "notebook", "agent"],
            EnumTy::Class => &["experiment", "development", "staging", "production"],
            EnumTy::Access => &["read", "write", "read_write"],
            EnumTy::Classification => &["public", "internal", "confidential", "restricted"],
            EnumTy::Format => &[
                "onnx",
                "tensorrt",
                "safetensors",
                "gguf",
                "pytorch",
                "torchscript",
                "openvino",
                "tflite",
                "savedmodel",
            ],
            EnumTy::Precision => &["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4"],
            EnumTy::Weekday => &["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
            EnumTy::Objective => &["cost", "data_latency"],
            EnumTy::Export => &["live"],
        }
    }

    /// `an environment class`, `a maturity`.
    pub fn with_article(self) -> String {
        let name = self.name();
        let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        format!("{article} {name}")
    }

    /// Ordered enumerations compare with `<`; the others only with `==` and `!=`.
    pub fn ordered(self) -> bool {
        matches!(
            self,
            EnumTy::Connectivity | EnumTy::Maturity | EnumTy::Class | EnumTy::Classification
        )
    }

    pub fn index_of(self, name: &str) -> Option<u8> {
        self.members()
            .iter()
            .position(|m| *m == name)
            .map(|i| i as u8)
    }

    pub fn member(self, index: u8) -> &'static str {
        self.members().get(index as usize).copied().unwrap_or("")
    }

    /// `absent < preview < ga` or `cloud, datacenter, …` for help texts.
    pub fn listing(self) -> String {
        let quoted: Vec<String> = self.members().iter().map(|m| format!("`{m}`")).collect();
        if self.ordered() {
            quoted.join(" < ")
        } else {
            quoted.join(", ")
        }
    }
}

/// What a unit measures, money included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QDim {
    /// Bytes.
    Size,
    /// Nanoseconds.
    Duration,
    /// Bits per second.
    Bandwidth,
    /// Millionths of the currency unit.
    Money,
}

impl QDim {
    pub fn from_dimension(d: Dimension) -> QDim {
        match d {
            Dimension::Size => QDim::Size,
            Dimension::Duration => QDim::Duration,
            Dimension::Bandwidth => QDim::Bandwidth,
        }
    }

    /// `a size`, `a duration`.
    pub fn with_article(self) -> &'static str {
        match self {
            QDim::Size => "a size",
            QDim::Duration => "a duration",
            QDim::Bandwidth => "a bandwidth",
            QDim::Money => "an amount of money",
        }
    }

    pub fn noun(self) -> &'static str {
        match self {
            QDim::Size => "size",
            QDim::Duration => "duration",
            QDim::Bandwidth => "bandwidth",
            QDim::Money => "money",
        }
    }

    /// The base unit, for overflow and inexactness messages.
    pub fn base_unit(self) -> &'static str {
        match self {
            QDim::Size => "byte",
            QDim::Duration => "nanosecond",
            QDim::Bandwidth => "bit per second",
            QDim::Money => "millionth of the currency unit",
        }
    }

    /// Example units, for help texts.
    pub fn units(self) -> &'static str {
        match self {
            QDim::Size => "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB",
            QDim::Duration => "ns, us, ms, s, m, h, d, w",
            QDim::Bandwidth => "bps, Kbps, Mbps, Gbps, Tbps",
            QDim::Money => "a plain decimal such as `0.90`",
        }
    }
}

/// The type a field or expression is expected to have.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    /// No expectation: infer (constants, operands of comparisons).
    Any,
    /// A whole number from 0 to 4294967295 (counts, replicas).
    Count,
    /// A port number, 1 to 65535.
    Port,
    Str,
    Bool,
    Size,
    Duration,
    Bandwidth,
    /// An amount of money: `500`, `0.90`.
    Money,
    /// Money per GPU hour: `0.90` or `0.90/gpu_hour`.
    Rate,
    /// CPU cores: `4`, `0.5` (exact to the millicore).
    Cpu,
    Enum(EnumTy),
    List(&'static Ty),
    /// `{ key: value }`; the key type is `Str` (names or strings) or a reference.
    Map(&'static Ty, &'static Ty),
    Ref(RefKind),
    /// One of several constructors: `kubernetes { … }`, `edge { … }`, `disconnected`.
    OneOf(&'static [Ctor]),
    /// A record value `name { … }` whose constructor is the schema's name (`mig { … }`).
    Record(&'static BlockSchema),
    /// A map literal with fixed keys: `{ gpu_hour: 0.90 }`.
    MapRecord(&'static BlockSchema),
    /// `service_account("x")`, `agent_identity("x")`, `user("x")`.
    Identity,
    /// `team("x")`.
    Team,
    /// `per_target(2)`, `lowest(cost)`.
    Call(&'static CallSchema),
    /// `service >= maturity`.
    ServiceReq,
    /// A Kubernetes taint `key=value:Effect` (or `key:Effect`).
    Taint,
    /// A model artifact digest: `sha256:` and 64 lowercase hex digits.
    Digest,
    /// An OCI registry mirror at a site: `oci://HOST[:PORT][/PATH]`.
    Mirror,
}

impl Ty {
    /// How the type reads in "expected …" messages.
    pub fn describe(&self) -> String {
        match self {
            Ty::Any => "a value".into(),
            Ty::Count => "a whole number".into(),
            Ty::Port => "a port number".into(),
            Ty::Str => "a string".into(),
            Ty::Bool => "`true` or `false`".into(),
            Ty::Size => "a size".into(),
            Ty::Duration => "a duration".into(),
            Ty::Bandwidth => "a bandwidth".into(),
            Ty::Money => "an amount of money".into(),
            Ty::Rate => "a price per GPU hour".into(),
            Ty::Cpu => "a number of CPU cores".into(),
            Ty::Enum(e) => e.with_article(),
            Ty::List(el) => format!("a list of {}", el.plural()),
            Ty::Map(k, v) => format!("a map from {} to {}", k.plural(), v.plural()),
            Ty::Ref(k) => k.with_article().into(),
            Ty::OneOf(ctors) => {
                let names: Vec<String> = ctors.iter().map(|c| format!("`{}`", c.name)).collect();
                format!("one of {}", names.join(", "))
            }
            Ty::Record(s) => format!("a `{} {{ … }}` record", s.name),
            Ty::MapRecord(s) => format!("a map with keys {}", s.key_listing()),
            Ty::Identity => {
                "an identity (`service_account(\"…\")`, `agent_identity(\"…\")` or `user(\"…\")`)"
                    .into()
            }
            Ty::Team => "a team (`team(\"…\")`)".into(),
            Ty::Call(c) => format!("`{}(…)`", c.name),
            Ty::ServiceReq => "a service requirement (`service >= maturity`)".into(),
            Ty::Taint => "a taint (`\"key=value:Effect\"`)".into(),
            Ty::Digest => "a digest (`\"sha256:…\"`)".into(),
            Ty::Mirror => "a registry mirror (`\"oci://HOST[:PORT][/PATH]\"`)".into(),
        }
    }

    /// The plural noun, for "a list of …".
    pub fn plural(&self) -> String {
        match self {
            Ty::Count => "whole numbers".into(),
            Ty::Port => "port numbers".into(),
            Ty::Str => "strings".into(),
            Ty::Size => "sizes".into(),
            Ty::Duration => "durations".into(),
            Ty::Money | Ty::Rate => "amounts of money".into(),
            Ty::Enum(e) => match e {
                EnumTy::EnvClass => "environment classes".into(),
                EnumTy::Weekday => "days".into(),
                other => format!("{} values", other.name()),
            },
            Ty::Ref(k) => k.plural().into(),
            Ty::Record(s) => format!("`{}` records", s.name),
            Ty::Call(c) => format!("`{}(…)`", c.name),
            Ty::ServiceReq => "service requirements".into(),
            Ty::Taint => "taints".into(),
            Ty::Mirror => "registry mirrors (`\"oci://HOST[:PORT][/PATH]\"`)".into(),
            other => other.describe(),
        }
    }

    /// The quantity dimension of a quantity type.
    pub fn dim(&self) -> Option<QDim> {
        match self {
            Ty::Size => Some(QDim::Size),
            Ty::Duration => Some(QDim::Duration),
            Ty::Bandwidth => Some(QDim::Bandwidth),
            Ty::Money => Some(QDim::Money),
            _ => None,
        }
    }
}

/// An exact decimal: `mant × 10^-scale`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dec {
    pub mant: i128,
    pub scale: u8,
}

/// Most decimal places kept in intermediate results.
const MAX_SCALE: u8 = 18;

/// Why exact arithmetic failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithError {
    Overflow,
    Inexact,
    DivideByZero,
}

pub fn pow10(n: u8) -> Option<i128> {
    10i128.checked_pow(u32::from(n))
}

/// Whether a value fits the 64-bit range every IR quantity uses.
pub fn fits64(x: i128) -> bool {
    x >= -i128::from(i64::MAX) && x <= i128::from(u64::MAX)
}

fn checked(x: Option<i128>) -> Result<i128, ArithError> {
    match x {
        Some(v) if fits64(v) => Ok(v),
        _ => Err(ArithError::Overflow),
    }
}

impl Dec {
    pub fn from_num(n: Num) -> Dec {
        Dec {
            mant: i128::from(n.mantissa),
            scale: n.scale,
        }
        .normalized()
    }

    pub fn int(n: i128) -> Dec {
        Dec { mant: n, scale: 0 }
    }

    /// Drops trailing zero decimals (`1.50` → `1.5`).
    pub fn normalized(mut self) -> Dec {
        while self.scale > 0 && self.mant % 10 == 0 {
            self.mant /= 10;
            self.scale -= 1;
        }
        self
    }

    /// The value as an integer when it is one.
    pub fn as_int(self) -> Option<i128> {
        let d = self.normalized();
        (d.scale == 0).then_some(d.mant)
    }

    /// `self × factor` as an integer, when exact (`0.90 × 10^6` = 900000).
    pub fn scale_to_int(self, factor: i128) -> Result<i128, ArithError> {
        let prod = self.mant.checked_mul(factor).ok_or(ArithError::Overflow)?;
        let div = pow10(self.scale).ok_or(ArithError::Inexact)?;
        if prod % div != 0 {
            return Err(ArithError::Inexact);
        }
        checked(Some(prod / div))
    }

    fn aligned(a: Dec, b: Dec) -> Result<(i128, i128, u8), ArithError> {
        let scale = a.scale.max(b.scale);
        let fa = pow10(scale - a.scale).ok_or(ArithError::Overflow)?;
        let fb = pow10(scale - b.scale).ok_or(ArithError::Overflow)?;
        let ma = a.mant.checked_mul(fa).ok_or(ArithError::Overflow)?;
        let mb = b.mant.checked_mul(fb).ok_or(ArithError::Overflow)?;
        Ok((ma, mb, scale))
    }

    pub fn checked_add(self, o: Dec) -> Result<Dec, ArithError> {
        let (a, b, scale) = Dec::aligned(self, o)?;
        Dec::checked_dec(a.checked_add(b), scale)
    }

    pub fn checked_sub(self, o: Dec) -> Result<Dec, ArithError> {
        let (a, b, scale) = Dec::aligned(self, o)?;
        Dec::checked_dec(a.checked_sub(b), scale)
    }

    pub fn checked_mul(self, o: Dec) -> Result<Dec, ArithError> {
        let d = Dec {
            mant: self.mant.checked_mul(o.mant).ok_or(ArithError::Overflow)?,
            scale: self.scale + o.scale,
        }
        .normalized();
        if d.scale > MAX_SCALE {
            return Err(ArithError::Inexact);
        }
        Dec::checked_dec(Some(d.mant), d.scale)
    }

    /// Exact division: the quotient must have at most 18 decimals.
    pub fn checked_div(self, o: Dec) -> Result<Dec, ArithError> {
        if o.mant == 0 {
            return Err(ArithError::DivideByZero);
        }
        let (a, b, _) = Dec::aligned(self, o)?;
        // a / b with up to MAX_SCALE decimals.
        for scale in 0..=MAX_SCALE {
            let f = pow10(scale).ok_or(ArithError::Overflow)?;
            let num = a.checked_mul(f).ok_or(ArithError::Inexact)?;
            if num % b == 0 {
                return Dec::checked_dec(Some(num / b), scale);
            }
        }
        Err(ArithError::Inexact)
    }

    fn checked_dec(mant: Option<i128>, scale: u8) -> Result<Dec, ArithError> {
        let mant = mant.ok_or(ArithError::Overflow)?;
        let d = Dec { mant, scale }.normalized();
        // The integer part must stay within 64 bits.
        let whole = d.mant / pow10(d.scale).ok_or(ArithError::Overflow)?;
        checked(Some(whole))?;
        Ok(d)
    }

    pub fn is_negative(self) -> bool {
        self.mant < 0
    }
}

impl std::fmt::Display for Dec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.mant < 0 { "-" } else { "" };
        let abs = self.mant.unsigned_abs();
        if self.scale == 0 {
            return write!(f, "{sign}{abs}");
        }
        let digits = format!("{:0>width$}", abs, width = self.scale as usize + 1);
        let (int, frac) = digits.split_at(digits.len() - self.scale as usize);
        write!(f, "{sign}{int}.{frac}")
    }
}

/// A value: what a constant expression evaluates to, or a field's checked value.
///
/// Inferred values may still be *open*: a bare name that is not in scope ([`Val::Symbol`],
/// perhaps an enum member) or an expression whose meaning depends on the expected type
/// ([`Val::Deferred`], e.g. a record or a list of enum members in a `const`). Checking
/// against a [`Ty`] closes them.
#[derive(Clone, Debug)]
pub enum Val<'a> {
    Int(i128),
    Dec(Dec),
    Str(String),
    Bool(bool),
    /// A quantity in base units.
    Qty(QDim, i128),
    /// Money per GPU hour, micro-units.
    Rate(i128),
    Enum(EnumTy, u8),
    /// A bare name not in scope.
    Symbol(&'a Ident),
    /// A reference to an item, as written.
    Item(Def, &'a Ident),
    Deferred(&'a Expr, ScopeRef),
    List(Vec<(Val<'a>, crate::source::Span)>),
    Map(Vec<MapItem<'a>>),
    /// A checked block or record body.
    Fields(Box<super::body::Fields<'a>>),
    /// A constructor of a [`Ty::OneOf`] with its checked body, if it has one.
    Ctor(&'static Ctor, Option<Box<super::body::Fields<'a>>>),
    Identity(crate::ir::IdentityKind, String),
    Team(String),
    /// A checked call such as `per_target(1)`.
    Call(&'static CallSchema, Box<Val<'a>>),
    /// `service >= maturity`.
    Req {
        service: Def,
        min: u8,
    },
    Taint(crate::ir::Taint),
}

/// One entry of a checked map.
#[derive(Clone, Debug)]
pub struct MapItem<'a> {
    pub key: MapKeyVal,
    pub key_text: String,
    pub key_span: crate::source::Span,
    pub value: Val<'a>,
    pub span: crate::source::Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapKeyVal {
    Str(String),
    Item(Def),
}

impl Val<'_> {
    /// What a value is, for "found …" in messages.
    pub fn describe(&self) -> String {
        match self {
            Val::Int(n) => format!("the integer `{n}`"),
            Val::Dec(d) => format!("the number `{d}`"),
            Val::Str(_) => "a string".into(),
            Val::Bool(_) => "a boolean".into(),
            Val::Qty(d, _) => d.with_article().into(),
            Val::Rate(_) => "a price per GPU hour".into(),
            Val::Enum(e, i) => format!("the {} `{}`", e.name(), e.member(*i)),
            Val::Symbol(i) => format!("`{}`", i.name),
            Val::Item(_, i) => format!("`{}`", i.name),
            Val::Deferred(..) => "an expression".into(),
            Val::List(_) => "a list".into(),
            Val::Map(_) => "a map".into(),
            Val::Fields(f) => format!("a `{}` block", f.schema.name),
            Val::Ctor(c, _) => format!("`{}`", c.name),
            Val::Identity(..) => "an identity".into(),
            Val::Team(_) => "a team".into(),
            Val::Call(c, _) => format!("`{}(…)`", c.name),
            Val::Req { .. } => "a service requirement".into(),
            Val::Taint(_) => "a taint".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_arithmetic_is_exact() {
        let a = Dec { mant: 90, scale: 2 };
        assert_eq!(a.scale_to_int(1_000_000), Ok(900_000));
        assert_eq!(
            Dec { mant: 1, scale: 7 }.scale_to_int(1_000_000),
            Err(ArithError::Inexact)
        );
        let third = Dec::int(1).checked_div(Dec::int(3));
        assert_eq!(third, Err(ArithError::Inexact));
        assert_eq!(
            Dec::int(1).checked_div(Dec::int(4)),
            Ok(Dec { mant: 25, scale: 2 })
        );
        assert_eq!(
            Dec { mant: 1, scale: 1 }.checked_add(Dec { mant: 2, scale: 1 }),
            Ok(Dec { mant: 3, scale: 1 })
        );
        assert_eq!(
            Dec::int(i128::from(u64::MAX)).checked_add(Dec::int(1)),
            Err(ArithError::Overflow)
        );
        assert_eq!(
            Dec {
                mant: -125,
                scale: 2
            }
            .to_string(),
            "-1.25"
        );
    }

    #[test]
    fn enum_members_match_the_ir() {
        use crate::ir;
        fn names<T: std::fmt::Display>(all: &[T]) -> Vec<String> {
            all.iter().map(|m| m.to_string()).collect()
        }
        let same = |e: EnumTy, ir: Vec<String>| {
            let ours: Vec<String> = e.members().iter().map(|s| s.to_string()).collect();
            assert_eq!(ours, ir, "{}", e.name());
        };
        same(EnumTy::EnvClass, names(ir::EnvClass::ALL));
        same(EnumTy::Connectivity, names(ir::Connectivity::ALL));
        same(EnumTy::Maturity, names(ir::Maturity::ALL));
        same(EnumTy::Kind, names(ir::WorkloadKind::ALL));
        same(EnumTy::Class, names(ir::WorkloadClass::ALL));
        same(EnumTy::Access, names(ir::Access::ALL));
        same(EnumTy::Classification, names(ir::Classification::ALL));
        same(EnumTy::Weekday, names(ir::Weekday::ALL));
        same(EnumTy::Objective, names(ir::Preference::ALL));
    }
}
