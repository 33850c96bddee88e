//! One verification: does a candidate produce a stored value? Constant-time comparison of
//! the calculated and stored digests; the candidate and the calculated values are never
//! logged or returned.

use std::fmt;

use md5::Md5;
use sha1::Sha1;
use sha2::{Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::md5crypt::md5_crypt_hash;
use super::scheme::{Argon2Variant, Digest, Stored};

/// Longest candidate tried (bytes).
pub const MAX_CANDIDATE_BYTES: usize = 256;

/// A verification that could not be calculated (the parameters passed the parser, but the
/// hashing library refused them or could not allocate). Carries no secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError(pub &'static str);

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for VerifyError {}

/// Whether `candidate` is a candidate the audit may try: at most
/// [`MAX_CANDIDATE_BYTES`] bytes, no NUL.
pub fn acceptable(candidate: &[u8]) -> bool {
    candidate.len() <= MAX_CANDIDATE_BYTES && !candidate.contains(&0)
}

fn eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

fn digest(algo: Digest, parts: &[&[u8]]) -> Vec<u8> {
    fn run<D: sha2::Digest>(parts: &[&[u8]]) -> Vec<u8> {
        let mut d = D::new();
        for p in parts {
            d.update(p);
        }
        d.finalize().to_vec()
    }
    match algo {
        Digest::Md5 => run::<Md5>(parts),
        Digest::Sha1 => run::<Sha1>(parts),
        Digest::Sha256 => run::<Sha256>(parts),
        Digest::Sha512 => run::<Sha512>(parts),
    }
}

/// Whether `candidate` matches `stored`. A candidate that is not [`acceptable`] never
/// matches.
pub fn verify(stored: &Stored, candidate: &[u8]) -> Result<bool, VerifyError> {
    if !acceptable(candidate) {
        return Ok(false);
    }
    Ok(match stored {
        Stored::Plain(p) => eq(p, candidate),
        Stored::Digest {
            algo,
            salt,
            digest: want,
        } => eq(&digest(*algo, &[candidate, salt]), want),
        Stored::Md5Crypt { salt, hash } => eq(&md5_crypt_hash(candidate, salt), hash),
        Stored::ShaCrypt {
            sha512,
            rounds,
            salt,
            hash,
        } => {
            let rounds = *rounds as usize;
            let got = if *sha512 {
                let p = sha_crypt::Sha512Params::new(rounds)
                    .map_err(|_| VerifyError("SHA-crypt rounds refused"))?;
                sha_crypt::sha512_crypt_b64(candidate, salt, &p)
            } else {
                let p = sha_crypt::Sha256Params::new(rounds)
                    .map_err(|_| VerifyError("SHA-crypt rounds refused"))?;
                sha_crypt::sha256_crypt_b64(candidate, salt, &p)
            }
            .map_err(|_| VerifyError("SHA-crypt calculation failed"))?;
            eq(got.as_bytes(), hash)
        }
        Stored::Bcrypt { cost, salt, hash } => {
            // OpenBSD's key: the password with its terminating NUL, at most 72 bytes.
            let mut key = Vec::with_capacity(candidate.len() + 1);
            key.extend_from_slice(candidate);
            key.push(0);
            key.truncate(72);
            let out = bcrypt::bcrypt(*cost, *salt, &key);
            eq(out.get(..23).unwrap_or(&[]), hash)
        }
        Stored::Argon2 {
            variant,
            memory_kib,
            passes,
            lanes,
            salt,
            hash,
        } => {
            let alg = match variant {
                Argon2Variant::I => argon2::Algorithm::Argon2i,
                Argon2Variant::Id => argon2::Algorithm::Argon2id,
            };
            let params = argon2::Params::new(*memory_kib, *passes, *lanes, Some(hash.len()))
                .map_err(|_| VerifyError("Argon2 parameters refused"))?;
            let a = argon2::Argon2::new(alg, argon2::Version::V0x13, params);
            let mut out = vec![0u8; hash.len()];
            a.hash_password_into(candidate, salt, &mut out)
                .map_err(|_| VerifyError("Argon2 calculation failed"))?;
            eq(&out, hash)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mail::password::scheme::{parse, Field};

    fn stored(v: &str) -> Stored {
        match parse(v.as_bytes()).unwrap() {
            Field::Value(s) => s,
            Field::Locked => panic!("locked"),
        }
    }

    #[test]
    fn candidate_limits() {
        let s = stored("{PLAIN}abc");
        assert!(verify(&s, b"abc").unwrap());
        assert!(!verify(&s, b"abd").unwrap());
        let long = vec![b'a'; MAX_CANDIDATE_BYTES];
        let s = Stored::Plain(long.clone());
        assert!(verify(&s, &long).unwrap(), "256 bytes is within the limit");
        let longer = vec![b'a'; MAX_CANDIDATE_BYTES + 1];
        assert!(!verify(&Stored::Plain(longer.clone()), &longer).unwrap());
        assert!(!verify(&Stored::Plain(b"a\0b".to_vec()), b"a\0b").unwrap());
    }

    #[test]
    fn known_crypt_vectors() {
        // From the glibc test suite (crypt-sha512 / crypt-sha256 / md5).
        let s = stored("$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1");
        assert!(verify(&s, b"Hello world!").unwrap());
        let s =
            stored("$5$rounds=10000$saltstringsaltst$3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA");
        assert!(verify(&s, b"Hello world!").unwrap());
        assert!(!verify(&s, b"Hello world").unwrap());
    }
}
