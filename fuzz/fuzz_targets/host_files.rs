//! Host files the scheduled checks read: passwd, crontabs, sshd_config, mountinfo.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use svc::checks::{accounts, cron, mountinfo, sshd};

fuzz_target!(|data: &[u8]| {
    let _ = accounts::parse_passwd(data);
    let _ = cron::parse_crontab(data, cron::CronFormat::System);
    let _ = cron::parse_crontab(data, cron::CronFormat::User);
    let _ = mountinfo::parse_mountinfo(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let cfg = sshd::SshdConfig::parse_str(text, Path::new("/etc/ssh/sshd_config"));
        let _ = sshd::assess_root_password_login(&cfg);
    }
});
