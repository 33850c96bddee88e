//! `php_taint_flow` in deep scans: every PHP file under the web roots goes through the taint
//! analysis ([`crate::scan::taint`]), the same as the file watcher's uploads, so a flow
//! that arrived while the daemon was down is found, and one whose file was cleaned is
//! resolved. At most [`MAX_ANALYSED`] files a run, each within the analysis's own caps.

use super::context::CheckContext;
use super::sink::Sink;
use super::walk::{OwnerCache, Walker};
use crate::findings::Finding;
use crate::scan::taint;

pub const CHECK: &str = taint::CHECK;

/// PHP files analysed per run at most.
pub const MAX_ANALYSED: usize = 100_000;

/// One finding per flow in a PHP file under the web roots.
pub fn php_taint_flows(ctx: &CheckContext) -> Vec<Finding> {
    let mut sink = Sink::new(ctx, CHECK);
    let mut walker = Walker::new(ctx);
    let mut owners = OwnerCache::default();
    let counters = taint::Counters::default();
    let mut analysed = 0usize;
    let now = sink.now();
    for root in ctx.glob_all(&ctx.web_roots) {
        walker.walk(&root, &mut |path, meta| {
            if !meta.is_file() || analysed >= MAX_ANALYSED || !taint::is_php_path(path) {
                return;
            }
            analysed += 1;
            let Ok((report, uid)) = taint::analyze_file(path, &counters) else {
                return;
            };
            for flow in &report.flows {
                let f = taint::finding(path, flow, now);
                sink.push_owned(f, owners.name(uid));
            }
        });
    }
    sink.finish(Some(&walker))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::{garbage, Fixture};
    use crate::clock::ManualClock;

    #[test]
    fn flows_under_the_web_roots_are_found() {
        let fx = Fixture::new();
        fx.write(
            "var/www/site/wp-content/uploads/2026/x.php",
            b"<?php\n$c = $_POST['c'];\nsystem($c);",
        );
        fx.write(
            "var/www/site/index.php",
            b"<?php echo htmlspecialchars($_GET['q']);",
        );
        let ctx = CheckContext::builder(ManualClock::at_epoch_2026())
            .web_roots([fx.path("var/www/site")])
            .build();
        let f = php_taint_flows(&ctx);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0]
            .message
            .ends_with("$_POST (line 2) reaches system (line 3)"));
    }

    #[test]
    fn garbage_never_panics_the_analysis() {
        for seed in 0..300 {
            let mut src = b"<?php ".to_vec();
            src.extend(garbage(seed, 2000));
            let r = taint::analyze_source(&src);
            assert!(r.flows.len() <= taint::flow::MAX_FLOWS);
        }
    }
}
