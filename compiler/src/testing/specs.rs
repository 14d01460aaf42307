//! Generators of large, realistic specifications for benchmarks and stress tests.
//!
//! Pure and deterministic: the same arguments always give the same text. Not part of the
//! compiler's API (hidden from the docs); benches of later stages (`berth check`) reuse it.

use std::fmt::Write;

use crate::splitmix::SplitMix64;

/// The generator's random choices: drawn from [`SplitMix64`], or read from bytes a fuzzer
/// chose (structure-aware fuzzing: every byte is a decision, so mutating bytes mutates the
/// spec's structure and values while it stays a spec).
enum Mix<'a> {
    Seeded(SplitMix64),
    Chosen(&'a [u8]),
}

impl Mix<'_> {
    fn next(&mut self) -> u64 {
        match self {
            Mix::Seeded(sequence) => sequence.next(),
            // Eight bytes per choice, zeros once the bytes run out.
            Mix::Chosen(bytes) => {
                let (head, rest) = bytes.split_at(bytes.len().min(8));
                let mut word = [0u8; 8];
                word[..head.len()].copy_from_slice(head);
                *bytes = rest;
                u64::from_le_bytes(word)
            }
        }
    }

    /// Whether round `n` adds a policy: every tenth round when seeded, the bytes' choice
    /// otherwise (policies are where most of the checker's and the planner's rules live).
    fn policy_in_round(&mut self, n: usize) -> bool {
        match self {
            Mix::Seeded(_) => n.is_multiple_of(10),
            Mix::Chosen(_) => self.next() & 1 == 1,
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pick<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items[self.below(items.len() as u64) as usize]
    }

    /// Two different items (lists in a spec may not repeat an element).
    fn pick_two<'s>(&mut self, items: &[&'s str]) -> (&'s str, &'s str) {
        let first = self.below(items.len() as u64) as usize;
        let second = (first + 1 + self.below(items.len() as u64 - 1) as usize) % items.len();
        (items[first], items[second])
    }
}

const ACCELERATORS: &[&str] = &[
    "L4",
    "L40S",
    "H100",
    "H200",
    "A100_80GB",
    "T4",
    "JetsonOrinNano",
];
const CLASSES: &[&str] = &["factory", "datacenter", "cloud", "branch", "edge"];
const CONNECTIVITY: &[&str] = &["disconnected", "intermittent", "connected"];
const KINDS: &[&str] = &["service", "batch", "notebook", "agent"];
const WORKLOAD_CLASSES: &[&str] = &["production", "experiment", "staging"];
const REGIONS: &[&str] = &["eu-west", "eu-central", "us-east", "ap-south"];

/// The imports every generated file starts with (imports are per file).
const HEADER: &str = "/// Generated specification.\n\
                      use std.gpu.{L4, L40S, H100, H200, A100_80GB, T4, JetsonOrinNano}\n\
                      use std.services.{object_store, model_cache, online_prediction}\n\n";

/// A specification of about `lines` lines: a header of imports, then rounds of models,
/// workloads, targets, placements and, now and then, a policy, in the style of
/// `docs/language.md`. Comments and doc comments included.
pub fn spec(lines: usize) -> String {
    spec_files(lines, 1).pop().unwrap_or_default()
}

/// The same specification as [`spec`] split over `files` files of about `lines / files`
/// lines each, as a real spec directory is: every file has the import header, and rounds
/// (with their names and random choices) continue from one file to the next, so the files
/// form one valid spec. `spec_files(n, 1)` is `[spec(n)]`.
pub fn spec_files(lines: usize, files: usize) -> Vec<String> {
    spec_files_seeded(lines, files, 0x5EED_BE27)
}

/// [`spec_files`] with other random choices: each `seed` gives another valid spec (property
/// tests draw it).
pub fn spec_files_seeded(lines: usize, files: usize, seed: u64) -> Vec<String> {
    let files = files.max(1);
    let per_file = lines.div_ceil(files);
    let mut mix = Mix::Seeded(SplitMix64(seed));
    let mut round = 0usize;
    (0..files)
        .map(|_| {
            let mut out = String::with_capacity(per_file * 36);
            out.push_str(HEADER);
            let mut line_count = newlines(&out);
            while line_count < per_file {
                let before = out.len();
                emit_round(&mut out, &mut mix, round);
                line_count += newlines(&out[before..]);
                round += 1;
            }
            out
        })
        .collect()
}

/// A specification of two to eight rounds whose every choice (the number of rounds, names
/// picked, numbers, which rounds add a policy) is read from `choices`: the input of the
/// structure-aware fuzz target. Any bytes give a spec the generator meant to be valid.
pub fn spec_from_choices(choices: &[u8]) -> String {
    let mut mix = Mix::Chosen(choices);
    // Two at least: the first round's placement names the second round's target.
    let rounds = 2 + mix.below(7) as usize;
    let mut out = String::from(HEADER);
    for round in 0..rounds {
        emit_round(&mut out, &mut mix, round);
    }
    out
}

/// Typical mistakes, as replacements in the text of the valid spec (each one many times).
const MISTAKES: &[(&str, &str)] = &[
    // The standard library calls it `A100_80GB`: an unknown import and an unknown name at
    // every use, each with a "did you mean" over the names in scope.
    ("A100_80GB", "A100"),
    // A workload kind that does not exist: an unknown enumeration member.
    ("kind     = agent", "kind     = training"),
    // A misspelt model in every workload: an unknown name among thousands of items.
    ("model    = model_", "model    = mdoel_"),
];

/// The spec of [`spec_files`] with the same [`MISTAKES`] in every round: thousands of
/// semantic errors (and no syntax error), to measure how fast they are reported.
pub fn spec_files_with_mistakes(lines: usize, files: usize) -> Vec<String> {
    spec_files(lines, files)
        .into_iter()
        .map(|text| {
            MISTAKES
                .iter()
                .fold(text, |text, (right, wrong)| text.replace(right, wrong))
        })
        .collect()
}

fn newlines(text: &str) -> usize {
    text.bytes().filter(|&b| b == b'\n').count()
}

fn emit_round(out: &mut String, mix: &mut Mix<'_>, round: usize) {
    let n = round;
    let (acc, acc2) = mix.pick_two(ACCELERATORS);
    let _ = write!(
        out,
        "/// Model {n}.\n\
         model model_{n} {{\n\
         \x20 version = \"{}.{}.{}\"\n\
         \x20 variant fp16 {{\n\
         \x20   format     = onnx\n\
         \x20   gpu_memory = {}GiB\n\
         \x20   artifact   = \"oci://models.example.com/model-{n}:fp16\"\n\
         \x20   digest     = \"sha256:{:016x}{:016x}{:016x}{:016x}\"\n\
         \x20 }}\n\
         \x20 variant int8 {{\n\
         \x20   format       = tensorrt\n\
         \x20   gpu_memory   = {}GiB\n\
         \x20   accelerators = [{acc}, {acc2}]\n\
         \x20   artifact     = \"oci://models.example.com/model-{n}:int8\"\n\
         \x20 }}\n\
         }}\n\n",
        mix.below(5),
        mix.below(20),
        mix.below(10),
        4 + mix.below(40),
        mix.next(),
        mix.next(),
        mix.next(),
        mix.next(),
        // At most 7GiB: fits the smallest accelerator the variant may list (8GB).
        2 + mix.below(6),
    );
    let kind = mix.pick(KINDS);
    let class = mix.pick(WORKLOAD_CLASSES);
    let conn = mix.pick(CONNECTIVITY);
    let (env1, env2) = mix.pick_two(CLASSES);
    let _ = write!(
        out,
        "workload workload_{n} {{\n\
         \x20 release  = \"1.{}.{}\"\n\
         \x20 image    = \"registry.example.com/workload-{n}:1.0\"\n\
         \x20 kind     = {kind}\n\
         \x20 class    = {class}\n\
         \x20 identity = service_account(\"team-{}\")\n\
         \x20 replicas = {}\n\
         \x20 model    = model_{n}              // any variant that fits\n\
         \x20 resources {{ cpu = {}  memory = {}GiB  gpu = {} }}\n\
         \x20 data images_{n} {{\n\
         \x20   dataset        = \"dataset-{n}\"\n\
         \x20   access         = read\n\
         \x20   max_latency    = {}ms\n\
         \x20   classification = confidential\n\
         \x20 }}\n\
         \x20 services     = [object_store >= ga, model_cache >= preview]\n\
         \x20 connectivity = {conn}\n\
         \x20 environments = [{env1}, {env2}]\n\
         \x20 telemetry {{ buffer = {}h }}\n\
         }}\n\n",
        mix.below(10),
        mix.below(10),
        mix.below(50),
        1 + mix.below(8),
        1 + mix.below(32),
        1 + mix.below(128),
        mix.below(4),
        5 + mix.below(100),
        1 + mix.below(48),
    );
    let tclass = mix.pick(CLASSES);
    let region = mix.pick(REGIONS);
    let tconn = mix.pick(CONNECTIVITY);
    let pacc = mix.pick(ACCELERATORS);
    let _ = write!(
        out,
        "target target_{n} {{\n\
         \x20 class        = {tclass}\n\
         \x20 runtime      = kubernetes {{ context = \"site-{n}\"  namespace = \"vision\" }}\n\
         \x20 region       = \"{region}\"\n\
         \x20 jurisdiction = \"FR\"\n\
         \x20 connectivity = intermittent {{ wan_latency = {}ms }}\n\
         \x20 cpu    = {}\n\
         \x20 memory = {}GiB\n\
         \x20 pool gpus {{\n\
         \x20   accelerator = {pacc}\n\
         \x20   count       = {}\n\
         \x20   node_labels = {{ \"nvidia.com/gpu.product\": \"NVIDIA-{pacc}\" }}\n\
         \x20 }}\n\
         \x20 data images_{n} = local {{ endpoint = \"s3://minio.site-{n}.local/images\"  latency = {}ms }}\n\
         \x20 services = {{ object_store: ga, model_cache: ga }}\n\
         \x20 cost     = {{ gpu_hour: {}.{:02} }}\n\
         \x20 // reachable as {tconn}\n\
         }}\n\n",
        10 + mix.below(90),
        16 * (1 + mix.below(32)),
        64 * (1 + mix.below(16)),
        1 + mix.below(16),
        1 + mix.below(9),
        mix.below(5),
        mix.below(100),
    );
    let _ = write!(
        out,
        "placement workload_{n} {{\n\
         \x20 targets  = [target_{n}, target_{}]\n\
         \x20 spread   = per_target({})\n\
         \x20 prefer   = [lowest(data_latency), lowest(cost)]\n\
         \x20 fallback = [target_{n}]\n\
         }}\n\n",
        // Another, earlier target (the first placement names the next one).
        if n == 0 { 1 } else { n / 2 },
        1 + mix.below(3),
    );
    if mix.policy_in_round(n) {
        let _ = write!(
            out,
            "policy governance_{n} {{\n\
             \x20 deny \"confidential data stays on premises\"\n\
             \x20   when workload.data.any(d -> d.classification == confidential) and target.class == cloud\n\
             \x20 entitle service_account(\"team-{n}\") {{ gpu <= {}  accelerators = [L4, H100]\n\
             \x20                                    environments = [factory, cloud] }}\n\
             \x20 quota team(\"team-{n}\") {{ gpu <= {} }}\n\
             \x20 window peak_{n} = weekdays 08:00..18:00 in \"Europe/Paris\"\n\
             \x20 limit class experiment during peak_{n} {{ gpu <= {} }}\n\
             \x20 approval when cost_per_day > {} {{ approvers = [\"platform-leads\"] }}\n\
             \x20 reclaim kind notebook when gpu_idle > {}m\n\
             }}\n\n",
            4 + mix.below(28),
            2 + mix.below(14),
            1 + mix.below(8),
            100 + mix.below(900),
            10 + mix.below(50),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_sized() {
        let a = spec(2_000);
        assert_eq!(a, spec(2_000));
        let lines = a.lines().count();
        assert!((2_000..2_100).contains(&lines), "{lines} lines");
    }

    #[test]
    fn one_file_is_the_spec_and_files_share_the_rounds() {
        assert_eq!(spec_files(2_000, 1), vec![spec(2_000)]);
        let files = spec_files(2_000, 4);
        assert_eq!(files.len(), 4);
        let total: usize = files.iter().map(|f| f.lines().count()).sum();
        assert!((2_000..2_400).contains(&total), "{total} lines");
        assert!(files[1].contains("model model_") && !files[1].contains("model model_0 "));
    }

    #[test]
    fn chosen_specs_are_valid_specs() {
        let mut sequence = SplitMix64(7);
        let random: Vec<u8> = (0..4_000).map(|_| sequence.next() as u8).collect();
        for choices in [&[][..], &[0xff; 600][..], &random[..], &random[1..1_000]] {
            let mut sources = crate::source::SourceMap::new();
            sources.add("chosen.berth", spec_from_choices(choices));
            let checked = crate::driver::check(&sources);
            let errors: Vec<_> = checked.diagnostics.iter().map(|d| &d.message).collect();
            assert!(!checked.has_errors(), "{errors:?}");
        }
    }
}
