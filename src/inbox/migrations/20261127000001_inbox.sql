-- The inbox: failures errbook could not answer, grouped, and what users said of
-- answers. Written for both SQLite and PostgreSQL: only BIGINT and TEXT columns, times
-- as Unix seconds, keys made by errbook.

CREATE TABLE failure_groups (
    fingerprint TEXT PRIMARY KEY,
    root_cause TEXT NOT NULL,
    count BIGINT NOT NULL,
    first_seen BIGINT NOT NULL,
    last_seen BIGINT NOT NULL,
    verdict TEXT NOT NULL,
    sample TEXT NOT NULL,
    triage TEXT NOT NULL,
    -- Slugs of the nearest entries, best first, separated by spaces.
    closest TEXT NOT NULL,
    -- open, not_training, attached or drafted.
    status TEXT NOT NULL,
    -- The entry the group was attached to or drafted as.
    entry TEXT
);
CREATE INDEX failure_groups_by_count ON failure_groups (status, count);
CREATE INDEX failure_groups_by_last_seen ON failure_groups (last_seen);

CREATE TABLE feedback (
    id TEXT PRIMARY KEY,
    at BIGINT NOT NULL,
    -- yes, no or wrong_entry.
    vote TEXT NOT NULL,
    entry TEXT,
    verdict TEXT,
    fingerprint TEXT,
    sample TEXT,
    comment TEXT
);
CREATE INDEX feedback_by_at ON feedback (at);
CREATE INDEX feedback_by_entry ON feedback (entry);
