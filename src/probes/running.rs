//! The running backends (feature `bpf`): rows, the reader hooks, the consumers and the
//! connection verdict pool.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::components::Component;
use crate::config::probes::ProbesConfig;
use crate::queue::{BoundedQueue, LagBasis, QueueHealth, RowConfig};
use crate::sys::bpf::{self, Hooks, RingStats, RING_BYTES};

use super::detect::{self, Hit};
use super::record::{self, Conn, Head};
use super::{
    Deps, Enrichment, Pending, Probes, ScoreLookup, StartError, IDLE, OUTPUT_SLOTS,
    VERDICT_WAITING, VERDICT_WORKERS,
};

/// What a backend's consumer does with one record.
struct Consumer {
    backend: String,
    enrichment: Arc<Enrichment>,
    allowed: Vec<crate::net::cidr::PortRange>,
    patterns: Vec<crate::config::probes::Pattern>,
    verdicts: Option<Arc<BoundedQueue<Conn>>>,
    component: Arc<Component>,
    clock: crate::clock::SharedClock,
    bad_records: Arc<AtomicU64>,
}

impl Consumer {
    fn handle(&self, bytes: &[u8]) {
        self.component.event(self.clock.now());
        let hit = match self.backend.as_str() {
            "execution" => record::exec(bytes).map(|e| detect::web_spawn(&e).map(|h| (h, e.head))),
            "connection" => record::conn(bytes).map(|c| self.connection(c)),
            "sensitive_files" => record::open(bytes).map(|o| {
                let full = self.enrichment.ctx.fd_path(o.head.actor.pid, o.fd);
                detect::sensitive(&o, full.as_deref(), &self.patterns).map(|h| (h, o.head))
            }),
            "af_alg" => record::alg(bytes).map(|a| {
                let account = self.enrichment.ctx.account(a.head.actor.uid);
                Some((detect::af_alg(&a, account.as_deref()), a.head))
            }),
            _ => Ok(None),
        };
        match hit {
            Ok(Some((hit, head))) => self.enrich(hit, head),
            Ok(None) => {}
            Err(_) => {
                self.bad_records.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A port outside the allow list is a finding at once; an allowed port gets the
    /// advisory reputation lookup (refused when the pool is full: no annotation, counted).
    fn connection(&self, c: Conn) -> Option<(Hit, Head)> {
        if let Some(hit) = detect::unusual_port(&c, &self.allowed) {
            return Some((hit, c.head));
        }
        if c.direction == record::Direction::Outbound && c.head.actor.uid != 0 {
            if let Some(v) = &self.verdicts {
                let _ = v.try_push(c);
            }
        }
        None
    }

    fn enrich(&self, hit: Hit, head: Head) {
        // Overflow replaces the oldest waiting request (counted as a loss by the row).
        let _ = self.enrichment.queue.force_push(Pending { hit, head });
    }
}

impl Probes {
    pub(super) fn start_backend(
        &mut self,
        backend: &str,
        cfg: &ProbesConfig,
        deps: &Deps,
        enrichment: &Arc<Enrichment>,
        component: &Arc<Component>,
    ) -> Result<(), StartError> {
        let kernel = QueueHealth::new(
            deps.clock.clone(),
            RowConfig::new("bytes")
                .capacity(RING_BYTES)
                .lag_basis(LagBasis::ConsumerProgress),
        );
        let output = Arc::new(
            BoundedQueue::<Vec<u8>>::new(
                deps.clock.clone(),
                RowConfig::new("records")
                    .capacity(OUTPUT_SLOTS as u64)
                    .running_slots(1)
                    .lag_basis(LagBasis::ConsumerProgress),
            )
            .map_err(|e| StartError::Queue(e.to_string()))?,
        );
        let verdicts = if backend == "connection" {
            Some(self.start_verdicts(cfg, deps, enrichment)?)
        } else {
            None
        };
        let names: Vec<String> = cfg
            .sensitive_files
            .iter()
            .filter_map(|p| p.kernel_name().ok().map(str::to_string))
            .collect();
        let hooks = {
            let out = output.clone();
            let polled = kernel.clone();
            let unmapped = kernel.clone();
            let mut seen_drops = 0u64;
            Hooks {
                on_record: Box::new(move |b: &[u8]| {
                    // A refusal (full) drops the record: counted by the row.
                    let _ = out.try_push(b.to_vec());
                }),
                on_poll: Box::new(move |s: RingStats| {
                    if let Some(bytes) = s.occupancy {
                        polled.set_waiting(bytes);
                    }
                    if s.consumed > 0 {
                        polled.note_progress();
                    }
                    if s.drops_total > seen_drops {
                        polled.record_losses(s.drops_total - seen_drops);
                        seen_drops = s.drops_total;
                    }
                }),
                on_unmap: Box::new(move || {
                    unmapped.set_depth_unavailable(true);
                    unmapped.set_lag_basis(LagBasis::Unavailable);
                }),
                stop: self.stop.clone(),
            }
        };
        let reader = bpf::spawn(backend, names, hooks).map_err(StartError::Bpf)?;
        self.threads.push(reader);
        self._rows.push(
            deps.registry
                .register(format!("{backend}.kernel"), kernel)
                .map_err(|e| StartError::Row(e.to_string()))?,
        );
        self._rows.push(
            deps.registry
                .register(format!("bpf.{backend}.output"), output.health().clone())
                .map_err(|e| StartError::Row(e.to_string()))?,
        );
        let consumer = Consumer {
            backend: backend.to_string(),
            enrichment: enrichment.clone(),
            allowed: cfg.allowed_out_ports.clone(),
            patterns: cfg.sensitive_files.clone(),
            verdicts,
            component: component.clone(),
            clock: deps.clock.clone(),
            bad_records: component.counter("bad_records_total"),
        };
        let stop = self.stop.clone();
        let t = std::thread::Builder::new()
            .name(format!("probe-{backend}-out"))
            .spawn(move || consume(&output, &consumer, &stop))
            .map_err(|e| StartError::Thread(e.to_string()))?;
        self.threads.push(t);
        Ok(())
    }

    /// `bpf.connection.verdict`: 256 waiting, 4 workers asking the threat database.
    fn start_verdicts(
        &mut self,
        cfg: &ProbesConfig,
        deps: &Deps,
        enrichment: &Arc<Enrichment>,
    ) -> Result<Arc<BoundedQueue<Conn>>, StartError> {
        let q = Arc::new(
            BoundedQueue::new(
                deps.clock.clone(),
                RowConfig::new("annotations")
                    .capacity(VERDICT_WAITING as u64)
                    .running_slots(VERDICT_WORKERS)
                    .lag_basis(LagBasis::ConsumerProgress),
            )
            .map_err(|e| StartError::Queue(e.to_string()))?,
        );
        self._rows.push(
            deps.registry
                .register("bpf.connection.verdict", q.health().clone())
                .map_err(|e| StartError::Row(e.to_string()))?,
        );
        for i in 0..VERDICT_WORKERS {
            let q = q.clone();
            let stop = self.stop.clone();
            let score = deps.score.clone();
            let e = enrichment.clone();
            let high = cfg.threat_score_high;
            let t = std::thread::Builder::new()
                .name(format!("probe-verdict-{i}"))
                .spawn(move || verdict_worker(&q, &stop, score.as_ref(), &e, high))
                .map_err(|e| StartError::Thread(e.to_string()))?;
            self.threads.push(t);
        }
        Ok(q)
    }
}

fn consume(output: &BoundedQueue<Vec<u8>>, consumer: &Consumer, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        if let Ok(guard) = output.pop_timeout(IDLE) {
            let bytes = guard.finish();
            consumer.handle(&bytes);
        }
    }
}

fn verdict_worker(
    q: &BoundedQueue<Conn>,
    stop: &AtomicBool,
    score: Option<&ScoreLookup>,
    e: &Enrichment,
    high: u8,
) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(guard) = q.pop_timeout(IDLE) else {
            continue;
        };
        let c = guard.finish();
        let Some(s) = score.and_then(|f| f(c.remote.0)) else {
            continue;
        };
        if let Some(hit) = detect::high_score(&c, s, high) {
            let _ = e.queue.force_push(Pending { hit, head: c.head });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::components::Components;
    use crate::queue::Registry;

    /// As root with the feature (CI): the kernel row measures bytes by consumer progress
    /// while the ring is mapped, and after the reader unmaps it depth is unavailable and
    /// the lag basis `unavailable` (spec, `<backend>.kernel`).
    #[test]
    fn kernel_row_after_unmap_has_no_depth_and_no_lag_basis() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "kernel probe tests need root"
        );
        let registry = Registry::new();
        let components = Arc::new(Components::default());
        let cfg = ProbesConfig {
            backends: vec!["af_alg".into()],
            ..ProbesConfig::default()
        };
        let mut probes = Probes::start(
            &cfg,
            Deps {
                clock: crate::clock::SystemClock::shared(),
                registry: registry.clone(),
                components: components.clone(),
                submit: Arc::new(|_| {}),
                score: None,
                proc_root: PathBuf::from("/proc"),
                passwd: PathBuf::from("/etc/passwd"),
            },
        );
        let rows = registry.snapshot();
        let k = &rows["af_alg.kernel"];
        assert_eq!(k.lag_basis, LagBasis::ConsumerProgress, "{rows:?}");
        assert!(!k.depth_unavailable);
        assert_eq!(k.waiting, Some(0));
        assert!(rows.contains_key("bpf.af_alg.output"));
        assert!(rows.contains_key("processctx.enrichment"));
        assert!(rows.contains_key("processctx.proc_reads"));
        assert!(!rows.contains_key("bpf.connection.verdict"));
        probes.halt();
        let k = &registry.snapshot()["af_alg.kernel"];
        assert!(k.depth_unavailable);
        assert_eq!(k.lag_basis, LagBasis::Unavailable);
        assert_eq!(k.waiting, None);
        probes.stop();
        assert!(registry.snapshot().is_empty());
    }
}
