//! Text analysis for the index: how English, Chinese and error strings become terms.
//!
//! Three analyzers, each indexed into its own field so that queries can weigh them:
//! `words` (jieba words for Chinese, whole words for everything else, lowercased and
//! stemmed), `ident` (identifiers split at camelCase and `_`: `ncclInvalidUsage` ->
//! `nccl invalid usage`) and `gram` (Chinese characters and character pairs, so that
//! one- and two-character queries find words jieba keeps whole).

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, LazyLock, OnceLock};

use jieba_rs::Jieba;
use rustc_hash::{FxHashMap, FxHashSet};
use tantivy::tokenizer::{
    LowerCaser, RemoveLongFilter, TextAnalyzer, Token, TokenFilter, TokenStream, Tokenizer,
};

pub const WORDS: &str = "errbook_words";
pub const IDENT: &str = "errbook_ident";
pub const GRAM: &str = "errbook_gram";

/// jieba with its whole dictionary, which is compiled into the binary: loading it takes
/// ~100 ms, so once, when first needed (queries); indexing needs only part of it (see
/// `Segmenter::for_texts`).
static JIEBA: OnceLock<Jieba> = OnceLock::new();

fn full_jieba() -> &'static Jieba {
    JIEBA.get_or_init(|| {
        let mut jieba = Jieba::new();
        for &(word, freq) in DOMAIN_WORDS {
            jieba.add_word(word, Some(freq), None);
        }
        jieba
    })
}

/// Words of the trade that jieba's general dictionary splits or barely knows (`报错`
/// has frequency 3, so `超时报错` became `超 时报 错`, a newspaper, and no timeout),
/// with the frequency of a common word: both the index and the queries segment them
/// whole. Two-character words only, so that a longer phrase still meets its parts.
const DOMAIN_WORDS: &[(&str, usize)] = &[
    ("超时", 20_000),
    ("报错", 20_000),
    ("卡住", 20_000),
    ("卡死", 20_000),
    ("显存", 20_000),
    ("多卡", 20_000),
    ("单卡", 20_000),
    ("双卡", 20_000),
    ("多机", 20_000),
    ("单机", 20_000),
    ("死锁", 20_000),
    ("挂起", 20_000),
    ("微调", 20_000),
    ("量化", 20_000),
    ("卸载", 20_000),
    ("网卡", 20_000),
    ("端口", 20_000),
    ("驱动", 20_000),
    ("梯度", 20_000),
    ("权重", 20_000),
    ("精度", 20_000),
    ("通信", 20_000),
];

/// Loads jieba's whole dictionary now rather than on the first Chinese query.
pub fn warm_up() {
    full_jieba();
}

/// jieba's dictionary, words and frequencies, zstd-compressed (see `data/README.md`).
const DICTIONARY: &[u8] = include_bytes!("data/jieba-dict.zst");

/// A word no Chinese run can contain (a private-use character): in a dictionary cut
/// down to some words, it carries the frequencies of the words left out.
const LEFT_OUT: &str = "\u{e000}";

/// How the `words` analyzer segments Chinese runs: with jieba's whole dictionary, or
/// with the part of it that a known set of texts can use.
#[derive(Clone, Default)]
pub struct Segmenter(Option<Arc<Subset>>);

/// jieba with only the dictionary words that `alphabet` covers.
struct Subset {
    jieba: Jieba,
    alphabet: Alphabet,
}

impl Segmenter {
    /// Segments with jieba's whole dictionary, loaded on first use.
    pub fn full() -> Segmenter {
        Segmenter(None)
    }

    /// A segmenter for `texts` that does not wait for jieba's whole dictionary (unless
    /// that is loaded already: then it is the one): it holds only the dictionary words
    /// whose every character, and every two characters next to each other, occur so
    /// in the Chinese of `texts` (for the shipped kb, one word in thirty).
    ///
    /// It segments those texts exactly as the whole dictionary does. jieba segments a
    /// run of Chinese by the dictionary words that occur in it, their frequencies, the
    /// dictionary's total frequency, and its own model for words it does not know.
    /// Every word that occurs in a run of `texts` is kept, with its frequency; the
    /// words left out are one word that no run can hold, with their frequencies, so
    /// the total is the same; the model is the same. A run with a character or a pair
    /// of characters that `texts` do not have is segmented with the whole dictionary,
    /// so no text is segmented differently, whatever text it is given.
    pub fn for_texts<S: AsRef<str>>(texts: impl IntoIterator<Item = S>) -> Segmenter {
        if JIEBA.get().is_some() {
            return Segmenter::full();
        }
        Segmenter::subset_for(texts)
    }

    /// The segmenter of `for_texts`, built even when the whole dictionary is loaded.
    fn subset_for<S: AsRef<str>>(texts: impl IntoIterator<Item = S>) -> Segmenter {
        let mut alphabet = Alphabet::default();
        for text in texts {
            alphabet.add_runs_of(text.as_ref());
        }
        match subset(&alphabet) {
            Ok(jieba) => Segmenter(Some(Arc::new(Subset { jieba, alphabet }))),
            Err(error) => {
                tracing::warn!(%error, "using jieba's whole dictionary");
                Segmenter::full()
            }
        }
    }

    /// The jieba that segments `run`, a run of Chinese characters.
    fn jieba_for(&self, run: &str) -> &Jieba {
        match &self.0 {
            Some(subset) if subset.alphabet.covers(run.as_bytes()) => &subset.jieba,
            _ => full_jieba(),
        }
    }
}

impl fmt::Debug for Segmenter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("Segmenter(whole dictionary)"),
            Some(subset) => write!(
                f,
                "Segmenter({} characters, {} pairs)",
                subset.alphabet.chars.len(),
                subset.alphabet.pairs.len()
            ),
        }
    }
}

/// Characters, and pairs of characters seen next to each other, each known by its
/// UTF-8 encoding, so that the dictionary's words need not be decoded to be looked up.
#[derive(Default)]
struct Alphabet {
    chars: FxHashSet<u32>,
    pairs: FxHashSet<u64>,
}

impl Alphabet {
    /// Adds the Chinese runs of `text` (as `Runs` cuts them), skipping the rest, mostly
    /// ASCII, eight bytes at a time.
    fn add_runs_of(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            if let Some(eight) = bytes.get(at..at + 8) {
                let eight = u64::from_le_bytes(eight.try_into().expect("eight bytes"));
                if eight & 0x8080_8080_8080_8080 == 0 {
                    at += 8;
                    continue;
                }
            }
            // `at` only ever moves by whole characters (or eight ASCII ones).
            let Some(c) = text[at..].chars().next() else {
                break;
            };
            if !is_cjk(c) {
                at += c.len_utf8();
                continue;
            }
            let run = &text[at..];
            let end = run.find(|c| !is_cjk(c)).unwrap_or(run.len());
            self.add(&run[..end]);
            at += end;
        }
    }

    fn add(&mut self, run: &str) {
        let mut previous = None;
        for key in keys(run.as_bytes()).flatten() {
            self.chars.insert(key);
            if let Some(previous) = previous {
                self.pairs.insert(pair(previous, key));
            }
            previous = Some(key);
        }
    }

    /// Whether `text` (UTF-8, or not: then the answer is no) is made of known
    /// characters, each next to one it was seen next to.
    fn covers(&self, text: &[u8]) -> bool {
        let mut previous = None;
        keys(text).all(|key| {
            let known = key.is_some_and(|key| {
                self.chars.contains(&key)
                    && previous.is_none_or(|p| self.pairs.contains(&pair(p, key)))
            });
            previous = key;
            known
        })
    }
}

/// The characters of `text` by their UTF-8 encodings (bytes zero-padded to four, read
/// as a number), without decoding them; `None` for a character cut off at the end.
fn keys(text: &[u8]) -> impl Iterator<Item = Option<u32>> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let lead = *text.get(at)?;
        let width = match lead {
            0..0x80 => 1,
            0xf0.. => 4,
            0xe0.. => 3,
            _ => 2,
        };
        let key = text.get(at..at + width).map(|bytes| {
            let mut padded = [0; 4];
            padded[..width].copy_from_slice(bytes);
            u32::from_le_bytes(padded)
        });
        at = if key.is_some() {
            at + width
        } else {
            text.len()
        };
        Some(key)
    })
}

fn pair(first: u32, second: u32) -> u64 {
    u64::from(first) << 32 | u64::from(second)
}

/// jieba with the words of the shipped dictionary that `alphabet` covers, and the
/// dictionary's total frequency.
fn subset(alphabet: &Alphabet) -> Result<Jieba, String> {
    // Decompressed in one call into a buffer of the size the frame records, so zstd
    // needs no window buffer of its own (it would come from the C allocator, which
    // keeps what it frees).
    let size = zstd::zstd_safe::get_frame_content_size(DICTIONARY)
        .ok()
        .flatten()
        .ok_or("the shipped jieba dictionary does not record its size")?;
    let text = zstd::bulk::decompress(DICTIONARY, size as usize)
        .map_err(|e| format!("cannot decompress the shipped jieba dictionary: {e}"))?;
    let mut jieba = Jieba::empty();
    let (mut total, mut kept) = (0usize, 0usize);
    let mut seen = [false; DOMAIN_WORDS.len()];
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', &text).chain([text.len()]);
    for (n, end) in ends.enumerate() {
        let line = &text[start.min(end)..end];
        start = end + 1;
        if line.is_empty() {
            continue;
        }
        let bad = || {
            format!(
                "line {} of the shipped jieba dictionary is not `word frequency`",
                n + 1
            )
        };
        let space = memchr::memchr(b' ', line).ok_or_else(bad)?;
        let (word, freq) = (&line[..space], &line[space + 1..]);
        if freq.is_empty() || !freq.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        let freq = freq.iter().fold(0usize, |n, &digit| {
            n.saturating_mul(10)
                .saturating_add(usize::from(digit - b'0'))
        });
        // A word of the trade has its own frequency, as `full_jieba` gives it.
        let freq = match DOMAIN_WORDS.iter().position(|(w, _)| w.as_bytes() == word) {
            Some(i) => {
                seen[i] = true;
                DOMAIN_WORDS[i].1
            }
            None => freq,
        };
        total = total.saturating_add(freq);
        if alphabet.covers(word) {
            // Made of encodings of characters, so UTF-8.
            let word = std::str::from_utf8(word).map_err(|_| bad())?;
            jieba.add_word(word, Some(freq), None);
            kept = kept.saturating_add(freq);
        }
    }
    for (&(word, freq), _) in DOMAIN_WORDS.iter().zip(seen).filter(|(_, seen)| !seen) {
        jieba.add_word(word, Some(freq), None);
        total = total.saturating_add(freq);
        kept = kept.saturating_add(freq);
    }
    jieba.add_word(LEFT_OUT, Some(total.saturating_sub(kept)), None);
    Ok(jieba)
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
    words_analyzer_with(Segmenter::full())
}

/// The `words` analyzer, segmenting Chinese with `segmenter`.
pub fn words_analyzer_with(segmenter: Segmenter) -> TextAnalyzer {
    TextAnalyzer::builder(WordsTokenizer { segmenter })
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .filter(TermFilter(StopWords))
        .filter(TermFilter(CachedStemmer))
        .build()
}

pub fn ident_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(IdentTokenizer)
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .filter(TermFilter(CachedStemmer))
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
    // The stemmer leaves words of fewer than three letters alone (so any of fewer than
    // three bytes), and every rule it applies ends in a (lowercased) ASCII letter.
    if word.len() < 3 || !word.bytes().any(|b| b.is_ascii_lowercase()) {
        return;
    }
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

/// `STOP_WORDS`, to look a term up in.
static STOP_SET: LazyLock<FxHashSet<&'static str>> =
    LazyLock::new(|| STOP_WORDS.iter().copied().collect());

/// Whether the `words` analyzer drops `term` (lowercase) as a stop word.
pub fn is_stop_word(term: &str) -> bool {
    STOP_SET.contains(term)
}

/// What a `TermFilter` does to each term: rewrites it in place, and keeps it or not.
pub trait TermRule: Clone + Send + Sync + 'static {
    fn apply(term: &mut String) -> bool;
}

/// Drops the terms in `STOP_WORDS`, as tantivy's `StopWordFilter` does with a hash that
/// is quicker for short words.
#[derive(Clone, Copy, Debug, Default)]
pub struct StopWords;

impl TermRule for StopWords {
    fn apply(term: &mut String) -> bool {
        !STOP_SET.contains(term.as_str())
    }
}

/// The Snowball English stemmer, as tantivy's `Stemmer` applies it, remembering each
/// word's stem (see `STEMS`): stemming was a fifth of indexing.
#[derive(Clone, Copy, Debug, Default)]
pub struct CachedStemmer;

impl TermRule for CachedStemmer {
    fn apply(term: &mut String) -> bool {
        stem(term);
        true
    }
}

/// A token filter applying a `TermRule` to each term.
#[derive(Clone, Copy, Debug, Default)]
pub struct TermFilter<R>(pub R);

impl<R: TermRule> TokenFilter for TermFilter<R> {
    type Tokenizer<T: Tokenizer> = TermFilterTokenizer<T, R>;

    fn transform<T: Tokenizer>(self, inner: T) -> TermFilterTokenizer<T, R> {
        TermFilterTokenizer {
            inner,
            rule: PhantomData,
        }
    }
}

#[derive(Clone)]
pub struct TermFilterTokenizer<T, R> {
    inner: T,
    rule: PhantomData<R>,
}

impl<T: Tokenizer, R: TermRule> Tokenizer for TermFilterTokenizer<T, R> {
    type TokenStream<'a> = TermFilterStream<T::TokenStream<'a>, R>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        TermFilterStream {
            tail: self.inner.token_stream(text),
            rule: PhantomData,
        }
    }
}

pub struct TermFilterStream<T, R> {
    tail: T,
    rule: PhantomData<R>,
}

impl<T: TokenStream, R: TermRule> TokenStream for TermFilterStream<T, R> {
    fn advance(&mut self) -> bool {
        while self.tail.advance() {
            if R::apply(&mut self.tail.token_mut().text) {
                return true;
            }
        }
        false
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

/// The runs of Chinese characters in `text`, one per line: what a Chinese body adds to
/// its English one (the commands, identifiers and error text in it are the English
/// body's, which the index holds already).
pub fn chinese_runs(text: &str) -> String {
    let mut out = String::new();
    for run in text
        .split(|c: char| !is_cjk(c))
        .filter(|run| !run.is_empty())
    {
        out.push_str(run);
        out.push('\n');
    }
    out
}

fn is_word_char(c: char) -> bool {
    (c.is_alphanumeric() || c == '_') && !is_cjk(c)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RunKind {
    Cjk,
    Word,
}

impl RunKind {
    /// The kind of run `c` belongs to, if any (spaces and punctuation separate runs).
    fn of(c: char) -> Option<RunKind> {
        if c.is_ascii() {
            ASCII_WORD[c as usize].then_some(RunKind::Word)
        } else if is_cjk(c) {
            Some(RunKind::Cjk)
        } else {
            is_word_char(c).then_some(RunKind::Word)
        }
    }
}

/// Maximal runs of Chinese characters or of word characters, with byte offsets;
/// everything else (spaces, punctuation) separates runs.
struct Runs<'a> {
    text: &'a str,
    /// Byte offset of the next character to look at.
    at: usize,
}

impl<'a> Runs<'a> {
    fn new(text: &'a str) -> Self {
        Runs { text, at: 0 }
    }

    /// The character at byte `at` and its kind (ASCII without decoding).
    fn kind_at(&self, at: usize) -> (Option<RunKind>, usize) {
        let b = self.text.as_bytes()[at];
        if b.is_ascii() {
            return (RunKind::of(b as char), 1);
        }
        let c = self.text[at..]
            .chars()
            .next()
            .expect("at is a char boundary");
        (RunKind::of(c), c.len_utf8())
    }
}

impl<'a> Iterator for Runs<'a> {
    type Item = (RunKind, usize, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.text.as_bytes();
        let len = bytes.len();
        while self.at < len {
            let start = self.at;
            let kind = match bytes[start] {
                b if b.is_ascii() => {
                    self.at += 1;
                    if !ASCII_WORD[b as usize] {
                        continue;
                    }
                    RunKind::Word
                }
                _ => {
                    let (kind, width) = self.kind_at(start);
                    self.at += width;
                    let Some(kind) = kind else { continue };
                    kind
                }
            };
            while self.at < len {
                // Most words are all ASCII: their bytes need no decoding.
                if kind == RunKind::Word {
                    while self.at < len && ASCII_WORD.get(bytes[self.at] as usize) == Some(&true) {
                        self.at += 1;
                    }
                    if self.at == len || bytes[self.at].is_ascii() {
                        break;
                    }
                }
                let (next, width) = self.kind_at(self.at);
                if next != Some(kind) {
                    break;
                }
                self.at += width;
            }
            return Some((kind, start, &self.text[start..self.at]));
        }
        None
    }
}

/// The ASCII bytes that are word characters: letters, digits and `_`.
const ASCII_WORD: [bool; 128] = {
    let mut table = [false; 128];
    let mut b = 0;
    while b < 128 {
        table[b] = (b as u8).is_ascii_alphanumeric() || b as u8 == b'_';
        b += 1;
    }
    table
};

/// The token a tokenizer streams, rewritten in place for each term (one allocation
/// for the whole text instead of one per term).
fn set_token(token: &mut Token, text: &str, from: usize, position: usize) {
    token.offset_from = from;
    token.offset_to = from + text.len();
    token.position = position;
    token.position_length = 1;
    token.text.clear();
    token.text.push_str(text);
}

/// Chinese runs segmented by jieba; other word runs kept whole. Ordinal positions.
#[derive(Clone, Debug, Default)]
pub struct WordsTokenizer {
    segmenter: Segmenter,
}

impl Tokenizer for WordsTokenizer {
    type TokenStream<'a> = WordsStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordsStream<'a> {
        WordsStream {
            segmenter: &self.segmenter,
            runs: Runs::new(text),
            chinese: Vec::new(),
            chinese_start: 0,
            next_chinese: 0,
            terms: 0,
            token: Token::default(),
        }
    }
}

pub struct WordsStream<'a> {
    segmenter: &'a Segmenter,
    runs: Runs<'a>,
    /// jieba's words of the current Chinese run, which starts at byte `chinese_start`.
    chinese: Vec<jieba_rs::Token<'a>>,
    chinese_start: usize,
    next_chinese: usize,
    /// Terms streamed so far: the next term's position.
    terms: usize,
    token: Token,
}

impl TokenStream for WordsStream<'_> {
    fn advance(&mut self) -> bool {
        loop {
            if let Some(word) = self.chinese.get(self.next_chinese) {
                let from = self.chinese_start + word.byte_start;
                set_token(&mut self.token, word.word, from, self.terms);
                self.next_chinese += 1;
                self.terms += 1;
                return true;
            }
            match self.runs.next() {
                None => return false,
                Some((RunKind::Word, start, run)) => {
                    set_token(&mut self.token, run, start, self.terms);
                    self.terms += 1;
                    return true;
                }
                Some((RunKind::Cjk, start, run)) => {
                    self.chinese = self.segmenter.jieba_for(run).cut(run, true);
                    self.chinese_start = start;
                    self.next_chinese = 0;
                }
            }
        }
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

/// The parts of every non-Chinese word (`SliceBackward0` -> `Slice`, `Backward0`).
#[derive(Clone, Copy, Debug, Default)]
pub struct IdentTokenizer;

impl Tokenizer for IdentTokenizer {
    type TokenStream<'a> = IdentStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> IdentStream<'a> {
        IdentStream {
            runs: Runs::new(text),
            word: None,
            terms: 0,
            token: Token::default(),
        }
    }
}

pub struct IdentStream<'a> {
    runs: Runs<'a>,
    /// The word being split, which starts at that byte offset.
    word: Option<(usize, IdentParts<'a>)>,
    terms: usize,
    token: Token,
}

impl TokenStream for IdentStream<'_> {
    fn advance(&mut self) -> bool {
        loop {
            if let Some((start, parts)) = &mut self.word {
                if let Some((offset, part)) = parts.next() {
                    set_token(&mut self.token, part, *start + offset, self.terms);
                    self.terms += 1;
                    return true;
                }
                self.word = None;
            }
            match self.runs.next() {
                None => return false,
                Some((RunKind::Word, start, run)) => self.word = Some((start, ident_parts(run))),
                Some((RunKind::Cjk, ..)) => {}
            }
        }
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

/// Splits an identifier into its parts: at `_`, at lower->upper case changes, and before
/// the last capital of a capital run followed by lowercase (`NCCLError` -> NCCL, Error).
/// Yields (byte offset within the word, part).
pub fn ident_parts(word: &str) -> IdentParts<'_> {
    // Most words are one part: lowercase ASCII without `_`. Such a word is the part
    // already begun, with no character left to read.
    let whole = word
        .bytes()
        .all(|b| b.is_ascii() && b != b'_' && !b.is_ascii_uppercase());
    IdentParts {
        word,
        chars: if whole { "" } else { word }.char_indices().peekable(),
        prev: None,
        start: (whole && !word.is_empty()).then_some(0),
    }
}

pub struct IdentParts<'a> {
    word: &'a str,
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    prev: Option<char>,
    /// Where the part being read starts.
    start: Option<usize>,
}

impl<'a> Iterator for IdentParts<'a> {
    type Item = (usize, &'a str);

    fn next(&mut self) -> Option<(usize, &'a str)> {
        while let Some((i, c)) = self.chars.next() {
            let prev = self.prev.replace(c);
            if c == '_' {
                if let Some(s) = self.start.take() {
                    return Some((s, &self.word[s..i]));
                }
                continue;
            }
            let (Some(s), Some(prev)) = (self.start, prev) else {
                self.start = Some(i);
                continue;
            };
            let next = self.chars.peek().map(|&(_, n)| n);
            let boundary = prev.is_lowercase() && c.is_uppercase()
                || prev.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase);
            if boundary {
                self.start = Some(i);
                return Some((s, &self.word[s..i]));
            }
        }
        let s = self.start.take()?;
        Some((s, &self.word[s..]))
    }
}

/// Every Chinese character and every adjacent pair, both at the first character's
/// position, so a pair sequence can be matched as a phrase.
#[derive(Clone, Copy, Debug, Default)]
pub struct GramTokenizer;

impl Tokenizer for GramTokenizer {
    type TokenStream<'a> = GramStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> GramStream<'a> {
        GramStream {
            runs: ChineseRuns { text, at: 0 },
            run: "",
            run_start: 0,
            at: 0,
            pair_next: false,
            position: 0,
            token: Token::default(),
        }
    }
}

pub struct GramStream<'a> {
    runs: ChineseRuns<'a>,
    /// The Chinese run being read, which starts at byte `run_start`, and the byte
    /// offset in it of the character whose terms come next.
    run: &'a str,
    run_start: usize,
    at: usize,
    /// The character at `at` was streamed; its pair with the next one comes next.
    pair_next: bool,
    position: usize,
    token: Token,
}

impl TokenStream for GramStream<'_> {
    fn advance(&mut self) -> bool {
        loop {
            if let Some(c) = self.run[self.at..].chars().next() {
                let end = self.at + c.len_utf8();
                if !self.pair_next {
                    let from = self.run_start + self.at;
                    set_token(
                        &mut self.token,
                        &self.run[self.at..end],
                        from,
                        self.position,
                    );
                    self.pair_next = true;
                    return true;
                }
                self.pair_next = false;
                let at = std::mem::replace(&mut self.at, end);
                let position = self.position;
                self.position += 1;
                if let Some(d) = self.run[end..].chars().next() {
                    let pair = &self.run[at..end + d.len_utf8()];
                    set_token(&mut self.token, pair, self.run_start + at, position);
                    return true;
                }
                // A gap so that pairs never span two separate Chinese runs.
                self.position += 1;
                continue;
            }
            let Some((start, run)) = self.runs.next() else {
                return false;
            };
            (self.run, self.run_start, self.at) = (run, start, 0);
        }
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

/// The Chinese runs of a text (as `Runs` finds them), skipping everything else
/// byte by byte: every Chinese character's UTF-8 encoding starts with a byte of at
/// least 0xE3, which no ASCII byte, continuation byte or shorter character's lead
/// byte reaches.
struct ChineseRuns<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> ChineseRuns<'a> {
    fn next(&mut self) -> Option<(usize, &'a str)> {
        let bytes = self.text.as_bytes();
        loop {
            let skip = bytes[self.at..].iter().position(|&b| b >= 0xE3)?;
            let start = self.at + skip;
            let mut end = start;
            for c in self.text[start..].chars() {
                if !is_cjk(c) {
                    break;
                }
                end += c.len_utf8();
            }
            if end > start {
                self.at = end;
                return Some((start, &self.text[start..end]));
            }
            let width = self.text[start..].chars().next().map_or(1, char::len_utf8);
            self.at = start + width;
        }
    }
}

/// Chinese runs of a query: the gram terms to look for, as a phrase of pairs
/// (or the single character for a one-character run).
pub fn gram_query_terms(text: &str) -> Vec<Vec<String>> {
    let mut runs = ChineseRuns { text, at: 0 };
    std::iter::from_fn(|| runs.next())
        .map(|(_, run)| {
            let chars: Vec<char> = run.chars().collect();
            if chars.len() == 1 {
                vec![chars[0].to_string()]
            } else {
                chars.windows(2).map(|w| w.iter().collect()).collect()
            }
        })
        .collect()
}

/// Hands the first `most` tokens of `text` to `each`; the rest is not analysed.
pub fn analyze_first(
    analyzer: &mut TextAnalyzer,
    text: &str,
    most: usize,
    mut each: impl FnMut(&Token),
) {
    let mut stream = analyzer.token_stream(text);
    for _ in 0..most {
        let Some(token) = stream.next() else {
            break;
        };
        each(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `analyzer` over `text`: (position, term) pairs.
    fn analyze(analyzer: &mut TextAnalyzer, text: &str) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        analyze_first(analyzer, text, usize::MAX, |t| {
            out.push((t.position, t.text.clone()))
        });
        out
    }

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
        let mut tantivy = TextAnalyzer::builder(WordsTokenizer::default())
            .filter(LowerCaser)
            .filter(tantivy::tokenizer::Stemmer::new(
                tantivy::tokenizer::Language::English,
            ))
            .build();
        let mut ours = TextAnalyzer::builder(WordsTokenizer::default())
            .filter(LowerCaser)
            .filter(TermFilter(CachedStemmer))
            .build();
        // Twice: the second pass is answered from the cache.
        for _ in 0..2 {
            assert_eq!(analyze(&mut ours, text), analyze(&mut tantivy, text));
        }
    }

    /// The analyzers as first written, one `String` and one `Vec` at a time, with
    /// tantivy's own stop word filter and stemmer: the streaming versions must give
    /// the same terms at the same positions and offsets.
    mod reference {
        use super::super::{STOP_WORDS, full_jieba, is_cjk, is_word_char};
        use tantivy::tokenizer::{
            Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token,
            TokenStream, Tokenizer,
        };

        fn runs(text: &str) -> Vec<(bool, usize, &str)> {
            let mut out = Vec::new();
            let mut chars = text.char_indices().peekable();
            while let Some((start, c)) = chars.next() {
                let cjk = is_cjk(c);
                if !cjk && !is_word_char(c) {
                    continue;
                }
                let mut end = start + c.len_utf8();
                while let Some(&(i, next)) = chars.peek() {
                    let same = if cjk {
                        is_cjk(next)
                    } else {
                        is_word_char(next)
                    };
                    if !same {
                        break;
                    }
                    end = i + next.len_utf8();
                    chars.next();
                }
                out.push((cjk, start, &text[start..end]));
            }
            out
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

        fn ident_parts(word: &str) -> Vec<(usize, &str)> {
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
                        || prev.is_uppercase()
                            && c.is_uppercase()
                            && next.is_some_and(char::is_lowercase);
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

        pub struct Tokens(Vec<Token>, usize);

        impl TokenStream for Tokens {
            fn advance(&mut self) -> bool {
                self.1 += 1;
                self.1 <= self.0.len()
            }
            fn token(&self) -> &Token {
                &self.0[self.1 - 1]
            }
            fn token_mut(&mut self) -> &mut Token {
                &mut self.0[self.1 - 1]
            }
        }

        /// A tokenizer that is a function from text to its tokens.
        #[derive(Clone)]
        struct Reference(fn(&str) -> Vec<Token>);

        impl Tokenizer for Reference {
            type TokenStream<'a> = Tokens;
            fn token_stream<'a>(&'a mut self, text: &'a str) -> Tokens {
                Tokens((self.0)(text), 0)
            }
        }

        fn words_tokens(text: &str) -> Vec<Token> {
            let mut tokens = Vec::new();
            for (cjk, start, run) in runs(text) {
                if cjk {
                    for w in full_jieba().cut(run, true) {
                        tokens.push(token(w.word, start + w.byte_start, tokens.len()));
                    }
                } else {
                    tokens.push(token(run, start, tokens.len()));
                }
            }
            tokens
        }

        fn ident_tokens(text: &str) -> Vec<Token> {
            let mut tokens = Vec::new();
            for (cjk, start, run) in runs(text) {
                if !cjk {
                    for (offset, part) in ident_parts(run) {
                        tokens.push(token(part, start + offset, tokens.len()));
                    }
                }
            }
            tokens
        }

        fn gram_tokens(text: &str) -> Vec<Token> {
            let mut tokens = Vec::new();
            let mut position = 0;
            for (cjk, start, run) in runs(text) {
                if !cjk {
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
                position += 1;
            }
            tokens
        }

        pub fn words() -> TextAnalyzer {
            TextAnalyzer::builder(Reference(words_tokens))
                .filter(RemoveLongFilter::limit(64))
                .filter(LowerCaser)
                .filter(StopWordFilter::remove(
                    STOP_WORDS.iter().map(|w| w.to_string()),
                ))
                .filter(Stemmer::new(Language::English))
                .build()
        }

        pub fn ident() -> TextAnalyzer {
            TextAnalyzer::builder(Reference(ident_tokens))
                .filter(RemoveLongFilter::limit(64))
                .filter(LowerCaser)
                .filter(Stemmer::new(Language::English))
                .build()
        }

        pub fn gram() -> TextAnalyzer {
            TextAnalyzer::builder(Reference(gram_tokens)).build()
        }
    }

    /// Every term with its position and offsets.
    fn tokens(analyzer: &mut TextAnalyzer, text: &str) -> Vec<(String, usize, usize, usize)> {
        let mut out = Vec::new();
        let mut stream = analyzer.token_stream(text);
        while let Some(t) = stream.next() {
            out.push((t.text.clone(), t.position, t.offset_from, t.offset_to));
        }
        out
    }

    fn assert_same_as_reference(text: &str) {
        let pairs = [
            (words_analyzer(), reference::words(), "words"),
            (ident_analyzer(), reference::ident(), "ident"),
            (gram_analyzer(), reference::gram(), "gram"),
        ];
        for (mut ours, mut theirs, name) in pairs {
            assert_eq!(
                tokens(&mut ours, text),
                tokens(&mut theirs, text),
                "{name} analysis of {text:?}"
            );
        }
    }

    #[test]
    fn streaming_analyzers_match_the_reference_on_the_whole_kb() {
        let kb = crate::kb::Kb::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kb"))
            .unwrap();
        for e in kb.entries() {
            let texts = [
                &e.title,
                &e.title_zh,
                &e.summary,
                &e.summary_zh,
                &e.body.text,
            ];
            for text in texts.into_iter().chain(&e.symptoms).chain(&e.examples) {
                assert_same_as_reference(text);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn streaming_analyzers_match_the_reference(
            text in "([a-zA-Z0-9_]{0,6}|[ .:/\\-'\\n]|[显存不均衡卡训练错误超时的了我们]|[ÉéİıßΣσ]|[\u{3000}\u{ff0c}\u{20000}\u{2a6df}\u{f900}]|[A-Z]{2,4}[a-z]{1,3}|cannot|running|NCCL_P2P_DISABLE){0,24}"
        ) {
            assert_same_as_reference(&text);
        }
    }

    /// Every text of the shipped kb the indexes analyse.
    fn kb_texts() -> Vec<String> {
        let kb = crate::kb::Kb::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kb"))
            .unwrap();
        crate::search::texts(&kb).map(|t| t.into_owned()).collect()
    }

    fn chinese_runs(text: &str) -> impl Iterator<Item = &str> {
        Runs::new(text).filter_map(|(kind, _, run)| (kind == RunKind::Cjk).then_some(run))
    }

    #[test]
    fn the_kbs_segmenter_segments_its_texts_as_the_whole_dictionary_does() {
        let texts = kb_texts();
        let segmenter = Segmenter::subset_for(&texts);
        let subset = segmenter.0.as_ref().expect("a subset of the dictionary");
        // Most words are left out, and none of the kb's runs needs the whole dictionary.
        assert!(
            !subset.jieba.has_word("蜂蜜") && subset.jieba.has_word("显存"),
            "{segmenter:?}"
        );
        let runs: Vec<&str> = texts.iter().flat_map(|t| chinese_runs(t)).collect();
        assert!(runs.len() > 1000);
        for run in &runs {
            assert!(
                std::ptr::eq(segmenter.jieba_for(run), &subset.jieba),
                "{run}"
            );
        }
        let mut ours = words_analyzer_with(segmenter.clone());
        let mut whole = words_analyzer();
        for text in &texts {
            assert_eq!(tokens(&mut ours, text), tokens(&mut whole, text), "{text}");
        }
    }

    #[test]
    fn a_segmenter_gives_other_texts_to_the_whole_dictionary() {
        let segmenter = Segmenter::subset_for(["显存不足", "训练卡住了"]);
        let mut ours = words_analyzer_with(segmenter.clone());
        let mut whole = words_analyzer();
        // Known characters in an unseen order, unknown characters, and the kb's own text.
        for text in [
            "显存卡住",
            "住了训练",
            "显存溢出",
            "蜂蜜",
            "显存不足 训练卡住了",
            "不",
        ] {
            assert_eq!(tokens(&mut ours, text), tokens(&mut whole, text), "{text}");
        }
        let subset = &segmenter.0.as_ref().unwrap().jieba;
        assert!(std::ptr::eq(segmenter.jieba_for("训练卡住了"), subset));
        assert!(std::ptr::eq(segmenter.jieba_for("练卡"), subset));
        assert!(!std::ptr::eq(segmenter.jieba_for("显存卡住"), subset));
        assert!(!std::ptr::eq(segmenter.jieba_for("蜂蜜"), subset));
    }

    #[test]
    fn words_of_the_trade_stay_whole_in_either_dictionary() {
        let text = "多卡训练NCCL超时报错，双卡显存卡住";
        let mut whole = words_analyzer();
        let words = tokens(&mut whole, text);
        for word in ["多卡", "超时", "报错", "双卡", "显存", "卡住"] {
            assert!(words.iter().any(|w| w.0 == word), "{word} in {words:?}");
        }
        assert!(!words.iter().any(|w| w.0 == "时报"), "{words:?}");
        // A subset that holds some of them, and one that holds none.
        for texts in [vec!["多卡训练超时报错"], vec!["训练卡住了"]] {
            let mut ours = words_analyzer_with(Segmenter::subset_for(&texts));
            for text in [text, "超时报错", "单机多卡微调", texts[0]] {
                assert_eq!(tokens(&mut ours, text), tokens(&mut whole, text), "{text}");
            }
        }
    }

    #[test]
    fn the_shipped_dictionary_is_jiebas() {
        let size = zstd::zstd_safe::get_frame_content_size(DICTIONARY)
            .unwrap()
            .unwrap();
        let text =
            String::from_utf8(zstd::bulk::decompress(DICTIONARY, size as usize).unwrap()).unwrap();
        let whole = Jieba::new();
        let mut total = 0usize;
        for line in text.lines() {
            let (word, freq) = line.split_once(' ').unwrap();
            total += freq.parse::<usize>().unwrap();
            assert!(whole.has_word(word), "{word}");
        }
        // jieba's own counts, which it only shows in its Debug form.
        assert_eq!(
            format!("{whole:?}"),
            format!(
                "Jieba {{ records_len: {}, total_freq: {total} }}",
                text.lines().count()
            )
        );
    }

    proptest::proptest! {
        /// Runs made of the kb's own runs, cut and joined at random: some covered by
        /// the kb's segmenter, some not.
        #[test]
        fn the_kbs_segmenter_segments_anything_as_the_whole_dictionary_does(
            picks in proptest::collection::vec((0usize..100_000, 0usize..12, 1usize..12), 1..4)
        ) {
            static KB: LazyLock<(Segmenter, Vec<Vec<char>>)> = LazyLock::new(|| {
                let texts = kb_texts();
                let runs = texts
                    .iter()
                    .flat_map(|t| chinese_runs(t))
                    .map(|r| r.chars().collect())
                    .collect();
                (Segmenter::subset_for(&texts), runs)
            });
            let (segmenter, runs) = &*KB;
            let mut text = String::new();
            for (run, from, len) in picks {
                let run = &runs[run % runs.len()];
                let from = from.min(run.len() - 1);
                text.extend(&run[from..(from + len).min(run.len())]);
            }
            let mut ours = words_analyzer_with(segmenter.clone());
            proptest::prop_assert_eq!(
                tokens(&mut ours, &text),
                tokens(&mut words_analyzer(), &text)
            );
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
        let parts = |w| ident_parts(w).map(|(_, p)| p).collect::<Vec<_>>();
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
