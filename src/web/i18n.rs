//! The portal's interface language: English or Chinese, from the reader's choice (a
//! cookie set by the language switch) or else the browser's `Accept-Language`.
//! Every label lives in one [`Labels`] table per language, so a label missing in one
//! language is a compile error, not an English word on a Chinese page.

use std::borrow::Borrow;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};

/// Name of the cookie the language switch sets.
pub const COOKIE: &str = "errbook_lang";

pub use crate::kb::Lang;

impl Lang {
    /// The supported language the browser prefers most (by `q` weight, then order);
    /// English when it names neither.
    pub fn from_accept_language(value: &str) -> Lang {
        let mut best: Option<(f32, Lang)> = None;
        for item in value.split(',') {
            let mut parts = item.split(';');
            let Some(lang) = parts.next().and_then(Lang::parse) else {
                continue;
            };
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
                best = Some((q, lang));
            }
        }
        best.map_or(Lang::En, |(_, lang)| lang)
    }

    /// The language of a request: the switch's cookie, else `Accept-Language`.
    pub fn of_request(headers: &HeaderMap) -> Lang {
        let chosen = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == COOKIE)
            .and_then(|(_, value)| Lang::parse(value));
        chosen.unwrap_or_else(|| {
            headers
                .get(header::ACCEPT_LANGUAGE)
                .and_then(|v| v.to_str().ok())
                .map_or(Lang::En, Lang::from_accept_language)
        })
    }

    pub fn labels(self) -> &'static Labels {
        match self {
            Lang::En => &EN,
            Lang::Zh => &ZH,
        }
    }

    /// "12 results" / "12 个结果".
    pub fn results(self, n: impl Borrow<usize>) -> String {
        match (self, *n.borrow()) {
            (Lang::En, 1) => "1 result".into(),
            (Lang::En, n) => format!("{n} results"),
            (Lang::Zh, n) => format!("{n} 个结果"),
        }
    }

    /// What the paste box says while capture is on.
    pub fn capture_notice(self, days: u32) -> String {
        match self {
            Lang::En => format!(
                "Capture is on: a paste errbook cannot answer is kept for {days} days, \
                 redacted (user names, hosts, addresses and tokens taken out), so this \
                 team's curators can write the entry it needs."
            ),
            Lang::Zh => format!(
                "已开启收集：errbook 答不上来的粘贴内容会脱敏（去掉用户名、主机名、地址和令牌）\
                 后保存 {days} 天，供团队维护者补写条目。"
            ),
        }
    }

    /// "3 entries" / "3 个条目".
    pub fn entries(self, n: impl Borrow<usize>) -> String {
        match (self, *n.borrow()) {
            (Lang::En, 1) => "1 entry".into(),
            (Lang::En, n) => format!("{n} entries"),
            (Lang::Zh, n) => format!("{n} 个条目"),
        }
    }

    /// Which entries of a long list a page shows: "Entries 501–1000 of 2,400".
    pub fn showing(
        self,
        first: impl Borrow<usize>,
        last: impl Borrow<usize>,
        total: impl Borrow<usize>,
    ) -> String {
        let (first, last, total) = (*first.borrow(), *last.borrow(), *total.borrow());
        match self {
            Lang::En => format!("Entries {first}–{last} of {total}"),
            Lang::Zh => format!("第 {first}–{last} 条，共 {total} 条"),
        }
    }

    /// "Results 21–40 of 94" / "第 21–40 个结果，共 94 个".
    pub fn showing_results(self, first: usize, last: usize, total: usize) -> String {
        match self {
            Lang::En => format!("Results {first}–{last} of {total}"),
            Lang::Zh => format!("第 {first}–{last} 个结果，共 {total} 个"),
        }
    }

    /// What errbook made of the paste's size.
    pub fn lines_read(self, lines: impl Borrow<usize>, distinct: impl Borrow<usize>) -> String {
        let (lines, distinct) = (*lines.borrow(), *distinct.borrow());
        match self {
            Lang::En => format!(
                "{lines} line{}, {distinct} distinct after removing prefixes and repeats",
                if lines == 1 { "" } else { "s" }
            ),
            Lang::Zh => format!("共 {lines} 行，去掉前缀与重复后 {distinct} 行不同"),
        }
    }

    /// The note on a share link that holds only part of a long paste.
    pub fn share_condensed(self, kept: impl Borrow<usize>, total: impl Borrow<usize>) -> String {
        let (kept, total) = (*kept.borrow(), *total.borrow());
        match self {
            Lang::En => format!(
                "The paste is long, so the link keeps {kept} of its {total} lines: the ones \
                 the answer rests on and the error lines around them."
            ),
            Lang::Zh => format!(
                "粘贴内容较长，链接只保留了 {total} 行中的 {kept} 行：即本答案依据的行及其附近的报错行。"
            ),
        }
    }

    /// A confidence level as shown on the answer page.
    pub fn confidence(self, level: &str) -> &'static str {
        match (self, level) {
            (Lang::En, "high") => "high confidence",
            (Lang::En, "medium") => "medium confidence",
            (Lang::En, _) => "low confidence",
            (Lang::Zh, "high") => "高置信度",
            (Lang::Zh, "medium") => "中等置信度",
            (Lang::Zh, _) => "低置信度",
        }
    }

    /// An HTTP status's title on an error page.
    pub fn status_title(self, status: u16) -> &'static str {
        match (self, status) {
            (Lang::En, 400) => "Bad request",
            (Lang::En, 404) => "Not found",
            (Lang::En, 405) => "Method not allowed",
            (Lang::En, 413) => "Paste too large",
            (Lang::En, 415) => "Unsupported media type",
            (Lang::En, 422) => "Cannot process this input",
            (Lang::En, _) => "Something went wrong",
            (Lang::Zh, 400) => "请求有误",
            (Lang::Zh, 404) => "页面不存在",
            (Lang::Zh, 405) => "不支持此请求方法",
            (Lang::Zh, 413) => "粘贴内容过大",
            (Lang::Zh, 415) => "不支持的内容类型",
            (Lang::Zh, 422) => "无法处理此输入",
            (Lang::Zh, _) => "出错了",
        }
    }
}

/// The portal's interface language of the request being answered.
impl<S: Send + Sync> FromRequestParts<S> for Lang {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Lang::of_request(&parts.headers))
    }
}

/// Every fixed string of the portal's interface, in one language.
pub struct Labels {
    pub skip_to_content: &'static str,
    pub home: &'static str,
    /// The switch's own text: the name of the other language, in that language.
    pub switch_to: &'static str,
    pub switch_title: &'static str,
    pub search_label: &'static str,
    pub search_placeholder: &'static str,
    pub search_button: &'static str,
    pub footer: &'static str,
    pub paste_heading: &'static str,
    pub paste_label: &'static str,
    pub paste_placeholder: &'static str,
    pub diagnose_button: &'static str,
    pub paste_shortcut: &'static str,
    pub search_heading: &'static str,
    pub search_examples: &'static str,
    pub tags_heading: &'static str,
    pub useful_heading: &'static str,
    pub useful_hint: &'static str,
    pub all_entries: &'static str,
    pub pages_label: &'static str,
    pub previous_page: &'static str,
    pub next_page: &'static str,
    pub search_title: &'static str,
    pub query_label: &'static str,
    pub tag_label: &'static str,
    pub any_tag: &'static str,
    pub search_hint: &'static str,
    pub no_results: &'static str,
    pub tagged: &'static str,
    pub tag_title: &'static str,
    pub related: &'static str,
    pub sources: &'static str,
    pub affected_releases: &'static str,
    pub fixed_in: &'static str,
    pub entry_link: &'static str,
    pub copy: &'static str,
    pub copied: &'static str,
    pub copy_failed: &'static str,
    pub diagnosis: &'static str,
    pub fix: &'static str,
    pub read_entry: &'static str,
    pub no_match_label: &'static str,
    pub no_match_heading: &'static str,
    pub no_match_text: &'static str,
    pub leads_text: &'static str,
    pub which_cause: &'static str,
    pub question_label: &'static str,
    pub question_heading: &'static str,
    pub question_text: &'static str,
    pub evidence_heading: &'static str,
    pub line: &'static str,
    pub paste: &'static str,
    pub matched: &'static str,
    /// What matched, for a signature: the entry's own error message.
    pub why_signature: &'static str,
    /// What matched, for text evidence: words the entry uses too.
    pub why_words: &'static str,
    pub likely_cause: &'static str,
    pub selected_by: &'static str,
    pub otherwise: &'static str,
    pub whole_fix: &'static str,
    pub possible_label: &'static str,
    pub possible_heading: &'static str,
    pub possible_text: &'static str,
    pub triage_heading: &'static str,
    pub own_code: &'static str,
    pub follows: &'static str,
    pub exits: &'static str,
    pub environment: &'static str,
    pub whole_paste: &'static str,
    pub other_candidates: &'static str,
    pub closest_heading: &'static str,
    pub understood_heading: &'static str,
    pub truncated: &'static str,
    pub root_cause: &'static str,
    pub line_word: &'static str,
    pub rank_word: &'static str,
    pub first_failure: &'static str,
    pub rank_unknown: &'static str,
    pub exit_code: &'static str,
    pub exceptions: &'static str,
    pub wrapper: &'static str,
    pub error_codes: &'static str,
    pub versions: &'static str,
    pub your_paste: &'static str,
    pub share_heading: &'static str,
    pub share_hint: &'static str,
    pub new_paste: &'static str,
    pub back_home: &'static str,
    pub feedback_heading: &'static str,
    pub feedback_hint: &'static str,
    pub vote_yes: &'static str,
    pub vote_no: &'static str,
    pub vote_wrong_entry: &'static str,
    pub feedback_thanks: &'static str,
    pub feedback_kept_paste: &'static str,
    pub feedback_kept_vote: &'static str,
    pub back_to_answer: &'static str,
}

static EN: Labels = Labels {
    skip_to_content: "Skip to content",
    home: "errbook home",
    switch_to: "中文",
    switch_title: "切换到中文界面",
    search_label: "Search the knowledge base",
    search_placeholder: "Search errors, symptoms, 中文…",
    search_button: "Search",
    footer: "errbook: known problems of distributed training, answered offline.",
    paste_heading: "What killed your training job?",
    paste_label: "Paste the whole traceback or log. Output of every rank is fine: prefixes and repeats are ignored.",
    paste_placeholder: "Traceback (most recent call last): …",
    diagnose_button: "Diagnose",
    paste_shortcut: "Ctrl+Enter (⌘+Enter on a Mac) diagnoses",
    search_heading: "Or search",
    search_examples: "ncclInvalidUsage, hangs at end of epoch, 显存不均衡…",
    tags_heading: "Browse by tag",
    useful_heading: "Start here",
    useful_hint: "The entries other entries point to most.",
    all_entries: "All entries",
    pages_label: "Pages",
    previous_page: "← Previous",
    next_page: "Next →",
    search_title: "Search",
    query_label: "Query",
    tag_label: "Tag",
    any_tag: "any",
    search_hint: "Type an error message, a symptom in your own words, or a Chinese phrase. To diagnose a whole traceback, paste it on the home page.",
    no_results: "No entry matches",
    tagged: "tagged",
    tag_title: "Tag: ",
    related: "Related",
    sources: "Sources",
    affected_releases: "Affected releases",
    fixed_in: "fixed in",
    entry_link: "Link to this entry",
    copy: "Copy",
    copied: "Copied",
    copy_failed: "Select and copy by hand",
    diagnosis: "Diagnosis",
    fix: "Fix",
    read_entry: "Read the whole entry: symptom, cause, fix and how to verify",
    no_match_label: "No known problem matches",
    no_match_heading: "errbook does not know this error",
    which_cause: "The paste does not say which of these causes it is",
    question_label: "No error in this paste",
    question_heading: "Entries about what you asked",
    question_text: "The paste shows no error to diagnose, so these are the entries closest to its words. Paste the traceback or the log's last lines for a diagnosis.",
    leads_text: "A little of this paste points at the entries below, not enough to name one: most of the time such a lead is not the cause. Open one only if its lines look like yours.",
    no_match_text: "None of the entries explains this paste. The entries below share some words with it, but none is a diagnosis: read them only if one looks like your problem.",
    evidence_heading: "The lines that led here",
    line: "Line",
    paste: "Your paste",
    matched: "Matched",
    why_signature: "this entry's error message",
    why_words: "words this entry also uses",
    likely_cause: "Most likely cause",
    selected_by: "Selected by line",
    otherwise: "If it is not this, check",
    whole_fix: "Every fix in this entry",
    possible_label: "Might be related",
    possible_heading: "errbook is not sure what this is",
    possible_text: "No entry fits firmly. These share evidence with your paste: check each one's lines against yours before you follow its fix.",
    triage_heading: "What happened",
    own_code: "In your code",
    follows: "Only follows from it",
    exits: "Exit",
    environment: "Environment",
    whole_paste: "Matched on the wording of the paste as a whole.",
    other_candidates: "Other candidates",
    closest_heading: "Closest entries by full text",
    understood_heading: "What errbook read in your paste",
    truncated: "very long: only error-looking lines were kept past the first 20,000",
    root_cause: "Root cause",
    line_word: "line",
    rank_word: "rank",
    first_failure: "torchrun's first observed failure",
    rank_unknown: "rank unknown",
    exit_code: "exit code",
    exceptions: "Exceptions",
    wrapper: "wrapper",
    error_codes: "Error codes",
    versions: "Versions",
    your_paste: "Your paste",
    share_heading: "Link to this answer",
    share_hint: "The link holds the paste itself (compressed), so it works for anyone who can reach this errbook.",
    new_paste: "Diagnose another paste",
    back_home: "Back to the home page",
    feedback_heading: "Did this fix it?",
    feedback_hint: "Your answer goes to the people who keep this errbook, with the entry it is about.",
    vote_yes: "Yes, it worked",
    vote_no: "Right problem, the fix did not work",
    vote_wrong_entry: "Wrong problem",
    feedback_thanks: "Thank you: your answer is recorded.",
    feedback_kept_paste: "It is kept with your paste, redacted (user names, hosts, addresses and tokens taken out), so the curators can see what it was about.",
    feedback_kept_vote: "Only your answer and the entry it is about are kept, not your paste.",
    back_to_answer: "Back to the answer",
};

static ZH: Labels = Labels {
    skip_to_content: "跳到正文",
    home: "errbook 首页",
    switch_to: "English",
    switch_title: "Switch the interface to English",
    search_label: "搜索知识库",
    search_placeholder: "搜索报错、现象或英文关键词…",
    search_button: "搜索",
    footer: "errbook：分布式训练常见问题，离线解答。",
    paste_heading: "训练任务为什么挂了？",
    paste_label: "粘贴完整的 traceback 或日志。所有 rank 的输出都可以直接粘贴，前缀和重复行会被忽略。",
    paste_placeholder: "Traceback (most recent call last): …",
    diagnose_button: "诊断",
    paste_shortcut: "按 Ctrl+Enter（Mac 上 ⌘+Enter）直接诊断",
    search_heading: "或者搜索",
    search_examples: "显存不均衡、训练卡住、ncclInvalidUsage…",
    tags_heading: "按标签浏览",
    useful_heading: "从这里开始",
    useful_hint: "被其他条目引用最多的条目。",
    all_entries: "全部条目",
    pages_label: "分页",
    previous_page: "← 上一页",
    next_page: "下一页 →",
    search_title: "搜索",
    query_label: "关键词",
    tag_label: "标签",
    any_tag: "全部",
    search_hint: "输入报错信息、用自己的话描述现象，或输入英文关键词。要诊断完整的 traceback，请粘贴到首页的输入框。",
    no_results: "没有匹配的条目：",
    tagged: "标签",
    tag_title: "标签：",
    related: "相关条目",
    sources: "来源",
    affected_releases: "受影响的版本",
    fixed_in: "修复于",
    entry_link: "本条目的链接",
    copy: "复制",
    copied: "已复制",
    copy_failed: "请手动选择并复制",
    diagnosis: "诊断结果",
    fix: "解决方法",
    read_entry: "阅读完整条目：现象、原因、解决方法与验证方式",
    no_match_label: "没有匹配的已知问题",
    no_match_heading: "errbook 还不认识这个错误",
    which_cause: "这段内容看不出是下面哪一个原因",
    question_label: "这段内容里没有报错",
    question_heading: "与你的问题相关的条目",
    question_text: "这段内容里没有可以诊断的报错，下面是与其文字最接近的条目。贴上 traceback 或日志的最后几行，才能得到诊断。",
    leads_text: "这段内容里只有少量依据指向下面的条目，不足以认定其中任何一条；这类线索多数时候并不是原因。只有当它列出的行和你的日志对得上时再展开看。",
    no_match_text: "没有条目能解释这段内容。下面的条目与它有部分相同的词语，但都不是诊断结论，仅在看起来像你的问题时参考。",
    evidence_heading: "得出结论所依据的行",
    line: "行号",
    paste: "你粘贴的内容",
    matched: "匹配依据",
    why_signature: "该条目收录的报错信息",
    why_words: "该条目中也出现的词",
    likely_cause: "最可能的原因",
    selected_by: "依据的行",
    otherwise: "如果不是这个原因，再检查",
    whole_fix: "本条目的全部解决方法",
    possible_label: "可能相关",
    possible_heading: "errbook 不能确定这是什么问题",
    possible_text: "没有条目能确定地解释这段内容。下面的条目与它有共同的依据：请先核对每条依据的行与你的日志是否一致，再考虑照着它的方法处理。",
    triage_heading: "发生了什么",
    own_code: "你的代码中",
    follows: "只是随之发生",
    exits: "退出",
    environment: "环境",
    whole_paste: "依据整段内容的用词匹配。",
    other_candidates: "其他可能",
    closest_heading: "全文最接近的条目",
    understood_heading: "errbook 从粘贴内容中读到的信息",
    truncated: "内容很长：前 20,000 行之后只保留了像报错的行",
    root_cause: "根本原因",
    line_word: "第几行",
    rank_word: "rank",
    first_failure: "torchrun 最先观察到的失败",
    rank_unknown: "rank 未知",
    exit_code: "退出码",
    exceptions: "异常",
    wrapper: "外层包装",
    error_codes: "错误码",
    versions: "版本",
    your_paste: "你粘贴的内容",
    share_heading: "本答案的链接",
    share_hint: "链接里包含（压缩后的）粘贴内容，能访问这个 errbook 的人都能打开。",
    new_paste: "诊断另一段内容",
    back_home: "回到首页",
    feedback_heading: "问题解决了吗？",
    feedback_hint: "你的回答会连同它针对的条目一起交给维护这个 errbook 的人。",
    vote_yes: "解决了",
    vote_no: "问题判断对了，但方法没用",
    vote_wrong_entry: "判断的问题不对",
    feedback_thanks: "谢谢，已记录你的回答。",
    feedback_kept_paste: "它和你粘贴的内容一起保存，内容已脱敏（去掉了用户名、主机名、地址和令牌），方便维护者了解具体情况。",
    feedback_kept_vote: "只保存你的回答和对应的条目，不保存你粘贴的内容。",
    back_to_answer: "回到答案",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_language_picks_the_preferred_supported_language() {
        assert_eq!(
            Lang::from_accept_language("zh-CN,zh;q=0.9,en;q=0.8"),
            Lang::Zh
        );
        assert_eq!(
            Lang::from_accept_language("en-US,en;q=0.9,zh;q=0.8"),
            Lang::En
        );
        assert_eq!(Lang::from_accept_language("fr-FR,zh-TW;q=0.5"), Lang::Zh);
        assert_eq!(
            Lang::from_accept_language("en;q=0.2, zh-Hans;q=0.7"),
            Lang::Zh
        );
        assert_eq!(Lang::from_accept_language("de, fr"), Lang::En);
        assert_eq!(Lang::from_accept_language("zh;q=0, en;q=0.1"), Lang::En);
        assert_eq!(Lang::from_accept_language(""), Lang::En);
    }

    #[test]
    fn the_switch_cookie_beats_the_browser() {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_LANGUAGE, "en-US".parse().unwrap());
        assert_eq!(Lang::of_request(&headers), Lang::En);
        headers.insert(header::COOKIE, "a=1; errbook_lang=zh-CN".parse().unwrap());
        assert_eq!(Lang::of_request(&headers), Lang::Zh);
        headers.insert(header::COOKIE, "errbook_lang=klingon".parse().unwrap());
        assert_eq!(
            Lang::of_request(&headers),
            Lang::En,
            "an unknown value is ignored"
        );
    }
}
