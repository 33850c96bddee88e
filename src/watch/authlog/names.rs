//! [`NameList`]: a few short names in one allocation.
//!
//! The detector remembers up to five user names and four service names per attacking
//! address, for up to `auth_max_tracked_addresses` addresses. A `Vec<Box<str>>` costs one
//! allocation per name plus the vector's own; this packs the names as length-prefixed bytes
//! in one boxed slice that grows by exactly the name added (it changes at most a few times
//! per address, so the copy on each addition is cheap).

/// Names of at most 255 bytes each (longer ones are cut at a character boundary), in the
/// order added, without repeats.
#[derive(Debug, Default)]
pub(crate) struct NameList {
    /// Each name as one length byte followed by its UTF-8 bytes.
    packed: Box<[u8]>,
    len: u8,
}

impl NameList {
    pub(crate) fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Called for every failure line: compares bytes, no UTF-8 check.
    pub(crate) fn contains(&self, name: &str) -> bool {
        let name = crate::text::prefix_within(name, usize::from(u8::MAX)).as_bytes();
        self.packed_names().any(|n| n == name)
    }

    fn packed_names(&self) -> impl Iterator<Item = &[u8]> {
        let mut rest: &[u8] = &self.packed;
        std::iter::from_fn(move || {
            let (&n, tail) = rest.split_first()?;
            let (name, tail) = tail.split_at_checked(usize::from(n))?;
            rest = tail;
            Some(name)
        })
    }

    /// Adds `name` (cut to 255 bytes) at the end; callers check [`NameList::contains`] and
    /// their own cap first. At most 255 names are kept.
    pub(crate) fn push(&mut self, name: &str) {
        let name = crate::text::prefix_within(name, usize::from(u8::MAX));
        let (Ok(n), Some(len)) = (u8::try_from(name.len()), self.len.checked_add(1)) else {
            return;
        };
        let mut packed = Vec::with_capacity(self.packed.len() + 1 + name.len());
        packed.extend_from_slice(&self.packed);
        packed.push(n);
        packed.extend_from_slice(name.as_bytes());
        self.packed = packed.into_boxed_slice();
        self.len = len;
    }

    /// The names in the order added.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        // Only whole `&str`s cut at character boundaries are packed.
        self.packed_names()
            .filter_map(|name| std::str::from_utf8(name).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_finds_names() {
        let mut l = NameList::default();
        assert!(l.is_empty());
        for n in ["root", "", "é-user", "admin"] {
            l.push(n);
        }
        assert_eq!(l.len(), 4);
        assert_eq!(
            l.iter().collect::<Vec<_>>(),
            ["root", "", "é-user", "admin"]
        );
        assert!(l.contains("é-user") && l.contains("") && !l.contains("ro"));
    }

    #[test]
    fn long_names_are_cut_at_a_character_boundary() {
        let mut l = NameList::default();
        let long = "é".repeat(200); // 400 bytes
        l.push(&long);
        let kept = l.iter().next().unwrap_or_default();
        assert_eq!(kept.len(), 254);
        assert!(long.starts_with(kept));
        assert!(l.contains(&long), "the same long name matches its cut form");
    }

    #[test]
    fn holds_at_most_255_names() {
        let mut l = NameList::default();
        for i in 0..300 {
            l.push(&i.to_string());
        }
        assert_eq!(l.len(), 255);
        assert_eq!(l.iter().count(), 255);
    }
}
