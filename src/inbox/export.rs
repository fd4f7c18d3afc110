//! The inbox as an `errbook eval` folder: each paste a person labelled becomes a case,
//! so a team measures errbook on its own failures. Labels come from curators (a group
//! attached to an entry, or drafted as one, is that entry; a group marked not a
//! training failure is `none`) and from users (a fix that worked labels its paste with
//! the entry). Groups nobody decided and feedback that names no entry are left out.

use std::fmt::Write as _;
use std::path::Path;

use super::store::{GroupStatus, Store, StoreError};

/// How many cases were written.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Exported {
    pub from_groups: usize,
    pub from_feedback: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// Writes the labelled pastes of `store` to `dir` (created if missing) with its
/// `manifest.tsv`.
pub async fn export(store: &Store, dir: &Path) -> Result<Exported, ExportError> {
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|source| ExportError::Write {
            path: path.display().to_string(),
            source,
        })
    };
    std::fs::create_dir_all(dir).map_err(|source| ExportError::Write {
        path: dir.display().to_string(),
        source,
    })?;
    let mut manifest = String::from("file\texpected\tkind\tsource\n");
    let mut exported = Exported::default();
    for group in store.groups(false, i64::MAX).await? {
        let expected = match &group.status {
            GroupStatus::Open => continue,
            GroupStatus::NotTraining => "none",
            GroupStatus::Attached(slug) | GroupStatus::Drafted(slug) => slug.as_str(),
        };
        let file = format!("group-{}.txt", group.fingerprint);
        write(&dir.join(&file), &group.sample)?;
        let _ = writeln!(
            manifest,
            "{file}\t{expected}\tlog\tinbox group {} ({}, seen {} times)",
            group.fingerprint,
            group.status.as_str(),
            group.count
        );
        exported.from_groups += 1;
    }
    for feedback in store.pasted_feedback().await? {
        let Some(entry) = feedback.entry.filter(|_| feedback.vote == "yes") else {
            continue;
        };
        let file = format!("feedback-{}.txt", feedback.id);
        write(&dir.join(&file), &feedback.sample)?;
        let _ = writeln!(
            manifest,
            "{file}\t{entry}\tlog\tinbox feedback {} (the fix worked)",
            feedback.id
        );
        exported.from_feedback += 1;
    }
    write(&dir.join("manifest.tsv"), &manifest)?;
    Ok(exported)
}
