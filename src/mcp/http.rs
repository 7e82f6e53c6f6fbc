//! rmcp's streamable-HTTP client contract on the project's reqwest 0.12 client: rmcp's own
//! implementation needs reqwest 0.13, and the project keeps one reqwest and one TLS provider.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::{RequestBuilder, Response, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorData, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

use crate::model::Secrets;

type Failure = StreamableHttpError<reqwest::Error>;

/// How much of a failed answer's body is kept for its message.
const ERROR_BODY_CHARS: usize = 512;
/// The largest JSON answer read (rmcp's own client's default).
const MAX_JSON_BODY: usize = 16 * 1024 * 1024;

/// One server's client: no redirects (like the webhook and model clients), the configured
/// headers on every request, and their values masked in what a failed answer quotes.
#[derive(Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    secrets: Arc<Secrets>,
}

impl HttpClient {
    pub fn new(headers: HeaderMap, secrets: Secrets) -> std::result::Result<HttpClient, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            // Request headers (session, accept, content type) win over these.
            .default_headers(headers)
            .build()
            .map_err(|error| error.to_string())?;
        Ok(HttpClient {
            client,
            secrets: Arc::new(secrets),
        })
    }
}

fn prepare(
    mut request: RequestBuilder,
    session_id: Option<&str>,
    auth_header: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
) -> RequestBuilder {
    if let Some(token) = auth_header {
        request = request.bearer_auth(token);
    }
    for (name, value) in custom_headers {
        request = request.header(name, value);
    }
    if let Some(session_id) = session_id {
        request = request.header(HEADER_SESSION_ID, session_id);
    }
    request
}

fn content_type(response: &Response) -> Option<String> {
    response
        .headers()
        .get(CONTENT_TYPE)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).to_ascii_lowercase())
}

fn is(content_type: Option<&str>, mime: &str) -> bool {
    content_type.is_some_and(|value| value.split(';').next().unwrap_or_default().trim() == mime)
}

/// The body, or `ResponseBodyTooLarge` once it passes `max` bytes.
async fn bounded_body(response: Response, max: usize) -> Result<Vec<u8>, Failure> {
    if response.content_length().is_some_and(|length| length > max as u64) {
        return Err(Failure::ResponseBodyTooLarge { max_size: max });
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        body.extend_from_slice(&chunk.map_err(Failure::Client)?);
        if body.len() > max {
            return Err(Failure::ResponseBodyTooLarge { max_size: max });
        }
    }
    Ok(body)
}

/// The events of `response`, none over the stdio cap; `answers`: the request it answers.
fn sse(response: Response, answers: Option<serde_json::Value>) -> BoxStream<'static, Result<Sse, SseError>> {
    let body = super::events::capped(response.bytes_stream(), answers, super::lines::MAX_LINE_BYTES);
    SseStream::from_bytes_stream(body).boxed()
}

fn session_of(response: &Response) -> Option<String> {
    response
        .headers()
        .get(HEADER_SESSION_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
}

impl StreamableHttpClient for HttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let request = self
            .client
            .post(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"));
        let request = prepare(request, session_id.as_deref(), auth_header, custom_headers);
        let response = request.json(&message).send().await.map_err(Failure::Client)?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(Failure::SessionExpired);
        }
        let awaits_no_response = !matches!(message, JsonRpcMessage::Request(_));
        let kind = content_type(&response);
        let session = session_of(&response);
        if !status.is_success() {
            let body = bounded_body(response, MAX_JSON_BODY).await.unwrap_or_default();
            let body = String::from_utf8_lossy(&body);
            if let Ok(error @ JsonRpcMessage::Error(_)) = serde_json::from_str::<ServerJsonRpcMessage>(&body) {
                return Ok(StreamableHttpPostResponse::Json(error, session));
            }
            // A server of an older protocol refuses `server/discover`: rmcp then initializes
            // the classic way, once it gets an error answering the request.
            if let JsonRpcMessage::Request(request) = &message {
                if session_id.is_none()
                    && status.is_client_error()
                    && !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                    && matches!(request.request, ClientRequest::DiscoverRequest(_))
                {
                    let error =
                        ErrorData::invalid_request(format!("server/discover rejected with HTTP {status}"), None);
                    return Ok(StreamableHttpPostResponse::Json(
                        ServerJsonRpcMessage::error(error, Some(request.id.clone())),
                        None,
                    ));
                }
            }
            // Masked before it is cut, so no half of a secret is left.
            let body = self.secrets.excerpt(&body, ERROR_BODY_CHARS);
            return Err(Failure::UnexpectedServerResponse(Cow::Owned(format!(
                "HTTP {status}: {body}"
            ))));
        }
        if is(kind.as_deref(), EVENT_STREAM_MIME_TYPE) {
            let answers = match &message {
                JsonRpcMessage::Request(request) => serde_json::to_value(&request.id).ok(),
                _ => None,
            };
            return Ok(StreamableHttpPostResponse::Sse(sse(response, answers), session));
        }
        if is(kind.as_deref(), JSON_MIME_TYPE) {
            let body = bounded_body(response, MAX_JSON_BODY).await?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(answer) => Ok(StreamableHttpPostResponse::Json(answer, session)),
                Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                Err(error) => Err(Failure::Deserialize(error)),
            };
        }
        if awaits_no_response {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(Failure::UnexpectedContentType(kind))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure> {
        let request = prepare(
            self.client.delete(uri.as_ref()),
            Some(&session_id),
            auth_header,
            custom_headers,
        );
        let response = request.send().await.map_err(Failure::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        response.error_for_status().map_err(Failure::Client)?;
        Ok(())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        let mut request = self
            .client
            .get(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"));
        if let Some(last_event_id) = last_event_id {
            request = request.header(HEADER_LAST_EVENT_ID, last_event_id);
        }
        let request = prepare(request, session_id.as_deref(), auth_header, custom_headers);
        let response = request.send().await.map_err(Failure::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(Failure::ServerDoesNotSupportSse);
        }
        let response = response.error_for_status().map_err(Failure::Client)?;
        let kind = content_type(&response);
        if !is(kind.as_deref(), EVENT_STREAM_MIME_TYPE) && !is(kind.as_deref(), JSON_MIME_TYPE) {
            return Err(Failure::UnexpectedContentType(kind));
        }
        Ok(sse(response, None))
    }
}
