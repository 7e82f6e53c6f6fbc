//! Sending webhooks: one shared client that never follows redirects, headers resolved from the
//! environment at send time, per-hook timeouts, and a 64 KiB cap on what a control may answer.
//! Errors carry a code and a status, never a header, a secret or the receiver's text.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use serde_json::Value;

use super::config::{template_names, WebhookConfig};
use super::decision::{self, Decision, Parsed, MAX_RESPONSE_BYTES};
use crate::offload::offload;

/// The environment variables a run may use, read on the JS thread when it started.
pub type Environment = HashMap<String, String>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryError {
    /// A header template names a variable that is not set.
    Configuration,
    /// A non-2xx answer (redirects included: they are not followed).
    Http(u16),
    InvalidResponse,
    Network,
    ResponseTooLarge,
    Timeout,
}

impl DeliveryError {
    pub fn code(&self) -> &'static str {
        match self {
            DeliveryError::Configuration => "configuration",
            DeliveryError::Http(_) => "http_error",
            DeliveryError::InvalidResponse => "invalid_response",
            DeliveryError::Network => "network_error",
            DeliveryError::ResponseTooLarge => "response_too_large",
            DeliveryError::Timeout => "timeout",
        }
    }
}

impl fmt::Display for DeliveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeliveryError::Http(status) => write!(f, "Hook HTTP request failed: http_error (status {status})"),
            other => write!(f, "Hook HTTP request failed: {}", other.code()),
        }
    }
}

/// What a result control answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlAnswer {
    Decision(Decision),
    Notification,
    Failed(DeliveryError),
}

pub(crate) fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .expect("the webhook client has a fixed, valid configuration")
    })
}

/// Resolves `${NAME}` templates from `environment`. An unset variable is a configuration error;
/// the values are only ever put into the request.
pub fn resolve_headers(config: &WebhookConfig, environment: &Environment) -> Result<HeaderMap, DeliveryError> {
    let mut headers = resolve_templates(&config.headers, environment)?;
    // A configured content-type header wins, as it always has.
    headers
        .entry(CONTENT_TYPE)
        .or_insert(HeaderValue::from_static("application/json"));
    Ok(headers)
}

/// `headers` (names and `${NAME}` templates) with their variables taken from `environment`.
pub fn resolve_templates(
    templates: &[(String, String)],
    environment: &Environment,
) -> Result<HeaderMap, DeliveryError> {
    let mut headers = HeaderMap::new();
    for (name, template) in templates {
        let mut value = template.clone();
        for variable in template_names(template).map_err(|_| DeliveryError::Configuration)? {
            let resolved = environment.get(&variable).ok_or(DeliveryError::Configuration)?;
            value = value.replacen(&format!("${{{variable}}}"), resolved, 1);
        }
        if value.contains(['\r', '\n', '\0']) {
            return Err(DeliveryError::Configuration);
        }
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| DeliveryError::Configuration)?;
        let mut value = HeaderValue::from_str(&value).map_err(|_| DeliveryError::Configuration)?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    Ok(headers)
}

async fn post(
    config: &WebhookConfig,
    payload: &Value,
    environment: &Environment,
) -> Result<reqwest::Response, DeliveryError> {
    let headers = resolve_headers(config, environment)?;
    let body = serde_json::to_vec(payload).map_err(|_| DeliveryError::Configuration)?;
    let sent = client().post(config.url.clone()).headers(headers).body(body).send();
    let response = match tokio::time::timeout(config.timeout, sent).await {
        Err(_) => return Err(DeliveryError::Timeout),
        Ok(Err(error)) if error.is_timeout() => return Err(DeliveryError::Timeout),
        Ok(Err(_)) => return Err(DeliveryError::Network),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if !status.is_success() {
        return Err(DeliveryError::Http(status.as_u16()));
    }
    Ok(response)
}

/// Sends `payload` on the runtime's workers, never on the thread polling the run: a result
/// control (`responseHandling: 'toolCall'`) is asked, any other webhook notified (any 2xx is
/// `Notification`).
pub async fn deliver(config: &Arc<WebhookConfig>, payload: Value, environment: &Arc<Environment>) -> ControlAnswer {
    let (config, environment) = (config.clone(), environment.clone());
    offload(async move {
        if config.is_control() {
            return control(&config, &payload, &environment).await;
        }
        match notify(&config, &payload, &environment).await {
            Ok(()) => ControlAnswer::Notification,
            Err(error) => ControlAnswer::Failed(error),
        }
    })
    .await
    // A delivery task that did not finish (the runtime shutting down) is "anything else" of the
    // error rules: network_error.
    .unwrap_or(ControlAnswer::Failed(DeliveryError::Network))
}

/// A notification: any 2xx is accepted and its body is not read.
async fn notify(config: &WebhookConfig, payload: &Value, environment: &Environment) -> Result<(), DeliveryError> {
    post(config, payload, environment).await.map(drop)
}

/// One attempt at a queued notification (already on the runtime's workers): `body` (JSON text)
/// to `url` with the header templates resolved from `environment` and the row's
/// `Idempotency-Key`, within `timeout`. Any 2xx delivers it; its body is not read.
pub async fn notify_queued(
    url: &reqwest::Url,
    timeout: Duration,
    templates: &[(String, String)],
    (body, idempotency_key): (String, &str),
    environment: &Environment,
) -> Result<(), DeliveryError> {
    let mut headers = resolve_templates(templates, environment)?;
    headers
        .entry(CONTENT_TYPE)
        .or_insert(HeaderValue::from_static("application/json"));
    let key = HeaderValue::from_str(idempotency_key).map_err(|_| DeliveryError::Configuration)?;
    headers.insert(HeaderName::from_static("idempotency-key"), key);
    let sent = client().post(url.clone()).headers(headers).body(body).send();
    match tokio::time::timeout(timeout, sent).await {
        Err(_) => Err(DeliveryError::Timeout),
        Ok(Err(error)) if error.is_timeout() => Err(DeliveryError::Timeout),
        Ok(Err(_)) => Err(DeliveryError::Network),
        Ok(Ok(response)) if response.status().is_success() => Ok(()),
        Ok(Ok(response)) => Err(DeliveryError::Http(response.status().as_u16())),
    }
}

/// An answer's body, at most [`MAX_RESPONSE_BYTES`], read by `deadline`: what result controls and
/// Claude-style HTTP hooks read.
pub(crate) async fn read_capped(
    response: reqwest::Response,
    deadline: tokio::time::Instant,
) -> Result<Vec<u8>, DeliveryError> {
    if response
        .content_length()
        .is_some_and(|length| length > MAX_RESPONSE_BYTES as u64)
    {
        return Err(DeliveryError::ResponseTooLarge);
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    loop {
        match tokio::time::timeout_at(deadline, chunks.next()).await {
            Err(_) => return Err(DeliveryError::Timeout),
            Ok(None) => return Ok(body),
            Ok(Some(Err(_))) => return Err(DeliveryError::Network),
            Ok(Some(Ok(chunk))) => {
                if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(DeliveryError::ResponseTooLarge);
                }
                body.extend_from_slice(&chunk);
            }
        }
    }
}

/// A result control: reads at most 64 KiB of the answer within the hook's timeout.
async fn control(config: &WebhookConfig, payload: &Value, environment: &Environment) -> ControlAnswer {
    let started = tokio::time::Instant::now();
    let response = match post(config, payload, environment).await {
        Ok(response) => response,
        Err(error) => return ControlAnswer::Failed(error),
    };
    let status = response.status().as_u16();
    if status == 204 {
        return ControlAnswer::Notification;
    }
    let body = match read_capped(response, started + config.timeout).await {
        Ok(body) => body,
        Err(error) => return ControlAnswer::Failed(error),
    };
    match decision::parse(status, &body) {
        Parsed::Decision(decision) => ControlAnswer::Decision(decision),
        Parsed::Notification => ControlAnswer::Notification,
        Parsed::Invalid | Parsed::NotUtf8 => ControlAnswer::Failed(DeliveryError::InvalidResponse),
        Parsed::TooLarge => ControlAnswer::Failed(DeliveryError::ResponseTooLarge),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook_event::HookEvent;
    use serde_json::json;

    #[test]
    fn templates_resolve_from_the_environment_and_unset_ones_fail() {
        let config = WebhookConfig::parse(
            &json!({"url": "https://x.test", "headers": {"Authorization": "Bearer ${TOKEN}"}, "allowedEnvVars": ["TOKEN"]}),
            "w",
            HookEvent::StepEnd,
        )
        .unwrap();
        let environment = Environment::from([("TOKEN".to_string(), "s3cr3t".to_string())]);
        let headers = resolve_headers(&config, &environment).unwrap();
        assert_eq!(headers["authorization"], "Bearer s3cr3t");
        assert!(headers["authorization"].is_sensitive());
        assert_eq!(
            resolve_headers(&config, &Environment::new()),
            Err(DeliveryError::Configuration)
        );
        let bad = Environment::from([("TOKEN".to_string(), "a\r\nInjected: 1".to_string())]);
        assert_eq!(resolve_headers(&config, &bad), Err(DeliveryError::Configuration));
    }

    #[test]
    fn errors_say_the_code_and_status_only() {
        assert_eq!(
            DeliveryError::Http(500).to_string(),
            "Hook HTTP request failed: http_error (status 500)"
        );
        assert_eq!(DeliveryError::Timeout.to_string(), "Hook HTTP request failed: timeout");
    }
}
