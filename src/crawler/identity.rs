//! Crawler identities: which user agents claim which crawler, and how a claim is verified.
//!
//! Built-in identities (`config::bots::BUILTINS`: search engines and social platforms by
//! forward-confirmed reverse DNS, some with a published range list checked first; AI-vendor
//! crawlers by published ranges, one with a legacy reverse-DNS suffix as fallback) come
//! after the operator's `reputation.verified_bots` in [`Identities::new`]'s order; a user
//! agent claims the identity of its leftmost matching substring (case-insensitive),
//! operator entries winning ties.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

pub use crate::config::bots::{is_builtin, Identity, BUILTINS};

/// The identities in force and the matcher over their user-agent substrings.
pub struct Identities {
    list: Vec<Identity>,
    matcher: Option<AhoCorasick>,
    /// Pattern index -> identity index.
    owner: Vec<usize>,
}

impl Identities {
    /// Operator entries first, then the built-ins.
    pub fn new(operator: &[Identity]) -> Identities {
        let mut list: Vec<Identity> = operator.to_vec();
        for (name, ua, rdns, published) in BUILTINS {
            list.push(Identity {
                name: Arc::from(*name),
                ua_substrings: ua.iter().map(|s| s.to_string()).collect(),
                rdns_suffixes: rdns.iter().map(|s| s.to_string()).collect(),
                ip_ranges: Vec::new(),
                published: *published,
                builtin: true,
            });
        }
        let mut patterns = Vec::new();
        let mut owner = Vec::new();
        for (i, id) in list.iter().enumerate() {
            for s in &id.ua_substrings {
                patterns.push(s.to_ascii_lowercase());
                owner.push(i);
            }
        }
        let matcher = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .build(&patterns)
            .ok();
        Identities {
            list,
            matcher,
            owner,
        }
    }

    /// The identity `user_agent` claims, if any.
    pub fn claim(&self, user_agent: &str) -> Option<&Identity> {
        let m = self.matcher.as_ref()?.find(user_agent)?;
        self.owner
            .get(m.pattern().as_usize())
            .and_then(|&i| self.list.get(i))
    }

    pub fn get(&self, name: &str) -> Option<&Identity> {
        self.list.iter().find(|i| &*i.name == name)
    }

    pub fn all(&self) -> &[Identity] {
        &self.list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_suffixes_pass_the_guards() {
        for (name, _, rdns, _) in BUILTINS {
            for s in *rdns {
                assert!(
                    crate::net::guards::check_rdns_suffix(s).is_ok(),
                    "{name}: {s}"
                );
            }
        }
    }

    #[test]
    fn claims_are_case_insensitive_and_operator_first() {
        let op = Identity {
            name: Arc::from("mybot"),
            ua_substrings: vec!["mybot".into()],
            rdns_suffixes: vec!["example.com".into()],
            ip_ranges: vec![],
            published: false,
            builtin: false,
        };
        let ids = Identities::new(&[op]);
        let ua = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
        assert_eq!(&*ids.claim(ua).unwrap().name, "googlebot");
        assert_eq!(&*ids.claim("MyBot/1.0").unwrap().name, "mybot");
        assert_eq!(
            &*ids.claim("Mozilla/5.0 GPTBot/1.2").unwrap().name,
            "gptbot"
        );
        assert!(ids
            .claim("Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0")
            .is_none());
    }
}
