//! WebFetch against a real HTTP server on 127.0.0.1, as an attacker would probe it: refused
//! targets never reached, redirects re-checked at every hop, credentials kept from other
//! origins, a body that never ends cut at the cap, a server that never answers or drips bytes
//! held to the timeout, and Blade's answer texts.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_runtime_hooks::builtins::{Answer, Builtin, Call, State, WebPolicy, Workspace};
use agent_runtime_hooks::options::OptionsObject;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A request as the server read it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    /// Lower-case names.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The whole request, head and body, as it came over the wire.
    raw: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// How the server answers a request.
enum Reply {
    /// These bytes, then the connection closes.
    Bytes(Vec<u8>),
    /// Nothing, ever.
    Hang,
    /// A head, then one byte of body every `every`, forever.
    Drip(Duration),
    /// A head, then a chunked body that never ends (until the client goes).
    Endless,
}

type Route = dyn Fn(&Seen, u16) -> Reply + Send + Sync;

struct Server {
    address: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Bytes of endless bodies written, and whether their writer saw the client go.
    written: Arc<AtomicU64>,
    ended: Arc<AtomicBool>,
}

impl Server {
    async fn start(route: impl Fn(&Seen, u16) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let written = Arc::new(AtomicU64::new(0));
        let ended = Arc::new(AtomicBool::new(false));
        let route: Arc<Route> = Arc::new(route);
        let (s, w, e) = (seen.clone(), written.clone(), ended.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (seen, written, ended, route) = (s.clone(), w.clone(), e.clone(), route.clone());
                tokio::spawn(async move { serve(stream, address.port(), seen, written, ended, route).await });
            }
        });
        Server {
            address,
            seen,
            written,
            ended,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve(
    mut stream: TcpStream,
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    written: Arc<AtomicU64>,
    ended: Arc<AtomicBool>,
    route: Arc<Route>,
) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    seen.lock().unwrap().push(request.clone());
    match route(&request, port) {
        Reply::Bytes(bytes) => {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.shutdown().await;
        }
        Reply::Hang => tokio::time::sleep(Duration::from_secs(60)).await,
        Reply::Drip(every) => {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 1000000\r\n\r\n")
                .await;
            while stream.write_all(b"x").await.is_ok() {
                tokio::time::sleep(every).await;
            }
        }
        Reply::Endless => {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n")
                .await;
            let piece = vec![b'a'; 64 * 1024];
            let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
            chunk.extend_from_slice(&piece);
            chunk.extend_from_slice(b"\r\n");
            loop {
                if stream.write_all(&chunk).await.is_err() {
                    ended.store(true, Ordering::SeqCst);
                    return;
                }
                written.fetch_add(piece.len() as u64, Ordering::SeqCst);
                // Bounded: a client that never stops reading fails the test, not the machine.
                if written.load(Ordering::SeqCst) > 512 * 1024 * 1024 {
                    return;
                }
            }
        }
    }
}

async fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut raw = Vec::new();
    let mut buffer = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = raw.windows(4).position(|window| window == b"\r\n\r\n") {
            break at + 4;
        }
        let read = stream.read(&mut buffer).await.ok()?;
        if read == 0 {
            return None;
        }
        raw.extend_from_slice(&buffer[..read]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    while raw.len() < head_end + length {
        let read = stream.read(&mut buffer).await.ok()?;
        if read == 0 {
            break;
        }
        raw.extend_from_slice(&buffer[..read]);
    }
    Some(Seen {
        method,
        path,
        headers,
        body: raw[head_end..].to_vec(),
        raw,
    })
}

/// A whole response: status line, headers, body.
fn response(status: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut text = format!("HTTP/1.1 {status}\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ));
    Reply::Bytes(text.into_bytes())
}

fn redirect(status: &str, location: &str) -> Reply {
    response(status, &[("location", location)], "")
}

fn policy(options: Value) -> WebPolicy {
    let advanced = json!({ "webFetch": options });
    WebPolicy::read(&OptionsObject::of(&advanced, "advanced", "an object").unwrap()).unwrap()
}

/// Loopback allowed: the test server is on it.
fn local() -> WebPolicy {
    policy(json!({"allowPrivateNetwork": true}))
}

async fn fetch(policy: WebPolicy, input: Value) -> Answer {
    fetch_with(policy, input, CancellationToken::new()).await
}

async fn fetch_with(policy: WebPolicy, input: Value, cancel: CancellationToken) -> Answer {
    let state = State::with_web_policy(policy);
    let workspace = Workspace::default();
    let call = Call {
        workspace: &workspace,
        state: &state,
        cancel,
    };
    Builtin::WebFetch.run(input.as_object().unwrap(), call).await
}

fn answer_json(answer: &Answer) -> Value {
    assert!(!answer.failed, "{}", answer.text);
    serde_json::from_str(&answer.text).unwrap()
}

#[tokio::test]
async fn a_get_answers_blades_json() {
    let server = Server::start(|_, _| {
        response(
            "200 OK",
            &[("content-type", "text/plain; charset=utf-8"), ("x-one", "1")],
            "hello",
        )
    })
    .await;
    let answer = fetch(local(), json!({"url": server.url("/hello?q=1")})).await;
    let value = answer_json(&answer);
    let time = value["response_time"].as_u64().unwrap();
    let expected = json!({
        "status": 200,
        "status_text": "OK",
        "body": "hello",
        "url": server.url("/hello?q=1"),
        "redirected": false,
        "redirect_count": 0,
        "redirect_chain": [],
        "content_type": "text/plain; charset=utf-8",
        "response_time": time,
    });
    // Key for key, in Blade's order, pretty-printed with two spaces.
    assert_eq!(answer.text, serde_json::to_string_pretty(&expected).unwrap());
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!((seen[0].method.as_str(), seen[0].path.as_str()), ("GET", "/hello?q=1"));
    assert_eq!(seen[0].header("user-agent"), Some("Blade-AI/1.0"));
    assert!(seen[0].body.is_empty());
}

#[tokio::test]
async fn only_what_the_model_gave_is_sent() {
    let server = Server::start(|_, _| response("200 OK", &[], "ok")).await;
    fetch(
        local(),
        json!({"url": server.url("/p"), "method": "POST", "headers": {"X-Mine": "m", "Authorization": "Bearer model-given"}, "body": "{\"a\":1}"}),
    )
    .await;
    let seen = &server.seen()[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.body, b"{\"a\":1}");
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(seen.header("authorization"), Some("Bearer model-given"));
    let mut names: Vec<&str> = seen.headers.iter().map(|(name, _)| name.as_str()).collect();
    names.sort();
    // Nothing of the client's own beyond framing: no cookies, no proxy headers, no compression.
    assert_eq!(
        names,
        [
            "accept",
            "authorization",
            "content-length",
            "content-type",
            "host",
            "user-agent",
            "x-mine"
        ]
    );
    assert_eq!(seen.header("accept"), Some("*/*"));
}

#[tokio::test]
async fn return_headers_and_head() {
    let server = Server::start(|_, _| {
        Reply::Bytes(
            b"HTTP/1.1 200 OK\r\nX-Multi: a\r\nx-multi: b\r\nContent-Type: text/plain\r\ncontent-length: 4\r\nconnection: close\r\n\r\nbody"
                .to_vec(),
        )
    })
    .await;
    let value = answer_json(&fetch(local(), json!({"url": server.url("/"), "return_headers": true})).await);
    assert_eq!(
        value["headers"],
        json!({"connection": "close", "content-length": "4", "content-type": "text/plain", "x-multi": "a, b"})
    );
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    assert_eq!(keys[..4], ["status", "status_text", "headers", "body"]);
    let head = answer_json(&fetch(local(), json!({"url": server.url("/"), "method": "HEAD"})).await);
    assert_eq!(head["body"], "");
    assert_eq!(server.seen()[1].method, "HEAD");
}

#[tokio::test]
async fn an_error_status_is_blades_error_text() {
    let server = Server::start(|seen, _| match seen.path.as_str() {
        "/missing" => response("404 Not Found", &[], "no such page, secret body"),
        _ => response("418 Short And Stout", &[], "teapot"),
    })
    .await;
    assert_eq!(
        fetch(local(), json!({"url": server.url("/missing")})).await,
        Answer::error("HTTP error 404: Not Found")
    );
    // The server's own reason phrase, as Node's statusText.
    assert_eq!(
        fetch(local(), json!({"url": server.url("/tea")})).await,
        Answer::error("HTTP error 418: Short And Stout")
    );
}

#[tokio::test]
async fn refused_targets_are_never_reached() {
    let server = Server::start(|_, _| response("200 OK", &[], "reached")).await;
    let port = server.address.port();
    for (url, text) in [
        (
            server.url("/"),
            "WebFetch blocked non-public network address: 127.0.0.1".to_string(),
        ),
        (
            format!("http://localhost:{port}/"),
            "WebFetch blocked local hostname: localhost".into(),
        ),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/"),
            "WebFetch blocked non-public network address: ::ffff:127.0.0.1".into(),
        ),
        (
            format!("http://2130706433:{port}/"),
            "WebFetch blocked non-public network address: 127.0.0.1".into(),
        ),
        (
            "http://169.254.169.254/latest/meta-data/".into(),
            "WebFetch blocked non-public network address: 169.254.169.254".into(),
        ),
        (
            "file:///etc/passwd".into(),
            "WebFetch only supports HTTP(S) URLs, received file:".into(),
        ),
        (
            format!("http://user:pass@127.0.0.1:{port}/"),
            "WebFetch URLs must not contain embedded credentials".into(),
        ),
    ] {
        let answer = fetch(WebPolicy::default(), json!({"url": url})).await;
        assert_eq!(
            answer,
            Answer::error(format!("Network request failed: {text}")),
            "{url}"
        );
    }
    // Allowlist and blocklist, with the private network allowed.
    let only_other = policy(json!({"allowPrivateNetwork": true, "allowedHosts": ["*.example.com"]}));
    assert_eq!(
        fetch(only_other, json!({"url": server.url("/")})).await,
        Answer::error("Network request failed: WebFetch host is not in the allowlist: 127.0.0.1")
    );
    let blocked = policy(json!({"allowPrivateNetwork": true, "blockedHosts": ["127.0.0.1"]}));
    assert_eq!(
        fetch(blocked, json!({"url": server.url("/")})).await,
        Answer::error("Network request failed: WebFetch blocked host by policy: 127.0.0.1")
    );
    assert!(
        server.seen().is_empty(),
        "a refused target was reached: {:?}",
        server.seen()
    );
}

#[tokio::test]
async fn every_redirect_hop_is_checked_again() {
    let server = Server::start(|seen, port| match seen.path.as_str() {
        "/to-localhost" => redirect("302 Found", &format!("http://localhost:{port}/inside")),
        "/to-file" => redirect("301 Moved Permanently", "file:///etc/passwd"),
        "/to-metadata" => redirect("307 Temporary Redirect", "http://169.254.169.254/latest/meta-data/"),
        _ => response("200 OK", &[], "inside"),
    })
    .await;
    let only_loopback_address = || policy(json!({"allowPrivateNetwork": true, "allowedHosts": ["127.0.0.1"]}));
    assert_eq!(
        fetch(only_loopback_address(), json!({"url": server.url("/to-localhost")})).await,
        Answer::error("Network request failed: WebFetch host is not in the allowlist: localhost")
    );
    assert_eq!(
        fetch(only_loopback_address(), json!({"url": server.url("/to-file")})).await,
        Answer::error("Network request failed: WebFetch only supports HTTP(S) URLs, received file:")
    );
    let no_metadata = policy(json!({"allowPrivateNetwork": true, "blockedHosts": ["169.254.169.254"]}));
    assert_eq!(
        fetch(no_metadata, json!({"url": server.url("/to-metadata")})).await,
        Answer::error("Network request failed: WebFetch blocked host by policy: 169.254.169.254")
    );
    let paths: Vec<String> = server.seen().into_iter().map(|seen| seen.path).collect();
    assert_eq!(
        paths,
        ["/to-localhost", "/to-file", "/to-metadata"],
        "a refused hop was reached"
    );
}

#[tokio::test]
async fn redirects_are_followed_by_hand_up_to_the_limit() {
    let server = Server::start(|seen, _| {
        let path = seen.path.as_str();
        match path.strip_prefix("/hop/").and_then(|n| n.parse::<u32>().ok()) {
            Some(0) => response("200 OK", &[("content-type", "text/plain")], "arrived"),
            Some(n) => redirect("302 Found", &format!("/hop/{}", n - 1)),
            None if path == "/nowhere" => response("302 Found", &[], ""),
            None => response("404 Not Found", &[], ""),
        }
    })
    .await;
    let value = answer_json(&fetch(local(), json!({"url": server.url("/hop/2"), "max_redirects": 2})).await);
    assert_eq!(value["body"], "arrived");
    assert_eq!(value["url"], server.url("/hop/0"));
    assert_eq!(value["redirected"], true);
    assert_eq!(value["redirect_count"], 2);
    assert_eq!(
        value["redirect_chain"],
        json!([
            format!("302 → {}", server.url("/hop/1")),
            format!("302 → {}", server.url("/hop/0"))
        ])
    );
    let before = server.seen().len();
    assert_eq!(
        fetch(local(), json!({"url": server.url("/hop/6")})).await,
        Answer::error("Network request failed: Exceeded maximum redirects (5)")
    );
    // Five hops followed, the sixth answer refused: six requests.
    assert_eq!(server.seen().len() - before, 6);
    assert_eq!(
        fetch(local(), json!({"url": server.url("/hop/1"), "max_redirects": 0})).await,
        Answer::error("Network request failed: Exceeded maximum redirects (0)")
    );
    assert_eq!(
        fetch(local(), json!({"url": server.url("/nowhere")})).await,
        Answer::error("Network request failed: HTTP 302 redirect is missing Location")
    );
    // Not followed: the redirect is the answer.
    let unfollowed =
        answer_json(&fetch(local(), json!({"url": server.url("/hop/3"), "follow_redirects": false})).await);
    assert_eq!(unfollowed["status"], 302);
    assert_eq!(unfollowed["redirect_count"], 0);
}

#[tokio::test]
async fn a_redirect_turns_a_post_into_a_get_as_fetch_does() {
    let server = Server::start(|seen, _| match seen.path.as_str() {
        "/found" => redirect("302 Found", "/final"),
        "/keep" => redirect("307 Temporary Redirect", "/final"),
        _ => response("200 OK", &[], "ok"),
    })
    .await;
    let input = |path: &str| json!({"url": server.url(path), "method": "POST", "body": "{\"value\":1}"});
    let dropped = answer_json(&fetch(local(), input("/found")).await);
    assert_eq!(dropped["body_dropped"], true);
    let kept = answer_json(&fetch(local(), input("/keep")).await);
    assert!(kept.get("body_dropped").is_none());
    let seen = server.seen();
    assert_eq!((seen[1].method.as_str(), seen[1].body.len()), ("GET", 0));
    assert_eq!(seen[1].header("content-type"), None);
    assert_eq!(
        (seen[3].method.as_str(), seen[3].body.as_slice()),
        ("POST", &b"{\"value\":1}"[..])
    );
}

#[tokio::test]
async fn credentials_stay_with_their_origin() {
    let other = Server::start(|_, _| response("200 OK", &[], "other")).await;
    let target = other.url("/final");
    let server = Server::start(move |seen, _| match seen.path.as_str() {
        "/same" => redirect("307 Temporary Redirect", "/final"),
        "/cross" => redirect("307 Temporary Redirect", &target),
        _ => response("200 OK", &[], "same"),
    })
    .await;
    let headers = json!({"Authorization": "Bearer secret", "Cookie": "session=secret", "Proxy-Authorization": "Basic secret", "X-Safe": "kept"});
    fetch(local(), json!({"url": server.url("/same"), "headers": headers})).await;
    fetch(local(), json!({"url": server.url("/cross"), "headers": headers})).await;
    let same = &server.seen()[1];
    assert_eq!(same.header("authorization"), Some("Bearer secret"));
    assert_eq!(same.header("cookie"), Some("session=secret"));
    let crossed = &other.seen()[0];
    assert_eq!(crossed.header("x-safe"), Some("kept"));
    for name in ["authorization", "cookie", "proxy-authorization"] {
        assert_eq!(crossed.header(name), None, "{name} crossed to another origin");
    }
    assert!(!String::from_utf8_lossy(&crossed.raw).contains("secret"));
}

#[tokio::test]
async fn a_body_that_never_ends_is_cut_at_the_cap() {
    let server = Server::start(|_, _| Reply::Endless).await;
    let capped = policy(json!({"allowPrivateNetwork": true, "maxResponseBytes": 100_000}));
    let value = answer_json(&fetch(capped, json!({"url": server.url("/")})).await);
    assert_eq!(value["body"].as_str().unwrap().len(), 100_000);
    assert_eq!(value["body_truncated"], true);
    // The connection was dropped: the server's writes failed soon after the cap.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server.ended.load(Ordering::SeqCst) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        server.ended.load(Ordering::SeqCst),
        "the client kept the endless body open"
    );
    let written = server.written.load(Ordering::SeqCst);
    assert!(
        written < 32 * 1024 * 1024,
        "{written} bytes were sent before the client let go"
    );
    // The default cap, 5 MiB, on the same endless body.
    let value = answer_json(&fetch(local(), json!({"url": server.url("/")})).await);
    assert_eq!(value["body"].as_str().unwrap().len(), 5 * 1024 * 1024);
}

#[tokio::test]
async fn the_timeout_runs_on_a_real_clock() {
    let server = Server::start(|seen, _| match seen.path.as_str() {
        "/hang" => Reply::Hang,
        _ => Reply::Drip(Duration::from_millis(100)),
    })
    .await;
    for path in ["/hang", "/drip"] {
        let started = Instant::now();
        let answer = fetch(local(), json!({"url": server.url(path), "timeout": 1000})).await;
        let elapsed = started.elapsed();
        assert_eq!(answer, Answer::error("Request aborted"), "{path}");
        assert!(
            elapsed >= Duration::from_millis(1000) && elapsed < Duration::from_millis(3000),
            "{path}: {elapsed:?}"
        );
    }
}

#[tokio::test]
async fn a_cancel_aborts_the_request_at_once() {
    let server = Server::start(|_, _| Reply::Hang).await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let answer = fetch_with(local(), json!({"url": server.url("/"), "timeout": 60_000}), cancel).await;
    assert_eq!(answer, Answer::error("Request aborted"));
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_closed_port_is_a_network_failure() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let answer = fetch(local(), json!({"url": format!("http://127.0.0.1:{port}/")})).await;
    assert!(answer.failed);
    assert!(
        answer.text.starts_with("Network request failed: error sending request")
            && answer.text.contains("Connection refused")
            && !answer.text.contains(&port.to_string()),
        "{}",
        answer.text
    );
}

#[tokio::test]
async fn extract_content_turns_a_page_into_text() {
    let server = Server::start(|seen, _| match seen.path.as_str() {
        "/page" => response(
            "200 OK",
            &[("content-type", "text/html; charset=utf-8")],
            "<html><head><title>The Page</title><script>alert(1)</script></head><body><h1>Hello</h1><p>World &amp; more</p></body></html>",
        ),
        _ => response("200 OK", &[("content-type", "application/json")], "{\"a\":1}"),
    })
    .await;
    let value = answer_json(&fetch(local(), json!({"url": server.url("/page"), "extract_content": true})).await);
    let body = value["body"].as_str().unwrap();
    assert!(
        body.starts_with(&format!("# The Page\n\n**Source**: {}\n\n---\n\n", server.url("/page"))),
        "{body}"
    );
    assert!(
        body.contains("Hello") && body.contains("World & more") && !body.contains("alert"),
        "{body}"
    );
    assert_eq!(value["content_type"], "text/markdown");
    // Not HTML: as it came.
    let json_body = answer_json(&fetch(local(), json!({"url": server.url("/data"), "extract_content": true})).await);
    assert_eq!(json_body["body"], "{\"a\":1}");
    assert_eq!(json_body["content_type"], "application/json");
}
