//! Plugin and theme inventory of one WordPress installation, read from the files (no PHP
//! runs): each plugin's header (`Plugin Name:`, `Version:`) in its main file, each theme's
//! `style.css` header (`Theme Name:`, `Version:`). Like WordPress, only the first
//! [`HEADER_BYTES`] of a file are read.
//!
//! The active/inactive state would need `wp-cli` (PHP run as the site's user, with its
//! database); it is not asked (decision 388), so every item found is listed.
//!
//! Files are opened beneath the installation through `sys::dir` (no symlink followed);
//! [`MAX_ITEMS`] plugins and themes and [`MAX_FILES_PER_PLUGIN`] candidate files of one plugin
//! directory are looked at.

use std::ffi::OsStr;
use std::io::Read;

use crate::sys::dir::{Dir, Kind};

/// Bytes of a header file read (WordPress reads 8 KiB).
pub const HEADER_BYTES: u64 = 8 * 1024;
/// Plugins plus themes of one installation looked at.
pub const MAX_ITEMS: usize = 2_000;
/// `.php` files of one plugin directory searched for the header.
pub const MAX_FILES_PER_PLUGIN: usize = 64;
/// Longest header value kept.
const MAX_VALUE: usize = 200;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ItemKind {
    Plugin,
    Theme,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemKind::Plugin => "plugin",
            ItemKind::Theme => "theme",
        }
    }
}

/// A plugin or theme found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub kind: ItemKind,
    /// Its directory name (or a single-file plugin's name without `.php`).
    pub slug: String,
    /// `Plugin Name:` / `Theme Name:`.
    pub name: String,
    /// `Version:`; `None` when absent.
    pub version: Option<String>,
}

/// An inventory and what it could not read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    pub items: Vec<Item>,
    pub truncated: bool,
}

/// The value of header `field` (`Plugin Name`) in `text`, as WordPress's
/// `get_file_data` finds it: a line whose start (after spaces, `*`, `#`, `@`, `/`) is
/// `field:`; the value is trimmed and cut at a closing `*/` or `?>`.
pub fn header_value(text: &str, field: &str) -> Option<String> {
    for line in text.lines() {
        let l = line.trim_start_matches([' ', '\t', '/', '*', '#', '@']);
        let Some(head) = l.get(..field.len()) else {
            continue;
        };
        if !head.eq_ignore_ascii_case(field) {
            continue;
        }
        let Some(rest) = l[field.len()..].trim_start().strip_prefix(':') else {
            continue;
        };
        let mut v = rest;
        for end in ["*/", "?>"] {
            if let Some(i) = v.find(end) {
                v = &v[..i];
            }
        }
        let v = v.trim();
        if v.is_empty() {
            continue;
        }
        return Some(crate::hostfs::sanitize(v, MAX_VALUE));
    }
    None
}

fn read_head(dir: &Dir, name: &OsStr) -> Option<String> {
    let f = dir.open_regular(name).ok()?;
    let mut buf = Vec::new();
    f.take(HEADER_BYTES).read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// The header's version, when it is a plausible version text.
fn version_of(text: &str) -> Option<String> {
    header_value(text, "Version").map(|v| v.chars().take(super::version::MAX_VERSION_LEN).collect())
}

fn sorted_entries(dir: &Dir, limit: usize, inv: &mut Inventory) -> Vec<crate::sys::dir::Entry> {
    let Ok((mut entries, cut)) = dir.entries(limit) else {
        return Vec::new();
    };
    inv.truncated |= cut;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

fn kind_of(dir: &Dir, e: &crate::sys::dir::Entry) -> Option<Kind> {
    e.kind
        .or_else(|| dir.lstat(&e.name).ok().flatten().map(|i| i.kind))
}

/// The plugins and themes of the WordPress installation in `wp`. `Err` when
/// `wp-content` exists but cannot be read.
pub fn inventory(wp: &Dir) -> Result<Inventory, crate::sys::dir::Error> {
    let mut inv = Inventory::default();
    let content = match wp.child(OsStr::new("wp-content")) {
        Ok(d) => d,
        Err(crate::sys::dir::Error::NotFound { .. }) => return Ok(inv),
        Err(e) => return Err(e),
    };
    if let Ok(plugins) = content.child(OsStr::new("plugins")) {
        plugins.entries(1)?;
        for e in sorted_entries(&plugins, MAX_ITEMS, &mut inv) {
            let Some(name) = e.name.to_str().map(str::to_owned) else {
                continue;
            };
            match kind_of(&plugins, &e) {
                Some(Kind::Dir) => {
                    let Ok(pd) = plugins.child(&e.name) else {
                        continue;
                    };
                    for f in sorted_entries(&pd, MAX_FILES_PER_PLUGIN * 4, &mut inv)
                        .into_iter()
                        .filter(|f| f.name.as_encoded_bytes().ends_with(b".php"))
                        .take(MAX_FILES_PER_PLUGIN)
                    {
                        let Some(text) = read_head(&pd, &f.name) else {
                            continue;
                        };
                        if let Some(title) = header_value(&text, "Plugin Name") {
                            inv.items.push(Item {
                                kind: ItemKind::Plugin,
                                slug: name.clone(),
                                name: title,
                                version: version_of(&text),
                            });
                            break;
                        }
                    }
                }
                Some(Kind::File) if name.ends_with(".php") => {
                    let Some(text) = read_head(&plugins, &e.name) else {
                        continue;
                    };
                    if let Some(title) = header_value(&text, "Plugin Name") {
                        inv.items.push(Item {
                            kind: ItemKind::Plugin,
                            slug: name.trim_end_matches(".php").to_string(),
                            name: title,
                            version: version_of(&text),
                        });
                    }
                }
                _ => {}
            }
        }
    }
    if let Ok(themes) = content.child(OsStr::new("themes")) {
        for e in sorted_entries(&themes, MAX_ITEMS, &mut inv) {
            let Some(name) = e.name.to_str().map(str::to_owned) else {
                continue;
            };
            if kind_of(&themes, &e) != Some(Kind::Dir) {
                continue;
            }
            let Ok(td) = themes.child(&e.name) else {
                continue;
            };
            let Some(text) = read_head(&td, OsStr::new("style.css")) else {
                continue;
            };
            if let Some(title) = header_value(&text, "Theme Name") {
                inv.items.push(Item {
                    kind: ItemKind::Theme,
                    slug: name,
                    name: title,
                    version: version_of(&text),
                });
            }
        }
    }
    if inv.items.len() > MAX_ITEMS {
        inv.items.truncate(MAX_ITEMS);
        inv.truncated = true;
    }
    Ok(inv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::Fixture;

    #[test]
    fn headers_as_wordpress_reads_them() {
        let t = "<?php\n/**\n * Plugin Name: Contact Form 7\n * Version:     5.3.1 */\n";
        assert_eq!(
            header_value(t, "Plugin Name").as_deref(),
            Some("Contact Form 7")
        );
        assert_eq!(header_value(t, "Version").as_deref(), Some("5.3.1"));
        assert_eq!(
            header_value("Version:\nVersion: 2", "Version").as_deref(),
            Some("2")
        );
        assert_eq!(
            header_value("# version : 3 ?>", "Version").as_deref(),
            Some("3")
        );
        assert_eq!(header_value("Versions: 3", "Version"), None);
        assert_eq!(header_value("", "Version"), None);
        assert_eq!(header_value("é", "Version"), None);
        assert_eq!(header_value("Versioné", "Version"), None);
    }

    #[test]
    fn inventory_of_plugins_and_themes() {
        let fx = Fixture::new();
        fx.write(
            "wp/wp-content/plugins/contact-form-7/wp-contact-form-7.php",
            b"<?php\n/*\nPlugin Name: Contact Form 7\nVersion: 5.3.1\n*/",
        );
        fx.write(
            "wp/wp-content/plugins/contact-form-7/a-helper.php",
            b"<?php // no header",
        );
        fx.write(
            "wp/wp-content/plugins/hello.php",
            b"<?php\n/*\nPlugin Name: Hello Dolly\nVersion: 1.7.2\n*/",
        );
        fx.write(
            "wp/wp-content/plugins/index.php",
            b"<?php // Silence is golden.",
        );
        fx.write(
            "wp/wp-content/themes/twentyfifteen/style.css",
            b"/*\nTheme Name: Twenty Fifteen\nVersion: 1.1\n*/",
        );
        fx.write(
            "elsewhere/evil/evil.php",
            b"<?php\n/* Plugin Name: Evil\nVersion: 1 */",
        );
        std::os::unix::fs::symlink(
            fx.path("elsewhere/evil"),
            fx.path("wp/wp-content/plugins/evil"),
        )
        .unwrap();
        let wp = Dir::walk_trusted(&fx.path("wp")).unwrap();
        let inv = inventory(&wp).unwrap();
        let got: Vec<_> = inv
            .items
            .iter()
            .map(|i| (i.kind, i.slug.as_str(), i.version.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (ItemKind::Plugin, "contact-form-7", Some("5.3.1")),
                (ItemKind::Plugin, "hello", Some("1.7.2")),
                (ItemKind::Theme, "twentyfifteen", Some("1.1")),
            ]
        );
    }
}
