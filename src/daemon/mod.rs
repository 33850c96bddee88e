//! The supervisor: builds each subsystem once, starts threads, handles shutdown.
//!
//! [`run`] reads as its phases: `block_signals`, `load_config`, `open_state`, TLS,
//! `Subsystems::start`, `Front::start` (API, listener, reloader, control socket),
//! systemd notification and watchdog ([`watchdog`]), `announce`, `wait_for_stop`, then
//! `Front::stop` and `Subsystems::shutdown`.
//!
//! Startup order: configuration (with legacy migration), state directory, store and its
//! migrations, end leftover sessions, TLS (certificate made or loaded), the findings engine,
//! suppressions, incidents (restored from the store), firewall, mail antivirus, WAF,
//! mail-log reader, scan jobs, collectors, event bus and alerts (listeners of the engine;
//! the alert spool replays what was left), threat intelligence (attack database loaded, a
//! listener of the engine), engine start, HTTP listener, control socket. SIGHUP reloads the
//! configuration (see [`reload`]).
//! SIGTERM or SIGINT end event streams, stop the HTTP server and the control socket, stop
//! the collectors and the engine, flush incident snapshots, stop the alert notifier, drain
//! the store writer and exit 0.

#[cfg(feature = "bench")]
mod bench;

pub mod challenge;
pub mod collectors;
pub mod commands;
pub mod control;
pub mod dev;
pub mod doctor;
mod error;
pub mod fallback;
pub mod reload;
mod watchdog;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::sys::signal::{SigSet, Signal};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::api::App;
use crate::checks::jobs::{JobKind, ScanJobs};
use crate::checks::CheckContext;
use crate::clock::SystemClock;
use crate::config::{self, Config};
use crate::findings::Engine;
use crate::http::{self, Server};
use crate::queue::Registry;
use crate::store::Store;

pub use error::{BoxError, StartError};

/// How the daemon was asked to start.
pub struct Options {
    pub config: Option<PathBuf>,
    pub dev: bool,
}

/// Where a reload reads the configuration from.
fn source(opts: &Options) -> reload::Source {
    if opts.dev {
        reload::Source::Dev
    } else {
        reload::Source::File(
            opts.config
                .clone()
                .unwrap_or_else(|| PathBuf::from(config::DEFAULT_PATH)),
        )
    }
}

fn load_config(opts: &Options) -> Result<(Config, Option<dev::DevTokens>), StartError> {
    if opts.dev {
        let (cfg, tokens) = dev::config().map_err(StartError::Dev)?;
        return Ok((cfg, Some(tokens)));
    }
    let path = opts
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(config::DEFAULT_PATH));
    match config::migrate::migrate_file(&path) {
        Ok(config::migrate::Outcome::Unchanged) => {}
        Ok(o) => log::info!(
            "{}: legacy webui.auth_token {}",
            path.display(),
            match o {
                config::migrate::Outcome::RemovedDuplicate => {
                    "removed (its token already had a webui.tokens entry)"
                }
                _ => "moved into a new webui.tokens entry legacy-auth-token",
            }
        ),
        // Not fatal: the legacy token keeps working from memory.
        Err(e) => log::warn!("legacy token migration skipped: {e}"),
    }
    let cfg = config::load(&path).map_err(StartError::Config)?;
    Ok((cfg, None))
}

fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut f = crate::fsutil::open_daemon_file(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(hex::encode(h.finalize()))
}

/// Runs the daemon in the foreground until SIGTERM or SIGINT, in named phases: signals,
/// configuration, state (directory, store, sessions), TLS, subsystems, API and control
/// socket, the wait for a signal, and shutdown in reverse dependency order.
pub fn run(opts: Options) -> Result<(), StartError> {
    let signals = block_signals()?;
    let (cfg, dev_tokens) = load_config(&opts)?;
    let cfg = Arc::new(cfg);
    let live = Arc::new(config::Live::new(cfg.clone()));
    let geoip = crate::geoip::GeoIp::open(&cfg.geoip)
        .map_err(StartError::GeoIp)?
        .map(Arc::new);
    let store = open_state(&cfg)?;
    let (cert, key) =
        http::tls::ensure_pair(&cfg.state_path, &cfg.webui.tls_cert, &cfg.webui.tls_key)
            .map_err(StartError::Tls)?;
    let tls = http::tls::server_config(&cert, &key).map_err(StartError::Tls)?;
    let clock = SystemClock::shared();
    let mut subsystems = Subsystems::start(&cfg, clock.clone(), &store, geoip.clone())?;
    let front = Front::start(&opts, &cfg, clock, &store, tls, &subsystems, geoip, live)?;
    let mut systemd = watchdog::Systemd::from_env();
    systemd.ready()?;
    // Kept before the listening line: whoever saw the daemon start finds it.
    if !opts.dev {
        let main = opts.config.clone();
        fallback::save(
            &main.unwrap_or_else(|| PathBuf::from(config::DEFAULT_PATH)),
            &cfg.state_path,
        );
    }
    announce(&cfg, front.addr, dev_tokens.as_ref());
    release_startup_code();
    let waited = wait_for_stop(&signals, &front.reloader, &systemd);
    systemd.stopping();
    let app = front.stop(&mut subsystems);
    subsystems.shutdown();
    // Audit records still waiting for the action-log writer are committed first.
    app.audit.shutdown();
    store.close();
    waited?;
    log::info!("stopped");
    Ok(())
}

/// Blocks the stop and reload signals in every thread (threads started later inherit the
/// mask); the main thread waits for them in [`wait_for_stop`].
fn block_signals() -> Result<SigSet, StartError> {
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGHUP);
    signals
        .thread_block()
        .map_err(|source| StartError::Signals {
            what: "cannot block signals",
            source,
        })?;
    Ok(signals)
}

/// The state directory, the store (migrated) and the end of the sessions a previous process
/// left.
fn open_state(cfg: &Config) -> Result<Store, StartError> {
    crate::fsutil::ensure_dir(&cfg.state_path, 0o700).map_err(|source| StartError::StateDir {
        path: cfg.state_path.clone(),
        source,
    })?;
    let db = cfg.state_path.join("svc.db");
    let store = Store::open(&db).map_err(|source| StartError::Store { path: db, source })?;
    match crate::api::sessions::Sessions::end_all_stored(&store) {
        Ok(0) => {}
        Ok(n) => log::info!("ended {n} browser sessions left by the previous process"),
        Err(e) => return Err(StartError::Sessions(e)),
    }
    Ok(store)
}

/// Start-up is over: most of the code it ran (configuration, key generation, migrations,
/// rule compilation) never runs again; give its pages back (decision 295).
fn release_startup_code() {
    let maps = crate::fsutil::read_daemon_string(std::path::Path::new("/proc/self/maps"));
    match maps.and_then(|m| crate::sys::pageout::release_startup_code(&m)) {
        Ok(n) => log::debug!("start-up code: {n} bytes of mappings advised for page-out"),
        Err(e) => log::debug!("start-up code not paged out: {e}"),
    }
}

/// Set by `POST /api/v1/settings/restart`: once `run` has shut down, the daemon command
/// executes the binary again ([`reexec`]).
static RESTART: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks for a restart: the daemon shuts down as on SIGTERM (after a moment, so the 202
/// answer goes out first), then re-executes itself.
fn request_restart() {
    RESTART.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = std::thread::Builder::new()
        .name("restart".into())
        .spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(250));
            let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), Signal::SIGTERM);
        });
}

/// Whether the daemon stopped to restart.
pub fn restart_requested() -> bool {
    RESTART.load(std::sync::atomic::Ordering::SeqCst)
}

/// Replaces this process with the same binary and arguments (`/proc/self/exe`); returns
/// only on failure.
pub fn reexec() -> std::io::Error {
    use std::os::unix::process::CommandExt;
    log::info!("restarting (settings restart)");
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.args(std::env::args_os().skip(1));
    fallback::restart_env(&mut cmd);
    cmd.exec()
}

/// Waits for SIGTERM or SIGINT; SIGHUP reloads the configuration and waits again.
fn wait_for_stop(
    signals: &SigSet,
    reloader: &reload::Reloader,
    systemd: &watchdog::Systemd,
) -> Result<(), StartError> {
    loop {
        let sig = signals.wait().map_err(|source| StartError::Signals {
            what: "waiting for signals",
            source,
        })?;
        if sig == Signal::SIGHUP {
            // Logged and audited by the reloader.
            systemd.reloading();
            let _ = reloader.reload(reload::Trigger::Signal);
            systemd.reloaded();
            continue;
        }
        log::info!("received {sig:?}; shutting down");
        return Ok(());
    }
}

/// Every subsystem the daemon runs, started in dependency order; [`Subsystems::shutdown`]
/// stops them in the reverse order each needs.
struct Subsystems {
    registry: Arc<Registry>,
    engine: Arc<Engine>,
    suppressions: Arc<crate::findings::suppress::Suppressions>,
    components: Arc<crate::components::Components>,
    incidents: Arc<crate::incidents::Incidents>,
    firewall: crate::firewall::Handle,
    mail: Arc<crate::mail::MailAv>,
    jobs: Arc<ScanJobs>,
    password_audit: Arc<crate::mail::password::PasswordAudit>,
    cms: Arc<crate::cms::CmsTask>,
    crawler: Arc<crate::crawler::Verifier>,
    crawler_updater: Option<crate::crawler::Updater>,
    collectors: Arc<collectors::LiveCollectors>,
    mail_log: Option<crate::mail::log::collector::MailLogCollector>,
    smtp_egress: Option<crate::mail::egress::EgressSampler>,
    events: crate::events::EventBus,
    alerts: Arc<crate::alerts::Alerts>,
    threat: Arc<crate::threat::Threat>,
    challenge: Option<challenge::Running>,
    abuse: Option<Arc<crate::abuse::Reporter>>,
    fleet: Option<Arc<crate::fleet::Fleet>>,
    waf: Arc<crate::waf::service::WafService>,
    probes: crate::probes::Probes,
}

impl Subsystems {
    /// Starts every subsystem, in dependency order (see the module documentation).
    fn start(
        cfg: &Config,
        clock: crate::clock::SharedClock,
        store: &Store,
        geoip: Option<Arc<crate::geoip::GeoIp>>,
    ) -> Result<Subsystems, StartError> {
        let store = store.clone();
        let registry = Registry::new();
        let engine = Engine::new(clock.clone(), store.clone(), &registry, &cfg.state_path)
            .map_err(StartError::subsystem("findings engine"))?;
        engine.set_max_active(cfg.engine.max_active_findings);
        engine.register_scheduled_checks(
            crate::checks::critical_checks()
                .iter()
                .chain(crate::checks::deep_checks())
                .map(|c| c.name)
                .chain(crate::mail::password::task::CHECKS.iter().copied())
                .chain(crate::cms::CHECKS.iter().copied())
                .chain(std::iter::once(crate::checks::file_index::CHECK)),
        );
        let suppressions =
            crate::findings::suppress::Suppressions::load(store.clone(), clock.clone())
                .map_err(StartError::subsystem("loading suppressions"))?;
        match engine.set_suppressor(suppressions.clone()) {
            Ok(0) => {}
            Ok(n) => log::info!("{n} active findings removed by suppressions"),
            Err(e) => return Err(StartError::subsystem("applying suppressions")(e)),
        }
        let components = Arc::new(crate::components::Components::default());
        let incidents = crate::incidents::Incidents::persistent(
            clock.clone(),
            std::time::Duration::from_secs(cfg.engine.incident_window_minutes * 60),
            store.clone(),
            &registry,
        )
        .map_err(StartError::subsystem("incidents"))?;
        incidents
            .start_writer()
            .map_err(StartError::subsystem("incidents"))?;
        {
            let incidents = incidents.clone();
            engine.subscribe(Box::new(move |f| incidents.observe(f)));
        }
        let firewall = crate::firewall::start(cfg, clock.clone(), store.clone(), &registry);
        let mail = crate::mail::MailAv::new(
            &cfg.mail,
            &cfg.state_path,
            store.clone(),
            clock.clone(),
            engine.clone(),
            registry.clone(),
        )
        .map_err(StartError::subsystem("mail antivirus"))?;
        let check_ctx = check_context(cfg, clock.clone());
        let jobs = ScanJobs::new(
            clock.clone(),
            store.clone(),
            engine.clone(),
            check_ctx,
            &registry,
        )
        .map_err(StartError::subsystem("scan jobs"))?;
        let password_audit = crate::mail::password::PasswordAudit::start(
            &cfg.mail.password,
            store.clone(),
            clock.clone(),
            &registry,
        )
        .map_err(StartError::subsystem("password audit"))?;
        jobs.add_task(password_audit.clone());
        let cms = crate::cms::CmsTask::start(
            crate::cms::Settings::from_config(cfg),
            store.clone(),
            clock.clone(),
            &registry,
        )
        .map_err(StartError::subsystem("cms verification"))?;
        jobs.add_task(cms.clone());
        let file_index =
            crate::checks::file_index::FileIndex::start(store.clone(), clock.clone(), &registry)
                .map_err(StartError::subsystem("file index"))?;
        jobs.add_task(file_index);
        // The crawler verifier is the access-log collector's oracle; it answers `NoClaim` while
        // `reputation.bot_verify_enabled` is off (as `crawler::NoVerification` does), so that
        // key applies on reload.
        let (crawler, crawler_updater) = start_crawler(cfg, clock.clone(), &store, &registry)?;
        let collectors = Arc::new(
            collectors::LiveCollectors::start(
                cfg,
                crawler.clone(),
                clock.clone(),
                &engine,
                &registry,
                &components,
                &store,
            )
            .map_err(StartError::subsystem("collectors"))?,
        );
        let mail_log = crate::mail::log::collector::start_configured(
            cfg,
            jiff::tz::TimeZone::system(),
            clock.clone(),
            &engine,
            &registry,
            &components,
            &store,
        );
        let smtp_egress = {
            let weak = Arc::downgrade(&engine);
            crate::mail::egress::start_system(
                &cfg.engine.checks_root,
                clock.clone(),
                &registry,
                store.clone(),
                Arc::new(move |f| {
                    if let Some(e) = weak.upgrade() {
                        e.submit(f);
                    }
                }),
            )
        };
        let events = crate::events::EventBus::new(
            clock.clone(),
            &registry,
            cfg.webui.limits.max_sse_subscribers,
        )
        .map_err(StartError::subsystem(crate::events::ROW))?;
        engine.subscribe(events.listener());
        let alerts =
            crate::alerts::Alerts::start(&cfg.alerts, clock.clone(), store.clone(), &registry)
                .map_err(StartError::subsystem("alerts"))?;
        engine.subscribe(alerts.listener());
        let threat = {
            let weak = Arc::downgrade(&engine);
            crate::threat::Threat::start(
                crate::threat::Deps {
                    clock: clock.clone(),
                    store: store.clone(),
                    registry: registry.clone(),
                    firewall: firewall.clone(),
                    geoip: geoip.clone(),
                    alerts: alerts.clone(),
                    submit: Arc::new(move |item| {
                        weak.upgrade().is_some_and(|e| e.submit_item(item))
                    }),
                },
                &cfg.threat,
                &cfg.reputation,
            )
            .map_err(StartError::Threat)?
        };
        engine.subscribe(threat.listener());
        let challenge = challenge::start(cfg, clock.clone(), &store, &threat)
            .map_err(StartError::subsystem("challenge"))?;
        let abuse = start_abuse_reporting(cfg, &clock, &store, &registry, &threat)?;
        let fleet = start_fleet(cfg, &clock, &store, &registry, &firewall, &threat)?;
        threat.add_exemption(crawler.clone());
        let waf = {
            let hook: Option<crate::waf::collector::EscalateHook> = match &firewall {
                crate::firewall::Handle::Active(fw) => {
                    let fw = fw.clone();
                    Some(Arc::new(move |f: &crate::findings::Finding| {
                        waf_escalate(&fw, f);
                    }))
                }
                _ => None,
            };
            let country = geoip.clone().map(|g| {
                Arc::new(move |ip: std::net::IpAddr| g.lookup(ip).and_then(|x| x.country))
                    as Arc<dyn Fn(std::net::IpAddr) -> Option<String> + Send + Sync>
            });
            crate::waf::service::WafService::start(
                &cfg.waf,
                crate::waf::logs::resolve(&cfg.engine.waf_logs, &cfg.engine.checks_root),
                hook,
                Some(Arc::new(WafDenies(threat.recorder()))),
                country,
                clock.clone(),
                &engine,
                &registry,
                &components,
                &store,
            )
            .map_err(StartError::subsystem("waf"))?
        };
        let probes = start_probes(cfg, &clock, &registry, &components, &engine, &threat);
        engine
            .start()
            .map_err(StartError::subsystem("findings engine"))?;
        mail.start()
            .map_err(StartError::subsystem("mail antivirus"))?;
        let minutes = |m: u64| (m > 0).then(|| std::time::Duration::from_secs(m * 60));
        jobs.start(
            minutes(cfg.engine.critical_interval_min),
            minutes(cfg.engine.deep_interval_min),
        )
        .map_err(StartError::subsystem("scan jobs"))?;
        Ok(Subsystems {
            registry,
            engine,
            suppressions,
            components,
            incidents,
            firewall,
            mail,
            jobs,
            password_audit,
            cms,
            crawler,
            crawler_updater,
            collectors,
            mail_log,
            smtp_egress,
            events,
            alerts,
            threat,
            challenge,
            abuse,
            fleet,
            waf,
            probes,
        })
    }

    /// Stops what [`Front::stop`] left, each after what feeds it.
    fn shutdown(self) {
        // Kernel probes first: their findings go to the engine stopped below.
        self.probes.stop();
        if let Some(m) = self.mail_log {
            m.stop();
        }
        if let Some(s) = self.smtp_egress {
            s.stop();
        }
        self.collectors.stop();
        self.waf.stop();
        self.jobs.shutdown(std::time::Duration::from_secs(3));
        self.password_audit.shutdown();
        self.mail.stop();
        self.engine.shutdown();
        if let Some(u) = self.crawler_updater {
            u.stop();
        }
        self.crawler.stop();
        // After the last finding: events written, automatic blocking stopped.
        self.threat.shutdown();
        // After the last block: waiting reports reach the spool; the senders stop.
        if let Some(a) = &self.abuse {
            a.shutdown();
        }
        // After the last block: waiting alerts reach the spool; waiting actions are applied
        // before the firewall stops.
        if let Some(f) = &self.fleet {
            f.shutdown();
        }
        self.firewall.shutdown();
        // After the last finding: the final snapshot flush.
        self.incidents.shutdown();
        self.alerts.shutdown(std::time::Duration::from_secs(2));
    }
}

/// What faces clients: the API (the `App` and its HTTPS front thread), the reloader and
/// the control socket.
struct Front {
    app: Arc<App>,
    addr: std::net::SocketAddr,
    stopper: http::Stopper,
    http_thread: std::thread::JoinHandle<()>,
    reloader: Arc<reload::Reloader>,
    control: control::ControlServer,
}

impl Front {
    /// Builds the API over the subsystems' handles, binds the listener, starts the control
    /// socket and the HTTPS front thread.
    #[allow(clippy::too_many_arguments)]
    fn start(
        opts: &Options,
        cfg: &Arc<Config>,
        clock: crate::clock::SharedClock,
        store: &Store,
        tls: Arc<rustls::ServerConfig>,
        sub: &Subsystems,
        geoip: Option<Arc<crate::geoip::GeoIp>>,
        live: Arc<config::Live>,
    ) -> Result<Front, StartError> {
        let quarantine: crate::remedy::QuarantineSource = {
            let collectors = sub.collectors.clone();
            Arc::new(move || collectors.quarantine_control())
        };
        let services = crate::api::Services {
            registry: sub.registry.clone(),
            engine: sub.engine.clone(),
            jobs: sub.jobs.clone(),
            components: sub.components.clone(),
            restored: sub.collectors.restored(),
            incidents: sub.incidents.clone(),
            geoip,
            suppressions: sub.suppressions.clone(),
            events: sub.events.clone(),
            alerts: sub.alerts.clone(),
            config: live.clone(),
            firewall: sub.firewall.clone(),
            mail: sub.mail.clone(),
            waf: sub.waf.clone(),
            threat: sub.threat.clone(),
            challenge: sub.challenge.as_ref().map(|r| r.challenge.clone()),
            crawler: sub.crawler.clone(),
            cms: sub.cms.clone(),
            fleet: sub.fleet.clone(),
            fixer: Arc::new(crate::remedy::Fixer::new(
                sub.jobs.context().clone(),
                quarantine.clone(),
                store.clone(),
                clock.clone(),
            )),
            quarantine,
        };
        let mut app = App::new(cfg.clone(), clock, store.clone(), services);
        app.runtime.start_fallback = fallback::reason();
        let app = Arc::new(app);
        {
            let app = app.clone();
            let _ = std::thread::Builder::new()
                .name("binary-hash".into())
                .spawn(move || {
                    if let Ok(h) = hash_file(Path::new("/proc/self/exe")) {
                        let _ = app.runtime.binary_hash.set(h);
                    }
                });
        }

        open_file_limit(&cfg.webui.limits);
        let listen_err = |source| StartError::Listen {
            addr: cfg.webui.listen,
            source,
        };
        let server =
            Server::bind(cfg.webui.listen, tls, cfg.webui.limits.clone()).map_err(listen_err)?;
        let addr = server.local_addr().map_err(listen_err)?;
        let _ = app.server.set(server.stats());
        let stopper = server.stopper().map_err(listen_err)?;
        sub.events.watch_server_stop(stopper.flag());

        let reloader = Arc::new(reload::Reloader::new(
            source(opts),
            live,
            reload::Handles {
                app: app.clone(),
                collectors: sub.collectors.clone(),
            },
        ));
        {
            let r = reloader.clone();
            let _ = app.control.set(crate::api::DaemonControl {
                reload: Box::new(move || r.reload(reload::Trigger::Api).to_json()),
                restart: Box::new(request_restart),
            });
        }
        let control = {
            let ctx = commands::Ctx::new(app.clone(), reloader.clone(), sub.collectors.clone());
            let handler: Arc<control::CommandFn> =
                Arc::new(move |cmd: &str, args: &Value| commands::dispatch(&ctx, cmd, args));
            control::ControlServer::start(&cfg.socket_path(), handler).map_err(|source| {
                StartError::Control {
                    path: cfg.socket_path(),
                    source,
                }
            })?
        };
        let http_thread = {
            let app: Arc<dyn http::Handler> = app.clone();
            std::thread::Builder::new()
                .name("http-front".into())
                .spawn(move || server.run(app))
                .map_err(|source| StartError::Spawn {
                    thread: "http-front",
                    source,
                })?
        };
        Ok(Front {
            app,
            addr,
            stopper,
            http_thread,
            reloader,
            control,
        })
    }

    /// Ends event streams (so the server's drain does not wait for them), stops the HTTPS
    /// front, the challenge listener and the control socket; the `App` stays for its audit
    /// writer, which stops after the subsystems.
    fn stop(self, sub: &mut Subsystems) -> Arc<App> {
        sub.events.close();
        self.stopper.stop();
        let _ = self.http_thread.join();
        if let Some(c) = sub.challenge.take() {
            c.stop();
        }
        self.control.stop();
        self.app
    }
}

/// Abuse reporting (`[reputation.report]`, read at start): confirmed automatic blocks go
/// to the configured destinations. `None` when off or without an auto-block engine.
/// The kernel probes (issue 29): never fatal, a backend that cannot start is a detached
/// component. The threat database answers the advisory reputation lookups.
fn start_probes(
    cfg: &Config,
    clock: &crate::clock::SharedClock,
    registry: &Arc<Registry>,
    components: &Arc<crate::components::Components>,
    engine: &Arc<Engine>,
    threat: &Arc<crate::threat::Threat>,
) -> crate::probes::Probes {
    let weak = Arc::downgrade(engine);
    let db = threat.db.clone();
    let score_clock = clock.clone();
    crate::probes::Probes::start(
        &cfg.probes,
        crate::probes::Deps {
            clock: clock.clone(),
            registry: registry.clone(),
            components: components.clone(),
            submit: Arc::new(move |f| {
                if let Some(e) = weak.upgrade() {
                    e.submit(f);
                }
            }),
            score: Some(Arc::new(move |ip| {
                let now = score_clock.now().as_microsecond();
                db.score_of(ip, now)
                    .map(|(s, _, _)| crate::threat::score::shown(s))
            })),
            proc_root: std::path::PathBuf::from("/proc"),
            passwd: crate::hostfs::reroot(
                &cfg.engine.checks_root,
                std::path::Path::new("/etc/passwd"),
            ),
        },
    )
}

fn start_abuse_reporting(
    cfg: &Config,
    clock: &crate::clock::SharedClock,
    store: &Store,
    registry: &Arc<crate::queue::Registry>,
    threat: &Arc<crate::threat::Threat>,
) -> Result<Option<Arc<crate::abuse::Reporter>>, StartError> {
    let Some(ab) = &threat.autoblock else {
        if cfg.reputation.report.active() {
            log::warn!("abuse reporting: no automatic blocking runs (firewall off), so nothing is reported");
        }
        return Ok(None);
    };
    let roots = crate::net::https::Roots::load(cfg.reputation.ca_file.as_deref())
        .map_err(StartError::subsystem("abuse reporting"))?;
    let r = crate::abuse::Reporter::new(
        &cfg.reputation.report,
        roots,
        std::time::Duration::from_secs(cfg.reputation.timeout_seconds),
        clock.clone(),
        store.clone(),
        registry,
    )
    .map_err(StartError::subsystem("abuse reporting"))?;
    if let Some(r) = &r {
        r.start()
            .map_err(StartError::subsystem("abuse reporting"))?;
        ab.add_sink(r.clone());
    }
    Ok(r)
}

/// Fleet mode (`[fleet]`, read at start): LAPI decisions become firewall blocks, and
/// confirmed automatic blocks become LAPI alerts. `None` when off.
fn start_fleet(
    cfg: &Config,
    clock: &crate::clock::SharedClock,
    store: &Store,
    registry: &Arc<crate::queue::Registry>,
    firewall: &crate::firewall::Handle,
    threat: &Arc<crate::threat::Threat>,
) -> Result<Option<Arc<crate::fleet::Fleet>>, StartError> {
    let fw = firewall.engine().ok().cloned();
    let f = crate::fleet::Fleet::new(
        &cfg.fleet,
        fw,
        threat.autoblock.is_some(),
        clock.clone(),
        store.clone(),
        registry,
    )
    .map_err(StartError::subsystem("fleet"))?;
    if let Some(f) = &f {
        f.start().map_err(StartError::subsystem("fleet"))?;
        if let (true, Some(ab)) = (f.watching(), &threat.autoblock) {
            ab.add_sink(f.clone());
        }
    }
    Ok(f)
}

/// Starts the crawler verifier (always: it answers `NoClaim` while verification is off, so
/// `reputation.bot_verify_enabled` applies on reload) and, when verification and
/// `reputation.bot_ranges` are on, the published-range updater.
fn start_crawler(
    cfg: &Config,
    clock: crate::clock::SharedClock,
    store: &Store,
    registry: &Arc<Registry>,
) -> Result<
    (
        Arc<crate::crawler::Verifier>,
        Option<crate::crawler::Updater>,
    ),
    StartError,
> {
    let (ranges, err) = crate::crawler::ranges::RangeSet::load(&cfg.state_path);
    if let Some(e) = err {
        log::warn!("bot ranges: {e}; using the embedded snapshot");
    }
    let verifier = crate::crawler::Verifier::start(
        cfg.crawler.settings(),
        ranges,
        clock,
        store.clone(),
        registry,
    )
    .map_err(StartError::subsystem("crawler verifier"))?;
    let updater = if cfg.crawler.enabled && cfg.crawler.bot_ranges.enabled {
        let roots = crate::net::https::Roots::load(cfg.reputation.ca_file.as_deref())
            .map_err(StartError::subsystem("bot-range updater"))?;
        Some(
            crate::crawler::Updater::start(
                verifier.clone(),
                cfg.crawler.bot_ranges.clone(),
                cfg.state_path.clone(),
                roots,
                std::time::Duration::from_secs(cfg.reputation.timeout_seconds),
            )
            .map_err(StartError::subsystem("cannot start the bot-range updater"))?,
        )
    } else {
        None
    };
    Ok((verifier, updater))
}

/// How long an address escalated by the WAF stays blocked.
const WAF_BLOCK: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Blocks the address of a `modsec_block_escalation` finding as an automatic caller
/// (source `waf`): dry run, the allow list and infrastructure refusals apply.
/// Records every WAF deny in the attack database as a "WAF block" event: it adds to the
/// address's score; a block follows from the score or from the escalation finding.
struct WafDenies(crate::threat::Recorder);

impl crate::waf::event::WafSink for WafDenies {
    fn waf_deny(&self, e: &crate::waf::event::WafEvent) {
        let rule = e
            .rule_id
            .map(|r| format!(" (rule {r})"))
            .unwrap_or_default();
        self.0.record(
            e.ip,
            crate::findings::evidence::AttackKind::WafBlock,
            "waf_deny",
            e.severity,
            None,
            &format!("WAF deny of {} {}{rule}", e.method, e.uri),
            false,
        );
    }
}

fn waf_escalate(fw: &crate::firewall::Firewall, f: &crate::findings::Finding) {
    let Some(ip) = f.ip else { return };
    let item = crate::firewall::BlockItem {
        net: crate::firewall::Net::host(ip),
        reason: "WAF deny escalation".into(),
        duration: Some(WAF_BLOCK),
    };
    let actor = crate::firewall::Actor::Automatic {
        source: "waf".into(),
    };
    match fw.block(vec![item], &actor) {
        Ok(out) => {
            for o in out {
                log::info!("WAF escalation: {o}");
            }
        }
        Err(e) => log::warn!("WAF escalation of {ip}: firewall refused: {e}"),
    }
}

/// Raises the open-file limit so `max_connections` fit, and logs the figure.
fn open_file_limit(limits: &crate::config::HttpLimits) {
    match http::raise_open_file_limit() {
        Ok((before, now)) => {
            log::info!("open-file limit: {now} (soft limit was {before})");
            // Connections, event streams, and room for the store, logs and watchers.
            let need = (limits.max_connections + limits.max_sse_subscribers + 256) as u64;
            if now < need {
                log::warn!(
                    "open-file limit {now} is below the {need} descriptors webui.limits.max_connections = {} needs; raise LimitNOFILE",
                    limits.max_connections
                );
            }
        }
        Err(e) => log::warn!("cannot read or raise the open-file limit: {e}"),
    }
}

/// The check context from `checks.root` and `checks.web_roots`.
pub fn check_context(cfg: &Config, clock: crate::clock::SharedClock) -> CheckContext {
    let mut b = CheckContext::builder(clock).system_layout(&cfg.engine.checks_root);
    if let Some(roots) = &cfg.engine.web_roots {
        b = b.web_roots(roots.clone());
    }
    b.build()
}

/// `svc check`: a full scan through the daemon, waiting for its findings.
pub(crate) fn run_check(app: &App) -> Value {
    match app
        .services
        .jobs
        .request(JobKind::Full, Some(std::time::Duration::from_secs(600)))
    {
        Ok(Some(result)) => {
            // Make the findings visible before answering.
            app.services
                .engine
                .flush(std::time::Duration::from_secs(10));
            json!({ "ok": true, "job": result })
        }
        Ok(None) => json!({ "error": "scan job queued without a result" }),
        Err(e) => json!({ "error": e.to_string() }),
    }
}

/// The start-up line names the address as bound (issue 23 item 13: a wildcard bind printed
/// `127.0.0.1`); a wildcard says it listens on every address. The dev log-in hint, which
/// must be a URL to open, names loopback for a wildcard (decision 289).
fn listen_text(addr: std::net::SocketAddr) -> (String, String) {
    let bound = format!("https://{addr}");
    match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => (
            format!("{bound} (every IPv4 address of this host)"),
            format!("https://127.0.0.1:{}", addr.port()),
        ),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => (
            format!("{bound} (every address of this host)"),
            format!("https://[::1]:{}", addr.port()),
        ),
        _ => (bound.clone(), bound),
    }
}

fn announce(cfg: &Config, addr: std::net::SocketAddr, dev: Option<&dev::DevTokens>) {
    let (listening, base) = listen_text(addr);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "svc {} listening on {listening} (state {})",
        env!("CARGO_PKG_VERSION"),
        cfg.state_path.display()
    );
    if let Some(t) = dev {
        if t.fresh {
            let _ = writeln!(
                out,
                "dev tokens (shown once; saved in {}/tokens, mode 0600):",
                cfg.state_path.display()
            );
            let _ = writeln!(out, "  admin:   {}", t.admin);
            let _ = writeln!(out, "  read:    {}", t.read);
            let _ = writeln!(out, "  metrics: {}", t.metrics);
        } else {
            let _ = writeln!(out, "dev tokens are in {}/tokens", cfg.state_path.display());
        }
        let _ = writeln!(
            out,
            "log in at {base}/login with the admin token (the certificate is self-signed)"
        );
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::listen_text;

    #[test]
    fn the_start_up_line_names_the_bound_address() {
        let t = |a: &str| listen_text(a.parse().unwrap());
        assert_eq!(
            t("0.0.0.0:9443"),
            (
                "https://0.0.0.0:9443 (every IPv4 address of this host)".to_string(),
                "https://127.0.0.1:9443".to_string()
            )
        );
        assert_eq!(
            t("[::]:9443").0,
            "https://[::]:9443 (every address of this host)"
        );
        assert_eq!(t("[::]:9443").1, "https://[::1]:9443");
        assert_eq!(
            t("192.0.2.1:9443"),
            (
                "https://192.0.2.1:9443".to_string(),
                "https://192.0.2.1:9443".to_string()
            )
        );
        assert_eq!(t("[2001:db8::1]:443").0, "https://[2001:db8::1]:443");
    }
}
