//! The inbox: grouping, redaction before storing, and the store itself, run the same
//! way on SQLite and on PostgreSQL (`ERRBOOK_TEST_POSTGRES`, which `.ci/run` starts;
//! under `CI=true` its absence fails the PostgreSQL tests).

mod common;

use std::sync::{Arc, OnceLock};

use errbook::diagnose::{Diagnoser, Diagnosis, Request, Verdict};
use errbook::inbox::export::export;
use errbook::inbox::store::{Location, Write};
use errbook::inbox::{Capture, Feedback, GroupStatus, Store, Vote, fingerprint};
use errbook::kb::Kb;
use errbook::search::SearchIndex;

fn diagnoser() -> &'static Diagnoser {
    static D: OnceLock<Diagnoser> = OnceLock::new();
    D.get_or_init(|| {
        let kb = Kb::load(&common::fixture_dir()).expect("fixture kb is valid");
        Diagnoser::new(Arc::new(SearchIndex::build(Arc::new(kb)).unwrap()))
    })
}

fn diagnose(text: &str) -> Diagnosis {
    diagnoser()
        .answer(&Request::text(Arc::<str>::from(text), None).unwrap())
        .unwrap()
}

/// The same failure, as another job on another host and rank prints it.
fn failure(rank: u32, user: &str, host: &str, step: u32) -> String {
    format!(
        "[rank{rank}]: Traceback (most recent call last):\n\
         [rank{rank}]:   File \"/home/{user}/proj/train.py\", line {}, in <module>\n\
         [rank{rank}]:     main()\n\
         [rank{rank}]:   File \"/home/{user}/proj/train.py\", line 88, in load_shard\n\
         [rank{rank}]:     shard = read(path)\n\
         [rank{rank}]:   File \"/opt/conda/lib/python3.11/site-packages/mylib/io.py\", line 12, in read\n\
         [rank{rank}]:     raise ShardFormatError(msg)\n\
         [rank{rank}]: mylib.io.ShardFormatError: shard /home/{user}/shards/{step:05}.bin on {host} has 7 \
         records, header says {step}\n",
        100 + rank
    )
}

#[test]
fn the_same_failure_from_other_jobs_and_ranks_is_one_group() {
    let a = failure(0, "alice", "gpu-node-01.cluster.local", 31);
    let b = failure(5, "bob", "10.0.3.7", 1024);
    let da = diagnose(&a);
    let db = diagnose(&b);
    assert_ne!(da.verdict, Verdict::Matched, "{:?}", da.verdict);
    assert_eq!(fingerprint(&a, &da), fingerprint(&b, &db));

    let other = a.replace("ShardFormatError", "ShardChecksumError");
    assert_ne!(fingerprint(&other, &diagnose(&other)), fingerprint(&a, &da));
    let elsewhere = a.replace("load_shard", "load_index");
    assert_ne!(
        fingerprint(&elsewhere, &diagnose(&elsewhere)),
        fingerprint(&a, &da),
        "the innermost user frame is part of the group"
    );
}

#[test]
fn a_capture_is_redacted_and_cut_to_the_lines_around_its_root_cause() {
    let mut text = String::new();
    for i in 0..400 {
        text.push_str(&format!(
            "step {i} loss 0.{i:03} HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123456\n"
        ));
    }
    text.push_str(&failure(2, "carol", "node7.cluster.example.com", 99));
    let d = diagnose(&text);
    let c = Capture::of(&text, &d, 1_700_000_000).expect("not answered, so captured");
    assert!(c.sample.contains("ShardFormatError"), "{}", c.sample);
    assert!(c.sample.lines().count() <= 40, "{}", c.sample);
    assert!(
        c.sample.starts_with('…') || !c.sample.contains("step 0 "),
        "{}",
        c.sample
    );
    for secret in [
        "carol",
        "node7.cluster.example.com",
        "hf_abcdefghijklmnopqrstuvwxyz123456",
    ] {
        assert!(!c.sample.contains(secret), "{secret} kept in {}", c.sample);
        assert!(
            !c.root_cause.contains(secret),
            "{secret} kept in {}",
            c.root_cause
        );
    }
    assert!(
        c.root_cause.starts_with("mylib.io.ShardFormatError: shard"),
        "{}",
        c.root_cause
    );
}

#[test]
fn an_answered_paste_is_not_captured() {
    let text = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";
    let d = diagnose(text);
    if d.verdict == Verdict::Matched {
        assert!(Capture::of(text, &d, 0).is_none());
    }
    let question = "how do I pick the number of dataloader workers per GPU";
    let d = diagnose(question);
    let c = Capture::of(question, &d, 0).expect("a question errbook cannot answer is kept");
    assert_eq!(c.sample, question);
}

/// A fresh PostgreSQL database for one test, or `None` (a failure under `CI=true`)
/// without `ERRBOOK_TEST_POSTGRES`.
async fn postgres(name: &str) -> Option<Location> {
    let Ok(base) = std::env::var("ERRBOOK_TEST_POSTGRES") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: ERRBOOK_TEST_POSTGRES must name a PostgreSQL server (see .ci/postgres)"
        );
        eprintln!("skipping the PostgreSQL half: ERRBOOK_TEST_POSTGRES is not set");
        return None;
    };
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&base).await.unwrap();
    let db = format!("errbook_{name}_{}", std::process::id());
    let drop = format!("DROP DATABASE IF EXISTS {db}");
    let create = format!("CREATE DATABASE {db}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(create))
        .execute(&mut conn)
        .await
        .unwrap();
    let (server, _) = base.rsplit_once('/').unwrap();
    Some(Location::Postgres(format!("{server}/{db}")))
}

fn sqlite(dir: &tempfile::TempDir) -> Location {
    Location::Sqlite(dir.path().join("nested/inbox.db"))
}

fn capture(fp: &str, at: i64) -> Write {
    Write::Capture(Capture {
        fingerprint: fp.into(),
        root_cause: format!("RuntimeError: {fp}"),
        verdict: Verdict::NoMatch,
        sample: format!("Traceback\nRuntimeError: {fp}"),
        triage: String::new(),
        closest: vec!["nccl-timeout".into(), "port-in-use".into()],
        at,
    })
}

fn vote(vote: Vote, entry: &str, sample: Option<&str>, at: i64) -> Write {
    Write::Feedback(Feedback {
        vote,
        entry: Some(entry.into()),
        verdict: Some(Verdict::Matched),
        fingerprint: None,
        sample: sample.map(str::to_string),
        comment: None,
        at,
    })
}

/// Everything the server and the CLI do with a store, on `location`.
async fn store_round_trip(location: Location) {
    let store = Store::open(&location).await.unwrap();
    // Opening again runs no migration twice.
    let store_again = Store::open(&location).await.unwrap();
    store_again.close().await;

    store
        .write(&[
            capture("a", 100),
            capture("b", 110),
            capture("a", 120),
            capture("a", 130),
        ])
        .await
        .unwrap();
    store
        .write(&[
            vote(Vote::WrongEntry, "nccl-timeout", None, 140),
            vote(Vote::No, "nccl-timeout", None, 141),
            vote(
                Vote::Yes,
                "port-in-use",
                Some("errno: 98 - Address already in use"),
                142,
            ),
        ])
        .await
        .unwrap();

    // A replica's late batch never moves a group's last sighting back.
    store.write(&[capture("a", 125)]).await.unwrap();
    let groups = store.groups(true, 10).await.unwrap();
    let summary: Vec<(&str, i64, i64, i64)> = groups
        .iter()
        .map(|g| (g.fingerprint.as_str(), g.count, g.first_seen, g.last_seen))
        .collect();
    assert_eq!(summary, [("a", 4, 100, 130), ("b", 1, 110, 110)]);
    assert_eq!(groups[0].closest, ["nccl-timeout", "port-in-use"]);
    assert_eq!(groups[0].status, GroupStatus::Open);

    let votes = store.entry_votes(10).await.unwrap();
    assert_eq!(votes[0].entry, "nccl-timeout");
    assert_eq!((votes[0].yes, votes[0].no, votes[0].wrong_entry), (0, 1, 1));
    assert_eq!((votes[1].entry.as_str(), votes[1].yes), ("port-in-use", 1));

    assert!(
        store
            .set_status("a", &GroupStatus::Attached("port-in-use".into()))
            .await
            .unwrap()
    );
    assert!(
        store
            .set_status("b", &GroupStatus::NotTraining)
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_status("zzz", &GroupStatus::NotTraining)
            .await
            .unwrap()
    );
    assert!(store.groups(true, 10).await.unwrap().is_empty());
    assert_eq!(
        store.group("a").await.unwrap().unwrap().status,
        GroupStatus::Attached("port-in-use".into())
    );

    let dir = tempfile::tempdir().unwrap();
    let exported = export(&store, &dir.path().join("eval")).await.unwrap();
    assert_eq!((exported.from_groups, exported.from_feedback), (2, 1));
    let manifest = std::fs::read_to_string(dir.path().join("eval/manifest.tsv")).unwrap();
    assert!(
        manifest.starts_with("file\texpected\tkind\tsource\n"),
        "{manifest}"
    );
    assert!(
        manifest.contains("group-a.txt\tport-in-use\tlog\t"),
        "{manifest}"
    );
    assert!(manifest.contains("group-b.txt\tnone\tlog\t"), "{manifest}");
    assert!(
        manifest.contains("\tport-in-use\tlog\tinbox feedback "),
        "{manifest}"
    );

    // Kept as long as they were seen within the retention: `a` was seen at 130.
    let purged = store.purge(125).await.unwrap();
    assert_eq!((purged.groups, purged.feedback), (1, 0));
    assert_eq!(store.counts().await.unwrap(), (1, 3));
    let purged = store.purge(1_000).await.unwrap();
    assert_eq!((purged.groups, purged.feedback), (1, 3));
    assert_eq!(store.integrity().await.unwrap(), "ok");
    store.close().await;
}

#[tokio::test]
async fn the_store_round_trips_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    store_round_trip(sqlite(&dir)).await;
}

#[tokio::test]
async fn the_store_round_trips_on_postgres() {
    if let Some(location) = postgres("round_trip").await {
        store_round_trip(location).await;
    }
}

#[tokio::test]
async fn a_store_that_cannot_open_says_where_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "not a folder").unwrap();
    let err = Store::open(&Location::Sqlite(file.join("inbox.db")))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("file"), "{err}");
    let err = Store::open(&Location::Postgres(
        "postgres://nobody@127.0.0.1:1/x".into(),
    ))
    .await
    .unwrap_err();
    assert!(err.to_string().starts_with("the store"), "{err}");
}

// ---------------------------------------------------------------------------------
// The server: capture, feedback, the curator's inbox

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request as HttpRequest, StatusCode, header};
use errbook::inbox::{Inbox, InboxOptions, StoreState};
use errbook::web::curator::Curator;
use errbook::{AppState, app};
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "curator-token-for-tests-0123";
const OOM: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";

/// A server over the fixture entries with an inbox at `location`.
struct Served {
    router: axum::Router,
    inbox: Inbox,
    _dir: Option<tempfile::TempDir>,
}

fn served_with(location: Location, capture: bool, dir: Option<tempfile::TempDir>) -> Served {
    let kb = Kb::load(&common::fixture_dir()).unwrap();
    let inbox = Inbox::start(InboxOptions {
        location,
        capture,
        retention_days: 90,
    });
    let mut state =
        AppState::new(SearchIndex::build(Arc::new(kb)).unwrap()).with_inbox(inbox.clone());
    state.curator = Some(Arc::new(Curator::new(TOKEN, false).unwrap()));
    Served {
        router: app(state),
        inbox,
        _dir: dir,
    }
}

fn served(capture: bool) -> Served {
    let dir = tempfile::tempdir().unwrap();
    served_with(sqlite(&dir), capture, Some(dir))
}

impl Served {
    async fn send(&self, request: HttpRequest<Body>) -> common::Reply {
        common::reply_of(self.router.clone().oneshot(request).await.unwrap()).await
    }

    async fn get(&self, uri: &str, cookie: &str) -> common::Reply {
        self.send(
            HttpRequest::get(uri)
                .header(header::COOKIE, cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await
    }

    async fn form(&self, uri: &str, body: &str, cookie: &str) -> common::Reply {
        self.send(
            HttpRequest::post(uri)
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .header(header::COOKIE, cookie)
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await
    }

    async fn json(&self, uri: &str, body: Value) -> common::Reply {
        self.send(
            HttpRequest::post(uri)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "application/json, text/event-stream")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await
    }

    /// Waits until the store has taken `writes` writes in all.
    async fn written(&self, writes: u64) -> Arc<Store> {
        for _ in 0..500 {
            let health = self.inbox.health();
            if health.state == StoreState::Ok && health.written >= writes && health.queued == 0 {
                return self.inbox.store().unwrap();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the store took {:?}", self.inbox.health());
    }
}

fn unknown_failure(rank: u32) -> String {
    failure(rank, "dave", "10.1.1.9", 7)
}

#[tokio::test]
async fn capture_is_off_unless_asked_and_the_portal_says_when_it_is_on() {
    let off = served(false);
    assert!(!off.get("/", "").await.body.contains("capture-notice"));
    let page = off
        .form(
            "/diagnose",
            &format!("text={}", common::encode(&unknown_failure(1))),
            "",
        )
        .await;
    assert_eq!(page.status, StatusCode::OK);
    let store = off.written(0).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(store.counts().await.unwrap(), (0, 0));
    assert_eq!(off.inbox.health().written, 0);

    let on = served(true);
    let home = on.get("/", "").await.body;
    assert!(home.contains("id=\"capture-notice\""), "{home}");
    assert!(home.contains("90 days"), "{home}");
    let zh = on.get("/", "errbook_lang=zh-CN").await.body;
    assert!(zh.contains("已开启收集"), "{zh}");
}

#[tokio::test]
async fn pastes_errbook_cannot_answer_are_grouped_from_page_api_and_mcp() {
    let s = served(true);
    let page = s
        .form(
            "/diagnose",
            &format!("text={}", common::encode(&unknown_failure(1))),
            "",
        )
        .await;
    assert_eq!(page.status, StatusCode::OK);
    let api = s
        .json("/api/v1/diagnose", json!({ "text": unknown_failure(6) }))
        .await;
    assert_eq!(api.status, StatusCode::OK, "{}", api.body);
    let mcp = s
        .json(
            "/mcp",
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": { "name": "diagnose", "arguments": { "text": unknown_failure(3) } } }),
        )
        .await;
    assert_eq!(mcp.status, StatusCode::OK, "{}", mcp.body);
    // Answered: not kept.
    s.json("/api/v1/diagnose", json!({ "text": OOM })).await;
    let store = s.written(3).await;
    let groups = store.groups(true, 10).await.unwrap();
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0].count, 3);
    assert!(
        groups[0]
            .root_cause
            .starts_with("mylib.io.ShardFormatError")
    );
    assert!(!groups[0].sample.contains("dave") && !groups[0].sample.contains("10.1.1.9"));
    // A share link opened again is not a failure seen again.
    let share = page
        .body
        .split("id=\"share-link\" class=\"share-link\" href=\"")
        .nth(1)
        .unwrap();
    let share = share.split('"').next().unwrap().replace("&amp;", "&");
    assert_eq!(s.get(&share, "").await.status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(store.groups(true, 10).await.unwrap()[0].count, 3);
}

#[tokio::test]
async fn every_answer_page_asks_whether_the_fix_worked_without_script() {
    let s = served(true);
    let page = s
        .form("/diagnose", &format!("text={}", common::encode(OOM)), "")
        .await;
    assert!(
        page.body
            .contains("<form class=\"feedback-form\" action=\"/feedback\" method=\"post\">")
    );
    for vote in ["yes", "no", "wrong_entry"] {
        assert!(
            page.body
                .contains(&format!("name=\"vote\" value=\"{vote}\"")),
            "{vote}"
        );
    }
    let packed = page.body.split("name=\"p\" value=\"").nth(1).unwrap();
    let packed = packed.split('"').next().unwrap();
    let thanks = s
        .form(
            "/feedback",
            &format!("vote=no&entry=cuda-oom&p={}", common::encode(packed)),
            "",
        )
        .await;
    assert_eq!(thanks.status, StatusCode::OK, "{}", thanks.body);
    assert!(
        thanks.body.contains("your answer is recorded"),
        "{}",
        thanks.body
    );
    assert!(
        thanks.body.contains("redacted"),
        "capture is on: the paste is kept"
    );
    let zh = s
        .form("/feedback", "vote=yes&entry=cuda-oom", "errbook_lang=zh-CN")
        .await;
    assert!(zh.body.contains("已记录"), "{}", zh.body);
    let bad = s.form("/feedback", "vote=maybe&entry=cuda-oom", "").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    let store = s.written(2).await;
    let votes = store.entry_votes(10).await.unwrap();
    assert_eq!(votes.len(), 1);
    assert_eq!(
        (votes[0].entry.as_str(), votes[0].yes, votes[0].no),
        ("cuda-oom", 1, 1)
    );
    let pasted = store.pasted_feedback().await.unwrap();
    assert_eq!(pasted.len(), 1);
    assert!(
        pasted[0].sample.contains("CUDA out of memory"),
        "{}",
        pasted[0].sample
    );
}

#[tokio::test]
async fn feedback_arrives_by_api_and_mcp() {
    let s = served(false);
    let ok = s
        .json("/api/v1/feedback", json!({ "vote": "wrong_entry", "entry": "cuda-oom", "text": OOM, "comment": "it was the dataloader" }))
        .await;
    assert_eq!(ok.status, StatusCode::ACCEPTED, "{}", ok.body);
    assert_eq!(ok.json(), json!({ "recorded": true, "kept_paste": false }));
    let unknown = s
        .json(
            "/api/v1/feedback",
            json!({ "vote": "yes", "entry": "no-such-entry" }),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.body);
    assert!(
        unknown.body.contains("no entry `no-such-entry`"),
        "{}",
        unknown.body
    );
    for (body, needle) in [
        (json!({ "vote": "maybe", "entry": "cuda-oom" }), "`vote`"),
        (json!({ "vote": "yes", "entry": " " }), "`entry` is empty"),
        (
            json!({ "vote": "yes", "entry": "cuda-oom", "text": "  " }),
            "empty",
        ),
    ] {
        let refused = s.json("/api/v1/feedback", body).await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            refused.body
        );
        assert!(refused.body.contains(needle), "{needle}: {}", refused.body);
    }
    let missing = s
        .json("/api/v1/feedback", json!({ "entry": "cuda-oom" }))
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{}", missing.body);

    let tools = s
        .json(
            "/mcp",
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }),
        )
        .await
        .json();
    let tool = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "feedback")
        .cloned()
        .unwrap();
    assert_eq!(tool["annotations"]["readOnlyHint"], false);
    let called = s
        .json(
            "/mcp",
            json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": { "name": "feedback", "arguments": { "vote": "yes", "entry": "cuda-oom" } } }),
        )
        .await
        .json();
    assert_eq!(
        called["result"]["structuredContent"]["recorded"], true,
        "{called}"
    );
    let wrong = s
        .json(
            "/mcp",
            json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": { "name": "feedback", "arguments": { "vote": "yes", "entry": "nope" } } }),
        )
        .await
        .json();
    assert_eq!(wrong["result"]["isError"], true, "{wrong}");

    let store = s.written(2).await;
    let votes = store.entry_votes(10).await.unwrap();
    assert_eq!((votes[0].yes, votes[0].wrong_entry), (1, 1));

    // A server without a store keeps no feedback, and says so.
    let kb = Kb::load(&common::fixture_dir()).unwrap();
    let bare = app(AppState::new(SearchIndex::build(Arc::new(kb)).unwrap()));
    let reply = common::reply_of(
        bare.oneshot(
            HttpRequest::post("/api/v1/feedback")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(
                    json!({ "vote": "yes", "entry": "cuda-oom" }).to_string(),
                ))
                .unwrap(),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
}

fn set_cookies(reply: &common::Reply) -> Vec<String> {
    reply
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

fn cookie_value(set_cookie: &[String], name: &str) -> String {
    let line = set_cookie
        .iter()
        .find(|c| c.starts_with(&format!("{name}=")))
        .unwrap();
    assert!(
        line.contains("HttpOnly")
            && line.contains("SameSite=Strict")
            && line.contains("Path=/inbox"),
        "{line}"
    );
    line.split(';').next().unwrap().to_string()
}

fn hidden(body: &str, name: &str) -> String {
    let at = body
        .split(&format!("name=\"{name}\" value=\""))
        .nth(1)
        .unwrap_or_else(|| panic!("no {name} in {body}"));
    at.split('"').next().unwrap().to_string()
}

/// The login form: its cookie and its CSRF token.
async fn login_form(s: &Served) -> (String, String) {
    let form = s.get("/inbox/login", "").await;
    assert_eq!(form.status, StatusCode::OK);
    assert_eq!(form.headers[header::CACHE_CONTROL], "no-store");
    let login = cookie_value(&set_cookies(&form), "errbook_login");
    (login, hidden(&form.body, "csrf"))
}

/// Signs in with the right token: the session cookie.
async fn session(s: &Served) -> String {
    let (login, csrf) = login_form(s).await;
    let signed = s
        .form(
            "/inbox/login",
            &format!("csrf={csrf}&token={}", common::encode(TOKEN)),
            &login,
        )
        .await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
    cookie_value(&set_cookies(&signed), "errbook_curator")
}

/// Signs in as the curator: the session cookie and the pages' CSRF token.
async fn sign_in(s: &Served) -> (String, String) {
    let session = session(s).await;
    let inbox = s.get("/inbox", &session).await;
    assert_eq!(inbox.status, StatusCode::OK, "{}", inbox.body);
    let csrf = hidden(&inbox.body, "csrf");
    (session, csrf)
}

#[tokio::test]
async fn the_inbox_is_the_curators_alone() {
    let s = served(true);
    s.json("/api/v1/diagnose", json!({ "text": unknown_failure(1) }))
        .await;
    let store = s.written(1).await;
    let fp = store.groups(true, 1).await.unwrap()[0].fingerprint.clone();

    // Nothing of it without a session.
    for uri in ["/inbox", &format!("/inbox/groups/{fp}")] {
        let out = s.get(uri, "").await;
        assert_eq!(out.status, StatusCode::SEE_OTHER, "{uri}");
        assert_eq!(out.headers[header::LOCATION], "/inbox/login");
        assert!(!out.body.contains("ShardFormatError"));
    }
    let forged = s.get("/inbox", "errbook_curator=99999999999.abcdef").await;
    assert_eq!(forged.status, StatusCode::SEE_OTHER);
    let dismiss = s
        .form(&format!("/inbox/groups/{fp}/dismiss"), "csrf=x", "")
        .await;
    assert_eq!(dismiss.status, StatusCode::SEE_OTHER);

    // A login form needs its own cookie, and the right token.
    let (login, csrf) = login_form(&s).await;
    let no_cookie = s
        .form(
            "/inbox/login",
            &format!("csrf={csrf}&token={}", common::encode(TOKEN)),
            "",
        )
        .await;
    assert_eq!(no_cookie.status, StatusCode::FORBIDDEN);
    let wrong = s
        .form(
            "/inbox/login",
            &format!("csrf={csrf}&token=not-the-token-at-all"),
            &login,
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(
        set_cookies(&wrong)
            .iter()
            .all(|c| !c.starts_with("errbook_curator="))
    );

    let (session, csrf) = sign_in(&s).await;
    let inbox = s.get("/inbox", &session).await;
    assert!(inbox.body.contains("ShardFormatError"), "{}", inbox.body);
    assert!(inbox.body.contains(&format!("/inbox/groups/{fp}")));
    let zh = s
        .get("/inbox", &format!("{session}; errbook_lang=zh-CN"))
        .await;
    assert!(
        zh.body.contains("维护者收件箱") && zh.body.contains("已开启收集"),
        "{}",
        zh.body
    );

    // Every form needs the session's CSRF token.
    let no_csrf = s
        .form(&format!("/inbox/groups/{fp}/dismiss"), "", &session)
        .await;
    assert_eq!(no_csrf.status, StatusCode::FORBIDDEN);
    let other = s
        .form(
            &format!("/inbox/groups/{fp}/dismiss"),
            "csrf=00ff",
            &session,
        )
        .await;
    assert_eq!(other.status, StatusCode::FORBIDDEN);
    assert_eq!(
        store.group(&fp).await.unwrap().unwrap().status,
        GroupStatus::Open
    );

    let group = s.get(&format!("/inbox/groups/{fp}"), &session).await;
    assert_eq!(group.status, StatusCode::OK);
    assert!(group.body.contains("Sample (redacted)") && !group.body.contains("dave"));

    let drafted = s
        .form(
            &format!("/inbox/groups/{fp}/draft"),
            &format!("csrf={csrf}"),
            &session,
        )
        .await;
    assert_eq!(drafted.status, StatusCode::OK, "{}", drafted.body);
    assert!(
        drafted.body.contains("TODO(draft)") && drafted.body.contains(".zh.md"),
        "{}",
        drafted.body
    );
    assert!(matches!(
        store.group(&fp).await.unwrap().unwrap().status,
        GroupStatus::Drafted(_)
    ));

    let attached = s
        .form(
            &format!("/inbox/groups/{fp}/attach"),
            &format!("csrf={csrf}&entry=launcher-wrapper"),
            &session,
        )
        .await;
    assert_eq!(attached.status, StatusCode::OK, "{}", attached.body);
    assert!(attached.body.contains("{regex: "), "{}", attached.body);
    assert_eq!(
        store.group(&fp).await.unwrap().unwrap().status,
        GroupStatus::Attached("launcher-wrapper".into())
    );
    let unknown = s
        .form(
            &format!("/inbox/groups/{fp}/attach"),
            &format!("csrf={csrf}&entry=ghost"),
            &session,
        )
        .await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);

    let dismissed = s
        .form(
            &format!("/inbox/groups/{fp}/dismiss"),
            &format!("csrf={csrf}"),
            &session,
        )
        .await;
    assert_eq!(dismissed.status, StatusCode::SEE_OTHER);
    assert_eq!(
        store.group(&fp).await.unwrap().unwrap().status,
        GroupStatus::NotTraining
    );

    let out = s
        .form("/inbox/logout", &format!("csrf={csrf}"), &session)
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(
        set_cookies(&out)
            .iter()
            .any(|c| c.starts_with("errbook_curator=;") && c.contains("Max-Age=0"))
    );
}

#[tokio::test]
async fn wrong_tokens_are_limited() {
    let s = served(false);
    let (login, csrf) = login_form(&s).await;
    for _ in 0..5 {
        let wrong = s
            .form(
                "/inbox/login",
                &format!("csrf={csrf}&token=guess-guess-guess-guess"),
                &login,
            )
            .await;
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    }
    let limited = s
        .form(
            "/inbox/login",
            &format!("csrf={csrf}&token={}", common::encode(TOKEN)),
            &login,
        )
        .await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(limited.headers.contains_key(header::RETRY_AFTER));
}

#[tokio::test]
async fn without_a_curator_token_the_inbox_is_off() {
    let kb = Kb::load(&common::fixture_dir()).unwrap();
    let router = app(AppState::new(SearchIndex::build(Arc::new(kb)).unwrap()));
    for uri in ["/inbox", "/inbox/login"] {
        let reply = common::reply_of(
            router
                .clone()
                .oneshot(HttpRequest::get(uri).body(Body::empty()).unwrap())
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{uri}");
        assert!(reply.body.contains("--curator-token"), "{}", reply.body);
    }
}

/// A store that can never open (its folder is a file), in a folder kept as long as
/// the returned guard.
fn store_that_cannot_open() -> (Location, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    (Location::Sqlite(file.join("inbox.db")), dir)
}

#[tokio::test]
async fn answers_go_on_while_the_store_is_down() {
    let (location, dir) = store_that_cannot_open();
    let s = served_with(location, true, Some(dir));
    for rank in 0..3 {
        let answer = s
            .json("/api/v1/diagnose", json!({ "text": unknown_failure(rank) }))
            .await;
        assert_eq!(answer.status, StatusCode::OK);
    }
    let feedback = s
        .json(
            "/api/v1/feedback",
            json!({ "vote": "yes", "entry": "cuda-oom" }),
        )
        .await;
    assert_eq!(feedback.status, StatusCode::ACCEPTED);
    for _ in 0..100 {
        if s.inbox.health().state == StoreState::Failing {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let health = s.get("/healthz", "").await.json();
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["store"]["state"], "failing", "{health}");
    assert!(
        health["store"]["error"]
            .as_str()
            .unwrap()
            .contains("a-file"),
        "{health}"
    );
    let metrics = s.get("/metrics", "").await.body;
    assert!(
        metrics.contains("errbook_store_up{backend=\"sqlite\"} 0"),
        "{metrics}"
    );
    // The inbox says why it cannot show anything.
    let session = session(&s).await;
    let inbox = s.get("/inbox", &session).await;
    assert_eq!(inbox.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(inbox.body.contains("not open"), "{}", inbox.body);
}

#[tokio::test]
async fn a_full_queue_drops_writes_and_counts_them() {
    // The store never opens, so nothing leaves a queue of two.
    let (location, _dir) = store_that_cannot_open();
    let inbox = Inbox::with_queue(
        InboxOptions {
            location,
            capture: true,
            retention_days: 1,
        },
        2,
    );
    let feedback = || {
        Write::Feedback(Feedback {
            vote: Vote::Yes,
            entry: None,
            verdict: None,
            fingerprint: None,
            sample: None,
            comment: None,
            at: 0,
        })
    };
    assert!(inbox.keep(feedback()));
    assert!(inbox.keep(feedback()));
    assert!(!inbox.keep(feedback()));
    let health = inbox.health();
    assert_eq!((health.queued, health.dropped), (2, 1));
}

/// One `POST /api/v1/diagnose` over a fresh connection; `false` when the server is gone.
#[cfg(unix)]
fn post_blocking(addr: &str, text: &str) -> bool {
    use std::io::{Read, Write as _};
    let body = json!({ "text": text }).to_string();
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let request = format!(
        "POST /api/v1/diagnose HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut reply = String::new();
    stream.read_to_string(&mut reply).is_ok() && reply.starts_with("HTTP/1.1 200")
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_under_load_leaves_a_sound_store() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inbox.db");
    let store_arg = db.to_str().unwrap().to_string();
    let server = common::server::Server::start(
        &common::fixture_dir(),
        &["--capture", "--store", &store_arg],
    );
    let answered = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let addr = server.addr.clone();
            let answered = answered.clone();
            std::thread::spawn(move || {
                for i in 0..400 {
                    let text = unknown_failure(1)
                        .replace("ShardFormatError", &format!("Shard{t}x{i}Error"));
                    if !post_blocking(&addr, &text) {
                        return;
                    }
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    while answered.load(Ordering::Relaxed) < 300 {
        std::thread::sleep(Duration::from_millis(5));
    }
    server.signal(libc::SIGKILL);
    for thread in threads {
        thread.join().unwrap();
    }
    let sent = answered.load(Ordering::Relaxed) as i64;
    drop(server);

    let store = Store::open(&Location::Sqlite(db.clone())).await.unwrap();
    assert_eq!(store.integrity().await.unwrap(), "ok");
    let (groups, _) = store.counts().await.unwrap();
    assert!(
        groups > 0 && groups <= sent,
        "{groups} groups of {sent} pastes"
    );
    store.close().await;

    // The next server goes on with the same file.
    let server = common::server::Server::start(
        &common::fixture_dir(),
        &["--capture", "--store", &store_arg],
    );
    assert!(post_blocking(
        &server.addr,
        &unknown_failure(2).replace("ShardFormatError", "AfterRestartError")
    ));
    let store = Store::open(&Location::Sqlite(db)).await.unwrap();
    let mut after = groups;
    for _ in 0..500 {
        after = store.counts().await.unwrap().0;
        if after > groups {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(after, groups + 1);
}

/// `errbook inbox ...` on `store`, with the fixture entries.
fn inbox_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_errbook"))
        .args(args)
        .env("ERRBOOK_NO_BUILTIN", "1")
        .env("ERRBOOK_KB", common::fixture_dir())
        .env(
            "ERRBOOK_INDEX_CACHE",
            std::env::temp_dir().join("errbook-tests-index-cache"),
        )
        .output()
        .unwrap()
}

#[tokio::test]
async fn the_inbox_becomes_an_eval_folder_from_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inbox.db");
    let store = Store::open(&Location::Sqlite(db.clone())).await.unwrap();
    let now = errbook::web::unix_now();
    let text = unknown_failure(4);
    let d = diagnose(&text);
    let mut known = Capture::of(&text, &d, now).unwrap();
    known.fingerprint = "known".into();
    let mut noise = known.clone();
    noise.fingerprint = "noise".into();
    noise.sample = "pip install errbook\nERROR: No matching distribution found for errbook".into();
    let old = Capture {
        fingerprint: "old".into(),
        at: now - 200 * 86_400,
        ..known.clone()
    };
    store
        .write(&[
            Write::Capture(known),
            Write::Capture(noise),
            Write::Capture(old),
            vote(Vote::Yes, "cuda-oom", Some(OOM), now),
        ])
        .await
        .unwrap();
    store
        .set_status("known", &GroupStatus::Attached("launcher-wrapper".into()))
        .await
        .unwrap();
    store
        .set_status("noise", &GroupStatus::NotTraining)
        .await
        .unwrap();
    store.close().await;
    let db = db.to_str().unwrap();

    let listed = inbox_cli(&["inbox", "list", "--all", "--store", db]);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains("attached launcher-wrapper") && listed.contains("not_training"),
        "{listed}"
    );

    let eval_dir = dir.path().join("team-eval");
    let exported = inbox_cli(&["inbox", "export", eval_dir.to_str().unwrap(), "--store", db]);
    assert!(
        exported.status.success(),
        "{}",
        String::from_utf8_lossy(&exported.stderr)
    );
    let said = String::from_utf8_lossy(&exported.stdout).into_owned();
    assert!(
        said.starts_with("3 cases (2 from curators' decisions, 1 from feedback)"),
        "{said}"
    );

    let eval = inbox_cli(&["eval", eval_dir.to_str().unwrap()]);
    let scored = String::from_utf8_lossy(&eval.stdout).into_owned();
    assert!(
        scored.contains("3 cases from"),
        "{scored}{}",
        String::from_utf8_lossy(&eval.stderr)
    );

    let purged = inbox_cli(&["inbox", "purge", "--store", db, "--retention-days", "90"]);
    let said = String::from_utf8_lossy(&purged.stdout).into_owned();
    assert!(
        said.starts_with("purged 1 groups and 0 feedback older than 90 days"),
        "{said}"
    );

    let wrong = inbox_cli(&["inbox", "list", "--store", "mysql://db/x"]);
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("--store: unknown store `mysql://`"));
}
