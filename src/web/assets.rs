//! Static assets (CSS, JavaScript, favicon) compiled into the binary, so the portal
//! works offline from one file.
//!
//! Pages link each asset by a fingerprinted name, `style.<hash>.css`, where the hash is
//! of the file's bytes: those URLs never change meaning, so browsers may keep them for a
//! year without asking again. The plain name (`style.css`) stays valid for anyone who
//! typed it, revalidated by its `ETag`.

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::AppError;

#[derive(rust_embed::Embed)]
#[folder = "static/"]
struct Assets;

/// Hex digits of the content hash kept in a fingerprinted name.
const HASH_LEN: usize = 12;

struct Fingerprints {
    /// `style.css` -> `/static/style.0123456789ab.css`
    urls: HashMap<String, String>,
    /// `style.0123456789ab.css` -> `style.css`
    files: HashMap<String, String>,
    /// `style.css` -> `"0123456789ab"`
    etags: HashMap<String, HeaderValue>,
}

fn fingerprints() -> &'static Fingerprints {
    static TABLE: OnceLock<Fingerprints> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut urls = HashMap::new();
        let mut files = HashMap::new();
        let mut etags = HashMap::new();
        for name in Assets::iter() {
            let Some(file) = Assets::get(&name) else {
                continue;
            };
            let hash = hex(&file.metadata.sha256_hash());
            let fingerprinted = match name.rsplit_once('.') {
                Some((stem, ext)) => format!("{stem}.{}.{ext}", &hash[..HASH_LEN]),
                None => format!("{name}.{}", &hash[..HASH_LEN]),
            };
            urls.insert(name.to_string(), format!("/static/{fingerprinted}"));
            files.insert(fingerprinted, name.to_string());
            if let Ok(etag) = HeaderValue::from_str(&format!("\"{}\"", &hash[..HASH_LEN])) {
                etags.insert(name.to_string(), etag);
            }
        }
        Fingerprints { urls, files, etags }
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The URL pages use for the asset `name` (`style.css`): its fingerprinted name.
pub fn url(name: &str) -> String {
    fingerprints()
        .urls
        .get(name)
        .cloned()
        .unwrap_or_else(|| format!("/static/{name}"))
}

pub async fn serve(Path(path): Path<String>, headers: HeaderMap) -> Result<Response, AppError> {
    let table = fingerprints();
    let (name, immutable) = match table.files.get(&path) {
        Some(name) => (name.as_str(), true),
        None => (path.as_str(), false),
    };
    let (Some(file), Some(etag)) = (Assets::get(name), table.etags.get(name)) else {
        return Err(AppError::NotFound(format!("no static file `{path}`")));
    };
    let cache = if immutable {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let mut response = if if_none_match(&headers, etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = file.data.into_owned().into_response();
        if let Ok(value) = HeaderValue::from_str(file.metadata.mimetype()) {
            response.headers_mut().insert(header::CONTENT_TYPE, value);
        }
        response
    };
    let out = response.headers_mut();
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    out.insert(header::ETAG, etag.clone());
    Ok(response)
}

/// Whether the browser's cached copy (`If-None-Match`) is this version.
fn if_none_match(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    let etag = etag.to_str().unwrap_or_default();
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| tag.trim().trim_start_matches("W/"))
        .any(|tag| tag == etag || tag == "*")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_has_a_distinct_fingerprinted_url() {
        let css = url("style.css");
        assert!(
            css.starts_with("/static/style.") && css.ends_with(".css"),
            "{css}"
        );
        assert_eq!(css.len(), "/static/style..css".len() + HASH_LEN);
        assert_ne!(url("app.js"), "/static/app.js");
        assert_eq!(
            fingerprints().files.get(css.trim_start_matches("/static/")),
            Some(&"style.css".to_string())
        );
    }
}
