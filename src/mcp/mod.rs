//! `advanced.mcpServers` (SPEC §8.6): MCP servers started (stdio) or reached (streamable HTTP)
//! through `rmcp`, their tools listed once at creation, their calls sent on the tokio workers (a run is polled on the JS
//! thread, which must not do I/O). The agent offers the tools as `mcp__<server>__<tool>`.

mod events;
mod http;
mod lines;
pub mod names;
mod stdio;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::error::{Result, SdkError};
use crate::model::Secrets;
use crate::offload::offload;
use crate::options::OptionsObject;
use crate::sync::lock;
use crate::text::excerpt;
use crate::webhook::config::{header_templates, parse_url, HeaderTemplates};
use crate::webhook::deliver::resolve_templates;

/// How long a server may take to start and answer `initialize` and `tools/list`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One `advanced.mcpServers` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// `{ command, args?, env?, cwd? }`: a process spoken to over its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
    },
    /// `{ url, headers?, allowedEnvVars? }`: a streamable-HTTP endpoint.
    Http {
        url: reqwest::Url,
        /// Lowercased names and `${NAME}` templates, resolved when the server is reached.
        headers: Vec<(String, String)>,
        allowed_env_vars: Vec<String>,
    },
}

/// Reads `advanced.mcpServers` strictly: every problem a `ConfigError` naming the field.
pub fn read(advanced: &OptionsObject) -> Result<Vec<ServerConfig>> {
    let Some(value) = advanced.get("mcpServers") else {
        return Ok(Vec::new());
    };
    let servers = OptionsObject::of(value, "advanced.mcpServers", "an object of server configs")?;
    let mut configs = Vec::new();
    for (name, value) in servers.map() {
        let path = format!("advanced.mcpServers.{name}");
        // The name is part of every tool name (`names.rs`).
        if let Some(problem) = names::server_name_problem(name) {
            return Err(SdkError::config(format!("{path}: a server name {problem}")).at(&path));
        }
        let server = OptionsObject::of(value, &path, "an object ({ command } or { url })")?;
        if server.get("url").is_some() && server.get("command").is_some() {
            return Err(SdkError::config(format!(
                "{path}: give either command (stdio) or url (streamable HTTP), not both"
            ))
            .at(&path));
        }
        if server.get("url").is_some() {
            server.only(&["url", "headers", "allowedEnvVars"], &[])?;
            let url = server.str("url")?.unwrap_or_default();
            let url = parse_url(url).map_err(|problem| server.error("url", problem))?;
            let HeaderTemplates {
                headers,
                allowed_env_vars,
            } = header_templates(&server, "an MCP server")?;
            configs.push(ServerConfig {
                name: name.clone(),
                transport: Transport::Http {
                    url,
                    headers,
                    allowed_env_vars,
                },
            });
            continue;
        }
        server.only(&["command", "args", "env", "cwd"], &[])?;
        let command = match server.str("command")? {
            Some(command) if !command.is_empty() => command.to_string(),
            Some(_) => return Err(server.error("command", "must be a non-empty string")),
            None => return Err(server.error("command", "is required (or url)")),
        };
        let args = match server.get("args") {
            None => Vec::new(),
            Some(value) => value
                .as_array()
                .filter(|items| items.iter().all(Value::is_string))
                .ok_or_else(|| server.invalid("args", "an array of strings", value))?
                .iter()
                .filter_map(|item| item.as_str().map(str::to_string))
                .collect(),
        };
        let env = match server.get("env") {
            None => Vec::new(),
            Some(value) => value
                .as_object()
                .filter(|map| map.values().all(Value::is_string))
                .ok_or_else(|| server.invalid("env", "an object of strings", value))?
                .iter()
                .filter_map(|(key, value)| value.as_str().map(|value| (key.clone(), value.to_string())))
                .collect(),
        };
        configs.push(ServerConfig {
            name: name.clone(),
            transport: Transport::Stdio {
                command,
                args,
                env,
                cwd: server.string("cwd")?,
            },
        });
    }
    Ok(configs)
}

pub use names::tool_name;

/// A tool one of the servers offers.
#[derive(Debug, Clone)]
pub struct Tool {
    /// Index of its server.
    pub server: usize,
    /// `mcp__<server>__<tool>`.
    pub name: String,
    /// The server's own name for it.
    pub api_name: String,
    pub description: String,
    pub input_schema: Value,
    /// The server says it changes nothing (`annotations.readOnlyHint`).
    pub read_only: bool,
}

struct Server {
    name: String,
    /// Its header values and URL query values (a `url` server's), masked in its errors.
    secrets: Secrets,
    peer: Peer<RoleClient>,
    /// Taken by `close`.
    service: Mutex<Option<RunningService<RoleClient, ()>>>,
}

/// The agent's started servers and their tools.
pub struct Servers {
    servers: Vec<Server>,
    pub tools: Vec<Tool>,
    /// Tools the servers listed that are not offered, and why: for the agent to log.
    pub skipped: Vec<String>,
}

/// How an MCP call ended, when it did not return a result.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The text of its content; `failed` for `isError: true`.
    Done {
        text: String,
        failed: bool,
    },
    /// The server could not answer (it crashed, or the connection broke).
    Broken(String),
    TimedOut,
    Cancelled,
}

impl Servers {
    /// Starts every server and lists its tools; the first that cannot start fails all (and
    /// those already started are stopped).
    pub async fn start(configs: Vec<ServerConfig>) -> Result<Servers> {
        let servers = offload(async move {
            let mut started = Servers {
                servers: Vec::new(),
                tools: Vec::new(),
                skipped: Vec::new(),
            };
            for config in configs {
                let name = config.name.clone();
                let mut secrets = Secrets::default();
                match tokio::time::timeout(START_TIMEOUT, start_one(&config, &mut secrets)).await {
                    Ok(Ok((service, tools))) => {
                        let server = started.servers.len();
                        let mut seen = HashSet::new();
                        for tool in tools {
                            // The server is not ours: a tool it names badly is left out, not the server.
                            let problem = names::tool_name_problem(&name, &tool.name).or_else(|| {
                                (!seen.insert(tool.name.to_string())).then(|| "it is listed twice".to_string())
                            });
                            if let Some(problem) = problem {
                                started.skipped.push(format!(
                                    "MCP server \"{name}\" lists a tool that is not offered ({problem}): {:?}",
                                    excerpt(&secrets.mask(&tool.name), 80)
                                ));
                                continue;
                            }
                            started.tools.push(Tool {
                                server,
                                name: tool_name(&name, &tool.name),
                                api_name: tool.name.to_string(),
                                description: tool.description.as_deref().unwrap_or_default().to_string(),
                                input_schema: Value::Object((*tool.input_schema).clone()),
                                read_only: tool.annotations.as_ref().and_then(|hints| hints.read_only_hint)
                                    == Some(true),
                            });
                        }
                        started.servers.push(Server {
                            name,
                            secrets,
                            peer: service.peer().clone(),
                            service: Mutex::new(Some(service)),
                        });
                    }
                    failed => {
                        let why = match failed {
                            Ok(Err(why)) => secrets.mask(&why).into_owned(),
                            _ => format!("it did not answer within {}s", START_TIMEOUT.as_secs()),
                        };
                        started.stop_all().await;
                        let field = format!("advanced.mcpServers.{name}");
                        return Err(
                            SdkError::config(format!("{field}: the MCP server could not start: {why}")).at(&field),
                        );
                    }
                }
            }
            Ok(started)
        })
        .await;
        servers.unwrap_or_else(|error| Err(SdkError::config(format!("MCP servers could not start: {error}"))))
    }

    pub fn server_name(&self, tool: &Tool) -> &str {
        &self.servers[tool.server].name
    }

    /// Calls `tool`, within `timeout_ms`, until `cancel` fires.
    pub async fn call(
        &self,
        tool: &Tool,
        input: &Map<String, Value>,
        timeout_ms: u32,
        cancel: Option<&CancellationToken>,
    ) -> Outcome {
        let peer = self.servers[tool.server].peer.clone();
        let params = CallToolRequestParams::new(tool.api_name.clone()).with_arguments(input.clone());
        let secrets = &self.servers[tool.server].secrets;
        let server = &self.servers[tool.server].name;
        // Dropping the offloaded call (timeout, abort) drops rmcp's request.
        let call = offload(async move { peer.call_tool(params).await });
        let timeout = tokio::time::sleep(Duration::from_millis(timeout_ms.into()));
        let cancelled = async {
            match cancel {
                Some(cancel) => cancel.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = cancelled => Outcome::Cancelled,
            _ = timeout => Outcome::TimedOut,
            called = call => match called {
                Ok(Ok(result)) => done(result, secrets),
                // An answer over the line limit (`lines.rs`): its message says it all.
                Ok(Err(ServiceError::McpError(error)))
                    if error.data.as_ref().is_some_and(|data| data.get(lines::LIMIT_MARK).is_some()) =>
                {
                    Outcome::Broken(format!("MCP server \"{server}\" failed: {}", secrets.mask(&error.message)))
                }
                Ok(Err(error)) => Outcome::Broken(format!("MCP server \"{server}\" failed: {}", secrets.mask(&error.to_string()))),
                Err(error) => Outcome::Broken(format!("MCP server \"{server}\" failed: {error}")),
            },
        }
    }

    /// `mcpServerStatus()`: each server's name, `connected` or `closed` (stopped, or its
    /// connection ended), and how many tools it offers.
    pub fn status(&self) -> Value {
        Value::Array(
            self.servers
                .iter()
                .enumerate()
                .map(|(index, server)| {
                    // A crashed server's loop has ended: its transport is closed.
                    let open = lock(&server.service)
                        .as_ref()
                        .is_some_and(|service| !service.is_closed())
                        && !server.peer.is_transport_closed();
                    json!({
                        "name": server.name,
                        "status": if open { "connected" } else { "closed" },
                        "toolCount": self.tools.iter().filter(|tool| tool.server == index).count(),
                    })
                })
                .collect(),
        )
    }

    /// `mcpListTools()`.
    pub fn list_tools(&self) -> Value {
        Value::Array(
            self.tools
                .iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "serverName": self.servers[tool.server].name,
                        "toolName": tool.api_name,
                        "description": tool.description,
                        "inputSchema": tool.input_schema,
                    })
                })
                .collect(),
        )
    }

    /// Stops every server (`close()`): the connection is closed and the process ended.
    pub async fn stop(&self) {
        let services: Vec<_> = self
            .servers
            .iter()
            .filter_map(|server| lock(&server.service).take())
            .collect();
        if services.is_empty() {
            return;
        }
        let _ = offload(async move {
            for service in services {
                let _ = service.cancel().await;
            }
        })
        .await;
    }

    async fn stop_all(&mut self) {
        for server in &self.servers {
            let service = lock(&server.service).take();
            if let Some(service) = service {
                let _ = service.cancel().await;
            }
        }
    }
}

/// Starts (or reaches) one server and lists its tools; `secrets` gets what it must never show,
/// before anything can fail.
async fn start_one(
    config: &ServerConfig,
    secrets: &mut Secrets,
) -> std::result::Result<(RunningService<RoleClient, ()>, Vec<rmcp::model::Tool>), String> {
    let service = match &config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let transport = stdio::StdioServer::spawn(command, args, env, cwd.as_deref())
                .map_err(|error| format!("{command} ({error})"))?;
            ().serve(transport).await.map_err(|error| error.to_string())?
        }
        Transport::Http {
            url,
            headers,
            allowed_env_vars,
        } => {
            // Only the allowed variables are read; their values go into the requests alone.
            let environment: HashMap<String, String> = allowed_env_vars
                .iter()
                .filter_map(|name| std::env::var(name).ok().map(|value| (name.clone(), value)))
                .collect();
            secrets.add_url(url.as_str());
            for value in environment.values() {
                secrets.add(value);
            }
            let headers = resolve_templates(headers, &environment)
                .map_err(|_| "a header names an environment variable that is not set".to_string())?;
            for value in headers.values() {
                secrets.add_header(&String::from_utf8_lossy(value.as_bytes()));
            }
            let client = http::HttpClient::new(headers, secrets.clone())?;
            let transport = StreamableHttpClientTransport::with_client(
                client,
                StreamableHttpClientTransportConfig::with_uri(url.as_str()),
            );
            ().serve(transport).await.map_err(|error| error.to_string())?
        }
    };
    let tools = service.list_all_tools().await.map_err(|error| error.to_string())?;
    Ok((service, tools))
}

/// Text content joined by newlines; other content is described by its JSON. An error's text has
/// the server's secrets masked, as every error does; a result is the server's data, kept whole.
fn done(result: CallToolResult, secrets: &Secrets) -> Outcome {
    let parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block.as_text() {
            Some(text) => text.text.clone(),
            None => serde_json::to_string(block).unwrap_or_default(),
        })
        .collect();
    let mut text = parts.join("\n");
    if text.is_empty() {
        if let Some(structured) = &result.structured_content {
            text = structured.to_string();
        }
    }
    let failed = result.is_error == Some(true);
    if failed {
        if let std::borrow::Cow::Owned(masked) = secrets.mask(&text) {
            text = masked;
        }
    }
    Outcome::Done { text, failed }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_json(value: Value) -> Result<Vec<ServerConfig>> {
        let advanced = json!({ "mcpServers": value });
        read(&OptionsObject::of(&advanced, "advanced", "an object")?)
    }

    #[test]
    fn stdio_servers_are_read() {
        let configs = read_json(json!({
            "files": {"command": "node", "args": ["s.js", "stdio"], "env": {"A": "1"}, "cwd": "/tmp"},
            "b": {"command": "x"}
        }))
        .unwrap();
        assert_eq!(
            configs[0],
            ServerConfig {
                name: "files".into(),
                transport: Transport::Stdio {
                    command: "node".into(),
                    args: vec!["s.js".into(), "stdio".into()],
                    env: vec![("A".into(), "1".into())],
                    cwd: Some("/tmp".into()),
                },
            }
        );
        assert!(matches!(&configs[1].transport, Transport::Stdio { args, .. } if args.is_empty()));
        assert!(read_json(json!({})).unwrap().is_empty());
    }

    #[test]
    fn bad_servers_name_the_field() {
        let message = |value: Value| read_json(value).unwrap_err().message;
        assert_eq!(
            message(json!([])),
            "advanced.mcpServers must be an object of server configs (got an array)"
        );
        assert!(message(json!({"s": {}})).starts_with("advanced.mcpServers.s.command is required"));
        assert!(message(json!({"s": {"command": "x", "args": [1]}}))
            .starts_with("advanced.mcpServers.s.args must be an array of strings"));
        assert!(message(json!({"s": {"command": "x", "env": {"A": 1}}}))
            .starts_with("advanced.mcpServers.s.env must be an object of strings"));
        assert!(message(json!({"s": {"command": "x", "nope": 1}})).contains("advanced.mcpServers.s.nope"));
        assert!(message(json!({"a b": {"command": "x"}})).starts_with("advanced.mcpServers.a b: a server name"));
        assert!(message(json!({"web": {"url": "ftp://example.com/mcp"}}))
            .starts_with("advanced.mcpServers.web.url must be an absolute http(s) URL"));
        assert!(message(json!({"web": {"url": "https://u:p@example.com/mcp"}}))
            .starts_with("advanced.mcpServers.web.url must not carry credentials"));
        assert_eq!(
            message(json!({"web": {"url": "https://example.com/mcp", "command": "x"}})),
            "advanced.mcpServers.web: give either command (stdio) or url (streamable HTTP), not both"
        );
        assert!(message(json!({"web": {"url": "https://example.com/mcp", "env": {}}}))
            .contains("advanced.mcpServers.web.env"));
        assert_eq!(
            message(json!({"web": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}})),
            "advanced.mcpServers.web.headers.Authorization uses ${TOKEN}, which is not in advanced.mcpServers.web.allowedEnvVars"
        );
        assert_eq!(
            message(json!({"web": {"url": "https://example.com/mcp", "headers": {"Host": "x"}}})),
            "advanced.mcpServers.web.headers.Host may not be set by an MCP server"
        );
        assert!(
            message(json!({"web": {"url": "https://example.com/mcp", "headers": {"A": 1}}}))
                .starts_with("advanced.mcpServers.web.headers.A must be a string")
        );
        assert!(
            message(json!({"web": {"url": "https://example.com/mcp", "allowedEnvVars": ["1X"]}}))
                .starts_with("advanced.mcpServers.web.allowedEnvVars must list variable names")
        );
    }

    #[test]
    fn http_servers_are_read() {
        let configs = read_json(json!({
            "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${MCP_TOKEN}", "X-Team": "a"},
                    "allowedEnvVars": ["MCP_TOKEN"]},
            "bare": {"url": "https://example.com/mcp"}
        }))
        .unwrap();
        assert_eq!(
            configs[0],
            ServerConfig {
                name: "web".into(),
                transport: Transport::Http {
                    url: reqwest::Url::parse("http://127.0.0.1:9/mcp").unwrap(),
                    headers: vec![
                        ("authorization".into(), "Bearer ${MCP_TOKEN}".into()),
                        ("x-team".into(), "a".into())
                    ],
                    allowed_env_vars: vec!["MCP_TOKEN".into()],
                },
            }
        );
        assert!(
            matches!(&configs[1].transport, Transport::Http { headers, allowed_env_vars, .. } if headers.is_empty() && allowed_env_vars.is_empty())
        );
    }

    #[test]
    fn results_join_their_text() {
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "isError": true
        }))
        .unwrap();
        assert_eq!(
            done(result, &Secrets::default()),
            Outcome::Done {
                text: "a\nb".into(),
                failed: true
            }
        );
    }
}
