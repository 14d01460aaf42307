//! The meaning of policy expressions: evaluation of a [`PolicyExpr`] for one
//! (workload, target) pair.
//!
//! This is part of the IR's definition, not of the solver: the placement engine and the
//! independent verifier both call it, so that they agree on what a rule *says* while each
//! decides on its own whether a plan *obeys* it. Semantics type-checked the expression, so
//! ill-typed combinations cannot occur; should one anyway, it evaluates to `false` rather
//! than panicking (and a debug assertion fires in tests).

use super::{
    CmpOp, Ir, PolicyExpr, TargetField, TargetId, Value, Workload, WorkloadField, WorkloadId,
};
use std::cmp::Ordering;

/// Evaluates `expr` for workload `w` on target `t`.
pub fn eval(ir: &Ir, expr: &PolicyExpr, w: WorkloadId, t: TargetId) -> Value {
    let mut env = Vec::new();
    Evaluator { ir, w, t }.eval(expr, &mut env)
}

/// Evaluates a condition; anything but `true` is false.
pub fn holds(ir: &Ir, expr: &PolicyExpr, w: WorkloadId, t: TargetId) -> bool {
    eval(ir, expr, w, t) == Value::Bool(true)
}

struct Evaluator<'a> {
    ir: &'a Ir,
    w: WorkloadId,
    t: TargetId,
}

impl Evaluator<'_> {
    fn eval(&self, expr: &PolicyExpr, env: &mut Vec<Value>) -> Value {
        match expr {
            PolicyExpr::Const(v) => v.clone(),
            PolicyExpr::Workload(f) => workload_field(self.ir, self.ir.workload(self.w), *f),
            PolicyExpr::Target(f) => self.target_field(*f),
            PolicyExpr::Param(depth) => env
                .len()
                .checked_sub(1 + *depth as usize)
                .and_then(|i| env.get(i))
                .cloned()
                .unwrap_or(Value::None),
            PolicyExpr::Member(base, field) => match self.eval(base, env) {
                Value::Record(fields) => fields
                    .into_iter()
                    .find(|(k, _)| k == field)
                    .map_or(Value::None, |(_, v)| v),
                _ => ill_typed(),
            },
            PolicyExpr::Any(list, body) => self.quantify(list, body, env, true),
            PolicyExpr::All(list, body) => self.quantify(list, body, env, false),
            PolicyExpr::Not(e) => match self.eval(e, env) {
                Value::Bool(b) => Value::Bool(!b),
                _ => ill_typed(),
            },
            PolicyExpr::And(a, b) => Value::Bool(self.truth(a, env) && self.truth(b, env)),
            PolicyExpr::Or(a, b) => Value::Bool(self.truth(a, env) || self.truth(b, env)),
            PolicyExpr::Compare(op, a, b) => {
                let (a, b) = (self.eval(a, env), self.eval(b, env));
                Value::Bool(compare(*op, &a, &b))
            }
            PolicyExpr::In(elem, list) => {
                let elem = self.eval(elem, env);
                match self.eval(list, env) {
                    Value::List(items) => Value::Bool(items.contains(&elem)),
                    _ => ill_typed(),
                }
            }
            PolicyExpr::List(items) => {
                Value::List(items.iter().map(|e| self.eval(e, env)).collect())
            }
        }
    }

    fn truth(&self, e: &PolicyExpr, env: &mut Vec<Value>) -> bool {
        self.eval(e, env) == Value::Bool(true)
    }

    /// `any` when `exists`, `all` otherwise.
    fn quantify(
        &self,
        list: &PolicyExpr,
        body: &PolicyExpr,
        env: &mut Vec<Value>,
        exists: bool,
    ) -> Value {
        let Value::List(items) = self.eval(list, env) else {
            return ill_typed();
        };
        for item in items {
            env.push(item);
            let b = self.truth(body, env);
            env.pop();
            if b == exists {
                return Value::Bool(exists);
            }
        }
        Value::Bool(!exists)
    }

    fn target_field(&self, f: TargetField) -> Value {
        let t = self.ir.target(self.t);
        let opt = |s: &Option<String>| s.clone().map_or(Value::None, Value::Str);
        match f {
            TargetField::Name => Value::Str(t.name.clone()),
            TargetField::Class => Value::EnvClass(t.class),
            TargetField::Region => opt(&t.region),
            TargetField::Jurisdiction => opt(&t.jurisdiction),
            TargetField::Connectivity => Value::Connectivity(t.connectivity),
            TargetField::GpuHour => Value::Money(t.cost.gpu_hour.unwrap_or_default()),
            TargetField::Accelerators => {
                let mut names: Vec<Value> = t
                    .pools
                    .iter()
                    .map(|p| Value::Str(self.ir.accelerator(p.accelerator).name.clone()))
                    .collect();
                names.sort();
                names.dedup();
                Value::List(names)
            }
        }
    }
}

/// The value of `workload.<f>`.
pub fn workload_field(ir: &Ir, w: &Workload, f: WorkloadField) -> Value {
    let _ = ir;
    match f {
        WorkloadField::Name => Value::Str(w.name.clone()),
        WorkloadField::Release => Value::Str(w.release.clone()),
        WorkloadField::Image => Value::Str(w.image.clone()),
        WorkloadField::Kind => Value::Kind(w.kind),
        WorkloadField::Class => Value::Class(w.class),
        WorkloadField::Team => Value::Str(w.team.clone()),
        WorkloadField::Identity => Value::Str(w.identity.name.clone()),
        WorkloadField::Replicas => Value::Int(i64::from(w.replicas)),
        WorkloadField::Gpu => Value::Int(i64::from(w.resources.gpu)),
        WorkloadField::Connectivity => Value::Connectivity(w.connectivity),
        WorkloadField::Environments => {
            Value::List(w.environments.iter().map(|e| Value::EnvClass(*e)).collect())
        }
        WorkloadField::Data => Value::List(
            w.data
                .iter()
                .map(|d| {
                    // Fields sorted by name (Record invariant).
                    Value::Record(vec![
                        ("access".into(), Value::Access(d.access)),
                        (
                            "classification".into(),
                            Value::Classification(d.classification),
                        ),
                        ("dataset".into(), Value::Str(d.dataset.clone())),
                        (
                            "max_latency".into(),
                            d.max_latency.map_or(Value::None, Value::Duration),
                        ),
                        ("name".into(), Value::Str(d.name.clone())),
                    ])
                })
                .collect(),
        ),
    }
}

/// Comparison with the language's rules: same kinds only; ordered enums and quantities by
/// order; `None` equals only `None` and orders against nothing.
pub fn compare(op: CmpOp, a: &Value, b: &Value) -> bool {
    if std::mem::discriminant(a) != std::mem::discriminant(b) {
        // `target.region == "eu-west"` on a target without a region: simply false.
        return op == CmpOp::Ne;
    }
    let ord = match (a, b) {
        (Value::None, Value::None) => {
            return matches!(op, CmpOp::Eq | CmpOp::Le | CmpOp::Ge);
        }
        _ => a.cmp(b),
    };
    match op {
        CmpOp::Eq => ord == Ordering::Equal,
        CmpOp::Ne => ord != Ordering::Equal,
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Le => ord != Ordering::Greater,
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Ge => ord != Ordering::Less,
    }
}

fn ill_typed() -> Value {
    debug_assert!(false, "ill-typed policy expression reached evaluation");
    Value::None
}
