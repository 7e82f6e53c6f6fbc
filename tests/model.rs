//! The HTTP model clients against servers on 127.0.0.1 that misbehave: redirects, echoed
//! secrets, bodies that never end, answers that are not what was asked for.

mod common;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_runtime_hooks::agent::{SendOptions, StreamEvent};
use agent_runtime_hooks::error::{ErrorCode, SdkError};
use common::FakeHost;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A server that answers each request with `answer(request head and body, socket)`.
struct Server {
    url: String,
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
}

async fn serve<F, Fut>(answer: F) -> Server
where
    F: Fn(String, TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let connections = Arc::new(AtomicUsize::new(0));
    let (seen, count, answer) = (requests.clone(), connections.clone(), Arc::new(answer));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let (seen, answer) = (seen.clone(), answer.clone());
            tokio::spawn(async move {
                let request = read_request(&mut socket).await;
                seen.lock().unwrap().push(request.clone());
                answer(request, socket).await;
            });
        }
    });
    Server {
        url: format!("http://127.0.0.1:{port}"),
        port,
        requests,
        connections,
    }
}

async fn read_request(socket: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&bytes).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    line.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|n| n.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0usize);
            if bytes.len() >= end + 4 + length {
                return text;
            }
        }
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&bytes).to_string(),
            Ok(n) => bytes.extend_from_slice(&buffer[..n]),
        }
    }
}

/// A whole HTTP/1.1 answer.
fn answer(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn reply(mut socket: TcpStream, text: String) {
    let _ = socket.write_all(text.as_bytes()).await;
    let _ = socket.shutdown().await;
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

/// Runs one `send` of an agent made from `options`: every event.
async fn run(options: Value) -> Vec<StreamEvent> {
    let (session, _) = common::session(options, FakeHost::default());
    common::run(&session, "hi").await
}

fn failure(events: &[StreamEvent]) -> &SdkError {
    match events.last() {
        Some(StreamEvent::Error { error, .. }) => error,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn model(url: &str, provider: &str, connection: Value) -> Value {
    json!({"model": "m", "provider": provider, "apiKey": "sk-test", "baseUrl": url,
           "advanced": {"connection": connection}})
}

#[tokio::test]
async fn a_redirect_is_an_error_and_nothing_reaches_the_other_origin() {
    let elsewhere = serve(|_, socket| reply(socket, answer("200 OK", "text/event-stream", "data: [DONE]\n\n"))).await;
    let target = format!("{}/v1/chat/completions", elsewhere.url);
    for (provider, status) in [("openai", "307 Temporary Redirect"), ("anthropic", "302 Found")] {
        let location = target.clone();
        let redirecting = serve(move |_, socket| {
            let text = format!("HTTP/1.1 {status}\r\nlocation: {location}\r\ncontent-length: 0\r\n\r\n");
            reply(socket, text)
        })
        .await;
        let events = run(model(&redirecting.url, provider, json!({"maxRetries": 0}))).await;
        let error = failure(&events);
        assert_eq!(error.code, ErrorCode::Model);
        assert_eq!(error.message, format!("Model request failed with status {status}"));
        assert_eq!(error.status(), Some(status[..3].parse().unwrap()));
        assert_eq!(redirecting.requests.lock().unwrap().len(), 1);
    }
    assert_eq!(elsewhere.connections.load(Ordering::SeqCst), 0);
}

// Markers that must never come back: the key, a header value, the URL's user and password, a
// query value.
const KEY: &str = "sk-MARK-key-0001";
const HEADER: &str = "MARK-header-0002";
const USER: &str = "MARKuser3";
const PASSWORD: &str = "MARK-pass-0004";
const QUERY: &str = "MARK-query-0005";

fn secret_options(port: u16, provider: &str, connection: Value) -> Value {
    let mut connection = connection;
    connection["headers"] = json!({"x-gateway-token": HEADER});
    json!({"model": "m", "provider": provider, "apiKey": KEY,
           "baseUrl": format!("http://{USER}:{PASSWORD}@127.0.0.1:{port}/v1?api-key={QUERY}"),
           "advanced": {"connection": connection}})
}

/// The run's error, checked to show no marker anywhere: its message, its JSON, every event.
fn without_secrets(events: &[StreamEvent]) -> SdkError {
    let everything = format!("{events:?} {}", serde_json::to_string(events).unwrap());
    assert!(!everything.contains("MARK"), "a secret leaked: {everything}");
    failure(events).clone()
}

#[tokio::test]
async fn secrets_the_server_echoes_are_masked_in_every_error() {
    // Each server answers with the whole request it got (head and body) in a different place.
    let echo_in_status = |request: String, socket| {
        let body = json!({"error": {"message": request}}).to_string();
        reply(socket, answer("401 Unauthorized", "application/json", &body))
    };
    let echo_in_stream = |request: String, socket| {
        let body = format!("data: {}\n\n", json!({"type": "error", "error": {"message": request}}));
        reply(socket, format!("{SSE_HEAD}{body}"))
    };
    let echo_in_page = |request: String, socket| {
        reply(
            socket,
            answer("200 OK", "text/html", &format!("<html><pre>{request}</pre></html>")),
        )
    };
    let echo_in_chunk = |request: String, socket| {
        let body = format!("data: {{\"choices\": [{}\n\n", json!(request));
        reply(socket, format!("{SSE_HEAD}{body}"))
    };
    let servers = [
        serve(echo_in_status).await,
        serve(echo_in_stream).await,
        serve(echo_in_page).await,
        serve(echo_in_chunk).await,
    ];
    let mut messages = Vec::new();
    for provider in ["openai", "anthropic"] {
        for server in &servers {
            let events = run(secret_options(server.port, provider, json!({"maxRetries": 0}))).await;
            let request = server.requests.lock().unwrap().pop().unwrap();
            // The server did get every secret: they were sent, and only hidden on the way back.
            for marker in [KEY, HEADER, QUERY] {
                assert!(request.contains(marker), "{marker} was not sent: {request}");
            }
            messages.push(without_secrets(&events).message);
        }
    }
    let path = |provider| match provider {
        "openai" => "POST /v1/chat/completions?api-key=*** HTTP/1.1",
        // The base URL ends in /v1: Anthropic's path is /messages under it.
        _ => "POST /v1/messages?api-key=*** HTTP/1.1",
    };
    for (provider, messages) in [("openai", &messages[..4]), ("anthropic", &messages[4..])] {
        let line = path(provider);
        assert!(
            messages[0].starts_with(&format!("Model request failed with status 401 Unauthorized: {line}")),
            "{}",
            messages[0]
        );
        assert!(
            messages[0].contains("Bearer ***") || messages[0].contains("x-api-key: ***"),
            "{}",
            messages[0]
        );
        assert!(messages[0].contains("x-gateway-token: ***"), "{}", messages[0]);
        assert!(
            messages[1].starts_with(&format!("Model stream reported an error: {line}")),
            "{}",
            messages[1]
        );
        assert!(
            messages[2].starts_with(&format!(
                "Model answer is not the event stream that was asked for (text/html): <html><pre>{line}"
            )),
            "{}",
            messages[2]
        );
        assert!(
            messages[3].starts_with("Model stream is malformed: "),
            "{}",
            messages[3]
        );
    }

    // A server that cannot be reached: the URL is named without user-info and query.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let events = run(secret_options(port, "openai", json!({}))).await;
    let error = without_secrets(&events);
    let named = format!("Model request to http://127.0.0.1:{port}/v1/chat/completions failed: ");
    assert!(error.message.starts_with(&named), "{}", error.message);
    assert_eq!(error.status(), None);
}

#[tokio::test]
async fn an_answer_that_is_not_what_was_asked_for_names_its_status_and_quotes_it() {
    let page = "<!DOCTYPE html><html><body>Sign in to continue</body></html>";
    let html = serve(move |_, socket| reply(socket, answer("200 OK", "text/html; charset=utf-8", page))).await;
    let error = failure(&run(model(&html.url, "openai", json!({}))).await).clone();
    assert_eq!(
        error.message,
        format!("Model answer is not the event stream that was asked for (text/html): {page}")
    );
    assert_eq!(error.status(), Some(200));

    // JSON where a stream was asked for: its error message.
    let json_body = r#"{"error":{"message":"stream is not supported for this model"}}"#;
    let json_answer = serve(move |_, socket| reply(socket, answer("200 OK", "application/json", json_body))).await;
    let error = failure(&run(model(&json_answer.url, "anthropic", json!({}))).await).clone();
    assert_eq!(
        error.message,
        "Model answer is not the event stream that was asked for (application/json): stream is not supported for this model"
    );
    assert_eq!(error.status(), Some(200));

    // No content-type, but the first bytes are a page.
    let bare = serve(move |_, socket| {
        reply(
            socket,
            format!("HTTP/1.1 203 Non-Authoritative Information\r\nconnection: close\r\n\r\n\n  {page}"),
        )
    })
    .await;
    let error = failure(&run(model(&bare.url, "openai", json!({}))).await).clone();
    assert_eq!(
        error.message,
        format!("Model answer is not the event stream that was asked for (no content-type): {page}")
    );
    assert_eq!(error.status(), Some(203));

    // A real stream under a wrong content-type is still read.
    let mislabelled = serve(|_, socket| {
        let body = "\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
        reply(socket, answer("200 OK", "application/json", body))
    })
    .await;
    let events = run(model(&mislabelled.url, "openai", json!({}))).await;
    assert_eq!(common::result(&events).content, "ok");

    // Not streamed: the page is quoted with the status too.
    let error = failure(&run(model(&html.url, "openai", json!({"stream": false}))).await).clone();
    assert_eq!(
        error.message,
        format!("Model response is not a chat completion: expected value at line 1 column 1 in {page}")
    );
    assert_eq!(error.status(), Some(200));
}

/// Writes `piece` over and over until the client goes away; `closed` is set then.
async fn flood(mut socket: TcpStream, head: &'static str, piece: Vec<u8>, closed: Arc<AtomicBool>) {
    if socket.write_all(head.as_bytes()).await.is_ok() {
        while socket.write_all(&piece).await.is_ok() {}
    }
    closed.store(true, Ordering::SeqCst);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_timeout_holds_while_events_arrive_as_fast_as_they_can() {
    let events = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"}}]}\n\n".repeat(2000);
    let closed = Arc::new(AtomicBool::new(false));
    let flag = closed.clone();
    let server = serve(move |_, socket| flood(socket, SSE_HEAD, events.clone().into_bytes(), flag.clone())).await;
    let started = Instant::now();
    let events = run(model(&server.url, "openai", json!({"requestTimeoutMs": 500}))).await;
    let elapsed = started.elapsed();
    assert_eq!(failure(&events).message, "Model request timed out after 500ms");
    assert!(elapsed < Duration::from_millis(1500), "took {elapsed:?}");
    println!("fast events: the 500 ms timeout fired after {elapsed:?}");
}

/// A stream of one line that never ends, 64 KiB a millisecond (about 64 MB/s).
async fn endless_line(closed: Arc<AtomicBool>) -> Server {
    serve(move |_, mut socket| {
        let closed = closed.clone();
        async move {
            let mut open = socket.write_all(SSE_HEAD.as_bytes()).await.is_ok();
            open = open
                && socket
                    .write_all(b"data: {\"choices\":[{\"delta\":{\"content\":\"")
                    .await
                    .is_ok();
            let piece = vec![b'x'; 64 * 1024];
            while open {
                open = socket.write_all(&piece).await.is_ok();
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            closed.store(true, Ordering::SeqCst);
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_timeout_holds_while_one_line_arrives_fast() {
    let server = endless_line(Arc::new(AtomicBool::new(false))).await;
    let started = Instant::now();
    let connection = json!({"requestTimeoutMs": 500, "maxResponseBytes": 1_000_000_000});
    let events = tokio::time::timeout(Duration::from_secs(10), run(model(&server.url, "openai", connection)))
        .await
        .expect("the run should have ended by its timeout");
    let elapsed = started.elapsed();
    assert_eq!(failure(&events).message, "Model request timed out after 500ms");
    assert!(elapsed < Duration::from_millis(1500), "took {elapsed:?}");
    println!("one fast line: the 500 ms timeout fired after {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_timeout_holds_while_bytes_trickle() {
    let server = serve(|_, mut socket| async move {
        let _ = socket.write_all(SSE_HEAD.as_bytes()).await;
        let _ = socket
            .write_all(b"data: {\"choices\":[{\"delta\":{\"content\":\"")
            .await;
        while socket.write_all(b"x").await.is_ok() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let started = Instant::now();
    let events = run(model(&server.url, "anthropic", json!({"requestTimeoutMs": 400}))).await;
    let elapsed = started.elapsed();
    assert_eq!(failure(&events).message, "Model request timed out after 400ms");
    assert!(elapsed < Duration::from_millis(1200), "took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_endless_line_or_body_is_cut_at_max_response_bytes() {
    let closed = Arc::new(AtomicBool::new(false));
    let flag = closed.clone();
    let line = serve(move |_, socket| {
        let flag = flag.clone();
        async move {
            let mut socket = socket;
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: ")
                .await;
            flood(socket, "", vec![b'x'; 64 * 1024], flag).await
        }
    })
    .await;
    let events = run(model(&line.url, "openai", json!({"maxResponseBytes": 1_048_576}))).await;
    let error = failure(&events);
    assert_eq!(
        error.message,
        "Model answer is too large: an event-stream line is longer than 1048576 bytes (advanced.connection.maxResponseBytes)"
    );
    assert_eq!(error.status(), Some(200));

    // Not streamed: an endless chunked body, and one that declares its excess up front.
    let endless = serve(|_, socket| {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n";
        flood(socket, head, vec![b' '; 64 * 1024], Arc::new(AtomicBool::new(false)))
    })
    .await;
    let declared = serve(|_, mut socket| async move {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5000000\r\n\r\n{";
        let _ = socket.write_all(head.as_bytes()).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    })
    .await;
    for server in [&endless, &declared] {
        let connection = json!({"stream": false, "maxResponseBytes": 1_000_000, "requestTimeoutMs": 3000});
        let started = Instant::now();
        let events = run(model(&server.url, "anthropic", connection)).await;
        assert_eq!(
            failure(&events).message,
            "Model answer is too large: the response body is longer than 1000000 bytes (advanced.connection.maxResponseBytes)"
        );
        assert!(started.elapsed() < Duration::from_millis(2000));
    }
    // The default cap is 16 MiB.
    let events = run(model(&line.url, "openai", json!({}))).await;
    assert_eq!(
        failure(&events).message,
        "Model answer is too large: an event-stream line is longer than 16777216 bytes (advanced.connection.maxResponseBytes)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_stream_is_let_go_at_once() {
    let closed = Arc::new(AtomicBool::new(false));
    let server = endless_line(closed.clone()).await;
    let connection = json!({"maxResponseBytes": 1_000_000_000});
    let (session, _) = common::session(model(&server.url, "openai", connection), FakeHost::default());
    let (handle, drive) = session.send(&json!("hi"), SendOptions::default()).expect("accepted");
    tokio::spawn(drive);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!closed.load(Ordering::SeqCst), "the stream should still be flowing");
    let aborted = Instant::now();
    handle.control.abort("enough".into());
    while !closed.load(Ordering::SeqCst) {
        assert!(
            aborted.elapsed() < Duration::from_secs(2),
            "the connection is still being read"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!(
        "the server saw the connection close {:?} after the abort",
        aborted.elapsed()
    );
    let mut last = None;
    while let Some(event) = handle.events.recv().await {
        last = Some(event);
    }
    assert!(matches!(last, Some(StreamEvent::Error { error, .. }) if error.code == ErrorCode::Abort));
}

#[tokio::test]
async fn a_surrogate_pair_split_across_events_reaches_the_run_whole() {
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\\ud83d\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\ude00\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let server = serve(move |_, socket| reply(socket, format!("{SSE_HEAD}{body}"))).await;
    let events = run(model(&server.url, "openai", json!({}))).await;
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::Content { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["a", "😀"]);
    assert_eq!(common::result(&events).content, "a😀");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_goes_quiet_fails_at_stream_idle_timeout_ms() {
    let server = serve(|_, mut socket| async move {
        let _ = socket.write_all(SSE_HEAD.as_bytes()).await;
        let _ = socket
            .write_all(b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
            .await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    })
    .await;
    let started = Instant::now();
    let connection = json!({"streamIdleTimeoutMs": 150, "requestTimeoutMs": 4000});
    let events = run(model(&server.url, "openai-compatible", connection)).await;
    let elapsed = started.elapsed();
    assert_eq!(
        failure(&events).message,
        "Model stream was idle for more than 150ms (advanced.connection.streamIdleTimeoutMs)"
    );
    assert!(elapsed < Duration::from_millis(1500), "took {elapsed:?}");
}

#[tokio::test]
async fn api_version_is_anthropics_header_and_an_openai_query_parameter() {
    let sse = "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let openai = serve(move |_, socket| reply(socket, answer("200 OK", "text/event-stream", sse))).await;
    let connection = json!({"apiVersion": "2024-10-21"});
    run(model(&openai.url, "openai-compatible", connection.clone())).await;
    let request = openai.requests.lock().unwrap()[0].clone();
    assert!(
        request.starts_with("POST /chat/completions?api-version=2024-10-21 HTTP/1.1"),
        "{request}"
    );
    let anthropic = serve(|_, socket| reply(socket, answer("500 Internal Server Error", "text/plain", "no"))).await;
    let options = json!({"model": "m", "provider": "anthropic", "apiKey": "sk-test", "baseUrl": anthropic.url,
                         "advanced": {"connection": {"apiVersion": "2099-01-01", "maxRetries": 0}}});
    run(options).await;
    let request = anthropic.requests.lock().unwrap()[0].to_ascii_lowercase();
    assert!(request.contains("anthropic-version: 2099-01-01\r\n"), "{request}");
}

/// A server that answers its requests in turn with `answers` (the last one again once they run
/// out).
async fn answering(answers: Vec<String>) -> Server {
    let answers = Arc::new(answers);
    let next = Arc::new(AtomicUsize::new(0));
    serve(move |_, socket| {
        let n = next.fetch_add(1, Ordering::SeqCst);
        let text = answers[n.min(answers.len() - 1)].clone();
        reply(socket, text)
    })
    .await
}

/// The JSON body of a request `read_request` kept.
fn body_of(request: &str) -> Value {
    serde_json::from_str(&request[request.find("\r\n\r\n").unwrap() + 4..]).unwrap()
}

fn sse_answer(datas: &[Value]) -> String {
    let mut body = String::new();
    for data in datas {
        body += &format!("data: {data}\n\n");
    }
    body += "data: [DONE]\n\n";
    answer("200 OK", "text/event-stream", &body)
}

fn with_tool(mut options: Value) -> Value {
    options["tools"] = json!([common::tool("get_weather", 1)]);
    options
}

#[tokio::test]
async fn a_streamed_name_repeated_in_every_delta_names_the_tool_once() {
    // As llama.cpp's server streams a call: the name again in every delta.
    let delta = |arguments: &str| {
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": arguments}}]}}]})
    };
    let server = answering(vec![
        sse_answer(&[
            delta("{\"city\""),
            delta(":\"Paris\"}"),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ]),
        sse_answer(&[json!({"choices": [{"index": 0, "delta": {"content": "sunny"}, "finish_reason": "stop"}]})]),
    ])
    .await;
    let host = FakeHost::default().returning(1, json!("18 C"));
    let (session, host) = common::session(with_tool(model(&server.url, "openai-compatible", json!({}))), host);
    let events = common::run(&session, "weather?").await;
    let result = common::result(&events);
    assert_eq!(result.tool_calls[0].name, "get_weather");
    assert_eq!(result.tool_calls[0].output, "18 C");
    assert_eq!(host.calls_of(1).len(), 1);
    assert_eq!(result.content, "sunny");
}

#[tokio::test]
async fn an_assistant_turn_with_tool_calls_and_no_text_is_sent_with_empty_content() {
    // llama.cpp's server refuses `content: null` (it validates a string).
    let call = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        "finish_reason": "tool_calls"}]});
    let done = json!({"choices": [{"message": {"role": "assistant", "content": "sunny"}, "finish_reason": "stop"}]});
    let server = answering(vec![
        answer("200 OK", "application/json", &call.to_string()),
        answer("200 OK", "application/json", &done.to_string()),
    ])
    .await;
    let host = FakeHost::default().returning(1, json!("18 C"));
    let options = with_tool(model(&server.url, "openai-compatible", json!({"stream": false})));
    let (session, _) = common::session(options, host);
    let events = common::run(&session, "weather?").await;
    assert_eq!(common::result(&events).content, "sunny");
    let second = body_of(&server.requests.lock().unwrap()[1]);
    assert_eq!(
        second["messages"][1],
        json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]})
    );
    // What the user sees in the conversation is OpenAI's own shape.
    let messages = serde_json::to_value(session.messages()).unwrap();
    assert_eq!(messages[1]["content"], Value::Null);
}

#[tokio::test]
async fn a_json_answer_to_a_streamed_request_is_read_as_the_whole_answer() {
    // LiteLLM's proxy answers a streamed Anthropic request with one message.
    let message = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "hello there"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 4, "output_tokens": 2}});
    let server = answering(vec![answer("200 OK", "application/json", &message.to_string())]).await;
    let events = run(model(&server.url, "anthropic", json!({}))).await;
    let result = common::result(&events);
    assert_eq!(result.content, "hello there");
    assert_eq!((result.usage.input_tokens, result.usage.output_tokens), (4, 2));
    assert!(events
        .iter()
        .any(|event| matches!(event, StreamEvent::Content { delta } if delta == "hello there")));
    assert_eq!(body_of(&server.requests.lock().unwrap()[0])["stream"], true);
}

#[tokio::test]
async fn tool_choice_reaches_both_wire_formats_and_a_forced_choice_is_spent_by_a_call() {
    let openai_call = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}}]});
    let openai_done = json!({"choices": [{"message": {"role": "assistant", "content": "ok"}}]});
    let anthropic_call = json!({"content": [{"type": "tool_use", "id": "tu_1", "name": "get_weather", "input": {}}],
        "stop_reason": "tool_use", "usage": {}});
    let anthropic_done = json!({"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": {}});
    let cases = [
        (
            "openai-compatible",
            openai_call,
            openai_done,
            json!("required"),
            json!("required"),
            json!("auto"),
        ),
        (
            "openai-compatible",
            json!(null),
            json!(null),
            json!({"name": "get_weather"}),
            json!({"type": "function", "function": {"name": "get_weather"}}),
            json!("auto"),
        ),
        (
            "anthropic",
            anthropic_call,
            anthropic_done,
            json!("required"),
            json!({"type": "any"}),
            json!({"type": "auto"}),
        ),
        (
            "anthropic",
            json!(null),
            json!(null),
            json!("none"),
            json!({"type": "none"}),
            json!({"type": "none"}),
        ),
    ];
    let mut previous = (json!(null), json!(null));
    for (provider, call, done, choice, first, second) in cases {
        let (call, done) = if call.is_null() { previous.clone() } else { (call, done) };
        previous = (call.clone(), done.clone());
        let server = answering(vec![
            answer("200 OK", "application/json", &call.to_string()),
            answer("200 OK", "application/json", &done.to_string()),
        ])
        .await;
        let mut options = with_tool(model(&server.url, provider, json!({"stream": false})));
        options["toolChoice"] = choice.clone();
        let (session, _) = common::session(options, FakeHost::default().returning(1, json!("18 C")));
        let events = common::run(&session, "weather?").await;
        assert_eq!(common::result(&events).content, "ok", "{provider} {choice}");
        let requests = server.requests.lock().unwrap();
        assert_eq!(body_of(&requests[0])["tool_choice"], first, "{provider} {choice}");
        assert_eq!(body_of(&requests[1])["tool_choice"], second, "{provider} {choice}");
    }
}

#[tokio::test]
async fn a_send_chooses_its_own_tool_choice_and_without_tools_none_is_sent() {
    let done = json!({"choices": [{"message": {"role": "assistant", "content": "ok"}}]});
    let server = answering(vec![answer("200 OK", "application/json", &done.to_string())]).await;
    let mut options = with_tool(model(&server.url, "openai-compatible", json!({"stream": false})));
    options["toolChoice"] = json!("auto");
    let (session, _) = common::session(options, FakeHost::default());
    let send = SendOptions {
        tool_choice: Some(agent_runtime_hooks::model::ToolChoice::None),
        ..SendOptions::default()
    };
    let (handle, drive) = session.send(&json!("hi"), send).unwrap();
    tokio::spawn(drive);
    while handle.events.recv().await.is_some() {}
    assert_eq!(body_of(&server.requests.lock().unwrap()[0])["tool_choice"], "none");

    let bare = answering(vec![answer("200 OK", "application/json", &done.to_string())]).await;
    let mut options = model(&bare.url, "openai-compatible", json!({"stream": false}));
    options["toolChoice"] = json!("required");
    run(options).await;
    assert!(body_of(&bare.requests.lock().unwrap()[0]).get("tool_choice").is_none());
}

#[tokio::test]
async fn a_tool_choice_naming_a_tool_not_offered_fails_the_run_naming_both() {
    let server = answering(vec![answer("500 Internal Server Error", "text/plain", "unreached")]).await;
    let mut options = with_tool(model(&server.url, "openai-compatible", json!({})));
    options["toolChoice"] = json!({"name": "get_wether"});
    let events = run(options).await;
    assert_eq!(
        failure(&events).message,
        "toolChoice names the tool \"get_wether\", which the model is not offered (offered: get_weather)"
    );
    assert!(server.requests.lock().unwrap().is_empty());
}

#[test]
fn bad_tool_choices_are_config_errors_naming_the_field() {
    for (choice, message) in [
        (
            json!("any"),
            "toolChoice must be 'auto', 'none', 'required' or { name: string } (got \"any\")",
        ),
        (
            json!(3),
            "toolChoice must be 'auto', 'none', 'required' or { name: string } (got 3)",
        ),
        (json!({"name": ""}), "toolChoice.name must be a tool's name (got \"\")"),
        (
            json!({"tool": "x"}),
            "toolChoice.tool is not a known option (known here: name)",
        ),
    ] {
        let options = json!({"model": "m", "apiKey": "k", "toolChoice": choice});
        let error = agent_runtime_hooks::agent::AgentConfig::from_options(&options, &Default::default()).unwrap_err();
        assert_eq!(error.code, ErrorCode::Config, "{choice}");
        assert_eq!(error.message, message);
    }
}

#[tokio::test]
async fn an_answer_cut_by_the_output_limit_ends_with_max_tokens_on_either_wire_format() {
    let openai = answering(vec![sse_answer(&[
        json!({"choices": [{"index": 0, "delta": {"content": "The weather in"}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}),
    ])])
    .await;
    let message = json!({"content": [{"type": "text", "text": "The weather in"}], "stop_reason": "max_tokens",
        "usage": {"input_tokens": 9, "output_tokens": 3}});
    let anthropic = answering(vec![answer("200 OK", "application/json", &message.to_string())]).await;
    for (server, provider, connection) in [
        (&openai, "openai-compatible", json!({})),
        (&anthropic, "anthropic", json!({"stream": false})),
    ] {
        let mut options = model(&server.url, provider, connection);
        options["maxOutputTokens"] = json!(3);
        let events = run(options).await;
        let result = common::result(&events);
        assert_eq!(result.content, "The weather in", "{provider}");
        assert_eq!(result.stop_reason.name(), "max_tokens", "{provider}");
        let ends: Vec<Value> = events
            .iter()
            .filter(|event| matches!(event, StreamEvent::TurnEnd { .. }))
            .map(|event| serde_json::to_value(event).unwrap())
            .collect();
        assert_eq!(
            ends,
            [json!({"type": "turn_end", "turn": 1, "finishReason": "length"})],
            "{provider}"
        );
    }
}
