//! Drop-in merge: tables merge, scalars replace, arrays append.

use toml::Value;

/// Merges `overlay` into `base` in place.
pub fn merge(base: &mut toml::value::Table, overlay: toml::value::Table) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o),
            (Some(Value::Array(b)), Value::Array(o)) => b.extend(o),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn arrays_of_tables_append() {
        let mut base = t("[[tok]]\nname = \"a\"\n");
        merge(&mut base, t("[[tok]]\nname = \"b\"\n"));
        assert_eq!(base["tok"].as_array().unwrap().len(), 2);
    }
}
