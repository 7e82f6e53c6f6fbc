//! Starts the OpenTelemetry export when the `OTEL_*` variables ask for it (once per process, when
//! the first agent is made: not while the addon loads, when the loader's lock is held and the
//! exporter's threads could not start), sends what is batched when a JS environment shuts down,
//! and gives JS `flushTelemetry()`. Problems with the variables go to stderr: there is no caller
//! to throw to.

use std::sync::{Once, OnceLock};

use napi::Env;
use napi_derive::napi;

use super::result::{native, NativeResult};
use crate::error::{ErrorCode, SdkError};
use crate::telemetry::{Settings, Telemetry};

static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();

fn report(problem: &str) {
    eprintln!("agent-runtime-hooks: OpenTelemetry export is off: {problem}");
}

/// Starts the export (once per process) and has it flushed when `env` shuts down; called once
/// per JS environment, when it makes its first agent.
pub(crate) fn start_for(env: &Env) -> napi::Result<()> {
    static STARTED: Once = Once::new();
    STARTED.call_once(start);
    env.add_env_cleanup_hook((), |()| flush_at_exit())?;
    Ok(())
}

fn start() {
    let settings = match Settings::from_env(|name| std::env::var(name).ok()) {
        Ok(Some(settings)) => settings,
        Ok(None) => return,
        Err(problem) => return report(&problem),
    };
    let telemetry = match Telemetry::start(&settings) {
        Ok(telemetry) => telemetry,
        Err(problem) => return report(&problem),
    };
    // The addon links its own `tracing`, whose global subscriber only this sets, once; a failure
    // would mean that changed.
    if tracing::subscriber::set_global_default(telemetry.subscriber()).is_err() {
        return report("another tracing subscriber is already installed in this process");
    }
    let _ = TELEMETRY.set(telemetry);
}

/// Sends every finished span; `Ok` at once when export is off.
fn flush() -> Result<(), String> {
    TELEMETRY.get().map_or(Ok(()), Telemetry::flush)
}

/// At a JS environment's shutdown (the process's normal exit among them).
pub(crate) fn flush_at_exit() {
    if let Err(problem) = flush() {
        eprintln!("agent-runtime-hooks: {problem}");
    }
}

/// Sends every finished span now (off the JS thread); at once when export is off. A failed
/// export is an `SdkError` (`TELEMETRY_EXPORT`) saying where and why in one line.
#[napi]
pub async fn flush_telemetry() -> NativeResult<()> {
    native(match tokio::task::spawn_blocking(flush).await {
        Ok(outcome) => outcome.map_err(|problem| SdkError::new(ErrorCode::TelemetryExport, problem)),
        // The flush itself failed (a panic), not the export.
        Err(error) => Err(SdkError::new(
            ErrorCode::Internal,
            format!("the flush of spans failed: {error}"),
        )),
    })
}
