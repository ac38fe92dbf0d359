//! The profile databases a set of runs shares, and the learned
//! interference model of each ([`ProfileSet`]). Above both `db` (the data)
//! and `ncf` (the model learned from it), so that neither imports the other's
//! cache.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::db::ProfileDb;
use super::ncf::LearnedModel;
use crate::error::{FeatureDisabled, TraceError};

/// The profile databases a set of runs shares (a sweep's, through its
/// artefact set): the builtin one, parsed on first use, and each directory's,
/// read on first use; each database is parsed once for the set, and every run
/// holds the one it reads as an `Arc`. Clones share the set. Owned by whoever
/// runs the runs: nothing here is process-wide.
#[derive(Clone, Default)]
pub struct ProfileSet {
    inner: Arc<ProfileSetInner>,
}

#[derive(Default)]
struct ProfileSetInner {
    builtin: OnceLock<Arc<ProfileDb>>,
    /// By directory (canonical where it resolves); looked up, never iterated.
    dirs: Mutex<std::collections::BTreeMap<PathBuf, Arc<ProfileDb>>>,
    /// The learned interference model of each database asked for, by the
    /// database's `Arc` (held here, so the pointer stays its own); searched
    /// by identity, never iterated for a result.
    #[cfg_attr(not(feature = "learned"), allow(dead_code))]
    learned: Mutex<Vec<(Arc<ProfileDb>, Arc<LearnedModel>)>>,
}

impl fmt::Debug for ProfileSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dirs = self.inner.dirs.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("ProfileSet")
            .field("builtin", &self.inner.builtin.get().is_some())
            .field("dirs", &dirs.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ProfileSet {
    /// The builtin database ([`ProfileDb::builtin`]), parsed on first use.
    pub fn builtin(&self) -> Arc<ProfileDb> {
        self.inner.builtin.get_or_init(|| Arc::new(ProfileDb::builtin())).clone()
    }

    /// The database in `dir` ([`ProfileDb::load_dir`]), read on first use;
    /// later calls for the same directory do not re-read its files. A
    /// directory that fails to load is not kept (the next call tries again).
    ///
    /// # Errors
    /// As [`ProfileDb::load_dir`].
    pub fn dir(&self, dir: &Path) -> Result<Arc<ProfileDb>, TraceError> {
        let key = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        // Held while loading, so that runs starting together parse it once.
        let mut dirs = self.inner.dirs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(db) = dirs.get(&key) {
            return Ok(db.clone());
        }
        let db = Arc::new(ProfileDb::load_dir(dir)?);
        dirs.insert(key, db.clone());
        Ok(db)
    }

    /// The database in `dir`, or the builtin one for `None`.
    ///
    /// # Errors
    /// As [`ProfileDb::load_dir`].
    pub fn get(&self, dir: Option<&Path>) -> Result<Arc<ProfileDb>, TraceError> {
        match dir {
            Some(d) => self.dir(d),
            None => Ok(self.builtin()),
        }
    }

    /// The learned interference model of `db` ([`super::ncf::Ncf::from_db`]),
    /// shared by every run of the set; trained at its first use, once per
    /// process and co-location table ([`LearnedModel`]).
    ///
    /// # Errors
    /// [`FeatureDisabled`] in a build without the `learned` feature.
    pub fn learned_coloc(&self, db: &Arc<ProfileDb>) -> Result<Arc<LearnedModel>, FeatureDisabled> {
        #[cfg(not(feature = "learned"))]
        {
            let _ = db;
            Err(FeatureDisabled::new("the learned interference model", "learned"))
        }
        #[cfg(feature = "learned")]
        {
            let mut learned = self.inner.learned.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, m)) = learned.iter().find(|(d, _)| Arc::ptr_eq(d, db)) {
                return Ok(m.clone());
            }
            let m = Arc::new(LearnedModel::new(db.clone()));
            learned.push((db.clone(), m.clone()));
            Ok(m)
        }
    }

    /// Databases parsed so far (the builtin one counts once).
    pub fn parsed(&self) -> usize {
        usize::from(self.inner.builtin.get().is_some())
            + self.inner.dirs.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_set_reads_each_database_once_and_two_sets_share_nothing() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/profile/data");
        let set = ProfileSet::default();
        assert_eq!(set.parsed(), 0, "nothing is parsed before it is asked for");
        let a = set.dir(&dir).unwrap();
        let b = set.clone().dir(&dir.join(".")).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "the same directory by another spelling, through a clone, is the same database");
        assert_eq!(a.throughput.len(), ProfileDb::builtin().throughput.len());
        assert!(Arc::ptr_eq(&set.builtin(), &set.get(None).unwrap()), "the builtin one is parsed once per set");
        // 1 directory + the builtin one.
        assert_eq!(set.parsed(), 2);
        assert!(set.dir(&dir.join("no-such-dir")).is_err());
        assert_eq!(set.parsed(), 2, "a failed load is not kept");
        let other = ProfileSet::default();
        assert!(!Arc::ptr_eq(&other.builtin(), &set.builtin()), "no database outlives or crosses its set");
        // Dropping the set and its runs' handles frees the databases (no leak).
        let weak = Arc::downgrade(&a);
        drop((a, b, set));
        assert!(weak.upgrade().is_none());
    }
}
