//! Drop-in merge: tables merge, scalars replace, arrays append; in a drop-in the API wrote
//! (`conf.d/90-api-*.toml`, [`replacing`]) arrays replace, since a posted value is the value.

use toml::Value;

/// Whether the drop-in at `path` is one the settings API writes (its arrays replace).
pub fn replacing(path: &std::path::Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(super::dropins::API_DROPIN_PREFIX))
}

/// Merges the file `path` parsed as `overlay`, with the semantics its name gives it.
pub fn merge_file(
    base: &mut toml::value::Table,
    path: &std::path::Path,
    overlay: toml::value::Table,
) {
    merge_with(base, overlay, replacing(path));
}

/// Merges `overlay` into `base` in place; with `replace`, arrays replace instead of append.
fn merge_with(base: &mut toml::value::Table, overlay: toml::value::Table, replace: bool) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(Value::Table(b)), Value::Table(o)) => merge_with(b, o, replace),
            (Some(Value::Array(b)), Value::Array(o)) if !replace => b.extend(o),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merge(base: &mut toml::value::Table, overlay: toml::value::Table) {
        merge_with(base, overlay, false);
    }

    fn merge_replacing(base: &mut toml::value::Table, overlay: toml::value::Table) {
        merge_with(base, overlay, true);
    }

    fn t(s: &str) -> toml::value::Table {
        toml::from_str(s).unwrap()
    }

    #[test]
    fn tables_merge_scalars_replace_arrays_append() {
        let mut base = t("a = 1\nlist = [1]\n[w]\nx = 1\ny = 2\n");
        merge(&mut base, t("a = 2\nlist = [2, 3]\n[w]\ny = 3\nz = 4\n"));
        assert_eq!(
            base,
            t("a = 2\nlist = [1, 2, 3]\n[w]\nx = 1\ny = 3\nz = 4\n")
        );
    }

    #[test]
    fn an_api_dropin_replaces_arrays_even_with_an_empty_one() {
        let mut base = t("list = [1]\n[w]\nl = [\"a\"]\n");
        merge_replacing(&mut base, t("list = []\n[w]\nl = [\"b\"]\n"));
        assert_eq!(base, t("list = []\n[w]\nl = [\"b\"]\n"));
        assert!(replacing(std::path::Path::new(
            "/etc/svc/conf.d/90-api-logs.toml"
        )));
        assert!(!replacing(std::path::Path::new(
            "/etc/svc/conf.d/50-local.toml"
        )));
    }

    #[test]
    fn arrays_of_tables_append() {
        let mut base = t("[[tok]]\nname = \"a\"\n");
        merge(&mut base, t("[[tok]]\nname = \"b\"\n"));
        assert_eq!(base["tok"].as_array().unwrap().len(), 2);
    }
}
