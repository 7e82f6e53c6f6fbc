//! Claude Code's HTTP hooks: the input a command hook reads on stdin, POSTed as JSON; a 2xx
//! answer's body is read as a command hook's stdout on exit 0. Anything else — another status,
//! no connection, the timeout, a body over the cap — is no answer. (Our LobeHub webhooks keep
//! their own contract, `crate::webhook`.)

use std::time::Duration;

use reqwest::header::{HeaderValue, CONTENT_TYPE};
use serde_json::Value;

use super::answer::{Exit, Finished};
use crate::error::Result;
use crate::options::OptionsObject;
use crate::webhook::config::{header_templates, parse_url};
use crate::webhook::decision::MAX_RESPONSE_BYTES;
use crate::webhook::deliver::{client, read_capped, resolve_templates, DeliveryError};
use crate::webhook::Environment;

/// Claude Code's default for HTTP hooks, as for commands: ten minutes.
const DEFAULT_TIMEOUT_MS: u64 = 600_000;
const KEYS: &[&str] = &["url", "headers", "allowedEnvVars", "timeoutMs"];

#[derive(Debug, Clone, PartialEq)]
pub struct HttpConfig {
    pub url: reqwest::Url,
    /// Lowercased names and `${NAME}` templates, resolved at send time.
    pub headers: Vec<(String, String)>,
    pub allowed_env_vars: Vec<String>,
    pub timeout: Duration,
}

impl HttpConfig {
    /// Reads `{ url, headers?, allowedEnvVars?, timeoutMs? }` at `path`.
    pub fn parse(value: &Value, path: &str) -> Result<Self> {
        let object = OptionsObject::of(value, path, "an object { url, headers?, allowedEnvVars?, timeoutMs? }")?;
        object.only(KEYS, &[])?;
        let url = match object.get("url") {
            Some(Value::String(url)) => parse_url(url).map_err(|problem| object.error("url", problem))?,
            Some(other) => return Err(object.invalid("url", "an absolute http(s) URL", other)),
            None => return Err(object.error("url", "is required")),
        };
        let templates = header_templates(&object, "an HTTP hook")?;
        let timeout_ms = object
            .positive_integer("timeoutMs", 2_147_483_647)?
            .unwrap_or(DEFAULT_TIMEOUT_MS);
        Ok(HttpConfig {
            url,
            headers: templates.headers,
            allowed_env_vars: templates.allowed_env_vars,
            timeout: Duration::from_millis(timeout_ms),
        })
    }

    pub fn timeout_ms(&self) -> u64 {
        self.timeout.as_millis() as u64
    }
}

/// POSTs `input`; `Err` says why there is no answer.
pub async fn post(
    config: &HttpConfig,
    input: &Value,
    environment: &Environment,
) -> std::result::Result<Finished, String> {
    let mut headers = resolve_templates(&config.headers, environment)
        .map_err(|_| "its headers could not be resolved (a variable in allowedEnvVars is unset)".to_string())?;
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let body = input.to_string();
    let url = config.url.clone();
    let timeout = config.timeout;
    let timeout_ms = config.timeout_ms();
    let exchange = async move {
        let deadline = tokio::time::Instant::now() + timeout;
        let sent = client().post(url).headers(headers).body(body).send();
        let response = match tokio::time::timeout_at(deadline, sent).await {
            Err(_) => return Err(format!("timed out after {timeout_ms}ms")),
            Ok(Err(error)) if error.is_connect() => return Err("could not connect".to_string()),
            Ok(Err(_)) => return Err("the request failed".to_string()),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            return Err(format!("answered HTTP {}", status.as_u16()));
        }
        let body = read_capped(response, deadline).await.map_err(|error| match error {
            DeliveryError::Timeout => format!("timed out after {timeout_ms}ms"),
            DeliveryError::ResponseTooLarge => format!("answered more than {MAX_RESPONSE_BYTES} bytes"),
            _ => "its answer broke off".to_string(),
        })?;
        Ok(Finished {
            exit: Exit::Code(0),
            stdout: String::from_utf8_lossy(&body).into_owned(),
            stderr: String::new(),
        })
    };
    // On the runtime's workers, as webhooks are sent: never on the thread polling the run.
    crate::offload::offload(exchange)
        .await
        .unwrap_or_else(|_| Err("the request was dropped".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const PATH: &str = "advanced.hooks[0] (hook \"policy\").http";

    /// A one-shot HTTP server: answers `status` with `body` and hands back the request it read.
    async fn serve(status: u16, body: &'static str) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let read = socket.read(&mut chunk).await.unwrap();
                request.extend_from_slice(&chunk[..read]);
                let text = String::from_utf8_lossy(&request);
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|line| {
                            line.to_ascii_lowercase()
                                .strip_prefix("content-length: ")
                                .map(|n| n.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            let reply = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(reply.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&request).into_owned()
        });
        (url, task)
    }

    #[tokio::test]
    async fn the_input_is_posted_as_json_and_a_2xx_body_is_the_answer() {
        let (url, server) = serve(200, r#"{"decision":"block","reason":"no"}"#).await;
        let config = HttpConfig::parse(
            &json!({"url": url, "headers": {"Authorization": "Bearer ${HOOK_TOKEN}"}, "allowedEnvVars": ["HOOK_TOKEN"]}),
            PATH,
        )
        .unwrap();
        let environment = Environment::from([("HOOK_TOKEN".to_string(), "t0k".to_string())]);
        let finished = post(&config, &json!({"hook_event_name": "PreToolUse"}), &environment)
            .await
            .unwrap();
        assert_eq!(finished.stdout, r#"{"decision":"block","reason":"no"}"#);
        let request = server.await.unwrap();
        assert!(request.starts_with("POST /hook HTTP/1.1\r\n"), "{request}");
        assert!(request.contains("content-type: application/json\r\n"), "{request}");
        assert!(request.contains("authorization: Bearer t0k\r\n"), "{request}");
        assert!(request.ends_with(r#"{"hook_event_name":"PreToolUse"}"#), "{request}");
    }

    #[tokio::test]
    async fn another_status_no_server_or_the_timeout_is_no_answer() {
        let (url, _server) = serve(500, "oops").await;
        let config = HttpConfig::parse(&json!({ "url": url }), PATH).unwrap();
        assert_eq!(
            post(&config, &json!({}), &Environment::new()).await,
            Err("answered HTTP 500".into())
        );
        let huge: &'static str = Box::leak("x".repeat(MAX_RESPONSE_BYTES + 1).into_boxed_str());
        let (url, _server) = serve(200, huge).await;
        let config = HttpConfig::parse(&json!({ "url": url }), PATH).unwrap();
        assert_eq!(
            post(&config, &json!({}), &Environment::new()).await,
            Err("answered more than 65536 bytes".into())
        );
        let closed = HttpConfig::parse(&json!({"url": "http://127.0.0.1:9/x"}), PATH).unwrap();
        assert_eq!(
            post(&closed, &json!({}), &Environment::new()).await,
            Err("could not connect".into())
        );
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/x", silent.local_addr().unwrap());
        let slow = HttpConfig::parse(&json!({"url": url, "timeoutMs": 200}), PATH).unwrap();
        assert_eq!(
            post(&slow, &json!({}), &Environment::new()).await,
            Err("timed out after 200ms".into())
        );
    }

    #[test]
    fn bad_configuration_names_the_field() {
        let cases = [
            (json!({}), format!("{PATH}.url is required")),
            (
                json!({"url": "ftp://x"}),
                format!("{PATH}.url must be an absolute http(s) URL"),
            ),
            (
                json!({"url": "http://x.test", "headers": {"A": "${T}"}}),
                format!("{PATH}.headers.A uses ${{T}}, which is not in {PATH}.allowedEnvVars"),
            ),
            (
                json!({"url": "http://x.test", "timeoutMs": 0}),
                format!("{PATH}.timeoutMs must be a positive integer no greater than 2147483647 (got 0)"),
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(
                HttpConfig::parse(&value, PATH).unwrap_err().message,
                expected,
                "for {value}"
            );
        }
    }
}
