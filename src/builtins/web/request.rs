//! WebFetch's HTTP exchange: a client of its own (no proxy, no cookies, no default headers, so
//! nothing of the agent's own connection can ride along), redirects followed by hand with the
//! policy checked at every hop, the names resolved only to public addresses (checked where the
//! connection is made, so a name cannot resolve one way for the check and another for the
//! connection), and a body read up to the policy's cap.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{
    HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST, LOCATION, PROXY_AUTHORIZATION,
};
use reqwest::{Method, StatusCode, Url};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::policy::{check_public, WebPolicy};

/// What the model asked for, checked.
pub(super) struct Request {
    pub url: Url,
    pub method: Method,
    pub headers: HeaderMap,
    pub body: Option<String>,
    pub follow_redirects: bool,
    pub max_redirects: u32,
}

/// The last hop's answer.
pub(super) struct Response {
    pub status: StatusCode,
    pub status_text: String,
    /// By lower-case name, in name order (as a Fetch `Headers` iterates them).
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    /// The body was longer than the cap and is cut there.
    pub truncated: bool,
    pub url: Url,
    /// `<status> → <next URL>`, one per redirect followed.
    pub redirect_chain: Vec<String>,
    /// A redirect turned the request into a GET and dropped its body.
    pub body_dropped: bool,
}

#[derive(Debug, PartialEq)]
pub(super) enum Failure {
    /// Cancelled, or the deadline passed (Blade answers both `Request aborted`).
    Aborted,
    Failed(String),
}

/// Runs `request` until `deadline` (every hop and the body alike) unless `cancel` fires first.
pub(super) async fn fetch(
    request: Request,
    policy: &WebPolicy,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Response, Failure> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(Failure::Aborted),
        outcome = tokio::time::timeout_at(deadline, follow(request, policy)) => {
            outcome.unwrap_or(Err(Failure::Aborted))
        }
    }
}

async fn follow(request: Request, policy: &WebPolicy) -> Result<Response, Failure> {
    let client = client(policy.allow_private_network);
    let Request {
        mut url,
        mut method,
        mut headers,
        mut body,
        follow_redirects,
        max_redirects,
    } = request;
    let mut redirect_chain = Vec::new();
    let mut body_dropped = false;
    loop {
        policy.check_url(&url).map_err(Failure::Failed)?;
        let sent_body = body.clone().filter(|_| method != Method::GET && method != Method::HEAD);
        let mut hop_headers = headers.clone();
        if sent_body.is_some() && !hop_headers.contains_key(CONTENT_TYPE) {
            hop_headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let mut builder = client.request(method.clone(), url.clone()).headers(hop_headers);
        if let Some(sent) = sent_body {
            builder = builder.body(sent);
        }
        let response = builder.send().await.map_err(|error| Failure::Failed(describe(error)))?;
        let status = response.status();
        if status.is_redirection() && follow_redirects {
            let Some(location) = response.headers().get(LOCATION) else {
                return Err(Failure::Failed(format!(
                    "HTTP {} redirect is missing Location",
                    status.as_u16()
                )));
            };
            if redirect_chain.len() as u32 >= max_redirects {
                return Err(Failure::Failed(format!("Exceeded maximum redirects ({max_redirects})")));
            }
            let location = String::from_utf8_lossy(location.as_bytes()).into_owned();
            let next = url
                .join(&location)
                .map_err(|_| Failure::Failed(format!("Invalid redirect location: {location}")))?;
            policy.check_url(&next).map_err(Failure::Failed)?;
            drop(response);
            redirect_chain.push(format!("{} → {next}", status.as_u16()));
            // Credentials the model gave for one origin are not handed to another.
            if next.origin() != url.origin() {
                for name in [AUTHORIZATION, PROXY_AUTHORIZATION, COOKIE, HOST] {
                    headers.remove(name);
                }
            }
            let to_get = status == StatusCode::SEE_OTHER && method != Method::HEAD
                || matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND)
                    && method != Method::GET
                    && method != Method::HEAD;
            if to_get {
                body_dropped |= body.is_some();
                method = Method::GET;
                body = None;
                headers.remove(CONTENT_TYPE);
                headers.remove(CONTENT_LENGTH);
            }
            url = next;
            continue;
        }
        let status_text = reason(&response);
        let response_headers = header_object(response.headers());
        let (bytes, truncated) = read_body(response, policy.max_response_bytes).await?;
        return Ok(Response {
            status,
            status_text,
            headers: response_headers,
            body: bytes,
            truncated,
            url,
            redirect_chain,
            body_dropped,
        });
    }
}

/// The body, at most `max` bytes; past them the rest is left unread (the connection dropped).
async fn read_body(mut response: reqwest::Response, max: usize) -> Result<(Vec<u8>, bool), Failure> {
    let declared = response.content_length().unwrap_or(0).min(max as u64) as usize;
    let mut body = Vec::with_capacity(declared);
    loop {
        // A body whose bytes are always ready would never let the deadline's timer fire.
        tokio::task::coop::consume_budget().await;
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return Ok((body, false)),
            Err(error) => return Err(Failure::Failed(describe(error))),
        };
        let room = max - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
}

/// The status line's own reason phrase (Node's `statusText`), else the standard one.
fn reason(response: &reqwest::Response) -> String {
    if let Some(phrase) = response.extensions().get::<hyper::ext::ReasonPhrase>() {
        return String::from_utf8_lossy(phrase.as_bytes()).into_owned();
    }
    response.status().canonical_reason().unwrap_or_default().to_string()
}

/// Headers by lower-case name; a repeated header's values joined by `, `.
fn header_object(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut object: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        object
            .entry(name.as_str().to_string())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    object
}

/// A refusal made while connecting (by the resolver), found again in reqwest's error.
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// What went wrong: a refusal's own text, else the error and its causes (without the URL,
/// which the model gave).
fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    let mut text = String::new();
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<Refused>() {
            return refused.0.clone();
        }
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Resolves a name and refuses it when any of its addresses is not public (Blade's
/// `createSafeDispatcher` lookup): the connection can only go to an address checked here.
struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if addresses.is_empty() {
                return Err(Box::new(Refused(format!("WebFetch could not resolve host: {host}"))) as _);
            }
            for address in &addresses {
                if let Err(refusal) = check_public(address.ip()) {
                    return Err(Box::new(Refused(refusal)) as _);
                }
            }
            Ok(Box::new(addresses.into_iter()) as Addrs)
        })
    }
}

/// One client per setting of `allowPrivateNetwork` (its resolver differs), shared by every
/// session: connections are reused, and each was checked when it was made.
fn client(allow_private_network: bool) -> &'static reqwest::Client {
    static PUBLIC: OnceLock<reqwest::Client> = OnceLock::new();
    static ANY: OnceLock<reqwest::Client> = OnceLock::new();
    let build = |public_only: bool| {
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // A proxy from the environment would resolve names itself (past the check) and
            // receive the proxy credentials of the agent's environment.
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(30));
        let builder = if public_only {
            builder.dns_resolver(Arc::new(PublicOnly))
        } else {
            builder
        };
        builder
            .build()
            .expect("the WebFetch client has a fixed, valid configuration")
    };
    if allow_private_network {
        ANY.get_or_init(|| build(false))
    } else {
        PUBLIC.get_or_init(|| build(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    async fn resolve(name: &str) -> Result<Vec<SocketAddr>, String> {
        match PublicOnly.resolve(Name::from_str(name).unwrap()).await {
            Ok(addresses) => Ok(addresses.collect()),
            Err(error) => Err(error.to_string()),
        }
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused() {
        // The name check refuses `localhost` before any lookup; the resolver refuses whatever
        // name resolves to a non-public address (a rebinding name, a hosts-file entry).
        let refused = resolve("localhost").await.unwrap_err();
        assert!(
            refused == "WebFetch blocked non-public network address: 127.0.0.1"
                || refused == "WebFetch blocked non-public network address: ::1",
            "{refused}"
        );
    }

    #[tokio::test]
    async fn a_refusal_in_the_resolver_is_the_answer() {
        // Through reqwest: the refusal comes back as its own text, not as a connect error.
        let error = client(false).get("http://localhost:9/").send().await.unwrap_err();
        let text = describe(error);
        assert!(
            text.starts_with("WebFetch blocked non-public network address: "),
            "{text}"
        );
    }

    #[test]
    fn repeated_headers_are_joined() {
        let mut headers = HeaderMap::new();
        headers.append("x-a", HeaderValue::from_static("1"));
        headers.append("x-a", HeaderValue::from_static("2"));
        headers.append(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        let object = header_object(&headers);
        assert_eq!(object["x-a"], "1, 2");
        assert_eq!(object.keys().collect::<Vec<_>>(), ["content-type", "x-a"]);
    }
}
