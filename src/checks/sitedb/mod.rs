//! Database objects of WordPress sites (issue 28): for each `wp-config.php` under the web
//! roots, its database (a local server only; [`wpconfig`]) is read for injected content:
//! - `db_option_injected`: `siteurl` or `home` pointing to another host than the one the
//!   site pins (`WP_HOME`/`WP_SITEURL`, else the `home` option), or holding markup; any
//!   `<script>` in a `widget_*` option, and iframes from other hosts there;
//! - `db_post_injected`: scripts or iframes loaded from other hosts, or inline scripts with
//!   decoding tricks, in post content;
//! - `db_trigger_injected`, `db_event_injected`, `db_routine_injected` (issue 41): triggers
//!   on the site's tables, events, and procedures or functions that write to its users or
//!   options tables, reach files or commands, or hold encoded payloads ([`objects`]).
//!
//! Rows and bytes read are bounded ([`crate::store::sitedb`]); at most [`MAX_SITES`] sites a
//! run. Findings name the site's `wp-config.php` as path and the row in details, never a
//! credential. Cleaning is the fix of the finding (the remediation fix route), after a backup of the
//! row to `db_object_backups`.

pub mod markup;
pub mod objects;
pub mod wpconfig;

use std::io::Read;
use std::path::{Path, PathBuf};

use super::context::CheckContext;
use super::sink::Sink;
use super::walk::{OwnerCache, Walker};
use crate::findings::{Finding, Severity};
use crate::hostfs::display_path;
use crate::store::sitedb::{ObjectKind, OptionRow, SiteConn, SiteDbError};

pub const OPTION_CHECK: &str = "db_option_injected";
pub const POST_CHECK: &str = "db_post_injected";
pub const TRIGGER_CHECK: &str = "db_trigger_injected";
pub const EVENT_CHECK: &str = "db_event_injected";
pub const ROUTINE_CHECK: &str = "db_routine_injected";

/// Sites whose database is read per run at most.
pub const MAX_SITES: usize = 500;

/// A site found under the web roots, with its configuration read.
pub struct Site {
    pub config_path: PathBuf,
    pub owner_uid: u32,
    pub config: wpconfig::WpConfig,
}

/// Reads a `wp-config.php` (no symlink followed, at most
/// [`wpconfig::MAX_CONFIG_BYTES`]).
pub fn read_config(path: &Path) -> Option<wpconfig::WpConfig> {
    let f = crate::sys::dir::open_regular_trusted(path, false).ok()?;
    let mut text = Vec::new();
    f.take(wpconfig::MAX_CONFIG_BYTES)
        .read_to_end(&mut text)
        .ok()?;
    wpconfig::parse(&String::from_utf8_lossy(&text)).ok()
}

pub(crate) fn sites(ctx: &CheckContext, walker: &mut Walker) -> Vec<Site> {
    let mut out = Vec::new();
    for root in ctx.glob_all(&ctx.web_roots) {
        walker.walk(&root, &mut |path, meta| {
            if out.len() >= MAX_SITES
                || !meta.is_file()
                || path.file_name().is_none_or(|n| n != "wp-config.php")
            {
                return;
            }
            if let Some(config) = read_config(path) {
                use std::os::unix::fs::MetadataExt;
                out.push(Site {
                    config_path: path.to_path_buf(),
                    owner_uid: meta.uid(),
                    config,
                });
            }
        });
    }
    out
}

/// The host the site pins or, failing that, the host of its `home` option.
pub fn site_host(config: &wpconfig::WpConfig, options: &[OptionRow]) -> Option<String> {
    config
        .home
        .as_deref()
        .or(config.siteurl.as_deref())
        .and_then(markup::url_host)
        .or_else(|| {
            options
                .iter()
                .find(|o| o.name == "home")
                .and_then(|o| markup::url_host(&String::from_utf8_lossy(&o.value)))
        })
}

/// Why an option looks injected, if it does.
pub fn option_problem(row: &OptionRow, site: Option<&str>, pinned: bool) -> Option<String> {
    let text = String::from_utf8_lossy(&row.value);
    match row.name.as_str() {
        "siteurl" | "home" => {
            if text.contains(['<', '>', '"', '\'']) || text.trim().contains(char::is_whitespace) {
                return Some(format!("{} holds markup", row.name));
            }
            let host = markup::url_host(&text)?;
            // Without a pinned host the site's host is `home`'s own: only siteurl can differ.
            let compare = pinned || row.name == "siteurl";
            (compare && markup::foreign(&host, site))
                .then(|| format!("{} points to {host}", row.name))
        }
        _ => markup::flagged(&row.value, site, true)
            .into_iter()
            .next()
            .map(|f| f.why),
    }
}

/// The value an injected option gets: the pinned or `home` URL for `siteurl`/`home`, the
/// value without its flagged elements otherwise. None when there is nothing to put back.
pub fn clean_value(
    row: &OptionRow,
    config: &wpconfig::WpConfig,
    home: Option<&OptionRow>,
    site: Option<&str>,
) -> Option<Vec<u8>> {
    match row.name.as_str() {
        "siteurl" => config
            .siteurl
            .clone()
            .or_else(|| config.home.clone())
            .map(String::into_bytes)
            .or_else(|| home.map(|h| h.value.clone())),
        "home" => config
            .home
            .clone()
            .or_else(|| config.siteurl.clone())
            .map(String::into_bytes),
        _ => Some(markup::cleaned(&row.value, site, true)),
    }
}

fn option_finding(sink: &Sink, site: &Site, name: &str, why: &str) -> Finding {
    let shown = display_path(&site.config_path);
    let table = format!("{}options", site.config.db.prefix);
    sink.finding(
        Severity::High,
        format!("injected content in the {table} row {name} of the site at {shown}"),
    )
    .with_details(format!(
        "database={} table={table} option={name}: {why}",
        site.config.db.database
    ))
    .with_path(site.config_path.to_string_lossy().into_owned())
}

/// The option a `db_option_injected` finding names (from its details).
pub fn option_of(details: &str) -> Option<&str> {
    let rest = &details[details.find(" option=")? + 8..];
    let end = rest.find(':').unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The post a `db_post_injected` finding names (from its details).
pub fn post_of(details: &str) -> Option<u64> {
    let rest = &details[details.find(" post=")? + 6..];
    let end = rest.find(':').unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn connect(site: &Site) -> Option<SiteConn> {
    match SiteConn::open(&site.config.db) {
        Ok(c) => Some(c),
        Err(e) => {
            log_unreadable(&site.config_path, &e);
            None
        }
    }
}

fn log_unreadable(path: &Path, e: &SiteDbError) {
    log::info!(
        "site database of {} not read: {e}",
        crate::text::escape_path(path)
    );
}

/// `db_option_injected`.
pub fn injected_options(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, OPTION_CHECK);
    let mut walker = Walker::new(ctx);
    let mut owners = OwnerCache::default();
    for site in sites(ctx, &mut walker) {
        let Some(mut conn) = connect(&site) else {
            continue;
        };
        let rows = match conn.watched_options() {
            Ok(r) => r,
            Err(e) => {
                log_unreadable(&site.config_path, &e);
                continue;
            }
        };
        let host = site_host(&site.config, &rows);
        let pinned = site.config.home.is_some() || site.config.siteurl.is_some();
        for row in &rows {
            if let Some(why) = option_problem(row, host.as_deref(), pinned) {
                let f = option_finding(&sink, &site, &row.name, &why);
                sink.push_owned(f, owners.name(site.owner_uid));
            }
        }
    }
    sink.finish(Some(&walker))
}

/// `db_post_injected`.
pub fn injected_posts(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, POST_CHECK);
    let mut walker = Walker::new(ctx);
    let mut owners = OwnerCache::default();
    for site in sites(ctx, &mut walker) {
        let Some(mut conn) = connect(&site) else {
            continue;
        };
        let host = conn
            .watched_options()
            .ok()
            .and_then(|rows| site_host(&site.config, &rows));
        let posts = match conn.posts_with_markup() {
            Ok(p) => p,
            Err(e) => {
                log_unreadable(&site.config_path, &e);
                continue;
            }
        };
        let table = format!("{}posts", site.config.db.prefix);
        let shown = display_path(&site.config_path);
        for post in posts {
            let Some(flag) = markup::flagged(&post.content, host.as_deref(), false)
                .into_iter()
                .next()
            else {
                continue;
            };
            let f = sink
                .finding(
                    Severity::High,
                    format!(
                        "injected script or iframe in the {table} row {} of the site at {shown}",
                        post.id
                    ),
                )
                .with_details(format!(
                    "database={} table={table} post={}: {}",
                    site.config.db.database, post.id, flag.why
                ))
                .with_path(site.config_path.to_string_lossy().into_owned());
            sink.push_owned(f, owners.name(site.owner_uid));
        }
    }
    sink.finish(Some(&walker))
}

/// The object a trigger, event or routine finding names (from its details): its kind and
/// exact name (the name is written as a JSON string).
pub fn object_of(details: &str) -> Option<(ObjectKind, String)> {
    let rest = &details[details.find(" kind=")? + 6..];
    let kind = ObjectKind::parse(&rest[..rest.find(' ')?])?;
    let rest = &details[details.find(" name=")? + 6..];
    let name = serde_json::Deserializer::from_str(rest)
        .into_iter::<String>()
        .next()?
        .ok()?;
    Some((kind, name))
}

/// The details of an object finding: `database=D kind=K name="N" [table=T]: why`.
pub fn object_details(database: &str, o: &crate::store::sitedb::DbObject, why: &str) -> String {
    let name = serde_json::to_string(&o.name).unwrap_or_default();
    let table = o
        .table
        .as_deref()
        .map(|t| format!(" table={}", crate::text::escape_controls(t)))
        .unwrap_or_default();
    format!(
        "database={database} kind={} name={name}{table}: {why}",
        o.kind.name()
    )
}

fn injected_objects(ctx: &CheckContext, check: &'static str, kinds: &[ObjectKind]) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, check);
    let mut walker = Walker::new(ctx);
    let mut owners = OwnerCache::default();
    for site in sites(ctx, &mut walker) {
        let Some(mut conn) = connect(&site) else {
            continue;
        };
        let shown = display_path(&site.config_path);
        for kind in kinds {
            let objects = match conn.objects(*kind) {
                Ok(o) => o,
                Err(e) => {
                    log_unreadable(&site.config_path, &e);
                    continue;
                }
            };
            for o in objects {
                let Some((severity, why)) = objects::object_problem(&o, &site.config.db.prefix)
                else {
                    continue;
                };
                let f = sink
                    .finding(
                        severity,
                        format!(
                            "injected {} `{}` in the database {} of the site at {shown}",
                            kind.name(),
                            crate::text::escape_controls(&o.name),
                            site.config.db.database
                        ),
                    )
                    .with_details(object_details(&site.config.db.database, &o, &why))
                    .with_path(site.config_path.to_string_lossy().into_owned());
                sink.push_owned(f, owners.name(site.owner_uid));
            }
        }
    }
    sink.finish(Some(&walker))
}

/// `db_trigger_injected`: every trigger on the site's tables.
pub fn injected_triggers(ctx: &CheckContext) -> Vec<Finding> {
    injected_objects(ctx, TRIGGER_CHECK, &[ObjectKind::Trigger])
}

/// `db_event_injected`: every event of the site's database.
pub fn injected_events(ctx: &CheckContext) -> Vec<Finding> {
    injected_objects(ctx, EVENT_CHECK, &[ObjectKind::Event])
}

/// `db_routine_injected`: procedures and functions that look malicious.
pub fn injected_routines(ctx: &CheckContext) -> Vec<Finding> {
    injected_objects(
        ctx,
        ROUTINE_CHECK,
        &[ObjectKind::Procedure, ObjectKind::Function],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, value: &str) -> OptionRow {
        OptionRow {
            name: name.into(),
            value: value.as_bytes().to_vec(),
            complete: true,
        }
    }

    fn config(home: Option<&str>) -> wpconfig::WpConfig {
        let mut c = wpconfig::parse(
            "define('DB_NAME','d');define('DB_USER','u');define('DB_PASSWORD','p');define('DB_HOST','localhost');$table_prefix='wp_';",
        )
        .unwrap();
        c.home = home.map(str::to_string);
        c
    }

    #[test]
    fn siteurl_hijack_and_widget_scripts() {
        let rows = [
            row("siteurl", "https://evil.example"),
            row("home", "https://example.org"),
        ];
        let c = config(None);
        let host = site_host(&c, &rows);
        assert_eq!(host.as_deref(), Some("example.org"));
        assert_eq!(
            option_problem(&rows[0], host.as_deref(), false).as_deref(),
            Some("siteurl points to evil.example")
        );
        assert_eq!(option_problem(&rows[1], host.as_deref(), false), None);
        assert_eq!(
            clean_value(&rows[0], &c, Some(&rows[1]), host.as_deref()),
            Some(b"https://example.org".to_vec())
        );
        // Both changed: only a pinned host tells.
        let pinned = config(Some("https://example.org"));
        let both = [
            row("siteurl", "https://evil.example"),
            row("home", "https://evil.example"),
        ];
        let host = site_host(&pinned, &both);
        assert!(option_problem(&both[1], host.as_deref(), true).is_some());
        assert_eq!(
            option_problem(&row("home", "https://x.example/\"><script>"), None, false).as_deref(),
            Some("home holds markup")
        );
        let w = row(
            "widget_text",
            "a:1:{i:2;a:1:{s:4:\"text\";s:22:\"<script>x()</script>ok\";}}",
        );
        assert_eq!(
            option_problem(&w, host.as_deref(), true).as_deref(),
            Some("script in a widget")
        );
        assert_eq!(
            clean_value(&w, &pinned, None, host.as_deref()),
            Some(b"a:1:{i:2;a:1:{s:4:\"text\";s:2:\"ok\";}}".to_vec())
        );
        assert_eq!(
            option_of("database=d table=wp_options option=widget_text: script in a widget"),
            Some("widget_text")
        );
        assert_eq!(
            post_of("database=d table=wp_posts post=42: iframe from 198.51.100.7"),
            Some(42)
        );
        assert_eq!(post_of("database=d table=wp_posts post=x: y"), None);
        let o = crate::store::sitedb::DbObject {
            kind: ObjectKind::Trigger,
            name: "a\"b: c".into(),
            table: Some("wp_users".into()),
            definer: "u@h".into(),
            body: Vec::new(),
            complete: true,
        };
        let d = object_details("d", &o, "why: x");
        assert_eq!(
            d,
            "database=d kind=trigger name=\"a\\\"b: c\" table=wp_users: why: x"
        );
        assert_eq!(object_of(&d), Some((ObjectKind::Trigger, "a\"b: c".into())));
    }
}
