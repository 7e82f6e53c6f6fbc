//! A stdio server's process: started with a small environment (not this process's API keys and
//! tokens), read through `CappedLines`, and stopped as the MCP spec's stdio shutdown says.

use std::io;
use std::process::Stdio;
use std::time::Duration;

use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::lines::{CappedLines, MAX_LINE_BYTES};

/// The variables a server gets from this process, besides its `env`: the official MCP SDKs'
/// default (`DEFAULT_INHERITED_ENV_VARS` of the TypeScript SDK, sudo's list on Unix).
#[cfg(windows)]
pub const INHERITED_ENV_VARS: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
    "PROGRAMFILES",
];
#[cfg(not(windows))]
pub const INHERITED_ENV_VARS: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// How long the server has to exit after its stdin is closed, and again after `SIGTERM`.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// A server's whole environment: the inherited variables `get` has (a value that is a shell
/// function, `() { … }`, is skipped, as the SDKs do), then `env`, which wins.
pub fn environment(env: &[(String, String)], get: impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let mut environment: Vec<(String, String)> = INHERITED_ENV_VARS
        .iter()
        .filter(|name| !env.iter().any(|(key, _)| key == *name))
        .filter_map(|name| get(name).map(|value| (name.to_string(), value)))
        .filter(|(_, value)| !value.starts_with("()"))
        .collect();
    environment.extend(env.iter().cloned());
    environment
}

pub struct StdioServer {
    /// Killed when dropped; taken once it has exited.
    child: Option<Child>,
    transport: AsyncRwTransport<RoleClient, CappedLines<ChildStdout>, ChildStdin>,
}

impl StdioServer {
    pub fn spawn(command: &str, args: &[String], env: &[(String, String)], cwd: Option<&str>) -> io::Result<Self> {
        let mut process = tokio::process::Command::new(command);
        process
            .args(args)
            .env_clear()
            .envs(environment(env, |name| std::env::var(name).ok()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(cwd) = cwd {
            process.current_dir(cwd);
        }
        let mut child = process.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("the server's stdin or stdout is missing"));
        };
        // Lines are cut at the same length on both sides: rmcp never sees a longer one.
        let transport =
            AsyncRwTransport::new(CappedLines::new(stdout, MAX_LINE_BYTES), stdin).with_max_line_length(MAX_LINE_BYTES);
        Ok(StdioServer {
            child: Some(child),
            transport,
        })
    }

    /// Closes the server's stdin; a server still running `EXIT_WAIT` later gets `SIGTERM`,
    /// then, `EXIT_WAIT` after that, is killed.
    async fn shutdown(&mut self) -> io::Result<()> {
        self.transport.close().await?;
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if exited(child).await {
            self.child = None;
            return Ok(());
        }
        #[cfg(unix)]
        if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
            // SAFETY: `kill` only sends a signal; the pid is our child's, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            if exited(child).await {
                self.child = None;
                return Ok(());
            }
        }
        child.kill().await?;
        self.child = None;
        Ok(())
    }
}

/// Whether `child` exits within `EXIT_WAIT`.
async fn exited(child: &mut Child) -> bool {
    matches!(tokio::time::timeout(EXIT_WAIT, child.wait()).await, Ok(Ok(_)))
}

impl Transport<RoleClient> for StdioServer {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl std::future::Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_gets_the_allow_list_and_its_env_and_nothing_else() {
        let parent = |name: &str| match name {
            "PATH" => Some("/usr/bin".to_string()),
            "HOME" => Some("/home/me".to_string()),
            "SHELL" => Some("() { evil; }".to_string()),
            "OPENAI_API_KEY" => Some("sk-secret".to_string()),
            _ => None,
        };
        let env = [
            ("HOME".to_string(), "/srv".to_string()),
            ("TOKEN".to_string(), "t".to_string()),
        ];
        let mut got = environment(&env, parent);
        got.sort();
        // The same on Windows: PATH is on both lists, HOME comes from `env`.
        assert_eq!(
            got,
            vec![
                ("HOME".to_string(), "/srv".to_string()),
                ("PATH".to_string(), "/usr/bin".to_string()),
                ("TOKEN".to_string(), "t".to_string()),
            ]
        );
    }
}
