//! The entries shipped with errbook: the repository's `kb/` folder, compiled into the
//! binary so that it answers from any directory with no files beside it.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

#[derive(rust_embed::Embed)]
#[folder = "kb/"]
struct Shipped;

/// The folder the shipped entries were compiled from, as their paths name it: a problem
/// in one of them points at the file an author edits.
pub const ROOT: &str = "kb";

/// Every shipped entry file and Chinese body (READMEs, the authors' guides, left out), as the path it
/// has in the repository, in a stable order.
pub fn files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Shipped::iter()
        .filter(|name| {
            let file = name.rsplit('/').next().unwrap_or(name);
            file.ends_with(".md")
                && !file.eq_ignore_ascii_case("README.md")
                && !name.split('/').any(|part| part.starts_with('.'))
        })
        .map(|name| Path::new(ROOT).join(name.as_ref()))
        .collect();
    files.sort();
    files
}

/// The text of a file `files` returned.
pub fn read(path: &Path) -> std::io::Result<Cow<'static, str>> {
    let missing = || std::io::Error::from(std::io::ErrorKind::NotFound);
    let name = path.strip_prefix(ROOT).map_err(|_| missing())?;
    let file = Shipped::get(&name.to_string_lossy()).ok_or_else(missing)?;
    match file.data {
        Cow::Borrowed(bytes) => std::str::from_utf8(bytes).map(Cow::Borrowed),
        Cow::Owned(bytes) => String::from_utf8(bytes)
            .map(Cow::Owned)
            .map_err(|err| err.utf8_error()),
    }
    .map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidData, err))
}
