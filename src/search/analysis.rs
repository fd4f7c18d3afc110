//! Text analysis for the index: how English, Chinese and error strings become terms.
//!
//! Three analyzers, each indexed into its own field so that queries can weigh them:
//! `words` (jieba words for Chinese, whole words for everything else, lowercased and
//! stemmed), `ident` (identifiers split at camelCase and `_`: `ncclInvalidUsage` ->
//! `nccl invalid usage`) and `gram` (Chinese characters and character pairs, so that
//! one- and two-character queries find words jieba keeps whole).

use std::cell::RefCell;
use std::sync::LazyLock;

use jieba_rs::Jieba;
use rustc_hash::FxHashMap;
use tantivy::tokenizer::{
    LowerCaser, RemoveLongFilter, StopWordFilter, TextAnalyzer, Token, TokenFilter, TokenStream,
    Tokenizer,
};

pub const WORDS: &str = "errbook_words";
pub const IDENT: &str = "errbook_ident";
pub const GRAM: &str = "errbook_gram";

/// The dictionary is compiled into the binary; loading it takes ~100 ms, so once.
static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);

/// Forces the jieba dictionary to load now rather than on the first query.
pub fn warm_up() {
    LazyLock::force(&JIEBA);
}

/// Words that carry no meaning for matching a problem: English function words, the
/// chatter of a question ("hi, I tried ..., thanks"), and Chinese particles.
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "anyone",
    "are", "as", "at", "be", "because", "been", "before", "being", "both", "bro", "but", "by",
    "can", "could", "did", "do", "does", "doing", "dont", "each", "even", "every", "few", "for",
    "from", "further", "get", "gets", "getting", "got", "guys", "had", "has", "have", "having",
    "he", "hello", "help", "her", "here", "hi", "his", "how", "however", "i", "if", "im", "in",
    "into", "is", "it", "its", "just", "know", "let", "like", "me", "more", "most", "my", "myself",
    "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "out",
    "over", "own", "please", "really", "same", "seems", "she", "should", "so", "some", "someone",
    "still", "such", "than", "thank", "thanks", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "those", "though", "through", "to", "too", "tried", "try", "trying",
    "under", "until", "up", "us", "very", "want", "was", "we", "were", "what", "whats", "when",
    "where", "which", "while", "who", "why", "will", "with", "would", "yet", "you", "your", "的",
    "了", "是", "我", "我们", "你", "您", "他", "吗", "呢", "吧", "啊", "在", "和", "也", "就",
    "都", "这", "那", "这个", "那个", "一个", "请问", "谢谢", "大家", "一下", "您好", "你好",
    "大佬",
];

pub fn words_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(WordsTokenizer)
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(
            STOP_WORDS.iter().map(|w| w.to_string()),
        ))
        .filter(CachedStemmer)
        .build()
}

pub fn ident_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(IdentTokenizer)
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .filter(CachedStemmer)
        .build()
}

pub fn gram_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(GramTokenizer).build()
}

/// Most stems one thread remembers before it starts over.
const MAX_STEMS: usize = 1 << 16;

/// A stemmer and the stems it already computed, by word.
type Stems = (frostem::Stemmer, FxHashMap<Box<str>, Box<str>>);

thread_local! {
    /// Words repeat endlessly in an entry and in a log, and looking a stem up costs a
    /// fraction of computing it again.
    static STEMS: RefCell<Stems> = RefCell::new((
        frostem::Stemmer::new(frostem::Algorithm::English),
        FxHashMap::default(),
    ));
}

/// Replaces `word` with its English (Snowball) stem.
fn stem(word: &mut String) {
    STEMS.with_borrow_mut(|(stemmer, known)| {
        if let Some(stem) = known.get(word.as_str()) {
            word.clear();
            word.push_str(stem);
            return;
        }
        let stem: Box<str> = stemmer.stem(word).into();
        if known.len() >= MAX_STEMS {
            known.clear();
        }
        known.insert(word.as_str().into(), stem.clone());
        *word = stem.into();
    });
}

/// The Snowball English stemmer, as tantivy's `Stemmer` applies it, remembering each
/// word's stem (see `STEMS`): stemming was a fifth of indexing.
#[derive(Clone, Copy, Debug, Default)]
pub struct CachedStemmer;

impl TokenFilter for CachedStemmer {
    type Tokenizer<T: Tokenizer> = CachedStemmerFilter<T>;

    fn transform<T: Tokenizer>(self, inner: T) -> CachedStemmerFilter<T> {
        CachedStemmerFilter { inner }
    }
}

#[derive(Clone)]
pub struct CachedStemmerFilter<T> {
    inner: T,
}

impl<T: Tokenizer> Tokenizer for CachedStemmerFilter<T> {
    type TokenStream<'a> = CachedStemmerStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        CachedStemmerStream {
            tail: self.inner.token_stream(text),
        }
    }
}

pub struct CachedStemmerStream<T> {
    tail: T,
}

impl<T: TokenStream> TokenStream for CachedStemmerStream<T> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        stem(&mut self.tail.token_mut().text);
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
}

/// Han ideographs (the CJK blocks people actually type).
pub fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{4e00}'..='\u{9fff}'
        | '\u{3400}'..='\u{4dbf}'
        | '\u{f900}'..='\u{faff}'
        | '\u{20000}'..='\u{2a6df}')
}

fn is_word_char(c: char) -> bool {
    (c.is_alphanumeric() || c == '_') && !is_cjk(c)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RunKind {
    Cjk,
    Word,
}

/// Maximal runs of Chinese characters or of word characters, with byte offsets;
/// everything else (spaces, punctuation) separates runs.
fn runs(text: &str) -> impl Iterator<Item = (RunKind, usize, &str)> + '_ {
    let mut chars = text.char_indices().peekable();
    std::iter::from_fn(move || {
        loop {
            let (start, c) = chars.next()?;
            let kind = if is_cjk(c) {
                RunKind::Cjk
            } else if is_word_char(c) {
                RunKind::Word
            } else {
                continue;
            };
            let mut end = start + c.len_utf8();
            while let Some(&(i, next)) = chars.peek() {
                let same = match kind {
                    RunKind::Cjk => is_cjk(next),
                    RunKind::Word => is_word_char(next),
                };
                if !same {
                    break;
                }
                end = i + next.len_utf8();
                chars.next();
            }
            return Some((kind, start, &text[start..end]));
        }
    })
}

fn token(text: &str, from: usize, position: usize) -> Token {
    Token {
        offset_from: from,
        offset_to: from + text.len(),
        position,
        text: text.to_string(),
        position_length: 1,
    }
}

/// Splits an identifier into its parts: at `_`, at lower->upper case changes, and before
/// the last capital of a capital run followed by lowercase (`NCCLError` -> NCCL, Error).
/// Returns (byte offset within the word, part).
pub fn ident_parts(word: &str) -> Vec<(usize, &str)> {
    let mut parts = Vec::new();
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut start: Option<usize> = None;
    for (k, &(i, c)) in chars.iter().enumerate() {
        if c == '_' {
            if let Some(s) = start.take() {
                parts.push((s, &word[s..i]));
            }
            continue;
        }
        if let Some(s) = start {
            let prev = chars[k - 1].1;
            let next = chars.get(k + 1).map(|&(_, n)| n);
            let boundary = prev.is_lowercase() && c.is_uppercase()
                || prev.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase);
            if boundary {
                parts.push((s, &word[s..i]));
                start = Some(i);
            }
        } else {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        parts.push((s, &word[s..]));
    }
    parts
}

/// A finished list of tokens, streamed.
pub struct VecTokenStream {
    tokens: Vec<Token>,
    next: usize,
}

impl VecTokenStream {
    fn new(tokens: Vec<Token>) -> Self {
        VecTokenStream { tokens, next: 0 }
    }
}

impl TokenStream for VecTokenStream {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

/// Chinese runs segmented by jieba; other word runs kept whole. Ordinal positions.
#[derive(Clone, Copy, Debug, Default)]
pub struct WordsTokenizer;

impl Tokenizer for WordsTokenizer {
    type TokenStream<'a> = VecTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> VecTokenStream {
        let mut tokens = Vec::new();
        for (kind, start, run) in runs(text) {
            match kind {
                RunKind::Word => tokens.push(token(run, start, tokens.len())),
                RunKind::Cjk => {
                    for w in JIEBA.cut(run, true) {
                        tokens.push(token(w.word, start + w.byte_start, tokens.len()));
                    }
                }
            }
        }
        VecTokenStream::new(tokens)
    }
}

/// The parts of every non-Chinese word (`SliceBackward0` -> `Slice`, `Backward0`).
#[derive(Clone, Copy, Debug, Default)]
pub struct IdentTokenizer;

impl Tokenizer for IdentTokenizer {
    type TokenStream<'a> = VecTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> VecTokenStream {
        let mut tokens = Vec::new();
        for (kind, start, run) in runs(text) {
            if kind == RunKind::Word {
                for (offset, part) in ident_parts(run) {
                    tokens.push(token(part, start + offset, tokens.len()));
                }
            }
        }
        VecTokenStream::new(tokens)
    }
}

/// Every Chinese character and every adjacent pair, both at the first character's
/// position, so a pair sequence can be matched as a phrase.
#[derive(Clone, Copy, Debug, Default)]
pub struct GramTokenizer;

impl Tokenizer for GramTokenizer {
    type TokenStream<'a> = VecTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> VecTokenStream {
        let mut tokens = Vec::new();
        let mut position = 0;
        for (kind, start, run) in runs(text) {
            if kind != RunKind::Cjk {
                continue;
            }
            let chars: Vec<(usize, char)> = run.char_indices().collect();
            for (k, &(i, c)) in chars.iter().enumerate() {
                let from = start + i;
                tokens.push(token(&run[i..i + c.len_utf8()], from, position));
                if let Some(&(j, d)) = chars.get(k + 1) {
                    tokens.push(token(&run[i..j + d.len_utf8()], from, position));
                }
                position += 1;
            }
            // A gap so that pairs never span two separate Chinese runs.
            position += 1;
        }
        VecTokenStream::new(tokens)
    }
}

/// Chinese runs of a query: the gram terms to look for, as a phrase of pairs
/// (or the single character for a one-character run).
pub fn gram_query_terms(text: &str) -> Vec<Vec<String>> {
    runs(text)
        .filter(|(kind, _, _)| *kind == RunKind::Cjk)
        .map(|(_, _, run)| {
            let chars: Vec<char> = run.chars().collect();
            if chars.len() == 1 {
                vec![chars[0].to_string()]
            } else {
                chars.windows(2).map(|w| w.iter().collect()).collect()
            }
        })
        .collect()
}

/// Runs `analyzer` over `text`: (position, term) pairs.
pub fn analyze(analyzer: &mut TextAnalyzer, text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while let Some(t) = stream.next() {
        out.push((t.position, t.text.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(mut analyzer: TextAnalyzer, text: &str) -> Vec<String> {
        analyze(&mut analyzer, text)
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    #[test]
    fn words_keep_error_identifiers_whole_and_segment_chinese() {
        let t = terms(
            words_analyzer(),
            "NCCL error: ncclInvalidUsage 多卡训练显存不均衡",
        );
        assert!(
            t.contains(&"ncclinvalidusag".to_string())
                || t.contains(&"ncclinvalidusage".to_string()),
            "{t:?}"
        );
        assert!(t.contains(&"显存".to_string()), "{t:?}");
        assert!(
            !t.iter().any(|x| x.contains(':') || x.trim().is_empty()),
            "{t:?}"
        );
    }

    #[test]
    fn cached_stems_are_tantivys_stems() {
        let text = "hangs hanging timeouts timed initialization processes NCCL hangs";
        let mut tantivy = TextAnalyzer::builder(WordsTokenizer)
            .filter(LowerCaser)
            .filter(tantivy::tokenizer::Stemmer::new(
                tantivy::tokenizer::Language::English,
            ))
            .build();
        let mut ours = TextAnalyzer::builder(WordsTokenizer)
            .filter(LowerCaser)
            .filter(CachedStemmer)
            .build();
        // Twice: the second pass is answered from the cache.
        for _ in 0..2 {
            assert_eq!(analyze(&mut ours, text), analyze(&mut tantivy, text));
        }
    }

    #[test]
    fn words_stem_english() {
        assert_eq!(
            terms(words_analyzer(), "hangs hanging"),
            vec!["hang", "hang"]
        );
    }

    #[test]
    fn ident_splits_camel_case_snake_case_and_acronyms() {
        let parts = |w| {
            ident_parts(w)
                .into_iter()
                .map(|(_, p)| p)
                .collect::<Vec<_>>()
        };
        assert_eq!(parts("ncclInvalidUsage"), ["nccl", "Invalid", "Usage"]);
        assert_eq!(parts("SliceBackward0"), ["Slice", "Backward0"]);
        assert_eq!(parts("NCCL_P2P_DISABLE"), ["NCCL", "P2P", "DISABLE"]);
        assert_eq!(parts("DistBackendError"), ["Dist", "Backend", "Error"]);
        assert_eq!(parts("ProcessGroupNCCL"), ["Process", "Group", "NCCL"]);
        assert_eq!(parts("NCCLError"), ["NCCL", "Error"]);
        assert_eq!(parts("plain"), ["plain"]);
    }

    #[test]
    fn gram_emits_characters_and_pairs() {
        let t = terms(gram_analyzer(), "显存 ok 卡");
        assert_eq!(t, ["显", "显存", "存", "卡"]);
    }

    #[test]
    fn gram_query_uses_pairs_or_the_single_character() {
        assert_eq!(gram_query_terms("卡"), vec![vec!["卡".to_string()]]);
        assert_eq!(
            gram_query_terms("显存不均 x"),
            vec![vec![
                "显存".to_string(),
                "存不".to_string(),
                "不均".to_string()
            ]]
        );
    }

    #[test]
    fn offsets_point_into_the_text() {
        let text = "错误 ncclInvalidUsage";
        let mut a = words_analyzer();
        let mut stream = a.token_stream(text);
        while let Some(t) = stream.next() {
            assert!(text.is_char_boundary(t.offset_from) && text.is_char_boundary(t.offset_to));
        }
    }
}
