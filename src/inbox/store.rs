//! The SQL store: one schema and its migrations (`migrations/`) for SQLite and
//! PostgreSQL, through sqlx's `Any` driver. SQL here is written once for both: `$n`
//! parameters, `BIGINT` and `TEXT` columns, `ON CONFLICT` upserts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};

use super::{Capture, Feedback};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("src/inbox/migrations");

/// Where the store lives: a SQLite file, or a PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Location {
    /// `postgres://…` or `postgresql://…` for PostgreSQL; `sqlite:PATH` or a plain
    /// path for SQLite.
    pub fn parse(text: &str) -> Result<Location, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the store is empty: give a file path or a postgres:// URL".into());
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(Location::Postgres(text.to_string()));
        }
        if let Some((scheme, _)) = text.split_once("://")
            && scheme != "sqlite"
        {
            return Err(format!(
                "unknown store `{scheme}://`: give a file path (SQLite) or a postgres:// URL"
            ));
        }
        let path = text
            .strip_prefix("sqlite://")
            .or_else(|| text.strip_prefix("sqlite:"))
            .unwrap_or(text);
        Ok(Location::Sqlite(PathBuf::from(path)))
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Location::Sqlite(_) => "sqlite",
            Location::Postgres(_) => "postgres",
        }
    }

    /// For logs and `/healthz`: the file, or the URL without its password.
    pub fn describe(&self) -> String {
        match self {
            Location::Sqlite(path) => path.display().to_string(),
            Location::Postgres(url) => without_password(url),
        }
    }

    fn url(&self) -> String {
        match self {
            Location::Sqlite(path) => {
                // sqlx reads the path percent-decoded.
                let mut out = String::from("sqlite://");
                for c in path.to_string_lossy().chars() {
                    match c {
                        '%' | '?' | '#' => out.push_str(&format!("%{:02X}", c as u32)),
                        c => out.push(c),
                    }
                }
                out.push_str("?mode=rwc");
                out
            }
            Location::Postgres(url) => url.clone(),
        }
    }
}

/// `scheme://user:password@host/...` as `scheme://user:***@host/...`.
fn without_password(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let authority_end = url[start..].find('/').map_or(url.len(), |i| start + i);
    let authority = &url[start..authority_end];
    match authority
        .rfind('@')
        .and_then(|at| authority[..at].find(':').map(|colon| (colon, at)))
    {
        Some((colon, at)) => format!(
            "{}{}:***{}",
            &url[..start],
            &authority[..colon],
            &url[start + at..]
        ),
        None => url.to_string(),
    }
}

/// The default store: `errbook.db` in `$XDG_DATA_HOME/errbook` or
/// `~/.local/share/errbook`, else in the working directory.
pub fn default_location() -> Location {
    let home = |var| std::env::var_os(var).filter(|dir| !dir.is_empty());
    let dir = home("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| home("HOME").map(|dir| Path::new(&dir).join(".local/share")))
        .map(|data| data.join("errbook"))
        .unwrap_or_default();
    Location::Sqlite(dir.join("errbook.db"))
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the store's folder {path}: {source}")]
    Folder {
        path: String,
        source: std::io::Error,
    },
    #[error("the store: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("the store's schema: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// One write the queue hands the store.
#[derive(Debug, Clone)]
pub enum Write {
    Capture(Capture),
    Feedback(Feedback),
}

/// What a curator decided about a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupStatus {
    /// Not looked at yet.
    Open,
    /// Not a failure of training (a typo in a command, a question, noise).
    NotTraining,
    /// An existing entry answers it: the group shows a signature that entry lacks.
    Attached(String),
    /// A draft entry with this slug was made from it.
    Drafted(String),
}

impl GroupStatus {
    fn from_row(status: &str, entry: Option<String>) -> GroupStatus {
        match (status, entry) {
            ("not_training", _) => GroupStatus::NotTraining,
            ("attached", Some(slug)) => GroupStatus::Attached(slug),
            ("drafted", Some(slug)) => GroupStatus::Drafted(slug),
            _ => GroupStatus::Open,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            GroupStatus::Open => "open",
            GroupStatus::NotTraining => "not_training",
            GroupStatus::Attached(_) => "attached",
            GroupStatus::Drafted(_) => "drafted",
        }
    }

    pub fn entry(&self) -> Option<&str> {
        match self {
            GroupStatus::Attached(slug) | GroupStatus::Drafted(slug) => Some(slug),
            _ => None,
        }
    }
}

/// One failure, however many times it was seen.
#[derive(Debug, Clone)]
pub struct Group {
    pub fingerprint: String,
    pub root_cause: String,
    pub count: i64,
    pub first_seen: i64,
    pub last_seen: i64,
    /// The latest answer's verdict (`no_match` or `possible`).
    pub verdict: String,
    /// The first paste of the group, redacted.
    pub sample: String,
    pub triage: String,
    pub closest: Vec<String>,
    pub status: GroupStatus,
}

/// What users said of one entry's answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryVotes {
    pub entry: String,
    pub yes: i64,
    pub no: i64,
    pub wrong_entry: i64,
}

/// A stored feedback that kept its paste.
#[derive(Debug, Clone)]
pub struct PastedFeedback {
    pub id: String,
    pub vote: String,
    pub entry: Option<String>,
    pub sample: String,
}

/// What a purge deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub groups: u64,
    pub feedback: u64,
}

#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    location: Location,
}

/// `SELECT` of every column of `failure_groups`, then `$rest`.
macro_rules! select_groups {
    ($rest:literal) => {
        concat!(
            "SELECT fingerprint, root_cause, count, first_seen, last_seen, verdict, sample, \
             triage, closest, status, entry FROM failure_groups ",
            $rest
        )
    };
}

impl Store {
    /// Opens the store at `location`, creating it and bringing its schema up to date.
    pub async fn open(location: &Location) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        if let Location::Sqlite(path) = location
            && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Folder {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let sqlite = matches!(location, Location::Sqlite(_));
        let pool = AnyPoolOptions::new()
            // SQLite takes one writer at a time; more connections only wait.
            .max_connections(if sqlite { 2 } else { 8 })
            .acquire_timeout(Duration::from_secs(5))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if sqlite {
                        // Survives a killed process without losing a committed write.
                        sqlx::query("PRAGMA synchronous = FULL")
                            .execute(&mut *conn)
                            .await?;
                        sqlx::query("PRAGMA busy_timeout = 5000")
                            .execute(&mut *conn)
                            .await?;
                    }
                    Ok(())
                })
            })
            .connect(&location.url())
            .await?;
        if sqlite {
            // Readers (the inbox) never block the writer; kept in the file.
            sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&pool)
                .await?;
        }
        MIGRATIONS.run(&pool).await?;
        Ok(Store {
            pool,
            location: location.clone(),
        })
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Writes `batch` in one transaction: all of it or none. Captures of one group
    /// (a failure every rank of a job reports at once) are counted in one statement.
    pub async fn write(&self, batch: &[Write]) -> Result<(), StoreError> {
        let mut groups: Vec<(&Capture, i64, i64)> = Vec::new();
        for write in batch {
            if let Write::Capture(c) = write {
                match groups
                    .iter_mut()
                    .find(|(g, ..)| g.fingerprint == c.fingerprint)
                {
                    Some((latest, count, first)) => {
                        *count += 1;
                        *first = (*first).min(c.at);
                        if c.at >= latest.at {
                            *latest = c;
                        }
                    }
                    None => groups.push((c, 1, c.at)),
                }
            }
        }
        let mut tx = self.pool.begin().await?;
        for (c, count, first) in groups {
            sqlx::query(
                "INSERT INTO failure_groups (fingerprint, root_cause, count, first_seen, \
                 last_seen, verdict, sample, triage, closest, status) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'open') \
                 ON CONFLICT (fingerprint) DO UPDATE SET \
                 count = failure_groups.count + excluded.count, \
                 last_seen = CASE WHEN excluded.last_seen > failure_groups.last_seen \
                 THEN excluded.last_seen ELSE failure_groups.last_seen END, \
                 verdict = excluded.verdict, closest = excluded.closest",
            )
            .bind(&c.fingerprint)
            .bind(&c.root_cause)
            .bind(count)
            .bind(first)
            .bind(c.at)
            .bind(c.verdict.as_str())
            .bind(&c.sample)
            .bind(&c.triage)
            .bind(c.closest.join(" "))
            .execute(&mut *tx)
            .await?;
        }
        for write in batch {
            match write {
                Write::Capture(_) => {}
                Write::Feedback(f) => {
                    sqlx::query(
                        "INSERT INTO feedback (id, at, vote, entry, verdict, fingerprint, \
                         sample, comment) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    )
                    .bind(new_id())
                    .bind(f.at)
                    .bind(f.vote.as_str())
                    .bind(f.entry.clone())
                    .bind(f.verdict.map(|v| v.as_str().to_string()))
                    .bind(f.fingerprint.clone())
                    .bind(f.sample.clone())
                    .bind(f.comment.clone())
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Deletes groups last seen, and feedback given, before `before` (Unix seconds).
    pub async fn purge(&self, before: i64) -> Result<Purged, StoreError> {
        let mut tx = self.pool.begin().await?;
        let groups = sqlx::query("DELETE FROM failure_groups WHERE last_seen < $1")
            .bind(before)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let feedback = sqlx::query("DELETE FROM feedback WHERE at < $1")
            .bind(before)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(Purged { groups, feedback })
    }

    /// Groups, the most often seen first: open ones, or every one.
    pub async fn groups(&self, open_only: bool, limit: i64) -> Result<Vec<Group>, StoreError> {
        let query = if open_only {
            select_groups!("WHERE status = 'open' ORDER BY count DESC, last_seen DESC LIMIT $1")
        } else {
            select_groups!("ORDER BY count DESC, last_seen DESC LIMIT $1")
        };
        let rows = sqlx::query(query).bind(limit).fetch_all(&self.pool).await?;
        rows.iter().map(group).collect()
    }

    pub async fn group(&self, fingerprint: &str) -> Result<Option<Group>, StoreError> {
        let row = sqlx::query(select_groups!("WHERE fingerprint = $1"))
            .bind(fingerprint)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(group).transpose()
    }

    /// Records a curator's decision; `false` when there is no such group.
    pub async fn set_status(
        &self,
        fingerprint: &str,
        status: &GroupStatus,
    ) -> Result<bool, StoreError> {
        let done =
            sqlx::query("UPDATE failure_groups SET status = $1, entry = $2 WHERE fingerprint = $3")
                .bind(status.as_str())
                .bind(status.entry().map(str::to_string))
                .bind(fingerprint)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Entries by how often users said they did not help, the least helpful first.
    pub async fn entry_votes(&self, limit: i64) -> Result<Vec<EntryVotes>, StoreError> {
        let rows = sqlx::query(
            "SELECT entry, \
             COUNT(CASE WHEN vote = 'yes' THEN 1 END) AS yes, \
             COUNT(CASE WHEN vote = 'no' THEN 1 END) AS no, \
             COUNT(CASE WHEN vote = 'wrong_entry' THEN 1 END) AS wrong_entry \
             FROM feedback WHERE entry IS NOT NULL GROUP BY entry \
             ORDER BY COUNT(CASE WHEN vote <> 'yes' THEN 1 END) DESC, entry LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(EntryVotes {
                    entry: row.try_get("entry")?,
                    yes: row.try_get("yes")?,
                    no: row.try_get("no")?,
                    wrong_entry: row.try_get("wrong_entry")?,
                })
            })
            .collect()
    }

    /// Feedback that kept its paste (given while capture was on), oldest first.
    pub async fn pasted_feedback(&self) -> Result<Vec<PastedFeedback>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, vote, entry, sample FROM feedback WHERE sample IS NOT NULL \
             ORDER BY at, id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(PastedFeedback {
                    id: row.try_get("id")?,
                    vote: row.try_get("vote")?,
                    entry: row.try_get("entry")?,
                    sample: row.try_get("sample")?,
                })
            })
            .collect()
    }

    /// How many groups and feedback the store holds.
    pub async fn counts(&self) -> Result<(i64, i64), StoreError> {
        let groups = sqlx::query("SELECT COUNT(*) AS n FROM failure_groups")
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        let feedback = sqlx::query("SELECT COUNT(*) AS n FROM feedback")
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        Ok((groups, feedback))
    }

    /// SQLite's own check of the file (`ok` when sound); PostgreSQL checks itself.
    pub async fn integrity(&self) -> Result<String, StoreError> {
        match self.location {
            Location::Sqlite(_) => Ok(sqlx::query("PRAGMA integrity_check")
                .fetch_one(&self.pool)
                .await?
                .try_get(0)?),
            Location::Postgres(_) => Ok("ok".into()),
        }
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn group(row: &AnyRow) -> Result<Group, StoreError> {
    let closest: String = row.try_get("closest")?;
    let status: String = row.try_get("status")?;
    Ok(Group {
        fingerprint: row.try_get("fingerprint")?,
        root_cause: row.try_get("root_cause")?,
        count: row.try_get("count")?,
        first_seen: row.try_get("first_seen")?,
        last_seen: row.try_get("last_seen")?,
        verdict: row.try_get("verdict")?,
        sample: row.try_get("sample")?,
        triage: row.try_get("triage")?,
        closest: closest.split_whitespace().map(str::to_string).collect(),
        status: GroupStatus::from_row(&status, row.try_get("entry")?),
    })
}

/// A random key for a row.
fn new_id() -> String {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes).expect("the system's random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_is_a_path_or_a_postgres_url() {
        assert_eq!(
            Location::parse("/data/errbook.db").unwrap(),
            Location::Sqlite("/data/errbook.db".into())
        );
        assert_eq!(
            Location::parse("sqlite:inbox.db").unwrap(),
            Location::Sqlite("inbox.db".into())
        );
        assert!(matches!(
            Location::parse("postgres://u:secret@db/errbook").unwrap(),
            Location::Postgres(_)
        ));
        assert!(
            !Location::parse("postgres://u:secret@db/errbook")
                .unwrap()
                .describe()
                .contains("secret")
        );
        assert!(
            Location::parse("mysql://db/x")
                .unwrap_err()
                .contains("mysql")
        );
        assert!(Location::parse(" ").is_err());
        assert_eq!(
            Location::Sqlite("/tmp/a?b#c%.db".into()).url(),
            "sqlite:///tmp/a%3Fb%23c%25.db?mode=rwc"
        );
    }
}
