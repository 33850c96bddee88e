//! Version facts read from PHP source without running PHP: WordPress's
//! `wp-includes/version.php` (`$wp_version`, `$wp_local_package`), Joomla's and Drupal's
//! version constants, and a version comparison that never fails on garbage.
//!
//! Every value taken from a file is checked against a narrow alphabet (it goes into a
//! checksum request's query), so a hostile `version.php` cannot inject anything.

use std::cmp::Ordering;

/// Longest version text accepted.
pub const MAX_VERSION_LEN: usize = 32;
/// Longest locale accepted.
pub const MAX_LOCALE_LEN: usize = 16;

/// WordPress's default locale, used when `$wp_local_package` is not set.
pub const DEFAULT_LOCALE: &str = "en_US";

/// What `wp-includes/version.php` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WpVersion {
    pub version: String,
    pub locale: String,
}

/// A version text of digits, letters, `.`, `-`, `_` and `+`, starting with a digit.
pub fn valid_version(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= MAX_VERSION_LEN
        && v.as_bytes()[0].is_ascii_digit()
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
}

/// A locale such as `en_US`, `de_DE_formal`, `pt_BR`: letters and `_`.
pub fn valid_locale(l: &str) -> bool {
    !l.is_empty()
        && l.len() <= MAX_LOCALE_LEN
        && l.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_')
}

/// The quoted value assigned to `name` (`$wp_version = '6.4.3';`, `const VERSION = '10.1';`,
/// `define('VERSION', '7.98');`) on a line that is not a comment. `None` when absent.
pub fn assigned(text: &str, name: &str) -> Option<String> {
    for line in text.lines() {
        let l = line.trim_start();
        if l.starts_with("//") || l.starts_with('#') || l.starts_with('*') || l.starts_with("/*") {
            continue;
        }
        let Some(at) = l.find(name) else { continue };
        // `MINIMUM_VERSION` is another constant.
        if l[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &l[at + name.len()..];
        // `$wp_version_x` is another variable.
        if rest
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = rest.trim_start();
        let rest = rest
            .strip_prefix('=')
            .or_else(|| rest.strip_prefix(',')) // define('VERSION', '7.98')
            .or_else(|| rest.strip_prefix("\","))
            .or_else(|| rest.strip_prefix("',"));
        let Some(rest) = rest else { continue };
        let rest = rest.trim_start();
        let Some(q) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
            continue;
        };
        let body = &rest[1..];
        if let Some(end) = body.find(q) {
            return Some(body[..end].to_string());
        }
    }
    None
}

/// Parses WordPress's `version.php`. `None` when `$wp_version` is missing or not a valid
/// version; a missing or invalid `$wp_local_package` means `en_US`.
pub fn parse_wp_version(text: &str) -> Option<WpVersion> {
    let version = assigned(text, "$wp_version").filter(|v| valid_version(v))?;
    let locale = assigned(text, "$wp_local_package")
        .filter(|l| valid_locale(l))
        .unwrap_or_else(|| DEFAULT_LOCALE.to_string());
    Some(WpVersion { version, locale })
}

/// Joomla 4+ (`libraries/src/Version.php`: `MAJOR_VERSION = 4;` ...) or Joomla 3
/// (`libraries/cms/version/version.php`: `$RELEASE = '3.9'; $DEV_LEVEL = '28';`).
pub fn parse_joomla_version(text: &str) -> Option<String> {
    let int_const = |name: &str| -> Option<String> {
        let at = text.find(name)?;
        let rest = text[at + name.len()..].trim_start().strip_prefix('=')?;
        let digits: String = rest
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .take(6)
            .collect();
        (!digits.is_empty()).then_some(digits)
    };
    if let (Some(a), Some(b), Some(c)) = (
        int_const("MAJOR_VERSION"),
        int_const("MINOR_VERSION"),
        int_const("PATCH_VERSION"),
    ) {
        return Some(format!("{a}.{b}.{c}"));
    }
    let release = assigned(text, "$RELEASE")?;
    let level = assigned(text, "$DEV_LEVEL").unwrap_or_default();
    let v = if level.is_empty() {
        release
    } else {
        format!("{release}.{level}")
    };
    valid_version(&v).then_some(v)
}

/// Drupal 8+ (`core/lib/Drupal.php`: `const VERSION = '10.1.5';`) or Drupal 7
/// (`includes/bootstrap.inc`: `define('VERSION', '7.98');`).
pub fn parse_drupal_version(text: &str) -> Option<String> {
    assigned(text, "VERSION").filter(|v| valid_version(v))
}

/// One comparable piece of a version: its leading number, and whether text followed it
/// (`2-beta1`: a pre-release sorts before the plain number).
fn pieces(v: &str) -> Option<Vec<(u64, bool)>> {
    let mut out = Vec::new();
    for part in v.trim().split(['.', '-', '_', '+']).take(8) {
        if part.is_empty() {
            continue;
        }
        let digits: String = part
            .chars()
            .take_while(char::is_ascii_digit)
            .take(18)
            .collect();
        if digits.is_empty() {
            // `6.4-RC1`: the RC marks the previous number a pre-release.
            if let Some(last) = out.last_mut() {
                let (_, pre): &mut (u64, bool) = last;
                *pre = true;
            }
            break;
        }
        let n = digits.parse::<u64>().ok()?;
        let tail = part.len() > digits.len();
        out.push((n, tail));
        if tail {
            break;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Compares two version texts numerically piece by piece (`1.10 > 1.9`, `1.2 == 1.2.0`,
/// `5.3.2-beta < 5.3.2`). `None` when either has no leading number: nothing is claimed
/// about garbage.
pub fn compare(a: &str, b: &str) -> Option<Ordering> {
    let (pa, pb) = (pieces(a)?, pieces(b)?);
    let n = pa.len().max(pb.len());
    for i in 0..n {
        let (x, xpre) = pa.get(i).copied().unwrap_or((0, false));
        let (y, ypre) = pb.get(i).copied().unwrap_or((0, false));
        match x.cmp(&y) {
            Ordering::Equal => {}
            o => return Some(o),
        }
        match (xpre, ypre) {
            (true, false) => return Some(Ordering::Less),
            (false, true) => return Some(Ordering::Greater),
            _ => {}
        }
    }
    Some(Ordering::Equal)
}

/// Whether `installed` is older than `fixed_in` (the vulnerable range); false when either
/// cannot be compared.
pub fn is_older(installed: &str, fixed_in: &str) -> bool {
    compare(installed, fixed_in) == Some(Ordering::Less)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wordpress_version_file() {
        let t = "<?php\n/**\n * $wp_version = '9.9';\n */\n$wp_version = '6.4.3';\n$wp_db_version = 56657;\n$wp_local_package = 'de_DE';\n";
        assert_eq!(
            parse_wp_version(t),
            Some(WpVersion {
                version: "6.4.3".into(),
                locale: "de_DE".into()
            })
        );
        let t = "<?php\n$wp_version = \"6.5\";\n";
        assert_eq!(parse_wp_version(t).unwrap().locale, "en_US");
        assert_eq!(parse_wp_version("<?php $wp_version = '1.0&x=y';"), None);
        assert_eq!(
            parse_wp_version("$wp_version = '6.4'; $wp_local_package = 'x&y';")
                .unwrap()
                .locale,
            "en_US"
        );
        assert_eq!(parse_wp_version(""), None);
        assert_eq!(parse_wp_version("$wp_version = '"), None);
    }

    /// Issue 35's attack run: a site owner writes `version.php`. A `../` or a query in the
    /// version never names a checksum request; binary and megabyte texts parse to nothing or
    /// a bounded version, without a panic.
    #[test]
    fn hostile_version_files_name_no_request() {
        for v in [
            "../../etc",
            "6.4/../../x",
            "6.4?x=1",
            "6.4 3",
            "",
            "\u{0}6.4",
        ] {
            let t = format!("<?php $wp_version = '{v}';");
            assert_eq!(parse_wp_version(&t), None, "{v:?}");
        }
        let long = format!("<?php $wp_version = '6{}';", "1".repeat(1 << 20));
        assert_eq!(parse_wp_version(&long), None);
        let binary: Vec<u8> = (0..=255u8).cycle().take(1 << 16).collect();
        assert_eq!(parse_wp_version(&String::from_utf8_lossy(&binary)), None);
        let t = "$wp_version = '6.4'; $wp_local_package = '../de';";
        assert_eq!(parse_wp_version(t).unwrap().locale, "en_US");
    }

    #[test]
    fn joomla_and_drupal() {
        let j4 = "final class Version {\n    public const MAJOR_VERSION = 4;\n    public const MINOR_VERSION = 4;\n    public const PATCH_VERSION = 2;\n";
        assert_eq!(parse_joomla_version(j4).as_deref(), Some("4.4.2"));
        let j3 = "public $RELEASE = '3.9';\npublic $DEV_LEVEL = '28';";
        assert_eq!(parse_joomla_version(j3).as_deref(), Some("3.9.28"));
        assert_eq!(
            parse_drupal_version("class Drupal {\n  const VERSION = '10.1.5';").as_deref(),
            Some("10.1.5")
        );
        assert_eq!(
            parse_drupal_version("define('VERSION', '7.98');").as_deref(),
            Some("7.98")
        );
    }

    #[test]
    fn comparison_is_numeric_and_never_fails() {
        assert!(is_older("5.3.1", "5.3.2"));
        assert!(is_older("1.9", "1.10"));
        assert!(!is_older("1.10", "1.9"));
        assert!(!is_older("1.2", "1.2.0"));
        assert!(is_older("5.3.2-beta", "5.3.2"));
        assert!(is_older("6.4-RC1", "6.4"));
        assert!(!is_older("garbage", "1.0"));
        assert!(!is_older("1.0", ""));
        assert!(!is_older("99999999999999999999999", "1"));
        assert_eq!(compare("v1", "1"), None);
        for junk in [
            "..",
            "-",
            "1..2",
            "1.-2",
            "\u{0}",
            "１.2",
            "1.2.3.4.5.6.7.8.9.10",
        ] {
            let _ = compare(junk, "1.2");
        }
    }
}
