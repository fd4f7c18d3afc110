//! `errbook inbox`: the store a server keeps, from the terminal.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use errbook::inbox::export::export;
use errbook::inbox::store::{Location, default_location};
use errbook::inbox::{InboxOptions, Store};

/// Where the inbox is kept, and for how long.
#[derive(clap::Args, Clone)]
pub struct StoreArg {
    /// The inbox's store: a SQLite file, or `postgres://USER@HOST/DB` for servers that
    /// share one [default: $XDG_DATA_HOME/errbook/errbook.db, or
    /// ~/.local/share/errbook/errbook.db].
    #[arg(long = "store", env = "ERRBOOK_STORE", value_name = "PATH|URL")]
    store: Option<String>,
    /// Days a failure group (since it was last seen) and feedback are kept.
    #[arg(long, env = "ERRBOOK_RETENTION_DAYS", default_value_t = 90,
      value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub retention_days: u32,
}

impl StoreArg {
    pub fn location(&self) -> anyhow::Result<Location> {
        match &self.store {
            Some(text) => Location::parse(text).map_err(|m| anyhow::anyhow!("--store: {m}")),
            None => Ok(default_location()),
        }
    }
}

#[derive(clap::Subcommand)]
pub enum InboxCommand {
    /// The groups of failures errbook could not answer, the most often seen first.
    List {
        #[command(flatten)]
        store: StoreArg,
        /// Every group, also those a curator decided.
        #[arg(long)]
        all: bool,
    },
    /// Delete groups last seen, and feedback given, more than --retention-days ago (a
    /// server also does this every hour).
    Purge {
        #[command(flatten)]
        store: StoreArg,
    },
    /// Write the pastes people labelled (curators' decisions, fixes users said worked)
    /// as an `errbook eval` folder: `errbook inbox export team-eval && errbook eval
    /// team-eval`.
    Export {
        /// Folder to write `manifest.tsv` and the pastes into.
        dir: PathBuf,
        #[command(flatten)]
        store: StoreArg,
    },
}

pub fn run(command: InboxCommand) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let store_arg = match &command {
            InboxCommand::List { store, .. }
            | InboxCommand::Purge { store }
            | InboxCommand::Export { store, .. } => store.clone(),
        };
        let location = store_arg.location()?;
        let store = Store::open(&location)
            .await
            .with_context(|| format!("opening the inbox at {}", location.describe()))?;
        let result = match command {
            InboxCommand::List { all, .. } => {
                let groups = store.groups(!all, i64::MAX).await?;
                if groups.is_empty() {
                    say!("no groups in {}", location.describe());
                }
                for g in groups {
                    say!(
                        "{:>6}  {}  {}  {}",
                        g.count,
                        g.fingerprint,
                        match g.status.entry() {
                            Some(slug) => format!("{} {slug}", g.status.as_str()),
                            None => g.status.as_str().to_string(),
                        },
                        g.root_cause
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            InboxCommand::Purge { .. } => {
                let options = InboxOptions {
                    location: location.clone(),
                    capture: false,
                    retention_days: store_arg.retention_days,
                };
                let purged = store
                    .purge(options.cutoff(errbook::web::unix_now()))
                    .await?;
                say!(
                    "purged {} groups and {} feedback older than {} days from {}",
                    purged.groups,
                    purged.feedback,
                    store_arg.retention_days,
                    location.describe()
                );
                Ok(ExitCode::SUCCESS)
            }
            InboxCommand::Export { dir, .. } => {
                let exported = export(&store, &dir).await?;
                say!(
                    "{} cases ({} from curators' decisions, {} from feedback) in {}; \
                     measure with `errbook eval {}`",
                    exported.from_groups + exported.from_feedback,
                    exported.from_groups,
                    exported.from_feedback,
                    dir.display(),
                    dir.display()
                );
                Ok(ExitCode::SUCCESS)
            }
        };
        store.close().await;
        result
    })
}
