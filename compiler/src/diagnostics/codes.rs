//! The registry of diagnostic codes. A code, once published, keeps its meaning forever.
//! Every code is documented with an example in `docs/diagnostics.md` (a test checks this).
//!
//! Ranges: E00xx lexical, E01xx syntax and input limits, E02xx names and imports,
//! E03xx schema and types, E04xx semantic checks, E05xx placement and plan, E06xx verifier,
//! W07xx fleet analysis (warnings, never errors).

use serde::{Serialize, Serializer};

macro_rules! codes {
    ($($(#[doc = $doc:literal])* $name:ident = $num:literal, $title:literal;)*) => {
        /// A stable diagnostic code such as `E0101` (an error) or `W0701` (a warning).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code {
            $($(#[doc = $doc])* $name,)*
        }

        impl Code {
            /// Every code, in numeric order.
            pub const ALL: &'static [Code] = &[$(Code::$name,)*];

            /// `E0101` and so on.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$name => $num,)* }
            }

            /// A short title, as in the heading of `docs/diagnostics.md`.
            pub fn title(self) -> &'static str {
                match self { $(Code::$name => $title,)* }
            }
        }
    };
}

codes! {
    // ---- E00xx: lexical ----
    /// A character that starts no token.
    UnexpectedChar = "E0001", "unexpected character";
    /// A string literal with no closing quote before the end of the line or file.
    UnterminatedString = "E0002", "unterminated string";
    /// A `/* */` comment (they nest) not closed before the end of the file.
    UnterminatedComment = "E0003", "unterminated block comment";
    /// A backslash escape other than `\"`, `\\`, `\n`, `\t`, `\r`, `\u{…}`.
    InvalidEscape = "E0004", "invalid escape in string";
    /// A number that is not well formed (`1__0`, `1.`, `1.2.3`, leading `_`) or too large.
    MalformedNumber = "E0005", "malformed number";
    /// A number followed by letters that are not a known unit (`16Gb`, `3q`).
    UnknownUnit = "E0006", "unknown unit suffix";
    /// A clock time that is not `HH:MM` with hours 00–23 (or 24:00) and minutes 00–59.
    InvalidClockTime = "E0007", "invalid clock time";

    // ---- E01xx: syntax and input limits ----
    /// The parser found a token where it expected something else.
    UnexpectedToken = "E0101", "unexpected token";
    /// A `{`, `[` or `(` that is never closed.
    UnclosedDelimiter = "E0102", "unclosed delimiter";
    /// The file ended in the middle of an item or expression.
    UnexpectedEof = "E0103", "unexpected end of file";
    /// Something at the top level that is not an item (`use`, `const`, `model`, `workload`,
    /// `target`, `policy`, `placement`).
    ExpectedItem = "E0104", "expected an item";
    /// An item without its name (`workload { … }`).
    MissingName = "E0105", "missing name";
    /// A field without its value (`replicas =`).
    MissingValue = "E0106", "missing value";
    /// Comparisons chained without parentheses (`a < b < c`).
    ChainedComparison = "E0107", "chained comparison";
    /// Blocks, lists or expressions nested deeper than the limit.
    NestingTooDeep = "E0190", "nesting too deep";
    /// A source file larger than the limit.
    FileTooLarge = "E0191", "file too large";
    /// A file with more tokens than the limit.
    TooManyTokens = "E0192", "too many tokens";

    // ---- E02xx: names and imports ----
    /// A name that is not defined in the spec, not imported, and not a member of the
    /// enumeration expected there.
    UnknownName = "E0201", "unknown name";
    /// Two definitions (items, constants or imports) with the same name in one namespace.
    DuplicateDefinition = "E0202", "duplicate definition";
    /// A `use` of a module that does not exist (only `std.gpu`, `std.services` and
    /// `std.environments` do).
    UnknownModule = "E0203", "unknown module";
    /// A `use` of an item its module does not have.
    UnknownImport = "E0204", "unknown import";
    /// Constants whose values depend on each other in a cycle.
    ConstCycle = "E0205", "cycle among constants";
    /// A reference to the wrong kind of thing: a target where a model is expected.
    WrongKindOfReference = "E0206", "wrong kind of reference";
    /// `use std.gpu`: a module itself cannot be imported, only its items.
    ModuleImport = "E0207", "import of a whole module";

    // ---- E03xx: schema and types ----
    /// A field the block's schema does not have.
    UnknownField = "E0301", "unknown field";
    /// A required field that is missing.
    MissingField = "E0302", "missing required field";
    /// A field given twice in one block.
    DuplicateField = "E0303", "duplicate field";
    /// A value of the wrong type.
    TypeMismatch = "E0304", "mismatched types";
    /// A name that is not a member of the enumeration expected there.
    UnknownMember = "E0305", "unknown enum member";
    /// Arithmetic or a comparison between values of different units.
    UnitMismatch = "E0306", "incompatible units";
    /// Arithmetic whose result does not fit in 64 bits.
    Overflow = "E0307", "arithmetic overflow";
    /// A value that needs a fraction of its base unit, or more decimals than allowed.
    InexactValue = "E0308", "inexact value";
    /// `<`, `<=`, `>`, `>=` between members of an unordered enumeration, or between strings.
    UnorderedComparison = "E0309", "comparison of unordered values";
    /// A field written in the wrong form: a block as a value, a missing or extra name.
    WrongEntryShape = "E0310", "wrong kind of entry";
    /// A bound in a policy rule that is not `<=`.
    InvalidBound = "E0311", "invalid bound";
    /// A path such as `workload.replica` that names no field usable in a policy condition.
    UnknownPath = "E0312", "unknown field in a condition";
    /// A `deny` condition (or `and`/`or`/`not` operand) that is not a boolean.
    NotBoolean = "E0313", "condition is not a boolean";
    /// A window's time zone that is not an IANA time zone name.
    UnknownTimeZone = "E0314", "unknown time zone";
    /// A window's days that are not `weekdays`, `weekends`, `daily` or a list of days.
    InvalidDays = "E0315", "invalid window days";
    /// A method other than `any`/`all`, or a lambda with the wrong number of parameters.
    InvalidMethod = "E0316", "invalid method call";
    /// Arithmetic on `workload.…` or `target.…` values in a policy condition.
    NonConstantArithmetic = "E0317", "arithmetic on run-time values";
    /// A record constructor that does not exist where it is used (`kubernets { … }`).
    UnknownConstructor = "E0318", "unknown constructor";
    /// A number outside the range its field allows.
    OutOfRange = "E0319", "value out of range";
    /// A call of an unknown function, or with the wrong arguments.
    InvalidCall = "E0320", "invalid call";
    /// An `approval` or `reclaim` condition not of the supported form.
    InvalidRuleCondition = "E0321", "unsupported rule condition";
    /// A `limit` or `reclaim` selector other than `class`, `kind` or `team`.
    UnknownSelector = "E0322", "unknown selector";
    /// A window whose clock range is empty or starts at `24:00`.
    InvalidClockRange = "E0323", "invalid clock range";
    /// A taint not written `key=value:Effect` or `key:Effect` with a known effect.
    InvalidTaint = "E0324", "invalid taint";
    /// A division by zero in a constant expression.
    DivisionByZero = "E0325", "division by zero";
    /// An instant (an entitlement's `until`) that is not an RFC 3339 time.
    InvalidInstant = "E0326", "invalid instant";
    /// An approver written as a public key (`berth-ed25519-public:…`) that is not one.
    InvalidPublicKey = "E0327", "invalid public key";

    // ---- E04xx: semantic checks ----
    /// A model variant that needs more GPU memory than any accelerator it may run on has.
    VariantTooLarge = "E0401", "model variant fits no accelerator";
    /// A count that must be at least one is zero (`replicas = 0`, a pool's `count = 0`).
    ZeroCount = "E0402", "zero where at least one is needed";
    /// A workload that needs GPUs but says nothing about which accelerators it accepts.
    GpuWithoutAccelerator = "E0403", "GPU workload without accelerators";
    /// A negative size, duration, count, capacity or price.
    NegativeQuantity = "E0404", "negative quantity";
    /// A digest that is not `sha256:` followed by 64 lowercase hex digits.
    InvalidDigest = "E0405", "invalid digest";
    /// Two `placement` blocks for one workload.
    DuplicatePlacement = "E0406", "duplicate placement";
    /// A MIG profile the accelerator does not have.
    UnknownMigProfile = "E0407", "unknown MIG profile";
    /// A fallback target that is not among the placement's candidate targets.
    FallbackNotCandidate = "E0408", "fallback outside the candidates";
    /// The same element twice in a list, or the same name twice among a block's entries.
    DuplicateEntry = "E0409", "duplicate entry";
    /// A workload listed in its own `isolate_from`.
    IsolateFromSelf = "E0410", "workload isolated from itself";
    /// Two entitlements for one identity, or two quotas for one team.
    DuplicateRule = "E0411", "duplicate policy rule";
    /// A `telemetry` block without exactly one of `export` and `buffer`.
    TelemetryChoice = "E0412", "telemetry needs one mode";
    /// A workload asking for a MIG profile without a GPU count.
    MigWithoutGpu = "E0413", "MIG profile without a GPU count";
    /// A what-if file's `offline` on something it cannot take out of the spec: a target the
    /// base spec does not define, an item that is not a target, a value other than `true`, or
    /// an offline target with other changes.
    InvalidWhatIf = "E0414", "invalid what-if change";
    /// A target's registry mirror that is not `oci://HOST[:PORT][/PATH]`.
    InvalidMirror = "E0415", "invalid registry mirror";

    // ---- E05xx: placement and plan ----

    // ---- E06xx: verifier ----
    /// A plan whose `format` is not the one this compiler reads and writes.
    PlanFormat = "E0601", "unsupported plan format";
    /// A plan whose recorded instant (`at`) is not the instant it is verified at.
    PlanInstant = "E0602", "plan instant mismatch";
    /// A plan whose `plan_id` is not the hash of its content: it was edited after it was made.
    PlanIdMismatch = "E0603", "plan id does not match content";
    /// A plan naming a workload, target, pool or window the spec does not define.
    PlanUnknownName = "E0604", "unknown name in plan";
    /// A plan lacking an entry the spec requires (a workload, a pool or target ledger, a
    /// window, a reclaim rule).
    PlanMissingEntry = "E0605", "missing plan entry";
    /// A plan listing the same workload, ledger or window twice.
    PlanDuplicateEntry = "E0606", "duplicate plan entry";
    /// A plan list that is complete but not in spec order.
    PlanEntryOrder = "E0607", "plan entries out of order";
    /// A recorded field (release, replicas, accelerator, data or service binding, GPUs per
    /// replica) that differs from what the spec says.
    PlanFieldMismatch = "E0608", "plan field differs from spec";
    /// A placement on a target outside the workload's `placement { targets = [...] }`.
    PlacementNotCandidate = "E0609", "placement outside candidates";
    /// A placement on a target (or pool) the workload cannot technically run on.
    PlacementIneligible = "E0610", "placement not eligible";
    /// A placement recording a model variant other than the first one that fits its pool.
    PlacementWrongVariant = "E0611", "wrong model variant";
    /// A placement with zero replicas.
    PlacementEmpty = "E0612", "empty placement";
    /// More replicas placed than the workload declares.
    TooManyReplicas = "E0613", "too many replicas placed";
    /// A workload `status`, `missing_replicas` or the plan's `feasible` flag that does not
    /// match the placements.
    StatusMismatch = "E0614", "status does not match placements";
    /// A GPU pool holding more GPUs (or MIG slices) than it has.
    PoolOverCommitted = "E0615", "pool over-committed";
    /// A target holding more CPU or memory than it has.
    TargetOverCommitted = "E0616", "target over-committed";
    /// A capacity ledger in the plan that differs from the one recomputed from placements.
    LedgerMismatch = "E0617", "ledger does not match placements";
    /// A team holding more GPUs than its quota.
    OverQuota = "E0618", "quota exceeded";
    /// An identity holding more GPUs than its entitlement.
    OverEntitlement = "E0619", "entitlement cap exceeded";
    /// A placement outside an identity's entitled accelerators or environments, or GPUs held
    /// by an identity without any entitlement.
    NotEntitled = "E0620", "placement not entitled";
    /// A placement on a target for which a deny rule holds.
    PlacementDenied = "E0621", "placement denied by policy";
    /// A window whose time zone the bundled time-zone database does not know.
    PlanUnknownTimeZone = "E0622", "unknown time zone";
    /// A window recorded as in effect (or not) when at the plan instant it is not (or is).
    WindowStateMismatch = "E0623", "window state mismatch";
    /// GPUs held by matching workloads above a `limit … during …` while its window is in
    /// effect.
    WindowLimitExceeded = "E0624", "window limit exceeded";
    /// More replicas on one target or region than the workload's spread allows.
    SpreadExceeded = "E0625", "spread exceeded";
    /// Two workloads that must be isolated sharing a pool.
    IsolationBroken = "E0626", "isolation broken";
    /// A `cost_per_day` that is not Σ replicas × GPUs per replica × `gpu_hour` × 24.
    CostMismatch = "E0627", "cost does not match placements";
    /// A workload above an approval threshold not marked as awaiting approval.
    ApprovalMissing = "E0628", "approval missing";
    /// A workload marked as awaiting approval under a rule it does not exceed.
    ApprovalUnwarranted = "E0629", "approval not required";
    /// A fallback target that the spec does not list, that is not eligible, or that is denied.
    BadFallback = "E0630", "invalid fallback";
    /// A reclaim rule carried into the plan that differs from the spec's.
    ReclaimMismatch = "E0631", "reclaim rule mismatch";
    /// A `rejected` list that omits an unused target, repeats one, lists a used one, or calls
    /// an eligible target ineligible.
    RejectionMismatch = "E0632", "rejections do not match placements";
    /// A plan whose `verification` summary is neither blank nor exactly what the verifier
    /// writes: the one part of a plan its id does not hash, so it is checked on its own.
    VerificationEdited = "E0633", "verification summary edited";
    /// A reason for leaving a target unused that the plan's placements do not bear out: a
    /// rule that does not hold, or `not_needed` for a target the workload would rather use.
    UntrueReason = "E0634", "untrue rejection reason";
    /// A replica on a fallback while a target ranked before it could take it.
    FallbackOrder = "E0635", "fallback out of order";

    // ---- W07xx: fleet analysis (warnings: what the spec allows the fleet to do) ----
    /// A workload no target of the spec can technically run, whatever its candidate list.
    Unplaceable = "W0701", "workload runs on no target";
    /// A workload that some targets could run, each of them forbidden to it by a deny rule or
    /// an entitlement.
    ForbiddenEverywhere = "W0702", "workload forbidden everywhere";
    /// An entitlement every placement of which a deny rule forbids.
    DeadEntitlement = "W0703", "entitlement made dead by deny rules";
    /// A quota, entitlement or limit allowing more GPUs than the fleet has that it could count.
    CapAboveFleet = "W0704", "GPU cap above the fleet";
    /// A window with no day to open on.
    WindowNeverOpens = "W0705", "window never opens";
    /// A fallback target the workload may never use.
    FallbackNeverUsable = "W0706", "fallback never usable";
    /// A candidate list whose every target refuses the workload, while others would take it.
    CandidatesUnusable = "W0707", "candidate list names no usable target";
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
