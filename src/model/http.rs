//! What the HTTP model clients share: one process-wide `reqwest` client (connection reuse, no
//! redirects), per-attempt deadlines, retries with backoff on 429/5xx, bounded bodies, and
//! readable errors that show no secret.

use std::sync::OnceLock;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Response, StatusCode};
use tokio::time::Instant;

use super::secrets::{display_url, Secrets};
use crate::error::{Result, SdkError};

/// The default cap of a non-streamed body, one SSE line and one tool call's arguments.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// How much of an error answer's body is read: enough for its message, not a flood.
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// How a client reaches its server.
#[derive(Debug, Clone)]
pub struct Connection {
    pub base_url: String,
    pub api_key: Option<String>,
    pub settings: HttpSettings,
    /// What errors must not show: made from the three fields above.
    pub secrets: Secrets,
}

impl Connection {
    pub fn new(base_url: String, api_key: Option<String>, settings: HttpSettings) -> Self {
        let mut secrets = Secrets::new(Some(&base_url), api_key.iter().map(String::as_str));
        for (_, value) in &settings.headers {
            secrets.add_header(value);
        }
        Connection {
            base_url,
            api_key,
            settings,
            secrets,
        }
    }

    /// Every model error leaves its client through here: what it says is masked.
    pub(crate) fn seal(&self, mut error: SdkError) -> SdkError {
        if let std::borrow::Cow::Owned(masked) = self.secrets.mask(&error.message) {
            error.message = masked;
        }
        error
    }
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
    /// Cap of a non-streamed body, one SSE line (or event) and one tool call's arguments.
    pub max_response_bytes: usize,
    /// A streamed answer that sends no byte for this long fails (`streamIdleTimeoutMs`).
    pub stream_idle_timeout: Option<Duration>,
    /// Anthropic's `anthropic-version` header; for OpenAI-compatible servers (Azure's among
    /// them), the `api-version` query parameter.
    pub api_version: Option<String>,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            headers: Vec::new(),
            request_timeout: Duration::from_millis(600_000),
            max_retries: 2,
            stream: true,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            stream_idle_timeout: None,
            api_version: None,
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
            // A redirect would carry the key and headers to wherever it points: a 3xx is an
            // answer like any other non-2xx (MODEL_ERROR with its status).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("the HTTP client has a fixed, valid configuration")
    })
}

/// Joins the base URL and a path without doubling or losing the slash; a query of the base
/// URL (a gateway's key) stays a query, after the path.
pub(crate) fn endpoint(base_url: &str, path: &str) -> String {
    let path = path.trim_start_matches('/');
    match reqwest::Url::parse(base_url) {
        Ok(mut url) => {
            let joined = format!("{}/{path}", url.path().trim_end_matches('/'));
            url.set_path(&joined);
            url.into()
        }
        Err(_) => format!("{}/{path}", base_url.trim_end_matches('/')),
    }
}

/// `url` with the query parameter `name=value` added (encoded).
pub(crate) fn with_query(url: &str, name: &str, value: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.query_pairs_mut().append_pair(name, value);
            parsed.into()
        }
        Err(_) => url.to_string(),
    }
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
pub(crate) async fn post(url: &str, headers: HeaderMap, body: Vec<u8>, connection: &Connection) -> Result<Opened> {
    let settings = &connection.settings;
    let mut attempt = 0;
    loop {
        let deadline = Instant::now() + settings.request_timeout;
        let request = client().post(url).headers(headers.clone()).body(body.clone()).send();
        let response = match tokio::time::timeout_at(deadline, request).await {
            Err(_) => return Err(timed_out(settings.request_timeout)),
            Ok(Err(error)) => {
                return Err(SdkError::model(format!(
                    "Model request to {} failed: {}",
                    display_url(url),
                    chain(&error.without_url())
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
        let opened = Opened {
            response,
            deadline,
            timeout: settings.request_timeout,
        };
        // What could be read of it in time: the status is the error either way.
        let body = read_body(opened, ERROR_BODY_BYTES, &connection.secrets, true)
            .await
            .unwrap_or_default();
        return Err(status_error(status, &body, &connection.secrets));
    }
}

/// The body of `opened`, at most `max` bytes, by its deadline. Past `max` it is an error, or,
/// with `truncate`, the first `max` bytes.
pub(crate) async fn read_body(mut opened: Opened, max: usize, secrets: &Secrets, truncate: bool) -> Result<Vec<u8>> {
    let declared = opened
        .response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if declared.is_some_and(|length| length > max) && !truncate {
        return Err(too_large("the response body", max));
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0).min(max));
    loop {
        // Checked before each chunk: a body whose bytes are always ready never lets a timer fire.
        if Instant::now() >= opened.deadline {
            return Err(timed_out(opened.timeout));
        }
        // A body that is always ready never returns `Pending`; spending the task's budget makes
        // it yield now and then, so an abort lands at once.
        tokio::task::coop::consume_budget().await;
        let chunk = match tokio::time::timeout_at(opened.deadline, opened.response.chunk()).await {
            Err(_) => return Err(timed_out(opened.timeout)),
            Ok(Err(error)) => {
                return Err(SdkError::model(format!(
                    "Model response broke off: {}",
                    secrets.mask(&chain(&error.without_url()))
                )))
            }
            Ok(Ok(None)) => return Ok(body),
            Ok(Ok(Some(chunk))) => chunk,
        };
        if body.len() + chunk.len() > max {
            if truncate {
                body.extend_from_slice(&chunk[..max - body.len()]);
                return Ok(body);
            }
            return Err(too_large("the response body", max));
        }
        body.extend_from_slice(&chunk);
    }
}

/// `Model answer is too large: <what> is longer than <max> bytes (advanced.connection.maxResponseBytes)`.
pub(crate) fn too_large(what: &str, max: usize) -> SdkError {
    SdkError::model(format!(
        "Model answer is too large: {what} is longer than {max} bytes (advanced.connection.maxResponseBytes)"
    ))
}

pub(crate) fn timed_out(timeout: Duration) -> SdkError {
    SdkError::model(format!("Model request timed out after {}ms", timeout.as_millis()))
}

/// `Model request failed with status 429 Too Many Requests: <the body's error message>`.
pub(crate) fn status_error(status: StatusCode, body: &[u8], secrets: &Secrets) -> SdkError {
    let detail = error_message(body, secrets);
    let mut message = format!("Model request failed with status {status}");
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(&detail);
    }
    SdkError::model(message).with_status(status.as_u16())
}

/// The `error.message` (or `message`, or string `error`) of a JSON error body; otherwise the
/// start of the body as text. Masked: a server may echo the key it was sent.
pub(crate) fn error_message(body: &[u8], secrets: &Secrets) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
        let found = json
            .pointer("/error/message")
            .or_else(|| json.get("message"))
            .or_else(|| json.get("error"))
            .and_then(|value| value.as_str());
        if let Some(message) = found {
            return secrets.mask(message).into_owned();
        }
    }
    secrets.excerpt(&String::from_utf8_lossy(body), 500)
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
        assert_eq!(
            endpoint("http://u:p@h/v1/?api-key=k", "chat/completions"),
            "http://u:p@h/v1/chat/completions?api-key=k"
        );
        assert_eq!(endpoint("http://h", "v1/messages"), "http://h/v1/messages");
        assert_eq!(
            with_query("http://h/v1/chat/completions?api-key=k", "api-version", "2024-06-01"),
            "http://h/v1/chat/completions?api-key=k&api-version=2024-06-01"
        );
    }

    #[test]
    fn error_message_prefers_the_json_error_message() {
        let none = Secrets::default();
        assert_eq!(
            error_message(br#"{"error":{"message":"Rate limit reached","type":"x"}}"#, &none),
            "Rate limit reached"
        );
        assert_eq!(error_message(br#"{"message":"bad"}"#, &none), "bad");
        assert_eq!(error_message(br#"{"error":"nope"}"#, &none), "nope");
        assert_eq!(error_message(b"  plain failure \n", &none), "plain failure");
        let key = Secrets::new(None, ["sk-echoed-key"]);
        assert_eq!(
            error_message(br#"{"error":{"message":"Incorrect API key: sk-echoed-key"}}"#, &key),
            "Incorrect API key: ***"
        );
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
        let error = status_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            br#"{"error":{"message":"boom"}}"#,
            &Secrets::default(),
        );
        assert_eq!(
            error.message,
            "Model request failed with status 500 Internal Server Error: boom"
        );
        assert_eq!(error.status(), Some(500));
        assert_eq!(error.code, crate::error::ErrorCode::Model);
    }
}
