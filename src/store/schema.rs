//! Schema migrations, tracked in `PRAGMA user_version`.
//!
//! Each entry is applied once, in order, inside a transaction. Never edit a released entry;
//! append a new one.

use rusqlite::Connection;

const MIGRATIONS: &[&str] = &[
    // 1: sessions and audit
    "CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        verifier TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        created INTEGER NOT NULL,
        last_seen INTEGER NOT NULL,
        expires INTEGER NOT NULL,
        remote_ip TEXT NOT NULL,
        user_agent TEXT NOT NULL
    );
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        actor TEXT NOT NULL,
        via TEXT NOT NULL,
        action TEXT NOT NULL,
        target TEXT NOT NULL,
        outcome TEXT NOT NULL,
        remote_ip TEXT NOT NULL
    );",
    // 2: findings history, active set, source checkpoints, scan jobs, quarantine
    "CREATE TABLE history (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        check_name TEXT NOT NULL,
        severity INTEGER NOT NULL,
        message TEXT NOT NULL,
        details TEXT NOT NULL,
        account TEXT,
        ip TEXT,
        path TEXT
    );
    CREATE INDEX history_at ON history(at);
    CREATE INDEX history_check_at ON history(check_name, at);
    CREATE TABLE active_findings (
        check_name TEXT NOT NULL,
        message TEXT NOT NULL,
        severity INTEGER NOT NULL,
        details TEXT NOT NULL,
        account TEXT,
        ip TEXT,
        path TEXT,
        first_seen INTEGER NOT NULL,
        last_seen INTEGER NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (check_name, message)
    );
    CREATE TABLE source_checkpoints (
        source TEXT PRIMARY KEY,
        inode INTEGER NOT NULL,
        offset INTEGER NOT NULL,
        updated INTEGER NOT NULL
    );
    CREATE TABLE scan_jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        reason TEXT,
        requested INTEGER NOT NULL,
        started INTEGER,
        finished INTEGER,
        findings INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE quarantine (
        id TEXT PRIMARY KEY,
        record TEXT NOT NULL,
        original_path TEXT NOT NULL,
        check_name TEXT NOT NULL,
        reason TEXT NOT NULL,
        account TEXT,
        at INTEGER NOT NULL,
        restored_at INTEGER
    );
    CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    // 3: suppressions, whitelist, blocked addresses, database-object backups
    "CREATE TABLE suppressions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        check_name TEXT NOT NULL,
        message TEXT,
        path_prefix TEXT,
        ip TEXT,
        account TEXT,
        reason TEXT NOT NULL,
        created INTEGER NOT NULL,
        created_by TEXT NOT NULL,
        expires INTEGER
    );
    CREATE TABLE whitelist (
        ip TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        created INTEGER NOT NULL,
        created_by TEXT NOT NULL,
        expires INTEGER
    );
    CREATE TABLE blocked_ips (
        ip TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        source TEXT NOT NULL,
        created INTEGER NOT NULL,
        expires INTEGER
    );
    CREATE TABLE db_object_backups (
        key TEXT PRIMARY KEY,
        account TEXT,
        database_name TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        statement TEXT NOT NULL,
        created INTEGER NOT NULL
    );",
    // 4: per-account history reads (account detail)
    "CREATE INDEX history_account_at ON history(account, at);",
    // 5: history queries (see store/history.rs): a severity index; per-UTC-day counts with
    // id bounds for exact totals without scanning; a trigram full-text index for `search`.
    // Triggers keep both in step with `history`; existing rows are loaded here.
    "CREATE INDEX history_sev_at ON history(severity, at);
    CREATE TABLE history_daily (
        day INTEGER NOT NULL,
        check_name TEXT NOT NULL,
        severity INTEGER NOT NULL,
        n INTEGER NOT NULL,
        min_id INTEGER NOT NULL,
        max_id INTEGER NOT NULL,
        PRIMARY KEY (day, check_name, severity)
    ) WITHOUT ROWID;
    INSERT INTO history_daily(day, check_name, severity, n, min_id, max_id)
        SELECT CASE WHEN at >= 0 THEN at / 86400000000 ELSE (at + 1) / 86400000000 - 1 END,
               check_name, severity, count(*), min(id), max(id)
        FROM history GROUP BY 1, 2, 3;
    CREATE TRIGGER history_daily_ai AFTER INSERT ON history BEGIN
        INSERT INTO history_daily(day, check_name, severity, n, min_id, max_id)
        VALUES (CASE WHEN NEW.at >= 0 THEN NEW.at / 86400000000 ELSE (NEW.at + 1) / 86400000000 - 1 END,
                NEW.check_name, NEW.severity, 1, NEW.id, NEW.id)
        ON CONFLICT(day, check_name, severity) DO UPDATE SET n = n + 1,
            min_id = min(min_id, excluded.min_id), max_id = max(max_id, excluded.max_id);
    END;
    CREATE TRIGGER history_daily_ad AFTER DELETE ON history BEGIN
        UPDATE history_daily SET n = n - 1
        WHERE day = CASE WHEN OLD.at >= 0 THEN OLD.at / 86400000000 ELSE (OLD.at + 1) / 86400000000 - 1 END
          AND check_name = OLD.check_name AND severity = OLD.severity;
        DELETE FROM history_daily WHERE n <= 0
          AND day = CASE WHEN OLD.at >= 0 THEN OLD.at / 86400000000 ELSE (OLD.at + 1) / 86400000000 - 1 END
          AND check_name = OLD.check_name AND severity = OLD.severity;
    END;
    CREATE TRIGGER history_daily_au AFTER UPDATE OF id, at, check_name, severity ON history BEGIN
        UPDATE history_daily SET n = n - 1
        WHERE day = CASE WHEN OLD.at >= 0 THEN OLD.at / 86400000000 ELSE (OLD.at + 1) / 86400000000 - 1 END
          AND check_name = OLD.check_name AND severity = OLD.severity;
        DELETE FROM history_daily WHERE n <= 0
          AND day = CASE WHEN OLD.at >= 0 THEN OLD.at / 86400000000 ELSE (OLD.at + 1) / 86400000000 - 1 END
          AND check_name = OLD.check_name AND severity = OLD.severity;
        INSERT INTO history_daily(day, check_name, severity, n, min_id, max_id)
        VALUES (CASE WHEN NEW.at >= 0 THEN NEW.at / 86400000000 ELSE (NEW.at + 1) / 86400000000 - 1 END,
                NEW.check_name, NEW.severity, 1, NEW.id, NEW.id)
        ON CONFLICT(day, check_name, severity) DO UPDATE SET n = n + 1,
            min_id = min(min_id, excluded.min_id), max_id = max(max_id, excluded.max_id);
    END;
    CREATE VIRTUAL TABLE history_fts USING fts5(
        check_name, message, details, account, ip, path,
        content='history', content_rowid='id', tokenize='trigram', detail=none, columnsize=0
    );
    INSERT INTO history_fts(history_fts) VALUES('rebuild');
    CREATE TRIGGER history_fts_ai AFTER INSERT ON history BEGIN
        INSERT INTO history_fts(rowid, check_name, message, details, account, ip, path)
        VALUES (NEW.id, NEW.check_name, NEW.message, NEW.details, NEW.account, NEW.ip, NEW.path);
    END;
    CREATE TRIGGER history_fts_ad AFTER DELETE ON history BEGIN
        INSERT INTO history_fts(history_fts, rowid, check_name, message, details, account, ip, path)
        VALUES ('delete', OLD.id, OLD.check_name, OLD.message, OLD.details, OLD.account, OLD.ip, OLD.path);
    END;
    CREATE TRIGGER history_fts_au AFTER UPDATE OF id, check_name, message, details, account, ip, path ON history BEGIN
        INSERT INTO history_fts(history_fts, rowid, check_name, message, details, account, ip, path)
        VALUES ('delete', OLD.id, OLD.check_name, OLD.message, OLD.details, OLD.account, OLD.ip, OLD.path);
        INSERT INTO history_fts(rowid, check_name, message, details, account, ip, path)
        VALUES (NEW.id, NEW.check_name, NEW.message, NEW.details, NEW.account, NEW.ip, NEW.path);
    END;",
    // 6: incident snapshots (see store/incidents.rs), written by the incidents' ordered
    // writer and restored at start.
    "CREATE TABLE incident_snapshots (
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        id INTEGER NOT NULL,
        severity INTEGER NOT NULL,
        first_seen INTEGER NOT NULL,
        last_seen INTEGER NOT NULL,
        count INTEGER NOT NULL,
        checks TEXT NOT NULL,
        accounts TEXT NOT NULL,
        contained INTEGER NOT NULL,
        PRIMARY KEY (kind, key)
    ) WITHOUT ROWID;",
    // 7: the durable webhook queue (`panel.spool`, see store/spool.rs).
    "CREATE TABLE webhook_spool (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created INTEGER NOT NULL,
        describe TEXT NOT NULL,
        body BLOB NOT NULL
    );",
    // 8: firewall: who made a block, expiry index for purges, and the blocks automatic callers
    // recorded in dry-run mode (see store/firewall.rs).
    "ALTER TABLE blocked_ips ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
    CREATE INDEX blocked_ips_expires ON blocked_ips(expires) WHERE expires IS NOT NULL;
    CREATE TABLE firewall_dry_run (
        ip TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        source TEXT NOT NULL,
        created_by TEXT NOT NULL DEFAULT '',
        created INTEGER NOT NULL,
        expires INTEGER
    );",
    // 9: the derived history tables are written in bulk by the store instead of by a
    // trigger per row (see store/history.rs, "Derived tables"): a row trigger made every
    // INSERT open a statement journal, and FTS5 flushes its pending terms at every statement
    // savepoint, so each row became its own index segment. `daily_upto` and `fts_upto` are
    // the newest history ids counted in `history_daily` and indexed in `history_fts`. The
    // delete and update triggers stay, for rows already derived. `active_findings` becomes a
    // WITHOUT ROWID table: one b-tree keyed by (check, message) instead of a table and its
    // key index, so an upsert touches one b-tree.
    "CREATE TABLE active_findings_new (
        check_name TEXT NOT NULL,
        message TEXT NOT NULL,
        severity INTEGER NOT NULL,
        details TEXT NOT NULL,
        account TEXT,
        ip TEXT,
        path TEXT,
        first_seen INTEGER NOT NULL,
        last_seen INTEGER NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (check_name, message)
    ) WITHOUT ROWID;
    INSERT INTO active_findings_new SELECT check_name, message, severity, details, account, ip,
        path, first_seen, last_seen, count FROM active_findings;
    DROP TABLE active_findings;
    ALTER TABLE active_findings_new RENAME TO active_findings;
    DROP TRIGGER history_daily_ai;
    DROP TRIGGER history_fts_ai;
    DROP TRIGGER history_daily_ad;
    DROP TRIGGER history_daily_au;
    DROP TRIGGER history_fts_ad;
    DROP TRIGGER history_fts_au;
    CREATE TABLE history_derived (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        daily_upto INTEGER NOT NULL,
        fts_upto INTEGER NOT NULL
    );
    INSERT INTO history_derived(id, daily_upto, fts_upto)
        SELECT 1, coalesce(max(id), 0), coalesce(max(id), 0) FROM history;
    CREATE TRIGGER history_daily_ad AFTER DELETE ON history
    WHEN OLD.id <= (SELECT daily_upto FROM history_derived WHERE id = 1) BEGIN
        UPDATE history_daily SET n = n - 1
        WHERE day = CASE WHEN OLD.at >= 0 THEN OLD.at / 86400000000 ELSE (OLD.at + 1) / 86400000000 - 1 END
          AND check_name = OLD.check_name AND severity = OLD.severity;
        DELETE FROM history_daily WHERE n <= 0
          AND day = CASE WHEN OLD.at >= 0 THEN OLD.at / 86400000000 ELSE (OLD.at + 1) / 86400000000 - 1 END
          AND check_name = OLD.check_name AND severity = OLD.severity;
    END;
    CREATE TRIGGER history_daily_au AFTER UPDATE OF id, at, check_name, severity ON history
    WHEN OLD.id <= (SELECT daily_upto FROM history_derived WHERE id = 1) BEGIN
        UPDATE history_daily SET n = n - 1
        WHERE day = CASE WHEN OLD.at >= 0 THEN OLD.at / 86400000000 ELSE (OLD.at + 1) / 86400000000 - 1 END
          AND check_name = OLD.check_name AND severity = OLD.severity;
        DELETE FROM history_daily WHERE n <= 0
          AND day = CASE WHEN OLD.at >= 0 THEN OLD.at / 86400000000 ELSE (OLD.at + 1) / 86400000000 - 1 END
          AND check_name = OLD.check_name AND severity = OLD.severity;
        INSERT INTO history_daily(day, check_name, severity, n, min_id, max_id)
        VALUES (CASE WHEN NEW.at >= 0 THEN NEW.at / 86400000000 ELSE (NEW.at + 1) / 86400000000 - 1 END,
                NEW.check_name, NEW.severity, 1, NEW.id, NEW.id)
        ON CONFLICT(day, check_name, severity) DO UPDATE SET n = n + 1,
            min_id = min(min_id, excluded.min_id), max_id = max(max_id, excluded.max_id);
    END;
    CREATE TRIGGER history_fts_ad AFTER DELETE ON history
    WHEN OLD.id <= (SELECT fts_upto FROM history_derived WHERE id = 1) BEGIN
        INSERT INTO history_fts(history_fts, rowid, check_name, message, details, account, ip, path)
        VALUES ('delete', OLD.id, OLD.check_name, OLD.message, OLD.details, OLD.account, OLD.ip, OLD.path);
    END;
    CREATE TRIGGER history_fts_au AFTER UPDATE OF id, check_name, message, details, account, ip, path ON history
    WHEN OLD.id <= (SELECT fts_upto FROM history_derived WHERE id = 1) BEGIN
        INSERT INTO history_fts(history_fts, rowid, check_name, message, details, account, ip, path)
        VALUES ('delete', OLD.id, OLD.check_name, OLD.message, OLD.details, OLD.account, OLD.ip, OLD.path);
        INSERT INTO history_fts(rowid, check_name, message, details, account, ip, path)
        VALUES (NEW.id, NEW.check_name, NEW.message, NEW.details, NEW.account, NEW.ip, NEW.path);
    END;",
    // 10: mail antivirus (see store/mail.rs): quarantined messages with their recovery
    // metadata (committed before spool files move), and hourly scan counters for the
    // 24-hour statistics.
    "CREATE TABLE mail_quarantine (
        id TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        mta TEXT NOT NULL,
        queue_id TEXT NOT NULL,
        spool_path TEXT NOT NULL,
        meta TEXT NOT NULL,
        files TEXT NOT NULL,
        quarantined_at INTEGER NOT NULL,
        updated INTEGER NOT NULL,
        error TEXT
    );
    CREATE INDEX mail_quarantine_state ON mail_quarantine(state, quarantined_at);
    CREATE TABLE mail_scan_hours (
        hour INTEGER NOT NULL,
        engine TEXT NOT NULL,
        scanned INTEGER NOT NULL,
        infected INTEGER NOT NULL,
        quarantined INTEGER NOT NULL,
        incomplete INTEGER NOT NULL,
        errors INTEGER NOT NULL,
        PRIMARY KEY (hour, engine)
    ) WITHOUT ROWID;",
    // 11: WAF events (see store/waf.rs), rules excluded from firewall escalation, and the
    // applied set of disabled svc rules.
    "CREATE TABLE waf_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        ip TEXT NOT NULL,
        country TEXT,
        host TEXT NOT NULL,
        uri TEXT NOT NULL,
        method TEXT NOT NULL,
        rule_id INTEGER,
        message TEXT NOT NULL,
        severity INTEGER NOT NULL,
        action TEXT NOT NULL,
        format TEXT NOT NULL,
        unique_id TEXT,
        status INTEGER
    );
    CREATE INDEX waf_events_at ON waf_events(at);
    CREATE INDEX waf_events_ip ON waf_events(ip, at);
    CREATE INDEX waf_events_rule ON waf_events(rule_id, at);
    CREATE TABLE waf_escalation_off (
        rule_id INTEGER PRIMARY KEY,
        created INTEGER NOT NULL,
        created_by TEXT NOT NULL
    );
    CREATE TABLE waf_rules_disabled (
        rule_id INTEGER PRIMARY KEY
    );",
    // 12: mail accounts (see store/mail_accounts.rs): messages read from the MTA log,
    // observed forwards, direct SMTP egress, mail-queue snapshots, and the mailbox
    // password audit's records (fingerprints only, never a password or a hash).
    "CREATE TABLE mail_messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL UNIQUE,
        at INTEGER NOT NULL,
        mta TEXT NOT NULL,
        queue_id TEXT NOT NULL,
        sender TEXT NOT NULL,
        sender_domain TEXT NOT NULL,
        account TEXT NOT NULL,
        auth_user TEXT NOT NULL,
        client_ip TEXT,
        origin TEXT NOT NULL,
        recipients INTEGER NOT NULL DEFAULT 0,
        sent INTEGER NOT NULL DEFAULT 0,
        deferred INTEGER NOT NULL DEFAULT 0,
        bounced INTEGER NOT NULL DEFAULT 0,
        forwarded INTEGER NOT NULL DEFAULT 0,
        remote INTEGER NOT NULL DEFAULT 0,
        relay_mismatch INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX mail_messages_at ON mail_messages(at);
    CREATE INDEX mail_messages_auth_at ON mail_messages(auth_user, at);
    CREATE TABLE mail_forwards (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        original TEXT NOT NULL,
        target TEXT NOT NULL,
        target_domain TEXT NOT NULL,
        account TEXT NOT NULL
    );
    CREATE INDEX mail_forwards_at ON mail_forwards(at);
    CREATE TABLE mail_egress (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        account TEXT NOT NULL,
        uid INTEGER NOT NULL,
        remote_ip TEXT NOT NULL,
        remote_port INTEGER NOT NULL,
        ptr TEXT,
        confirmed INTEGER NOT NULL
    );
    CREATE INDEX mail_egress_at ON mail_egress(at);
    CREATE TABLE mail_queue_snapshots (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        mta TEXT NOT NULL,
        size INTEGER NOT NULL,
        oldest INTEGER,
        bounces INTEGER NOT NULL,
        domains TEXT NOT NULL
    );
    CREATE INDEX mail_queue_snapshots_at ON mail_queue_snapshots(at);
    CREATE TABLE mail_password_audit (
        mailbox TEXT PRIMARY KEY,
        account TEXT,
        audited_fp TEXT,
        audited_version TEXT,
        weak INTEGER NOT NULL DEFAULT 0,
        breach_count INTEGER,
        audited INTEGER,
        failed_fp TEXT,
        failed_version TEXT,
        failed_reason TEXT,
        retry_after INTEGER
    ) WITHOUT ROWID;",
    // 13: threat intelligence (see store/threat.rs): per-address attack records and their
    // events, cached answers of remote verdict sources, durable auto-block retries, undo
    // entries of operator changes, downloaded threat-feed entries.
    "CREATE TABLE attack_records (
        ip TEXT PRIMARY KEY,
        first_seen INTEGER NOT NULL,
        last_seen INTEGER NOT NULL,
        n_brute_force INTEGER NOT NULL DEFAULT 0,
        n_webshell_upload INTEGER NOT NULL DEFAULT 0,
        n_phishing INTEGER NOT NULL DEFAULT 0,
        n_command_and_control INTEGER NOT NULL DEFAULT 0,
        n_waf_block INTEGER NOT NULL DEFAULT 0,
        n_auth_success INTEGER NOT NULL DEFAULT 0,
        n_file_upload INTEGER NOT NULL DEFAULT 0,
        accounts TEXT NOT NULL DEFAULT '',
        accounts_more INTEGER NOT NULL DEFAULT 0,
        score REAL NOT NULL DEFAULT 0,
        score_at INTEGER NOT NULL DEFAULT 0,
        scoring INTEGER NOT NULL DEFAULT 1,
        evidence INTEGER NOT NULL DEFAULT 0,
        evidence_until INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    CREATE INDEX attack_records_last_seen ON attack_records(last_seen);
    CREATE TABLE attack_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        ip TEXT NOT NULL,
        kind TEXT NOT NULL,
        severity INTEGER NOT NULL,
        check_name TEXT NOT NULL,
        account TEXT,
        message TEXT NOT NULL
    );
    CREATE INDEX attack_events_ip_at ON attack_events(ip, at);
    CREATE INDEX attack_events_at ON attack_events(at);
    CREATE TABLE threat_cache (
        source TEXT NOT NULL,
        ip TEXT NOT NULL,
        fetched INTEGER NOT NULL,
        expires INTEGER NOT NULL,
        score INTEGER,
        reason TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (source, ip)
    ) WITHOUT ROWID;
    CREATE TABLE auto_block_pending (
        ip TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        created INTEGER NOT NULL,
        expires INTEGER NOT NULL,
        attempts INTEGER NOT NULL,
        next_at INTEGER NOT NULL,
        last_error TEXT NOT NULL
    );
    CREATE TABLE threat_undo (
        token_hash TEXT PRIMARY KEY,
        caller TEXT NOT NULL,
        action TEXT NOT NULL,
        seq INTEGER NOT NULL,
        created INTEGER NOT NULL,
        expires INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    CREATE TABLE threat_feed_entries (
        feed TEXT NOT NULL,
        net TEXT NOT NULL,
        PRIMARY KEY (feed, net)
    ) WITHOUT ROWID;",
    // Abuse reporting (issue 15, see store/abuse.rs): the durable per-destination report
    // spool (`abuse_reporting.spool`) and the addresses and categories reported per
    // destination (the dedup window, durable across restarts).
    "CREATE TABLE abuse_spool (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        dest TEXT NOT NULL,
        created INTEGER NOT NULL,
        ip TEXT NOT NULL,
        categories TEXT NOT NULL,
        comment TEXT NOT NULL,
        at INTEGER NOT NULL
    );
    CREATE INDEX abuse_spool_dest ON abuse_spool(dest, id);
    CREATE TABLE abuse_reported (
        dest TEXT NOT NULL,
        ip TEXT NOT NULL,
        category TEXT NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (dest, ip, category)
    ) WITHOUT ROWID;
    CREATE INDEX abuse_reported_at ON abuse_reported(at);",
    "CREATE TABLE bot_verify (
        ip TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        at INTEGER NOT NULL,
        retry_at INTEGER NOT NULL,
        expires INTEGER NOT NULL,
        PRIMARY KEY (ip, name)
    ) WITHOUT ROWID;
    CREATE INDEX bot_verify_expires ON bot_verify (expires);",
    "CREATE TABLE cms_checksums (
        version TEXT NOT NULL,
        locale TEXT NOT NULL,
        fetched_at INTEGER NOT NULL,
        checksums TEXT NOT NULL,
        PRIMARY KEY (version, locale)
    ) WITHOUT ROWID;
    CREATE TABLE cms_coverage (
        path TEXT NOT NULL,
        kind TEXT NOT NULL,
        platform TEXT NOT NULL,
        account TEXT,
        state TEXT NOT NULL,
        last_attempt INTEGER,
        failures INTEGER NOT NULL,
        cause TEXT,
        detail TEXT,
        scan_seq INTEGER NOT NULL,
        PRIMARY KEY (path, kind)
    ) WITHOUT ROWID;",
    // File-index baseline (issue 28, see store/file_index.rs): one row per indexed file of
    // a web root (paths are the raw bytes below the root), and one per root that has a
    // completed baseline.
    "CREATE TABLE file_index (
        root BLOB NOT NULL,
        path BLOB NOT NULL,
        size INTEGER NOT NULL,
        mode INTEGER NOT NULL,
        uid INTEGER NOT NULL,
        gid INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        ctime_ns INTEGER NOT NULL,
        dev INTEGER NOT NULL,
        ino INTEGER NOT NULL,
        hash BLOB NOT NULL,
        PRIMARY KEY (root, path)
    ) WITHOUT ROWID;
    CREATE TABLE file_index_roots (
        root BLOB PRIMARY KEY,
        built INTEGER NOT NULL,
        files INTEGER NOT NULL
    ) WITHOUT ROWID;",
    // Fleet mode (issue 30, see store/fleet.rs): alerts waiting for the CrowdSec LAPI
    // (`fleet.spool`) and the address and scenario pairs pushed, until their decision ends
    // (the dedup window, durable across restarts).
    "CREATE TABLE fleet_spool (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created INTEGER NOT NULL,
        ip TEXT NOT NULL,
        scenario TEXT NOT NULL,
        alert TEXT NOT NULL
    );
    CREATE TABLE fleet_pushed (
        ip TEXT NOT NULL,
        scenario TEXT NOT NULL,
        until INTEGER NOT NULL,
        PRIMARY KEY (ip, scenario)
    ) WITHOUT ROWID;
    CREATE INDEX fleet_pushed_until ON fleet_pushed(until);",
];

/// Applies pending migrations.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    migrate_to(conn, MIGRATIONS.len())
}

/// Applies pending migrations up to version `last` (tests build older schemas with it).
pub fn migrate_to(conn: &mut Connection, last: usize) -> rusqlite::Result<()> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().take(last) {
        let version = i as i64 + 1;
        if version <= current {
            continue;
        }
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
    }
    Ok(())
}
