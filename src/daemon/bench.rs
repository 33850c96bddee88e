//! Developer tool, compiled only with the cargo feature `bench`: the control-socket command
//! `bench.inject {count, rate, distinct}` submits synthetic WARNING findings (check
//! `bench_synthetic`) to the real engine, paced at `rate` per second, so benchmarks drive the
//! dispatcher, the store, the event bus and SSE subscribers faster than real detectors can.
//! It answers at once; progress shows in `engines.findings.dispatched_total` (health) and
//! refusals in the `findings.ingest` row.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::api::App;
use crate::findings::{Finding, Severity};

pub fn inject(app: &App, args: &Value) -> Value {
    let arg = |k: &str, default: u64| args.get(k).and_then(Value::as_u64).unwrap_or(default);
    let count = arg("count", 0).min(100_000_000);
    let rate = arg("rate", 10_000).clamp(1, 10_000_000);
    let distinct = arg("distinct", 1000).clamp(1, 1_000_000);
    let engine = app.services.engine.clone();
    let clock = app.clock.clone();
    let spawned = std::thread::Builder::new()
        .name("bench-inject".into())
        .spawn(move || {
            let start = Instant::now();
            let mut refused = 0u64;
            for i in 0..count {
                let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
                let now = Instant::now();
                if due > now + Duration::from_millis(1) {
                    std::thread::sleep(due - now);
                }
                let f = Finding::new(
                    "bench_synthetic",
                    Severity::Warning,
                    format!("synthetic finding {}", i % distinct),
                    clock.now(),
                )
                .with_path(format!("/var/www/bench/{}.php", i % distinct))
                .with_details("synthetic finding submitted by bench.inject (cargo feature bench)");
                if !engine.submit(f) {
                    refused += 1;
                }
            }
            log::info!(
                "bench.inject: submitted {count} findings in {:.3} s ({refused} refused)",
                start.elapsed().as_secs_f64()
            );
        });
    match spawned {
        Ok(_) => json!({ "ok": true, "count": count, "rate": rate, "distinct": distinct }),
        Err(e) => json!({ "error": format!("cannot start the injector: {e}") }),
    }
}
