//! Static assets (CSS, favicon) compiled into the binary, so the portal works offline
//! from one file.

use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::error::AppError;

#[derive(rust_embed::Embed)]
#[folder = "static/"]
struct Assets;

pub async fn serve(Path(path): Path<String>) -> Result<Response, AppError> {
    let file =
        Assets::get(&path).ok_or_else(|| AppError::NotFound(format!("no static file `{path}`")))?;
    let mime = file.metadata.mimetype().to_string();
    let mut response = file.data.into_owned().into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&mime) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    Ok(response)
}
