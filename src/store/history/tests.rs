use super::*;

use rusqlite::params;

fn db() -> Connection {
    let mut c = Connection::open_in_memory().unwrap();
    crate::store::schema::migrate(&mut c).unwrap();
    c
}

/// Inserts a row and derives it, as the store's writer does.
#[allow(clippy::too_many_arguments)]
fn insert(
    c: &Connection,
    at: i64,
    check: &str,
    sev: u8,
    message: &str,
    details: &str,
    account: Option<&str>,
    ip: Option<&str>,
    path: Option<&str>,
) -> i64 {
    let id = insert_raw(c, at, check, sev, message, details, account, ip, path);
    derive_all(c);
    id
}

/// Counts and indexes every row written so far, as the store's writer does once idle.
fn derive_all(c: &Connection) {
    derive_pending(c).unwrap();
    while index_pending(c, INDEX_STEP).unwrap() > 0 {}
}

/// Inserts a row without deriving it (another writer, or a schema before migration 9).
#[allow(clippy::too_many_arguments)]
fn insert_raw(
    c: &Connection,
    at: i64,
    check: &str,
    sev: u8,
    message: &str,
    details: &str,
    account: Option<&str>,
    ip: Option<&str>,
    path: Option<&str>,
) -> i64 {
    c.execute(
        "INSERT INTO history(at, check_name, severity, message, details, account, ip, path) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
        params![at, check, sev, message, details, account, ip, path],
    )
    .unwrap();
    c.last_insert_rowid()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const CHECKS: [&str; 5] = [
    "ssh_bruteforce",
    "webshell",
    "wp_login",
    "suid_binary",
    "cron_job",
];
const WORDS: [&str; 10] = [
    "Failed", "login", "from", "EVAL", "base64", "Zürich", "x\"y", "a%b_c", "=cmd", "über",
];

/// Rows spread over a few UTC days around the epoch and 2026, ids not in `at` order,
/// several rows per instant, some exactly on day boundaries.
fn fill(c: &Connection, rng: &mut Rng, n: usize) -> Vec<Row> {
    let rows = fill_raw(c, rng, n);
    derive_all(c);
    rows
}

/// [`fill`] without deriving the rows.
fn fill_raw(c: &Connection, rng: &mut Rng, n: usize) -> Vec<Row> {
    let base = [0i64, 1_767_225_600_000_000];
    let mut rows = Vec::new();
    for _ in 0..n {
        let day = rng.below(5) as i64 - 2;
        let at = match rng.below(6) {
            0 => *rng.pick(&base) + day * DAY_MICROS,
            1 => *rng.pick(&base) + day * DAY_MICROS - 1,
            _ => *rng.pick(&base) + day * DAY_MICROS + rng.below(DAY_MICROS as u64) as i64,
        };
        let check = *rng.pick(&CHECKS);
        let sev = rng.below(3) as u8;
        let message = format!(
            "{} {} {}",
            rng.pick(&WORDS),
            rng.pick(&WORDS),
            rng.below(50)
        );
        let details = format!("{} {}", rng.pick(&WORDS), rng.pick(&WORDS));
        let account = (rng.below(2) == 0).then(|| format!("User{}", rng.below(4)));
        let ip = (rng.below(3) == 0).then(|| format!("203.0.113.{}", rng.below(20)));
        let path = (rng.below(2) == 0).then(|| format!("/home/u/{}.php", rng.pick(&WORDS)));
        let id = insert_raw(
            c,
            at,
            check,
            sev,
            &message,
            &details,
            account.as_deref(),
            ip.as_deref(),
            path.as_deref(),
        );
        rows.push(Row {
            id,
            at,
            check: check.to_string(),
            severity: Severity::from_level(sev).unwrap(),
            message,
            details,
            account,
            ip,
            path,
        });
    }
    rows
}

/// The reference: filter and sort in Rust.
fn naive(rows: &[Row], f: &Filter) -> Vec<Row> {
    let needle = f.search.as_ref().map(|s| s.to_ascii_lowercase());
    let mut out: Vec<Row> = rows
        .iter()
        .filter(|r| f.from.is_none_or(|v| r.at >= v) && f.to.is_none_or(|v| r.at < v))
        .filter(|r| f.severities.is_empty() || f.severities.contains(&r.severity))
        .filter(|r| f.checks.is_empty() || f.checks.contains(&r.check))
        .filter(|r| {
            let Some(n) = &needle else { return true };
            [
                Some(&r.check),
                Some(&r.message),
                Some(&r.details),
                r.account.as_ref(),
                r.ip.as_ref(),
                r.path.as_ref(),
            ]
            .iter()
            .flatten()
            .any(|v| v.to_ascii_lowercase().contains(n.as_str()))
        })
        .cloned()
        .collect();
    out.sort_by_key(|r| std::cmp::Reverse((r.at, r.id)));
    out
}

fn random_filter(rng: &mut Rng) -> Filter {
    let base = *rng.pick(&[0i64, 1_767_225_600_000_000]);
    let bound = |rng: &mut Rng| -> Option<i64> {
        match rng.below(4) {
            0 => None,
            1 => Some(base + (rng.below(7) as i64 - 3) * DAY_MICROS),
            2 => Some(base + (rng.below(7) as i64 - 3) * DAY_MICROS + 1),
            _ => Some(base + rng.below(5 * DAY_MICROS as u64) as i64 - 2 * DAY_MICROS),
        }
    };
    let mut f = Filter {
        from: bound(rng),
        to: bound(rng),
        ..Filter::default()
    };
    for s in Severity::ALL {
        if rng.below(3) == 0 {
            f.severities.push(s);
        }
    }
    f.severities.sort();
    for c in CHECKS {
        if rng.below(4) == 0 {
            f.checks.push(c.to_string());
        }
    }
    f.checks.sort();
    if rng.below(3) == 0 {
        let terms = [
            "LOGIN",
            "zür",
            "ZÜR",
            "x\"y",
            "%b_",
            "=c",
            "e",
            "203.0.113.1",
            "user1",
            "b",
            "php",
            "nothing",
            "\"",
        ];
        f.search = Some(rng.pick(&terms).to_string());
    }
    f
}

fn ids(rows: &[Row]) -> Vec<i64> {
    rows.iter().map(|r| r.id).collect()
}

#[test]
fn pages_and_totals_match_the_reference_for_every_plan() {
    let c = db();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let rows = fill(&c, &mut rng, 1500);
    let (mut nonempty, mut searched) = (0, 0);
    for round in 0..400 {
        let f = random_filter(&mut rng);
        let expect = naive(&rows, &f);
        if !expect.is_empty() {
            nonempty += 1;
            searched += usize::from(f.search.is_some());
        }
        let offset = *rng.pick(&[0u64, 0, 3, 40, 5000]);
        let limit = *rng.pick(&[0u64, 1, 7, 100, 1000]);
        let want: Vec<i64> = expect
            .iter()
            .skip(offset as usize)
            .take(limit as usize)
            .map(|r| r.id)
            .collect();
        let mut plans = vec![None, Some(Plan::Time)];
        if !f.severities.is_empty() {
            plans.push(Some(Plan::Severity));
        }
        if !f.checks.is_empty() {
            plans.push(Some(Plan::Check));
        }
        for plan in plans {
            let p = page_with(&c, &f, offset, limit, plan, Caps::DEFAULT).unwrap();
            assert_eq!(p.total, expect.len() as u64, "round {round} {plan:?} {f:?}");
            assert_eq!(ids(&p.rows), want, "round {round} {plan:?} {f:?}");
            assert!(!p.scan_capped);
        }
        if f.search.is_none() {
            assert_eq!(count(&c, &f).unwrap(), expect.len() as u64, "{f:?}");
        }
    }
    assert!(nonempty > 150 && searched > 30, "{nonempty} {searched}");
    // Whole rows come back as stored.
    let all = page(&c, &Filter::default(), 0, 10_000).unwrap();
    assert_eq!(all.rows, naive(&rows, &Filter::default()));
}

#[test]
fn daily_counts_follow_deletes_and_updates() {
    let c = db();
    let mut rng = Rng(42);
    let mut rows = fill(&c, &mut rng, 300);
    c.execute("DELETE FROM history WHERE id % 3 = 0", [])
        .unwrap();
    rows.retain(|r| r.id % 3 != 0);
    c.execute(
        "UPDATE history SET at = at + 86400000000, check_name = 'moved', message = 'Moved here' WHERE id % 5 = 0",
        [],
    )
    .unwrap();
    for r in rows.iter_mut().filter(|r| r.id % 5 == 0) {
        r.at += DAY_MICROS;
        r.check = "moved".into();
        r.message = "Moved here".into();
    }
    for _ in 0..100 {
        let f = random_filter(&mut rng);
        let p = page(&c, &f, 0, 2000).unwrap();
        assert_eq!(ids(&p.rows), ids(&naive(&rows, &f)), "{f:?}");
    }
    let moved = Filter {
        search: Some("moved HERE".into()),
        ..Filter::default()
    };
    assert_eq!(
        page(&c, &moved, 0, 2000).unwrap().total,
        rows.iter().filter(|r| r.id % 5 == 0).count() as u64
    );
}

#[test]
fn migration_loads_rows_written_before_it() {
    // The schema before migration 5: write rows there, then migrate to the current schema.
    let mut c = Connection::open_in_memory().unwrap();
    crate::store::schema::migrate_to(&mut c, 4).unwrap();
    let mut rng = Rng(7);
    let rows = fill_raw(&c, &mut rng, 200);
    crate::store::schema::migrate(&mut c).unwrap();
    for _ in 0..100 {
        let f = random_filter(&mut rng);
        let p = page(&c, &f, 0, 1000).unwrap();
        assert_eq!(ids(&p.rows), ids(&naive(&rows, &f)), "{f:?}");
    }
}

#[test]
fn search_caps_count_only_the_examined_rows() {
    let c = db();
    for i in 0..30 {
        insert(
            &c,
            1_000 + i,
            "ssh",
            1,
            &format!("login failed {i}"),
            "",
            None,
            None,
            None,
        );
    }
    let caps = Caps {
        indexed: 10,
        scanned: 12,
    };
    let f = Filter {
        search: Some("FAILED".into()),
        ..Filter::default()
    };
    let p = page_with(&c, &f, 0, 5, None, caps).unwrap();
    assert!(p.scan_capped);
    assert_eq!(p.total, 10);
    // The most recently recorded candidates, newest first.
    assert_eq!(p.rows[0].at, 1_029);
    let short = Filter {
        search: Some("9".into()),
        ..Filter::default()
    };
    let p = page_with(&c, &short, 0, 100, None, caps).unwrap();
    assert!(p.scan_capped);
    // Rows 29..18 were examined; "9" is in 29 and 19.
    assert_eq!(p.total, 2);
    let exact = page_with(&c, &f, 0, 100, None, Caps::DEFAULT).unwrap();
    assert!(!exact.scan_capped);
    assert_eq!(exact.total, 30);
}

#[test]
fn candidates_come_from_the_rarest_trigrams() {
    let c = db();
    for i in 0..3000 {
        insert(
            &c,
            i,
            "login",
            0,
            &format!("user{i:04} failed"),
            "",
            None,
            None,
            None,
        );
    }
    let caps = Caps {
        indexed: 50,
        scanned: 50,
    };
    let f = Filter {
        search: Some("USER0042 F".into()),
        ..Filter::default()
    };
    // "use" and "ser" occur in every row; the probe picks rarer trigrams.
    let q = candidate_query(&c, "USER0042 F", i64::MIN, i64::MAX).unwrap();
    assert!(!q.contains("\"use\"") && !q.contains("\"ser\""), "{q}");
    let p = page_with(&c, &f, 0, 10, None, caps).unwrap();
    assert!(!p.scan_capped);
    assert_eq!(p.total, 1);
    assert_eq!(p.rows[0].message, "user0042 failed");
}

#[test]
fn search_terms_are_literal_and_ascii_case_insensitive() {
    let c = db();
    let a = insert(&c, 1, "c", 0, "100% done_now", "", None, None, None);
    let b = insert(&c, 2, "c", 0, "ZÜRICH said \"hi\"", "", None, None, None);
    let d = insert(&c, 3, "c", 0, "zürich", "", None, Some("::1"), None);
    let find = |s: &str| {
        let f = Filter {
            search: Some(s.into()),
            ..Filter::default()
        };
        let mut got = ids(&page(&c, &f, 0, 10).unwrap().rows);
        got.sort();
        got
    };
    assert_eq!(find("0% d"), vec![a]);
    assert_eq!(find("%"), vec![a]);
    assert_eq!(find("_"), vec![a]);
    assert_eq!(find("e_n"), vec![a]);
    assert_eq!(find("\"hi\""), vec![b]);
    assert_eq!(find("\""), vec![b]);
    // ASCII letters fold; Ü and ü are different characters.
    assert_eq!(find("zÜr"), vec![b]);
    assert_eq!(find("ürich"), vec![d]);
    assert_eq!(find("RICH"), vec![b, d]);
    assert_eq!(find("::1"), vec![d]);
    assert_eq!(find("a\0b"), Vec::<i64>::new());
    let e = insert(&c, 4, "c", 0, "C:\\temp\\x", "", None, None, None);
    assert_eq!(find("\\temp\\"), vec![e]);
    assert_eq!(find(":\\"), vec![e]);
    assert_eq!(find("*"), Vec::<i64>::new());
    assert_eq!(find("NEAR(x y)"), Vec::<i64>::new());
    assert_eq!(find("\" OR \""), Vec::<i64>::new());
}

#[test]
fn ordered_plans_do_not_sort() {
    let c = db();
    let plan = |sql: &str| -> String {
        let mut st = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows = st
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        rows.join("; ")
    };
    let f = Filter {
        from: Some(5),
        severities: vec![Severity::High],
        ..Filter::default()
    };
    for (p, filter) in [
        (Plan::Time, Filter::default()),
        (Plan::Time, f.clone()),
        (Plan::Severity, f.clone()),
        (
            Plan::Check,
            Filter {
                checks: vec!["x".into()],
                ..f.clone()
            },
        ),
    ] {
        let mut q = Sql::new(&format!(
            "SELECT h.id FROM history AS h INDEXED BY {} WHERE 1",
            p.index()
        ));
        q.conds("h", filter.from, filter.to, &filter);
        q.push(" ORDER BY h.at DESC, h.id DESC LIMIT 5");
        let text = q
            .text
            .replace("?1", "5")
            .replace("?2", "1")
            .replace("?3", "'x'");
        let shown = plan(&text);
        assert!(!shown.contains("TEMP B-TREE"), "{p:?}: {shown}");
    }
}

#[test]
fn sql_builder_binds_every_value() {
    let f = Filter {
        from: Some(1),
        to: Some(2),
        severities: vec![Severity::Warning, Severity::Critical],
        checks: vec!["a'b".into()],
        search: None,
    };
    let mut q = Sql::new("SELECT count(*) FROM history AS h WHERE 1");
    q.conds("h", f.from, f.to, &f);
    assert_eq!(
        q.text,
        "SELECT count(*) FROM history AS h WHERE 1 AND h.at >= ?1 AND h.at < ?2 AND h.severity IN (?3, ?4) AND h.check_name = ?5"
    );
    assert_eq!(q.params.len(), 5);
    assert!(!q.text.contains("a'b"));
    let mut s = Sql::new("");
    s.search("h", "x");
    assert_eq!(s.text.matches("?1").count(), 6);
    assert_eq!(fts_token("a\"b"), "\"a\"\"b\"");
    assert_eq!(like_pattern("10%_a\\b"), "%10\\%\\_a\\\\b%");
    assert_eq!(trigrams("AbCab"), vec!["abc", "bca", "cab"]);
    assert_eq!(trigrams("aaaa"), vec!["aaa"]);
    assert!(trigrams("ab").is_empty());
    assert_eq!(spread(&[1, 2, 3], 8), vec![1, 2, 3]);
    assert_eq!(spread(&(0..20).collect::<Vec<_>>(), 4), vec![0, 6, 12, 19]);
    assert!(uses_text_index("abc") && !uses_text_index("ab") && !uses_text_index("a\tbc"));
    assert!(uses_text_index("üüü"));
}

#[test]
fn day_of_floors_and_count_handles_extreme_bounds() {
    assert_eq!(day_of(0), 0);
    assert_eq!(day_of(-1), -1);
    assert_eq!(day_of(DAY_MICROS), 1);
    assert_eq!(day_of(-DAY_MICROS), -1);
    assert_eq!(day_of(-DAY_MICROS - 1), -2);
    let c = db();
    insert(&c, -1, "a", 0, "m", "", None, None, None);
    insert(&c, 0, "a", 0, "m", "", None, None, None);
    for (from, to, n) in [
        (Some(i64::MIN), Some(i64::MAX), 2),
        (Some(i64::MAX), None, 0),
        (None, Some(i64::MIN), 0),
        (Some(-1), Some(0), 1),
        (Some(0), Some(1), 1),
        (Some(-DAY_MICROS), Some(DAY_MICROS), 2),
        (Some(3), Some(2), 0),
    ] {
        let f = Filter {
            from,
            to,
            ..Filter::default()
        };
        assert_eq!(count(&c, &f).unwrap(), n, "{from:?} {to:?}");
        assert_eq!(page(&c, &f, 0, 10).unwrap().total, n);
    }
}

#[test]
fn stats_queries() {
    let c = db();
    insert(&c, 10, "a", 2, "m", "", Some("bob"), None, None);
    insert(&c, 11, "a", 2, "m", "", Some("bob"), None, None);
    insert(&c, 12, "a", 0, "m", "", Some("amy"), None, None);
    insert(&c, 13, "a", 1, "m", "", Some("cid"), None, None);
    insert(&c, 14, "a", 1, "m", "", Some(""), None, None);
    insert(&c, 99, "a", 2, "m", "", Some("late"), None, None);
    assert_eq!(severity_counts(&c, 10, 99).unwrap(), [1, 2, 2]);
    let acc = accounts_at_risk(&c, 10, 99).unwrap();
    let names: Vec<&str> = acc.iter().map(|a| a.account.as_str()).collect();
    assert_eq!(names, ["bob", "cid", "amy"]);
    assert_eq!(acc[0].counts, [0, 0, 2]);
    c.execute(
        "INSERT INTO quarantine(id, record, original_path, check_name, reason, at) VALUES ('q1', '{}', '/x', 'webshell', 'r', 50), ('q2', '{}', '/y', 'webshell', 'r', 5)",
        [],
    )
    .unwrap();
    assert_eq!(quarantined_between(&c, 10, 99).unwrap(), 1);
    c.execute(
        "INSERT INTO blocked_ips(ip, reason, source, created) VALUES ('192.0.2.1', 'r', 'auto', 20), ('192.0.2.2', 'r', 'auto', 21), ('192.0.2.3', 'r', 'manual', 22), ('192.0.2.4', 'r', 'auto', 1)",
        [],
    )
    .unwrap();
    let b = blocks_between(&c, 10, 99).unwrap();
    assert_eq!(b.get("auto"), Some(&2));
    assert_eq!(b.get("manual"), Some(&1));
}

#[test]
fn rows_written_by_another_writer_are_derived_later() {
    let c = db();
    let a = insert(&c, 10, "ssh", 1, "login failed here", "", None, None, None);
    let b = insert_raw(&c, 20, "ssh", 1, "login failed there", "", None, None, None);
    let f = Filter {
        search: Some("failed".into()),
        ..Filter::default()
    };
    // Deleting a row that was never derived leaves the derived tables alone.
    let gone = insert_raw(&c, 30, "ssh", 1, "login failed gone", "", None, None, None);
    c.execute("DELETE FROM history WHERE id = ?1", [gone])
        .unwrap();
    assert_eq!(derive_pending(&c).unwrap(), 1);
    assert_eq!(derive_pending(&c).unwrap(), 0, "nothing left");
    assert_eq!(count(&c, &Filter::default()).unwrap(), 2);
    // `b` is counted but not indexed yet: searches examine it directly, within the cap.
    assert_eq!(index_backlog(&c).unwrap(), (a, b));
    let p = page(&c, &f, 0, 10).unwrap();
    assert_eq!(ids(&p.rows), vec![b, a]);
    assert!(!p.scan_capped);
    let tight = Caps {
        indexed: 1,
        scanned: 1,
    };
    let p = page_with(&c, &f, 0, 10, None, tight).unwrap();
    assert_eq!((ids(&p.rows), p.total, p.scan_capped), (vec![b], 1, true));
    assert_eq!(index_pending(&c, INDEX_STEP).unwrap(), 0);
    assert_eq!(index_backlog(&c).unwrap(), (b, b));
    let p = page(&c, &f, 0, 10).unwrap();
    assert_eq!(ids(&p.rows), vec![b, a]);
    let fts: i64 = c
        .query_row(
            "SELECT count(*) FROM history_fts WHERE history_fts MATCH '\"gon\" AND \"one\"'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(fts, 0);
}
