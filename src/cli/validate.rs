//! `svc validate`.

use super::Args;

pub fn run(flags: &Args) -> i32 {
    let path = super::config_path(flags);
    match crate::config::load(&path) {
        Ok(cfg) => {
            let unstartable = crate::http::startcheck::check(&cfg);
            if !unstartable.is_empty() {
                for u in unstartable {
                    println!("{}: {}", u.key, u.message);
                }
                return 1;
            }
            let n = cfg.effective_tokens().len();
            println!(
                "OK: {} ({} file{}, {n} API token{})",
                path.display(),
                cfg.sources.len(),
                if cfg.sources.len() == 1 { "" } else { "s" },
                if n == 1 { "" } else { "s" }
            );
            0
        }
        Err(errors) => {
            for e in errors {
                println!("{e}");
            }
            1
        }
    }
}
