//! Deferred results (SPEC §8.2): a tool that returned `deferred()` paused its call; any process
//! that reaches the store publishes the result once with `completeToolCall`. The session's
//! stored webhook hooks see it first, through the same tail as a live result (`post_call.rs`:
//! after-controls, then PostToolUse or PostToolUseFailure), and the placeholder is filled by a
//! conditional update: the first final result wins, a denial included.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{self as durable, store_error};
use crate::agent::config;
use crate::agent::events::PendingReason;
use crate::agent::payloads::{CallOf, ToolEvent};
use crate::agent::post_call::{Failures, PostCall};
use crate::agent::tools::model_output;
use crate::error::{ErrorCode, Result, SdkError};
use crate::hooks::dispatch::{Caller, Dispatcher, HookContext, HookError};
use crate::hooks::registry::Registry;
use crate::hooks::HookEvent;
use crate::host::{Host, NoFunctions, ScopeId};
use crate::log::Log;
use crate::store::{self, DeferredOutcome, StoreConfig, ToolResult};
use crate::webhook::Environment;

/// What `completeToolCall` reports: whether this call published, and the result that stands.
pub struct Completed {
    pub published: bool,
    pub result: ToolResult,
}

/// The environment variables the stored hooks of `stored` may read in their header templates.
pub fn environment_names(stored: &durable::Stored) -> Vec<String> {
    Registry::parse(Some(&stored.record.hooks))
        .map(|registry| registry.env_var_names())
        .unwrap_or_default()
}

/// Publishes `result` as the deferred call `tool_call_id`'s result, once.
pub async fn complete(
    config: &StoreConfig,
    stored: durable::Stored,
    tool_call_id: &str,
    result: &Value,
    environment: Environment,
) -> Result<Completed> {
    let session_id = stored.record.session_id.clone();
    let turn = durable::resumed_turn(&stored, &[], false)?.map(|resumed| resumed.turn);
    let call = turn
        .as_ref()
        .and_then(|turn| turn.pending.iter().find(|call| call.tool_call_id == tool_call_id))
        .filter(|call| call.reason == PendingReason::Deferred)
        .ok_or_else(|| {
            SdkError::new(
                ErrorCode::ApprovalNotPending,
                format!("Tool call {tool_call_id} is not waiting for a deferred result"),
            )
        })?;
    let step_index = turn.as_ref().map_or(0, |turn| turn.step_index);
    let operation_id = turn.as_ref().map_or_else(String::new, |turn| turn.operation_id.clone());

    // The session's stored webhook hooks: no JS function is among them.
    let host: Arc<dyn Host> = Arc::new(NoFunctions(
        "no JavaScript function runs while a deferred result is published",
    ));
    let registry = Registry::parse(Some(&stored.record.hooks))?;
    let log = Log::new(host.clone(), None);
    // The agent's own budgets are not stored with the session: the defaults hold.
    let dispatcher = Dispatcher::new(
        registry,
        config::DEFAULT_HOOK_TIMEOUT_MS,
        config::DEFAULT_SESSION_END_HOOK_TIMEOUT_MS,
        host,
        log,
    );
    let context = HookContext {
        extra: Vec::new(),
        queue: Some(Arc::new(durable::Unfenced(config.clone()))),
        environment: Arc::new(environment),
        observer: None,
    };
    let caller = Caller {
        scope: ScopeId::NONE,
        cancel: None,
        context: &context,
    };
    let post = PostCall {
        dispatcher: &dispatcher,
        caller,
        fields: ToolEvent::new(
            HookEvent::PostToolUse,
            CallOf {
                session_id: &session_id,
                // Deferred results exist in the root only: a sub-agent cannot wait for one.
                lineage: (&[], None),
                tool_name: &call.tool_name,
                tool_call_id: &call.tool_call_id,
                step_index,
                call_index: call.index,
                operation_id: &operation_id,
                // An MCP tool's result is never deferred.
                mcp: None,
            },
            &call.input,
        ),
        // A failed delivery of a critical hook fails the publication: nothing is published.
        failures: Failures::Refuse,
    };
    let outcome = post
        .finish(model_output(Some(result.clone())))
        .await
        .map_err(HookError::into_sdk)?;
    let failed = !outcome.is_success();
    let result = ToolResult::new(outcome.output, failed);
    let store = store::open(config).await.map_err(store_error)?;
    let published = store
        .complete_deferred(&session_id, tool_call_id, &result)
        .await
        .map_err(store_error)?;
    match published {
        DeferredOutcome::Published => Ok(Completed {
            published: true,
            result,
        }),
        DeferredOutcome::AlreadyPublished(first) => Ok(Completed {
            published: false,
            result: first,
        }),
        DeferredOutcome::NotDeferred => Err(SdkError::new(
            ErrorCode::ApprovalNotPending,
            format!("Tool call {tool_call_id} is not waiting for a deferred result"),
        )),
    }
}

impl Completed {
    pub fn to_json(&self) -> Value {
        json!({"published": self.published, "result": {"output": self.result.output, "isError": self.result.is_error}})
    }
}
