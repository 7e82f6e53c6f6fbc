//! The Node-API edge: the only code that knows napi. It converts between JS values and the
//! core's types and calls the core; `index.js` and `lib/` wrap it in the public API. Whatever
//! can fail returns a [`result::NativeResult`].

pub mod agent;
mod arguments;
pub mod host;
pub mod later;
pub mod local;
mod loop_clock;
pub mod result;
pub mod telemetry;

/// The loop allocates many small, short-lived values (events, hook inputs, JSON text) on the
/// JS thread; mimalloc serves them several times faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The runtime's workers (model HTTP, SSE parsing, webhook delivery) run at a lower priority
/// than the JS thread: on a machine with few cores they must not preempt it mid-callback.
#[napi_derive::module_init]
fn init() {
    give_freed_memory_back();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_start(yield_to_the_js_thread)
        .build();
    if let Ok(runtime) = runtime {
        napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
    }
}

/// mimalloc's `arena_eager_commit` (option 4 in the `mi_option_e` of mimalloc 3's header, which
/// the bindings leave unnamed). On by default on Linux, it keeps memory the runtime freed
/// resident: a thousand concurrent sessions peaked ~12 MB higher with it, for no measurable
/// speed.
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// mimalloc's `purge_delay` (option 15, unnamed too): how long freed pages stay resident before
/// they are given back. mimalloc 3 waits 1000 ms, longer than a burst of sessions lasts, so a
/// thousand concurrent sessions peaked ~14 MB higher; at 100 ms per-call time and main-thread
/// CPU were unchanged within noise (A/B runs, bench/notes.md), where 0 cost ~6% per call.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const PURGE_DELAY_MS: std::os::raw::c_long = 100;

/// Defaults only: a `MIMALLOC_ARENA_EAGER_COMMIT` or `MIMALLOC_PURGE_DELAY` in the environment
/// still wins.
fn give_freed_memory_back() {
    // SAFETY: each sets one of mimalloc's option defaults (a plain integer); mimalloc reads them
    // when it next reserves or purges arena memory.
    unsafe {
        libmimalloc_sys::mi_option_set_default(MI_OPTION_ARENA_EAGER_COMMIT, 0);
        libmimalloc_sys::mi_option_set_default(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
    }
}

fn yield_to_the_js_thread() {
    // On Linux a nice value belongs to the thread (who = 0 is the calling thread).
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority takes plain integers and touches no memory of ours; a failure only
    // leaves the thread at its priority.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 5);
    }
}

/// `getBuiltinTools()`: each built-in tool as the model is offered it, with its kind and side
/// effect (JSON text; `lib/builtins.js` makes the tool objects).
#[napi_derive::napi]
pub fn builtin_tools() -> String {
    let tools: Vec<serde_json::Value> = crate::builtins::Builtin::ALL
        .into_iter()
        .map(|tool| {
            serde_json::json!({
                "name": tool.name(),
                "description": tool.description(),
                "parameters": tool.schema(),
                "kind": tool.kind(),
                "sideEffect": tool.side_effect(),
            })
        })
        .collect();
    serde_json::Value::Array(tools).to_string()
}

/// `loadClaudeHooks(source, { unsupported })`: `source` (JSON: a path or a settings object) as
/// hook objects (JSON text).
#[napi_derive::napi]
pub fn load_claude_hooks(source: String, unsupported: String) -> result::NativeResult<String> {
    use crate::command_hook::settings::{load, Unsupported};
    let unsupported = if unsupported == "skip" {
        Unsupported::Skip
    } else {
        Unsupported::Error
    };
    let loaded = crate::text::parse_js_json::<serde_json::Value>(&source)
        .map_err(|error| {
            crate::error::SdkError::config(format!("loadClaudeHooks could not read its argument: {error}"))
        })
        .and_then(|source| load(&source, unsupported))
        .map(|hooks| serde_json::Value::Array(hooks).to_string());
    result::native(loaded)
}
