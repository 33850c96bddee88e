//! MD5-crypt (`$1$`, Poul-Henning Kamp's FreeBSD algorithm, as glibc and OpenSSL compute
//! it), implemented here over RustCrypto's `md-5`: no maintained crate offers it alone, and
//! the algorithm is short. Checked against `openssl passwd -1` in the tests.

use md5::{Digest, Md5};

use super::scheme::MD5_CRYPT_MAX_SALT;

const ALPHABET: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The 22-character hash part of `$1$salt$hash` for `password` and `salt` (truncated to 8
/// bytes, as crypt does).
pub fn md5_crypt_hash(password: &[u8], salt: &[u8]) -> [u8; 22] {
    let salt = salt
        .get(..salt.len().min(MD5_CRYPT_MAX_SALT))
        .unwrap_or(salt);
    let mut alt = Md5::new();
    alt.update(password);
    alt.update(salt);
    alt.update(password);
    let alt = alt.finalize();

    let mut ctx = Md5::new();
    ctx.update(password);
    ctx.update(b"$1$");
    ctx.update(salt);
    let mut left = password.len();
    while left > 0 {
        let n = left.min(16);
        ctx.update(alt.get(..n).unwrap_or(&[]));
        left -= n;
    }
    let mut i = password.len();
    while i > 0 {
        if i & 1 == 1 {
            ctx.update([0u8]);
        } else {
            ctx.update(password.get(..1).unwrap_or(&[]));
        }
        i >>= 1;
    }
    let mut fin = ctx.finalize();
    for round in 0..1000 {
        let mut c = Md5::new();
        if round & 1 == 1 {
            c.update(password);
        } else {
            c.update(fin);
        }
        if round % 3 != 0 {
            c.update(salt);
        }
        if round % 7 != 0 {
            c.update(password);
        }
        if round & 1 == 1 {
            c.update(fin);
        } else {
            c.update(password);
        }
        fin = c.finalize();
    }
    let f: [u8; 16] = fin.into();
    let mut out = [0u8; 22];
    let mut pos = 0;
    let mut put = |v: u32, n: usize| {
        let mut v = v;
        for _ in 0..n {
            if let Some(slot) = out.get_mut(pos) {
                *slot = ALPHABET[(v & 0x3f) as usize];
            }
            pos += 1;
            v >>= 6;
        }
    };
    for (a, b, c) in [(0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)] {
        put(
            (u32::from(f[a]) << 16) | (u32::from(f[b]) << 8) | u32::from(f[c]),
            4,
        );
    }
    put(u32::from(f[11]), 2);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector() {
        // glibc: crypt("password", "$1$saltsalt$") = "$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/"
        assert_eq!(
            &md5_crypt_hash(b"password", b"saltsalt"),
            b"qjXMvbEw8oaL.CzflDtaK/"
        );
    }
}
