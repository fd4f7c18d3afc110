//! Built indexes kept on disk between runs, so that a restart (or the next
//! `errbook diagnose`) opens them rather than analysing every entry again.
//!
//! Layout: `<root>/<key>/{main,quoting,describing}/` and `<root>/<key>/complete`. The key
//! hashes the kb's files (paths and contents) and the errbook binary itself, so an edited
//! entry, an added file or a rebuilt errbook never opens indexes made for something else.
//! A store is written in `<root>/.writing-<pid>-<n>/` and renamed into place whole: a
//! reader never sees half an index, and two processes storing the same kb at once both
//! end up with a complete one.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tantivy::Index;

use super::{CreateIndex, SearchError, Written};
use crate::kb::Kb;

/// Written last: a folder without it is not a store.
const COMPLETE: &str = "complete";
/// Prefix of the folders stores are written in.
const WRITING: &str = ".writing-";
/// Stores kept (the most recently used): the current kb's and a few earlier ones, so
/// that reverting an edit or switching between two kbs opens rather than builds.
const KEEP: usize = 4;
/// A writing folder this old was left by a process that died while writing.
const ABANDONED: Duration = Duration::from_secs(3600);

/// A folder of stored indexes.
#[derive(Clone, Debug)]
pub struct IndexStore {
    root: PathBuf,
}

impl IndexStore {
    pub fn new(root: impl Into<PathBuf>) -> IndexStore {
        IndexStore { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The name of `kb`'s store, or `None` when it cannot be named safely: entries not
    /// read from files, or a binary that cannot be identified.
    pub fn key(&self, kb: &Kb) -> Option<String> {
        let files = kb.fingerprint()?;
        let binary = binary_identity()?;
        let mut key = Vec::with_capacity(32);
        key.extend_from_slice(&files.to_le_bytes());
        key.extend_from_slice(&binary.to_le_bytes());
        Some(format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&key)))
    }

    /// The indexes stored under `key`, if a complete store is there and opens. A store
    /// that does not open is removed.
    pub fn open(&self, key: &str) -> Option<Written> {
        let dir = self.root.join(key);
        let marker = dir.join(COMPLETE);
        if !marker.is_file() {
            return None;
        }
        // Marks the store as used, for `prune`.
        let _ = fs::File::options()
            .write(true)
            .open(&marker)
            .and_then(|file| file.set_modified(SystemTime::now()));
        match Written::open_in(&dir) {
            Ok(written) => Some(written),
            Err(err) => {
                tracing::warn!(store = %dir.display(), "removing stored indexes that do not open: {err}");
                self.discard(key);
                None
            }
        }
    }

    /// Removes the store under `key`.
    pub fn discard(&self, key: &str) {
        let _ = fs::remove_dir_all(self.root.join(key));
    }

    /// Stores under `key` the indexes `write` writes (into the indexes it is given to
    /// create), then forgets the least recently used stores beyond `KEEP`.
    pub fn write(
        &self,
        key: &str,
        write: impl FnOnce(&CreateIndex<'_>) -> Result<Written, SearchError>,
    ) -> Result<(), SearchError> {
        static WRITES: AtomicU64 = AtomicU64::new(0);
        fs::create_dir_all(&self.root)?;
        let scratch = self.root.join(format!(
            "{WRITING}{}-{}",
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&scratch)?;
        let stored = write_into(&scratch, &self.root.join(key), write);
        if scratch.exists() {
            let _ = fs::remove_dir_all(&scratch);
        }
        self.prune(key);
        stored
    }

    /// Removes writing folders abandoned by dead processes, and every store but `key`
    /// and the `KEEP - 1` most recently used others. A process still serving from a
    /// removed store keeps its open files.
    fn prune(&self, key: &str) {
        let Ok(read) = fs::read_dir(&self.root) else {
            return;
        };
        let now = SystemTime::now();
        let mut stores = Vec::new();
        for item in read.flatten() {
            let name = item.file_name().to_string_lossy().into_owned();
            let path = item.path();
            if name.starts_with(WRITING) {
                let age = fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|modified| now.duration_since(modified).ok());
                if age.is_some_and(|age| age > ABANDONED) {
                    let _ = fs::remove_dir_all(&path);
                }
            } else if name != key && is_key(&name) {
                let used = fs::metadata(path.join(COMPLETE))
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                stores.push((used, path));
            }
        }
        stores.sort_by_key(|store| std::cmp::Reverse(store.0));
        for (_, path) in stores.into_iter().skip(KEEP - 1) {
            let _ = fs::remove_dir_all(path);
        }
    }
}

/// Writes indexes into `scratch`, marks them complete and renames them to `target`.
fn write_into(
    scratch: &Path,
    target: &Path,
    write: impl FnOnce(&CreateIndex<'_>) -> Result<Written, SearchError>,
) -> Result<(), SearchError> {
    let create = |name: &str, schema| {
        let dir = scratch.join(name);
        fs::create_dir(&dir)?;
        Ok(Index::create_in_dir(&dir, schema)?)
    };
    drop(write(&create)?);
    fs::write(scratch.join(COMPLETE), b"")?;
    match fs::rename(scratch, target) {
        Ok(()) => Ok(()),
        // Another process stored the same indexes first.
        Err(_) if target.join(COMPLETE).is_file() => Ok(()),
        Err(err) => Err(SearchError::Io(err)),
    }
}

/// Whether `name` is a store's folder name (so pruning never touches anything else a
/// user keeps in the folder).
fn is_key(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The running binary, identified by its version, size and modification time: indexes
/// depend on how this build analyses text, so another build must not open them.
fn binary_identity() -> Option<u128> {
    static IDENTITY: OnceLock<Option<u128>> = OnceLock::new();
    *IDENTITY.get_or_init(|| {
        let exe = std::env::current_exe().ok()?;
        let meta = fs::metadata(exe).ok()?;
        let modified = meta
            .modified()
            .ok()?
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()?;
        let mut id = Vec::new();
        id.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        id.extend_from_slice(&meta.len().to_le_bytes());
        id.extend_from_slice(&modified.as_nanos().to_le_bytes());
        Some(xxhash_rust::xxh3::xxh3_128(&id))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::search::{SearchIndex, SearchQuery};

    fn real_kb() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("kb")
    }

    /// A copy of the real kb (its area folders too) that a test may edit.
    fn kb_copy() -> tempfile::TempDir {
        fn copy(from: &Path, to: &Path) {
            for item in fs::read_dir(from).unwrap().flatten() {
                let target = to.join(item.file_name());
                if item.path().is_dir() {
                    fs::create_dir(&target).unwrap();
                    copy(&item.path(), &target);
                } else {
                    fs::copy(item.path(), target).unwrap();
                }
            }
        }
        let dir = tempfile::tempdir().unwrap();
        copy(&real_kb(), dir.path());
        dir
    }

    fn load(dir: &Path) -> Arc<Kb> {
        Arc::new(Kb::load(dir).unwrap())
    }

    fn answers(index: &SearchIndex) -> Vec<Vec<(String, String)>> {
        [
            "NCCL watchdog timeout",
            "显存不足",
            "address already in use",
        ]
        .iter()
        .map(|q| {
            index
                .search(&SearchQuery::new(q, None, 5))
                .unwrap()
                .hits
                .iter()
                .map(|hit| {
                    (
                        hit.slug.clone(),
                        format!("{:.4} {}", hit.score, hit.snippet),
                    )
                })
                .collect()
        })
        .collect()
    }

    /// An empty store, the real kb and the key it is stored under.
    fn store_of_real_kb() -> (tempfile::TempDir, IndexStore, Arc<Kb>, String) {
        let root = tempfile::tempdir().unwrap();
        let store = IndexStore::new(root.path());
        let kb = load(&real_kb());
        let key = store.key(&kb).unwrap();
        (root, store, kb, key)
    }

    fn stores(root: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_second_start_opens_the_stored_indexes_and_answers_the_same() {
        let (root, store, kb, key) = store_of_real_kb();
        let in_ram = SearchIndex::build(kb.clone()).unwrap();

        let first = SearchIndex::build_in(kb.clone(), Some(&store)).unwrap();
        assert_eq!(
            stores(root.path()),
            vec![key.clone()],
            "stored once, no scratch left"
        );
        assert!(root.path().join(&key).join(COMPLETE).is_file());
        let second = SearchIndex::build_in(load(&real_kb()), Some(&store)).unwrap();
        assert_eq!(stores(root.path()), vec![key]);

        assert_eq!(answers(&first), answers(&in_ram));
        assert_eq!(answers(&second), answers(&in_ram));
    }

    #[test]
    fn an_edited_entry_gets_indexes_of_its_own() {
        let kb_dir = kb_copy();
        let store = IndexStore::new(tempfile::tempdir().unwrap().keep());
        let before = store.key(&load(kb_dir.path())).unwrap();
        // Reading the same files from another folder names the same store.
        assert_eq!(store.key(&load(&real_kb())).unwrap(), before);

        let file = load(kb_dir.path()).entries()[0].path.clone();
        let text = fs::read_to_string(&file).unwrap();
        fs::write(
            &file,
            text.replacen("## Fix", "## Fix\n\nA new sentence about quokkas.", 1),
        )
        .unwrap();
        let edited = load(kb_dir.path());
        let after = store.key(&edited).unwrap();
        assert_ne!(after, before);

        let index = SearchIndex::build_in(edited, Some(&store)).unwrap();
        let found = index.search(&SearchQuery::new("quokkas", None, 5)).unwrap();
        assert_eq!(found.hits.len(), 1, "the edit is searchable: {found:?}");

        // The same file in another folder is another file.
        fs::create_dir(kb_dir.path().join("moved")).unwrap();
        fs::rename(
            &file,
            kb_dir.path().join("moved").join(file.file_name().unwrap()),
        )
        .unwrap();
        assert_ne!(store.key(&load(kb_dir.path())).unwrap(), after);
    }

    #[test]
    fn a_damaged_store_is_rebuilt_not_trusted() {
        let (root, store, kb, key) = store_of_real_kb();
        let good = answers(&SearchIndex::build_in(kb.clone(), Some(&store)).unwrap());

        // Every file of the main index truncated, as a full disk or a crash could leave it.
        for file in fs::read_dir(root.path().join(&key).join("main"))
            .unwrap()
            .flatten()
        {
            fs::write(file.path(), b"").unwrap();
        }
        let rebuilt = SearchIndex::build_in(kb.clone(), Some(&store)).unwrap();
        assert_eq!(answers(&rebuilt), good);
        // And stored again, whole.
        assert!(store.open(&key).is_some());
        assert_eq!(
            answers(&SearchIndex::build_in(kb, Some(&store)).unwrap()),
            good
        );
    }

    #[test]
    fn an_unusable_folder_means_building_in_ram() {
        let file = tempfile::NamedTempFile::new().unwrap();
        // A folder below a file cannot be created, whoever runs the test.
        let store = IndexStore::new(file.path().join("cache"));
        let kb = load(&real_kb());
        let index = SearchIndex::build_in(kb.clone(), Some(&store)).unwrap();
        assert_eq!(answers(&index), answers(&SearchIndex::build(kb).unwrap()));
    }

    #[test]
    fn only_the_most_recently_used_stores_are_kept() {
        let root = tempfile::tempdir().unwrap();
        let store = IndexStore::new(root.path());
        // Stores of other kbs, used one after the other, and things that are not stores.
        for (i, name) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            let dir = root.path().join(format!("{:0>32}", name));
            fs::create_dir(&dir).unwrap();
            let marker = fs::File::create(dir.join(COMPLETE)).unwrap();
            marker
                .set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 + i as u64))
                .unwrap();
        }
        fs::write(root.path().join("notes.txt"), "mine").unwrap();
        let abandoned = root.path().join(format!("{WRITING}1-0"));
        fs::create_dir(&abandoned).unwrap();
        fs::File::open(&abandoned)
            .unwrap()
            .set_modified(SystemTime::now() - 2 * ABANDONED)
            .unwrap();

        let kb = load(&real_kb());
        let key = store.key(&kb).unwrap();
        SearchIndex::build_in(kb, Some(&store)).unwrap();
        let mut expected = vec![
            format!("{:0>32}", "c"),
            format!("{:0>32}", "d"),
            format!("{:0>32}", "e"),
            key,
            "notes.txt".to_string(),
        ];
        expected.sort();
        assert_eq!(stores(root.path()), expected);
    }
}
