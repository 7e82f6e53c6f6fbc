//! WebFetch: one HTTP(S) request from the model, under the session's `webFetch` policy
//! (`policy.rs`), sent by a client that adds nothing of the agent's own (`request.rs`); the
//! answer is Blade's JSON, with an HTML page turned into text on request (`extract.rs`).

mod extract;
mod policy;
mod request;

use std::time::{Duration, Instant as StdInstant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, USER_AGENT};
use reqwest::{Method, Url};
use serde_json::{json, Map, Value};

use super::input::Fields;
use super::{Answer, Call};
use request::{Failure, Request};

pub use policy::WebPolicy;

/// Blade's request header when the model gives no `User-Agent`.
const DEFAULT_USER_AGENT: &str = "Blade-AI/1.0";
const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "HEAD"];
/// Headers the HTTP client writes itself: one set by the model would frame the request wrongly
/// or name another host than the one checked.
const CLIENT_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-connection",
];

/// A POST can be sent twice by a re-run: the effects ledger must not replay any call blindly
/// (Blade narrows GET and HEAD to `pure` per call; the ledger keeps one value per tool).
pub(crate) fn side_effect() -> &'static str {
    "non_idempotent"
}

pub(crate) fn description() -> &'static str {
    "Fetches an http(s) URL and answers with JSON: status, status_text, body (the response text), url \
     (after redirects), redirected, redirect_count, redirect_chain and content_type; response headers \
     too with return_headers. A status of 400 or more is an error. With extract_content, an HTML page \
     comes back as readable text. Private network addresses and other refused hosts fail; redirects are \
     followed (up to max_redirects) and checked the same way. Prefer an MCP-provided fetch tool when one \
     is available."
}

pub(crate) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri", "description": "URL to request (http or https)"},
            "method": {"type": "string", "enum": METHODS, "default": "GET", "description": "HTTP method"},
            "extract_content": {"type": "boolean", "default": false, "description": "Return an HTML page as readable text (Markdown-like) instead of its markup"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Request headers"},
            "body": {"type": "string", "description": "Request body (not sent with GET or HEAD; Content-Type defaults to application/json)"},
            "timeout": {"type": "integer", "minimum": 1000, "maximum": 120_000, "default": 30_000, "description": "Timeout of the whole request in milliseconds"},
            "follow_redirects": {"type": "boolean", "default": true, "description": "Follow redirects"},
            "max_redirects": {"type": "integer", "minimum": 0, "maximum": 10, "default": 5, "description": "Maximum redirect hops"},
            "return_headers": {"type": "boolean", "default": false, "description": "Return response headers"},
        },
        "required": ["url"],
        "additionalProperties": false,
    })
}

/// The call's input, checked.
struct Input {
    request: Request,
    timeout: Duration,
    extract_content: bool,
    return_headers: bool,
}

fn read_input(input: &Map<String, Value>) -> Result<Input, Answer> {
    let fields = Fields::of("WebFetch", input);
    let url = fields.required_string("url")?;
    let url = Url::parse(url).map_err(|_| fields.invalid("url", "an absolute URL"))?;
    let method = fields.choice("method", METHODS, "GET")?;
    let method = Method::from_bytes(method.as_bytes()).expect("the methods are valid");
    let headers = headers(&fields)?;
    let body = fields.string("body")?.map(str::to_string);
    let timeout = fields.integer("timeout", 1000, 120_000)?.unwrap_or(30_000);
    let follow_redirects = fields.bool("follow_redirects", true)?;
    let max_redirects = fields.integer("max_redirects", 0, 10)?.unwrap_or(5) as u32;
    Ok(Input {
        request: Request {
            url,
            method,
            headers,
            body,
            follow_redirects,
            max_redirects,
        },
        timeout: Duration::from_millis(timeout),
        extract_content: fields.bool("extract_content", false)?,
        return_headers: fields.bool("return_headers", false)?,
    })
}

/// The model's headers after Blade's default `User-Agent`; nothing else is added.
fn headers(fields: &Fields) -> Result<HeaderMap, Answer> {
    let mut headers = HeaderMap::new();
    headers.insert(USER_AGENT, HeaderValue::from_static(DEFAULT_USER_AGENT));
    let Some(given) = fields.get("headers") else {
        return Ok(headers);
    };
    let Value::Object(given) = given else {
        return Err(fields.invalid("headers", "an object of header names and string values"));
    };
    for (name, value) in given {
        let invalid = |what: &str| Answer::error(format!("Invalid input for WebFetch: headers.{name} {what}"));
        let Value::String(value) = value else {
            return Err(invalid("must be a string"));
        };
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid("is not a valid header name"))?;
        if CLIENT_HEADERS.contains(&header.as_str()) {
            return Err(invalid("cannot be set: the HTTP client writes it"));
        }
        let value = HeaderValue::from_str(value).map_err(|_| invalid("has a value that is not valid in HTTP"))?;
        headers.insert(header, value);
    }
    Ok(headers)
}

pub(crate) async fn web_fetch(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    let input = match read_input(input) {
        Ok(input) => input,
        Err(answer) => return answer,
    };
    let started = StdInstant::now();
    let deadline = tokio::time::Instant::now() + input.timeout;
    let response = match request::fetch(input.request, &call.state.web, deadline, &call.cancel).await {
        Ok(response) => response,
        Err(Failure::Aborted) => return Answer::error("Request aborted"),
        Err(Failure::Failed(message)) => return Answer::error(format!("Network request failed: {message}")),
    };
    if response.status.as_u16() >= 400 {
        return Answer::error(format!(
            "HTTP error {}: {}",
            response.status.as_u16(),
            response.status_text
        ));
    }
    let mut content_type = response.headers.get("content-type").cloned();
    let body = if input.extract_content && extract::is_html(content_type.as_deref()) {
        content_type = Some("text/markdown".to_string());
        let (bytes, source) = (response.body, response.url.to_string());
        // Parsing a large page is CPU work: off the async workers.
        match tokio::task::spawn_blocking(move || extract::page_text(&bytes, &source)).await {
            Ok(text) => text,
            Err(error) => return Answer::error(format!("Network request failed: {error}")),
        }
    } else {
        String::from_utf8_lossy(&text_prefix(&response.body, response.truncated)).into_owned()
    };
    let mut answer = Map::new();
    answer.insert("status".into(), json!(response.status.as_u16()));
    answer.insert("status_text".into(), json!(response.status_text));
    if input.return_headers {
        answer.insert("headers".into(), json!(response.headers));
    }
    answer.insert("body".into(), json!(body));
    answer.insert("url".into(), json!(response.url.as_str()));
    answer.insert("redirected".into(), json!(!response.redirect_chain.is_empty()));
    answer.insert("redirect_count".into(), json!(response.redirect_chain.len()));
    answer.insert("redirect_chain".into(), json!(response.redirect_chain));
    if let Some(content_type) = content_type {
        answer.insert("content_type".into(), json!(content_type));
    }
    if response.body_dropped {
        answer.insert("body_dropped".into(), json!(true));
    }
    if response.truncated {
        answer.insert("body_truncated".into(), json!(true));
    }
    answer.insert("response_time".into(), json!(started.elapsed().as_millis() as u64));
    Answer::json(&Value::Object(answer))
}

/// A body cut at the cap may end inside a UTF-8 character: that partial character is left out
/// rather than shown as a replacement character.
fn text_prefix(body: &[u8], truncated: bool) -> std::borrow::Cow<'_, [u8]> {
    if !truncated {
        return body.into();
    }
    match std::str::from_utf8(body) {
        Err(error) if error.error_len().is_none() => body[..error.valid_up_to()].into(),
        _ => body.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(value: Value) -> Result<Input, Answer> {
        read_input(value.as_object().unwrap())
    }

    #[test]
    fn the_schema_requires_only_the_url() {
        let schema = schema();
        assert_eq!(schema["required"], json!(["url"]));
        for (name, property) in schema["properties"].as_object().unwrap() {
            let defaulted = property.get("default").is_some();
            assert_eq!(
                defaulted,
                !["url", "headers", "body"].contains(&name.as_str()),
                "{name}"
            );
        }
        assert!(schema["properties"].get("jina_options").is_none());
    }

    #[test]
    fn defaults_are_blades() {
        let parsed = input(json!({"url": "https://example.com/a"})).unwrap();
        assert_eq!(parsed.request.method, Method::GET);
        assert_eq!(parsed.timeout, Duration::from_millis(30_000));
        assert!(parsed.request.follow_redirects);
        assert_eq!(parsed.request.max_redirects, 5);
        assert!(!parsed.extract_content && !parsed.return_headers);
        assert_eq!(parsed.request.headers.len(), 1);
        assert_eq!(parsed.request.headers[USER_AGENT], "Blade-AI/1.0");
        let own = input(json!({"url": "https://e.com", "headers": {"user-agent": "mine", "X-A": "1"}})).unwrap();
        assert_eq!(own.request.headers[USER_AGENT], "mine");
        assert_eq!(own.request.headers["x-a"], "1");
    }

    #[test]
    fn wrong_fields_are_named() {
        for (value, text) in [
            (json!({}), "Invalid input for WebFetch: url must be a string (got nothing)"),
            (json!({"url": "not a url"}), "Invalid input for WebFetch: url must be an absolute URL (got a string)"),
            (json!({"url": "https://e.com", "method": "PATCH"}), "Invalid input for WebFetch: method must be one of GET, POST, PUT, DELETE, HEAD (got a string)"),
            (json!({"url": "https://e.com", "timeout": 500}), "Invalid input for WebFetch: timeout must be an integer from 1000 to 120000 (got a number)"),
            (json!({"url": "https://e.com", "max_redirects": 11}), "Invalid input for WebFetch: max_redirects must be an integer from 0 to 10 (got a number)"),
            (json!({"url": "https://e.com", "headers": ["a"]}), "Invalid input for WebFetch: headers must be an object of header names and string values (got an array)"),
            (json!({"url": "https://e.com", "headers": {"X-N": 1}}), "Invalid input for WebFetch: headers.X-N must be a string"),
            (json!({"url": "https://e.com", "headers": {"bad name": "v"}}), "Invalid input for WebFetch: headers.bad name is not a valid header name"),
            (json!({"url": "https://e.com", "headers": {"X-V": "a\r\nInjected: 1"}}), "Invalid input for WebFetch: headers.X-V has a value that is not valid in HTTP"),
            (json!({"url": "https://e.com", "headers": {"Host": "internal"}}), "Invalid input for WebFetch: headers.Host cannot be set: the HTTP client writes it"),
            (json!({"url": "https://e.com", "headers": {"Content-Length": "0"}}), "Invalid input for WebFetch: headers.Content-Length cannot be set: the HTTP client writes it"),
            (json!({"url": "https://e.com", "follow_redirects": "yes"}), "Invalid input for WebFetch: follow_redirects must be a boolean (got a string)"),
        ] {
            assert_eq!(input(value).err().map(|answer| answer.text), Some(text.to_string()));
        }
    }

    #[test]
    fn a_cut_body_loses_only_its_partial_character() {
        let text = "aé".as_bytes();
        assert_eq!(&*text_prefix(&text[..2], true), b"a");
        assert_eq!(&*text_prefix(&text[..2], false), &text[..2]);
        assert_eq!(&*text_prefix(text, true), text);
    }
}
