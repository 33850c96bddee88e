//! Random identifiers (session ids, secrets, quarantine ids, tokens). A leaf module: it
//! depends on nothing in the crate, so every layer may use it.

/// `bytes` random bytes from the operating system, hex-encoded (`2 * bytes` characters).
///
/// # Panics
/// When the operating system cannot supply randomness: continuing with predictable session
/// secrets would be worse than stopping.
pub fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    if getrandom::getrandom(&mut b).is_err() {
        panic!("operating system random source unavailable");
    }
    hex::encode(b)
}

#[cfg(test)]
mod tests {
    #[test]
    fn length_and_uniqueness() {
        let a = super::random_hex(16);
        let b = super::random_hex(16);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
