//! SQL of the file-index baseline (`file_index`, `file_index_roots`): per web root, one row
//! per indexed file with its size, mode, owner, times, inode and content hash. Roots and
//! paths are raw bytes (a path is whatever bytes the filesystem holds); times are
//! nanoseconds since the epoch.

use rusqlite::{params, Connection};

/// One indexed file. `path` is relative to its root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedFile {
    pub path: Vec<u8>,
    pub size: i64,
    pub mode: i64,
    pub uid: i64,
    pub gid: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub dev: i64,
    pub ino: i64,
    pub hash: Vec<u8>,
}

/// What one scan changes in a root's baseline.
#[derive(Debug, Default)]
pub struct BaselineUpdate {
    /// New or changed files (inserted or replaced).
    pub upserts: Vec<IndexedFile>,
    /// Paths no longer there.
    pub removed: Vec<Vec<u8>>,
    /// Files in the root's baseline after the update.
    pub files: i64,
    /// When the scan ran (microseconds).
    pub built: i64,
}

/// Whether `root` has a completed baseline.
pub fn has_baseline(c: &Connection, root: &[u8]) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS(SELECT 1 FROM file_index_roots WHERE root = ?1)",
        params![root],
        |r| r.get(0),
    )
}

/// The baseline of `root`, at most `limit` files.
pub fn load(c: &Connection, root: &[u8], limit: usize) -> rusqlite::Result<Vec<IndexedFile>> {
    let mut st = c.prepare_cached(
        "SELECT path, size, mode, uid, gid, mtime_ns, ctime_ns, dev, ino, hash
         FROM file_index WHERE root = ?1 LIMIT ?2",
    )?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = st.query_map(params![root, limit], |r| {
        Ok(IndexedFile {
            path: r.get(0)?,
            size: r.get(1)?,
            mode: r.get(2)?,
            uid: r.get(3)?,
            gid: r.get(4)?,
            mtime_ns: r.get(5)?,
            ctime_ns: r.get(6)?,
            dev: r.get(7)?,
            ino: r.get(8)?,
            hash: r.get(9)?,
        })
    })?;
    rows.collect()
}

/// Applies one scan's changes to `root`'s baseline and marks the baseline complete.
pub fn apply(c: &Connection, root: &[u8], u: &BaselineUpdate) -> rusqlite::Result<()> {
    {
        let mut up = c.prepare_cached(
            "INSERT OR REPLACE INTO file_index
             (root, path, size, mode, uid, gid, mtime_ns, ctime_ns, dev, ino, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?;
        for f in &u.upserts {
            up.execute(params![
                root, f.path, f.size, f.mode, f.uid, f.gid, f.mtime_ns, f.ctime_ns, f.dev, f.ino,
                f.hash
            ])?;
        }
        let mut del = c.prepare_cached("DELETE FROM file_index WHERE root = ?1 AND path = ?2")?;
        for p in &u.removed {
            del.execute(params![root, p])?;
        }
    }
    c.execute(
        "INSERT OR REPLACE INTO file_index_roots (root, built, files) VALUES (?1, ?2, ?3)",
        params![root, u.built, u.files],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &[u8], hash: u8) -> IndexedFile {
        IndexedFile {
            path: path.to_vec(),
            size: 3,
            mode: 0o644,
            uid: 1000,
            gid: 1000,
            mtime_ns: 1,
            ctime_ns: 2,
            dev: 3,
            ino: 4,
            hash: vec![hash; 32],
        }
    }

    #[test]
    fn baseline_round_trip_with_hostile_bytes() {
        let mut c = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut c).unwrap();
        let root = b"/www/\xff\n".as_slice();
        assert!(!has_baseline(&c, root).unwrap());
        let odd = b"a\xfe\x1b[31m.php".to_vec();
        let u = BaselineUpdate {
            upserts: vec![file(&odd, 1), file(b"b", 2)],
            removed: Vec::new(),
            files: 2,
            built: 10,
        };
        apply(&c, root, &u).unwrap();
        assert!(has_baseline(&c, root).unwrap());
        let mut got = load(&c, root, 10).unwrap();
        got.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(got, vec![file(&odd, 1), file(b"b", 2)]);
        assert_eq!(load(&c, root, 1).unwrap().len(), 1);
        let u = BaselineUpdate {
            upserts: vec![file(b"b", 9)],
            removed: vec![odd],
            files: 1,
            built: 11,
        };
        apply(&c, root, &u).unwrap();
        assert_eq!(load(&c, root, 10).unwrap(), vec![file(b"b", 9)]);
        assert!(load(&c, b"/other", 10).unwrap().is_empty());
    }
}
