//! Times `berth check` (parse + semantic analysis) on a generated spec of about 100,000
//! lines: `cargo run --release -p berth-compiler --example check_big [LINES]`.
//! Run under `/usr/bin/time -v` for the peak memory.

use berth_compiler::sema::analyze;
use berth_compiler::source::SourceMap;
use berth_compiler::syntax::{Parsed, parse_file};
use std::fmt::Write as _;
use std::time::Instant;

/// A realistic spec: models, workloads with data and services, targets with pools and
/// data offers, placements and a policy; about `lines` lines.
fn generate(lines: usize) -> String {
    let n = lines / 61 + 1;
    let mut s = String::with_capacity(lines * 40);
    s.push_str("use std.gpu.{L4, L40S, H100, T4, JetsonOrinNano}\n");
    s.push_str("use std.services.{object_store, model_cache, monitoring}\n\n");
    s.push_str("const images = \"plant-images\"\nconst budget = 400 + 100\n\n");
    for i in 0..n {
        let _ = write!(
            s,
            r#"/// Model {i}.
model model_{i} {{
  version = "1.{i}.0"
  variant fp16 {{
    format     = onnx
    gpu_memory = 12GiB
    artifact   = "oci://models.example.com/m{i}:fp16"
    digest     = "sha256:8f7d8bfd9466a7f561b86c22b26c131a50be0d46ed59c2eef313b4527854ada6"
  }}
  variant int8 {{
    format       = tensorrt
    gpu_memory   = 4GiB
    accelerators = [L4, JetsonOrinNano]
    artifact     = "oci://models.example.com/m{i}:int8"
  }}
}}

workload w_{i} {{
  release  = "1.8.{i}"
  image    = "registry.example.com/w{i}:1.8.{i}"
  kind     = service
  class    = production
  identity = service_account("team-{t}")
  replicas = 2
  model    = model_{i}
  resources {{ cpu = 4  memory = 16GiB  gpu = 1 }}
  data images {{
    dataset        = images
    access         = read
    max_latency    = 20ms
    classification = confidential
  }}
  services     = [object_store >= ga, model_cache >= preview]
  connectivity = intermittent
  environments = [factory, datacenter, cloud]
  telemetry {{ buffer = 24h }}
}}

target t_{i} {{
  class        = factory
  runtime      = kubernetes {{ context = "site-{i}"  namespace = "vision" }}
  region       = "eu-{r}"
  connectivity = intermittent {{ wan_latency = 40ms }}
  cpu    = 64
  memory = 256GiB
  pool l4 {{
    accelerator = L4
    count       = 8
    node_labels = {{ "nvidia.com/gpu.product": "NVIDIA-L4" }}
  }}
  data images = local {{ endpoint = "s3://minio.site{i}.local/images"  latency = 2ms }}
  services = {{ object_store: ga, model_cache: ga }}
  cost     = {{ gpu_hour: 0.90 }}
}}

placement w_{i} {{
  targets = [t_{i}, t_{j}]
  spread  = per_target(1)
  prefer  = [lowest(data_latency), lowest(cost)]
}}

"#,
            t = i % 50,
            r = i % 7,
            j = (i + 1) % n,
        );
    }
    s.push_str(
        r#"policy governance {
  deny "confidential data never leaves the premises"
    when workload.data.any(d -> d.classification == confidential) and target.class == cloud
  quota team("research") { gpu <= 8 }
  window peak = weekdays 08:00..18:00 in "Europe/Paris"
  limit class experiment during peak { gpu <= 4 }
  approval when cost_per_day > budget { approvers = ["platform-leads"] }
  reclaim kind notebook when gpu_idle > 30m
}
"#,
    );
    s
}

fn main() {
    let lines: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let text = generate(lines);
    let mut map = SourceMap::new();
    map.add("big.berth", text);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        let parsed: Vec<Parsed> = map
            .files()
            .iter()
            .map(|f| parse_file(f.id, &f.text))
            .collect();
        let parse_ms = start.elapsed().as_secs_f64() * 1e3;
        let (ir, diags) = analyze(&map, &parsed);
        let total_ms = start.elapsed().as_secs_f64() * 1e3;
        best = best.min(total_ms);
        println!(
            "{} lines, {} bytes: parse {parse_ms:.1} ms, parse + analyze {total_ms:.1} ms, {} diagnostics, {} workloads",
            map.files()[0].line_count(),
            map.files()[0].text.len(),
            diags.len() + parsed.iter().map(|p| p.diagnostics.len()).sum::<usize>(),
            ir.map_or(0, |i| i.workloads.len()),
        );
    }
    println!("best: {best:.1} ms");
}
