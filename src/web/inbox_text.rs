//! The inbox pages' words in both languages, one table each, so a missing
//! translation is a compile error (as `i18n::Labels` does for the portal).

use super::i18n::Lang;

pub struct InboxText {
    lang: Lang,
    pub heading: &'static str,
    pub capture_off: &'static str,
    pub sign_out: &'static str,
    pub groups_heading: &'static str,
    pub nothing_waiting: &'static str,
    pub seen: &'static str,
    pub root_cause: &'static str,
    pub first_seen: &'static str,
    pub last_seen: &'static str,
    pub answer: &'static str,
    pub closest: &'static str,
    pub votes_heading: &'static str,
    pub no_feedback: &'static str,
    pub entry: &'static str,
    pub did_not_work: &'static str,
    pub wrong_problem: &'static str,
    pub worked: &'static str,
    pub back: &'static str,
    pub sample: &'static str,
    pub decide: &'static str,
    pub draft_button: &'static str,
    pub attach_label: &'static str,
    pub attach_button: &'static str,
    pub dismiss_button: &'static str,
    pub signature_heading: &'static str,
    pub example_heading: &'static str,
    pub token_label: &'static str,
    pub sign_in: &'static str,
    pub token_hint: &'static str,
    pub form_expired: &'static str,
    pub wrong_token: &'static str,
}

impl InboxText {
    pub fn of(lang: Lang) -> &'static InboxText {
        match lang {
            Lang::En => &EN,
            Lang::Zh => &ZH,
        }
    }

    pub fn capture_on(&self, days: u32) -> String {
        if self.lang.is_zh() {
            format!("已开启收集：errbook 答不上来的粘贴内容脱敏后保存 {days} 天。")
        } else {
            format!(
                "Capture is on: pastes errbook could not answer are kept, redacted, for {days} days."
            )
        }
    }

    /// "Seen 3 times, from 2026-11-01 to 2026-11-27; answered no_match; open".
    pub fn seen_line(
        &self,
        count: i64,
        first: &str,
        last: &str,
        verdict: &str,
        status: &str,
    ) -> String {
        if self.lang.is_zh() {
            format!("出现 {count} 次，{first} 至 {last}；回答为 {verdict}；状态 {status}")
        } else {
            format!("Seen {count} times, from {first} to {last}; answered {verdict}; {status}")
        }
    }

    pub fn drafted(&self, slug: &str) -> String {
        if self.lang.is_zh() {
            format!(
                "已起草为 `{slug}`。把下面两个文件存进团队的 kb 目录（任意分类），补全每个 \
                 TODO(draft)，再运行 `errbook check` 直到通过。"
            )
        } else {
            format!(
                "Drafted as `{slug}`. Save both files in the team's kb folder (any area), fill \
                 in every TODO(draft), and run `errbook check` until it passes."
            )
        }
    }

    pub fn attached(&self, slug: &str) -> String {
        if self.lang.is_zh() {
            format!(
                "已归到 `{slug}`。把下面的签名加进它的 `signatures:`，把样例加进它的 \
                 `examples:`，再运行 `errbook check`：样例必须诊断到这个条目。"
            )
        } else {
            format!(
                "Attached to `{slug}`. Add the signature below to its `signatures:` and the \
                 sample to its `examples:`, then run `errbook check`: the sample must diagnose \
                 to it."
            )
        }
    }
}

static EN: InboxText = InboxText {
    lang: Lang::En,
    heading: "Curator's inbox",
    capture_off: "Capture is off: only feedback arrives here. Start the server with --capture to keep the pastes errbook cannot answer.",
    sign_out: "Sign out",
    groups_heading: "Failures errbook could not answer",
    nothing_waiting: "Nothing waiting.",
    seen: "Seen",
    root_cause: "Root cause",
    first_seen: "First seen",
    last_seen: "Last seen",
    answer: "Answer",
    closest: "Closest entries",
    votes_heading: "Entries by what users said",
    no_feedback: "No feedback yet.",
    entry: "Entry",
    did_not_work: "Did not work",
    wrong_problem: "Wrong problem",
    worked: "Worked",
    back: "← Inbox",
    sample: "Sample (redacted)",
    decide: "Decide",
    draft_button: "Draft a new entry from it",
    attach_label: "An existing entry answers it:",
    attach_button: "Attach as a missing signature",
    dismiss_button: "Not a training failure",
    signature_heading: "Signature to add",
    example_heading: "Example to add",
    token_label: "Curator token",
    sign_in: "Sign in",
    token_hint: "The token the server was started with (--curator-token or ERRBOOK_CURATOR_TOKEN).",
    form_expired: "The form expired: sign in again.",
    wrong_token: "That is not the curator token.",
};

static ZH: InboxText = InboxText {
    lang: Lang::Zh,
    heading: "维护者收件箱",
    capture_off: "收集未开启：这里只有用户反馈。用 --capture 启动服务，才会保存 errbook 答不上来的粘贴内容。",
    sign_out: "退出登录",
    groups_heading: "errbook 答不上来的故障",
    nothing_waiting: "暂无待处理的内容。",
    seen: "次数",
    root_cause: "根因",
    first_seen: "首次出现",
    last_seen: "最近出现",
    answer: "回答",
    closest: "最接近的条目",
    votes_heading: "用户对各条目的反馈",
    no_feedback: "还没有反馈。",
    entry: "条目",
    did_not_work: "方法没用",
    wrong_problem: "判断错了",
    worked: "解决了",
    back: "← 收件箱",
    sample: "样例（已脱敏）",
    decide: "处理",
    draft_button: "据此起草新条目",
    attach_label: "已有条目能回答它：",
    attach_button: "作为缺失的签名归到该条目",
    dismiss_button: "不是训练故障",
    signature_heading: "要添加的签名",
    example_heading: "要添加的样例",
    token_label: "维护者令牌",
    sign_in: "登录",
    token_hint: "即启动服务时给的令牌（--curator-token 或 ERRBOOK_CURATOR_TOKEN）。",
    form_expired: "表单已过期，请重新登录。",
    wrong_token: "令牌不对。",
};
