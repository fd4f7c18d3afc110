//! Diagnosis through the HTTP surface: the answer page and `POST /api/v1/diagnose`,
//! over the fixture entries, with the kinds of pastes people really send.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::{Reply, encode, post_form, send};
use serde_json::{Value, json};

async fn post_json(body: &str) -> Reply {
    send(
        Request::post("/api/v1/diagnose")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
    )
    .await
}

async fn diagnose(text: &str) -> Value {
    let reply = post_json(&json!({ "text": text, "limit": 3 }).to_string()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.json()
}

fn top(d: &Value) -> &str {
    d["matches"][0]["slug"].as_str().unwrap_or("no_match")
}

const MULTI_RANK: &str = "\
W1104 09:31:55.123000 139872 torch/distributed/run.py:779] Setting OMP_NUM_THREADS environment variable for each process to be 1
[rank1]: Traceback (most recent call last):
[rank1]:   File \"/work/train.py\", line 88, in <module>
[rank1]:     model = DDP(model, device_ids=[local_rank])
[rank1]: RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, invalid usage, NCCL version 2.10.3
[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
[rank0]: Traceback (most recent call last):
[rank0]:   File \"/work/train.py\", line 88, in <module>
[rank0]:     model = DDP(model, device_ids=[local_rank])
[rank0]: RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, invalid usage, NCCL version 2.10.3
[rank0]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
";

#[tokio::test]
async fn api_answers_with_verdict_matches_evidence_and_what_it_parsed() {
    let d = diagnose(MULTI_RANK).await;
    assert_eq!(d["verdict"], "matched");
    let m = &d["matches"][0];
    assert_eq!(m["slug"], "nccl-invalid-usage");
    assert_eq!(
        m["title"],
        "NCCL invalid usage when the model sits on another GPU"
    );
    assert_eq!(m["url"], "/entries/nccl-invalid-usage");
    assert!(m["summary"].as_str().unwrap().starts_with("DDP was given"));
    assert!(m["score"].as_f64().unwrap() > 0.0);
    assert_eq!(m["confidence"], "high");
    let evidence = m["evidence"].as_array().unwrap();
    assert!(
        evidence.iter().any(|e| e["line"] == 6
            && e["signature"] == "ncclInvalidUsage"
            && e["kind"] == "signature"),
        "evidence points at paste line 6: {evidence:?}"
    );
    let parsed = &d["parsed"];
    assert_eq!(parsed["lines"], 11);
    assert!(
        parsed["distinct_lines"].as_u64().unwrap() < 11,
        "ranks' copies deduplicated"
    );
    assert_eq!(parsed["root_cause"]["type"], "RuntimeError");
    assert!(
        parsed["error_codes"]
            .as_array()
            .unwrap()
            .contains(&json!("ncclInvalidUsage"))
    );
    assert!(
        parsed["versions"]
            .as_array()
            .unwrap()
            .contains(&json!("NCCL 2.10.3"))
    );
}

#[tokio::test]
async fn the_root_cause_beats_the_launcher_wrapper() {
    let paste = "\
[rank2]: RuntimeError: Output 0 of SliceBackward0 is a view and is being modified inplace.
Traceback (most recent call last):
  File \"/opt/conda/bin/torchrun\", line 8, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-19_16:39:58
  host      : node-3
  rank      : 2 (local_rank: 2)
  exitcode  : 1 (pid: 78970)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================";
    let d = diagnose(paste).await;
    assert_eq!(top(&d), "view-inplace", "{d}");
    assert_eq!(d["parsed"]["first_failure"]["rank"], 2);
    assert_eq!(d["parsed"]["root_cause"]["rank"], 2);
}

#[tokio::test]
async fn an_answer_says_whether_the_pasted_release_is_affected() {
    let error = "RuntimeError: Output 0 of SliceBackward0 is a view and is being modified inplace.";
    let d = diagnose(&format!("torch 1.10.2+cu113\n{error}")).await;
    assert_eq!(top(&d), "view-inplace", "{d}");
    let check = &d["matches"][0]["versions"][0];
    assert_eq!(check["found"], "1.10.2");
    assert_eq!(check["affected"], true);
    assert_eq!(
        check["text"],
        "your torch 1.10.2 is affected (==1.10.*); fixed in 1.11.0"
    );

    let d = diagnose(&format!("torch==1.12.1\n{error}")).await;
    assert_eq!(d["matches"][0]["versions"][0]["affected"], false, "{d}");
    let d = diagnose(error).await;
    assert_eq!(
        d["matches"][0]["versions"],
        json!([]),
        "no release, nothing said"
    );
}

#[tokio::test]
async fn a_report_of_only_its_release_and_symptom_finds_the_entry_for_that_release() {
    let d = diagnose("After upgrading to torch 1.10.1 my training script stopped working.").await;
    assert_eq!(top(&d), "view-inplace", "{d}");
    assert_eq!(d["matches"][0]["versions"][0]["affected"], true);
    let d = diagnose("After upgrading to torch 1.13.1 my training script stopped working.").await;
    assert_ne!(
        top(&d),
        "view-inplace",
        "an unaffected release names no entry: {d}"
    );
}

#[tokio::test]
async fn the_launcher_box_alone_gets_the_launcher_entry() {
    let d = diagnose(
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n====\ntrain.py FAILED",
    )
    .await;
    assert_eq!(top(&d), "launcher-wrapper");
}

#[tokio::test]
async fn a_line_wrapped_by_the_terminal_still_matches() {
    let long = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.69 GiB total capacity; 16.12 GiB already allocated; 374.94 MiB free; 19.00 GiB reserved in total by PyTor";
    let paste = format!(
        "{long}\nch) If reserved memory is >> allocated memory try setting max_split_size_mb"
    );
    let d = diagnose(&paste).await;
    assert_eq!(top(&d), "cuda-oom");
    assert_eq!(
        d["parsed"]["distinct_lines"], 1,
        "two screen lines, one message"
    );
}

#[tokio::test]
async fn a_question_in_words_is_answered_from_full_text() {
    let d =
        diagnose("why does GPU 0 use more memory than the other GPUs when I load a checkpoint?")
            .await;
    assert_eq!(
        d["verdict"], "no_match",
        "words alone never name a failure: the entries are leads"
    );
    assert_eq!(top(&d), "gpu0-imbalance");
    let d = diagnose("多卡训练 0 号卡显存不均衡").await;
    assert_eq!(top(&d), "gpu0-imbalance");
}

#[tokio::test]
async fn an_unrelated_error_is_no_match_with_closest_entries() {
    let paste = "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n    render()\ndjango.template.exceptions.TemplateSyntaxError: Invalid block tag on line 7: 'static', expected 'endblock'. Did you forget to register or load this tag?";
    let d = diagnose(paste).await;
    assert_eq!(d["verdict"], "no_match", "{d}");
    assert_eq!(d["matches"].as_array().unwrap().len(), 0);
    assert_eq!(d["parsed"]["root_cause"]["type"], "TemplateSyntaxError");
}

#[tokio::test]
async fn limit_caps_the_matches() {
    let reply = post_json(&json!({ "text": MULTI_RANK, "limit": 1 }).to_string()).await;
    assert_eq!(reply.json()["matches"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_paste_sent_again_gets_the_same_answer_at_its_own_limit() {
    let text = format!("{MULTI_RANK}[rank0]: sent twice\n");
    let ask = |limit: usize| json!({ "text": text, "limit": limit }).to_string();
    let first = post_json(&ask(3)).await.json();
    let one = post_json(&ask(1)).await.json();
    let again = post_json(&ask(3)).await.json();
    assert_eq!(first, again);
    assert!(first["matches"].as_array().unwrap().len() > 1, "{first}");
    assert_eq!(one["matches"].as_array().unwrap().len(), 1);
    assert_eq!(one["matches"][0], first["matches"][0]);
}

#[tokio::test]
async fn bad_requests_are_problem_json() {
    for (body, status, needle) in [
        ("{not json", StatusCode::BAD_REQUEST, ""),
        (r#"{"limit": 3}"#, StatusCode::BAD_REQUEST, "text"),
        (
            r#"{"text": "   "}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "empty",
        ),
        (
            r#"{"text": "x", "limit": 0}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "limit",
        ),
        (
            r#"{"text": "x", "limit": 500}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "limit",
        ),
    ] {
        let reply = post_json(body).await;
        assert_eq!(reply.status, status, "{body}: {}", reply.body);
        assert_eq!(reply.content_type(), "application/problem+json");
        assert!(
            reply.json()["detail"].as_str().unwrap().contains(needle),
            "{body}: {}",
            reply.body
        );
    }
}

#[tokio::test]
async fn answer_page_shows_verdict_fix_and_highlighted_evidence() {
    let page = post_form("/diagnose", &format!("text={}", encode(MULTI_RANK))).await;
    assert_eq!(page.status, StatusCode::OK);
    let b = &page.body;
    assert!(b.contains("Diagnosis · high confidence"), "{b}");
    assert!(b.contains(r#"<a href="/entries/nccl-invalid-usage">NCCL invalid usage when the model sits on another GPU</a>"#));
    assert!(b.contains("<section class=\"fix\""), "fix inline");
    assert!(
        b.contains("torch.cuda.set_device(local_rank)"),
        "the fix's steps are on the page"
    );
    assert!(
        b.contains(r#"<td class="line-no">6</td>"#),
        "evidence with its paste line number"
    );
    assert!(
        b.contains("<mark>ncclInvalidUsage</mark>"),
        "matched text highlighted"
    );
    assert!(
        b.contains("Root cause: <code>RuntimeError: NCCL error in"),
        "what was understood"
    );
}

#[tokio::test]
async fn answer_page_says_plainly_when_nothing_matches() {
    let paste = "Traceback (most recent call last):\nnumpy.core._exceptions.UFuncTypeError: Cannot cast ufunc 'add' output from dtype('float64') to dtype('int64')";
    let page = post_form("/diagnose", &format!("text={}", encode(paste))).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("No known problem matches"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("Diagnosis ·"));
}

/// A first match of low confidence is wrong more often than right on real reports: the
/// answer says errbook does not know, and keeps the matches as leads, folded.
#[tokio::test]
async fn a_low_confidence_first_match_is_no_match_with_its_leads() {
    let text = "worker exited with exitcode 1 during training";
    let d = diagnose(text).await;
    assert_eq!(d["verdict"], "no_match", "{d:#}");
    let leads = d["matches"].as_array().unwrap();
    assert!(!leads.is_empty(), "{d:#}");
    assert!(leads.iter().all(|m| m["confidence"] == "low"), "{d:#}");
    assert_eq!(d["closest"].as_array().unwrap().len(), 0, "{d:#}");

    let page = post_form("/diagnose", &format!("text={}", encode(text))).await;
    assert!(
        page.body.contains("No known problem matches"),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("most of the time such a lead is not the cause"),
        "{}",
        page.body
    );
    let slug = leads[0]["slug"].as_str().unwrap();
    let folded = page.body.split("lead-list").nth(1).unwrap_or_default();
    assert!(
        folded.contains("<details>") && folded.contains(&format!("/entries/{slug}")),
        "{}",
        page.body
    );
}

/// A question in words shows no error: its leads are entries about what it asks.
#[tokio::test]
async fn a_question_in_words_gets_the_entries_about_it() {
    let text = "my job gets slower with more gpus";
    let d = diagnose(text).await;
    assert_eq!(d["verdict"], "no_match", "{d:#}");
    assert!(!d["matches"].as_array().unwrap().is_empty(), "{d:#}");
    let page = post_form("/diagnose", &format!("text={}", encode(text))).await;
    assert!(
        page.body.contains("Entries about what you asked"),
        "{}",
        page.body
    );
    assert!(
        !page.body.contains("No known problem matches"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn answer_page_escapes_the_paste() {
    let page = post_form(
        "/diagnose",
        &format!(
            "text={}",
            encode("<script>alert(1)</script> ncclInvalidUsage")
        ),
    )
    .await;
    assert!(!page.body.contains("<script>alert(1)"));
}

/// A paste large enough to be diagnosed on a blocking thread is answered as it would be
/// on the request's own thread, through the API, the answer page and MCP alike.
#[tokio::test]
async fn a_large_paste_answers_the_same_from_a_blocking_thread() {
    let padding: String = (0..3000)
        .map(|i| {
            format!("[rank0]: INFO step {i} loss 0.{i:04} lr 0.0001 throughput 312 samples/s\n")
        })
        .collect();
    let large = format!("{padding}{MULTI_RANK}");
    assert!(large.len() >= errbook::web::LARGE_PASTE);
    for text in [MULTI_RANK.to_string(), large] {
        let api = common::send(
            Request::post("/api/v1/diagnose")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(json!({ "text": text, "limit": 3 }).to_string()))
                .unwrap(),
        )
        .await;
        assert_eq!(api.status, StatusCode::OK, "{}", api.body);
        assert_eq!(top(&api.json()), "nccl-invalid-usage");
        let page = post_form("/diagnose", &format!("text={}", encode(&text))).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        assert!(page.body.contains("nccl-invalid-usage"));
        let call = json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "diagnose", "arguments": { "text": text } },
        });
        let mcp = common::send(
            Request::post("/mcp")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(call.to_string()))
                .unwrap(),
        )
        .await;
        assert_eq!(
            mcp.json()["result"]["structuredContent"]["matches"][0]["slug"],
            "nccl-invalid-usage",
            "{}",
            mcp.body
        );
    }
}

/// The ranks behind and NCCL's two sequence numbers reach an API client as fields, not
/// only in the summary's words.
#[tokio::test]
async fn the_triage_gives_the_sequence_numbers_that_show_a_rank_behind() {
    let text = "\
[rank0]:[E1104 09:42:17.318204512 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8190, OpType=ALLGATHER, NumelIn=1024, NumelOut=8192, Timeout(ms)=600000) ran for 600047 milliseconds before timing out.
[rank5]:[E1104 09:42:18.002114870 ProcessGroupNCCL.cpp:1389] [PG 0 (default_pg) Rank 5] Received a dump signal due to a collective timeout from rank 0 and we will try our best to dump the debug info. Last enqueued NCCL work: 8189, last completed NCCL work: 8189.
";
    let d = diagnose(text).await;
    let triage = &d["triage"];
    assert_eq!(triage["behind"], json!([5]), "{triage:#}");
    assert_eq!(
        triage["behind_sequence"]["last_enqueued"], 8189,
        "{triage:#}"
    );
    assert_eq!(triage["behind_sequence"]["waiting_in"], 8190, "{triage:#}");
    assert_eq!(triage["behind_outstanding"], json!(null), "{triage:#}");
}

/// The heartbeat monitor's queue lengths show a rank behind too.
#[tokio::test]
async fn the_triage_gives_the_queue_lengths_that_show_a_rank_behind() {
    let line = |rank: u32, size: u32| {
        format!(
            "[rank{rank}]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank {rank}] Heartbeat monitor \
             timed out! Process will be terminated after dumping debug info. \
             workMetaList_.size()={size}\n"
        )
    };
    let text = [
        line(4, 57),
        line(6, 41),
        line(1, 57),
        "[rank4]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 4] [PG 0 Rank 4] ProcessGroupNCCL's \
         watchdog got stuck for 480 seconds without making progress in monitoring enqueued \
         collectives.\n"
            .to_string(),
    ]
    .concat();
    let d = diagnose(&text).await;
    let triage = &d["triage"];
    assert_eq!(triage["behind"], json!([6]), "{triage:#}");
    assert_eq!(
        triage["behind_outstanding"],
        json!({"outstanding": 41, "others": 57}),
        "{triage:#}"
    );
    assert_eq!(triage["behind_sequence"], json!(null), "{triage:#}");
    let summary = triage["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with("Rank 6 fell behind: when the heartbeat monitor fired, it had 41"),
        "{summary}"
    );
}

#[tokio::test]
async fn every_answer_carries_the_triage_of_its_paste() {
    // The shipped kb knows no entry for this (tests/pastes/snapshots.tsv: NoMatch);
    // whatever the verdict, the triage says what happened.
    let text = include_str!("pastes/python-keyerror-rank1.txt");
    let d = diagnose(text).await;
    let triage = &d["triage"];
    assert_eq!(
        triage["summary"],
        "Rank 1 failed first: KeyError: 'warmup_steps' (in train.py line 13, in main). \
         Rank 0 then lost the connection to it (\"Connection closed by peer\"). The \
         launcher's ChildFailedError only reports it.",
        "{triage:#}"
    );
    assert_eq!(triage["first_failure"]["rank"], 1);
    assert_eq!(triage["first_failure"]["host"], "node-a");
    assert_eq!(triage["first_failure"]["known_from"], "root_cause_block");
    assert_eq!(triage["user_frame"]["file"], "train.py");
    assert_eq!(triage["user_frame"]["line"], 13);
    let kinds: Vec<&str> = triage["consequences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["peer_connection_lost", "launcher_summary"]);
    assert_eq!(triage["exits"][0]["code"], 1);
}

#[tokio::test]
async fn errors_of_other_tools_are_not_answered_with_an_entry() {
    for text in [
        include_str!("pastes/npm-eresolve.txt"),
        include_str!("pastes/rust-panic.txt"),
        include_str!("pastes/go-nil-pointer.txt"),
    ] {
        let d = diagnose(text).await;
        assert_eq!(d["verdict"], "no_match", "{text}\n{d:#}");
    }
}
