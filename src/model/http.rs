//! What the HTTP model clients share: one process-wide `reqwest` client (connection reuse),
//! per-attempt deadlines, retries with backoff on 429/5xx, and readable errors.

use std::sync::OnceLock;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Response, StatusCode};
use tokio::time::Instant;

use crate::error::{Result, SdkError};
pub(crate) use crate::text::excerpt;

/// How a client reaches its server.
#[derive(Debug, Clone)]
pub struct Connection {
    pub base_url: String,
    pub api_key: Option<String>,
    pub settings: HttpSettings,
}

#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Extra headers sent with every request (after the client's own).
    pub headers: Vec<(String, String)>,
    /// Budget for one attempt, from sending the request to the last byte of the answer.
    pub request_timeout: Duration,
    /// Further attempts after a 429 or 5xx answer.
    pub max_retries: u32,
    /// Ask for a streamed (SSE) answer.
    pub stream: bool,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            headers: Vec::new(),
            request_timeout: Duration::from_millis(600_000),
            max_retries: 2,
            stream: true,
        }
    }
}

/// A response whose status was 2xx, with the deadline its body must arrive by.
pub(crate) struct Opened {
    pub response: Response,
    pub deadline: Instant,
    pub timeout: Duration,
}

fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .expect("the HTTP client has a fixed, valid configuration")
    })
}

/// Joins the base URL and a path without doubling or losing the slash.
pub(crate) fn endpoint(base_url: &str, path: &str) -> String {
    format!("{}/{}", base_url.trim_end_matches('/'), path.trim_start_matches('/'))
}

pub(crate) fn header_map(own: &[(&str, String)], extra: &[(String, String)]) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let all = own
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .chain(extra.iter().map(|(name, value)| (name.as_str(), value.as_str())));
    for (name, value) in all {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| SdkError::config(format!("header name \"{name}\" is not valid")))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| SdkError::config(format!("header \"{name}\" has a value that is not valid in HTTP")))?;
        headers.insert(header, value);
    }
    Ok(headers)
}

fn retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// The wait before attempt `attempt + 1`: what the server asked for (`retry-after-ms`,
/// `retry-after` in seconds), else exponential backoff from 250 ms, never over 60 s.
fn backoff(response: &Response, attempt: u32) -> Duration {
    const LONGEST: Duration = Duration::from_secs(60);
    // Seconds, capped before they become a Duration (a huge value would not fit in one).
    let header = |name: &str, per_second: f64| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<f64>().ok())
            .filter(|value| value.is_finite() && *value >= 0.0)
            .map(|value| Duration::from_secs_f64((value / per_second).min(LONGEST.as_secs_f64())))
    };
    let asked = header("retry-after-ms", 1000.0).or_else(|| header(RETRY_AFTER.as_str(), 1.0));
    let wait = asked.unwrap_or_else(|| Duration::from_millis(250u64 << attempt.min(5)));
    wait.min(LONGEST)
}

/// Sends a JSON POST, retrying 429/5xx answers; any other non-2xx is an error.
pub(crate) async fn post(url: &str, headers: HeaderMap, body: Vec<u8>, settings: &HttpSettings) -> Result<Opened> {
    let mut attempt = 0;
    loop {
        let deadline = Instant::now() + settings.request_timeout;
        let request = client().post(url).headers(headers.clone()).body(body.clone()).send();
        let response = match tokio::time::timeout_at(deadline, request).await {
            Err(_) => return Err(timed_out(settings.request_timeout)),
            Ok(Err(error)) => {
                return Err(SdkError::model(format!(
                    "Model request to {url} failed: {}",
                    chain(&error)
                )))
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(Opened {
                response,
                deadline,
                timeout: settings.request_timeout,
            });
        }
        if retryable(status) && attempt < settings.max_retries {
            let wait = backoff(&response, attempt);
            tracing::debug!(%status, attempt, ?wait, "retrying model request");
            drop(response);
            tokio::time::sleep(wait).await;
            attempt += 1;
            continue;
        }
        let body = tokio::time::timeout_at(deadline, response.bytes())
            .await
            .ok()
            .and_then(|body| body.ok())
            .unwrap_or_default();
        return Err(status_error(status, &body));
    }
}

pub(crate) fn timed_out(timeout: Duration) -> SdkError {
    SdkError::model(format!("Model request timed out after {}ms", timeout.as_millis()))
}

/// `Model request failed with status 429 Too Many Requests: <the body's error message>`.
pub(crate) fn status_error(status: StatusCode, body: &[u8]) -> SdkError {
    let detail = error_message(body);
    let mut message = format!("Model request failed with status {status}");
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(&detail);
    }
    SdkError::model(message).with_status(status.as_u16())
}

/// The `error.message` (or `message`, or string `error`) of a JSON error body; otherwise the
/// start of the body as text.
pub(crate) fn error_message(body: &[u8]) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
        let found = json
            .pointer("/error/message")
            .or_else(|| json.get("message"))
            .or_else(|| json.get("error"))
            .and_then(|value| value.as_str());
        if let Some(message) = found {
            return message.to_string();
        }
    }
    excerpt(&String::from_utf8_lossy(body), 500)
}

/// An error and its sources, `: `-joined (reqwest's own message alone says little).
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_joins_with_exactly_one_slash() {
        assert_eq!(
            endpoint("http://h/v1/", "/chat/completions"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(
            endpoint("http://h/v1", "chat/completions"),
            "http://h/v1/chat/completions"
        );
    }

    #[test]
    fn error_message_prefers_the_json_error_message() {
        assert_eq!(
            error_message(br#"{"error":{"message":"Rate limit reached","type":"x"}}"#),
            "Rate limit reached"
        );
        assert_eq!(error_message(br#"{"message":"bad"}"#), "bad");
        assert_eq!(error_message(br#"{"error":"nope"}"#), "nope");
        assert_eq!(error_message(b"  plain failure \n"), "plain failure");
    }

    #[test]
    fn backoff_follows_the_server_then_doubles_from_250_ms_and_never_exceeds_60_s() {
        let answer = |headers: &[(&str, &str)]| {
            let mut builder = http::Response::builder().status(429);
            for (name, value) in headers {
                builder = builder.header(*name, *value);
            }
            Response::from(builder.body(Vec::<u8>::new()).unwrap())
        };
        assert_eq!(backoff(&answer(&[]), 0), Duration::from_millis(250));
        assert_eq!(backoff(&answer(&[]), 2), Duration::from_millis(1000));
        assert_eq!(
            backoff(&answer(&[("retry-after", "1.5")]), 0),
            Duration::from_millis(1500)
        );
        assert_eq!(
            backoff(&answer(&[("retry-after-ms", "20"), ("retry-after", "9")]), 3),
            Duration::from_millis(20)
        );
        assert_eq!(backoff(&answer(&[("retry-after", "999")]), 0), Duration::from_secs(60));
        // Larger than any Duration: capped, not a panic.
        assert_eq!(backoff(&answer(&[("retry-after", "1e20")]), 0), Duration::from_secs(60));
        assert_eq!(
            backoff(&answer(&[("retry-after-ms", "1e300")]), 0),
            Duration::from_secs(60)
        );
        assert_eq!(
            backoff(&answer(&[("retry-after", "soon")]), 1),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn status_error_carries_status_and_body_message() {
        let error = status_error(StatusCode::INTERNAL_SERVER_ERROR, br#"{"error":{"message":"boom"}}"#);
        assert_eq!(
            error.message,
            "Model request failed with status 500 Internal Server Error: boom"
        );
        assert_eq!(error.status, Some(500));
        assert_eq!(error.code, crate::error::ErrorCode::Model);
    }
}
