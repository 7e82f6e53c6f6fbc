//! Runs a session's agent loop on the JS thread. A run is polled inside a threadsafe-function
//! callback whenever it is woken, so the JS functions it calls (tools, hooks) are direct calls,
//! with no thread hop in either direction. What must not run on the JS thread — model HTTP and
//! SSE parsing, webhook delivery — is spawned onto the tokio runtime by the core, and timers
//! come from that runtime too; their wake-ups schedule a poll here.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

use napi::sys;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Schedules polls of a run: calling it with a task id polls that task on the JS thread.
pub type PollFn = ThreadsafeFunction<u64, (), (), Status, false, true>;

thread_local! {
    static TASKS: RefCell<HashMap<u64, (Task, Arc<TaskWaker>)>> = RefCell::new(HashMap::new());
    static NEXT_ID: Cell<u64> = const { Cell::new(1) };
    /// Set while a task is being polled: user functions can then be called directly.
    static CURRENT_ENV: Cell<Option<sys::napi_env>> = const { Cell::new(None) };
}

struct TaskWaker {
    id: u64,
    scheduled: AtomicBool,
    poll: Arc<PollFn>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            self.poll.call(self.id, ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// The JS thread's env while one of its runs is being polled.
pub fn current_env() -> Option<sys::napi_env> {
    CURRENT_ENV.with(Cell::get)
}

/// Keeps `future` as a task of this thread; its waker schedules polls through `poll_fn`.
fn register(poll_fn: Arc<PollFn>, future: impl Future<Output = ()> + 'static) -> Arc<TaskWaker> {
    let id = NEXT_ID.with(|next| {
        let id = next.get();
        next.set(id + 1);
        id
    });
    let waker = Arc::new(TaskWaker {
        id,
        scheduled: AtomicBool::new(false),
        poll: poll_fn,
    });
    TASKS.with(|tasks| tasks.borrow_mut().insert(id, (Box::pin(future), waker.clone())));
    waker
}

/// Starts `future` on the JS thread; its first poll is scheduled, not done now.
pub fn spawn(poll_fn: Arc<PollFn>, future: impl Future<Output = ()> + 'static) {
    register(poll_fn, future).wake_by_ref();
}

/// Polls task `id` (called on the JS thread by the poll function's callback).
pub fn poll(env: sys::napi_env, id: u64) {
    let Some((mut task, waker)) = TASKS.with(|tasks| tasks.borrow_mut().remove(&id)) else {
        return;
    };
    waker.scheduled.store(false, Ordering::Release);
    let context_waker = Waker::from(waker.clone());
    let previous = CURRENT_ENV.with(|current| current.replace(Some(env)));
    let ready = napi::bindgen_prelude::within_runtime_if_available(|| {
        task.as_mut().poll(&mut Context::from_waker(&context_waker)).is_ready()
    });
    CURRENT_ENV.with(|current| current.set(previous));
    if !ready {
        TASKS.with(|tasks| tasks.borrow_mut().insert(id, (task, waker)));
    }
}

/// Starts `future` on the JS thread and polls it once right away (the caller is on the JS
/// thread, with `env`).
pub fn spawn_now(env: sys::napi_env, poll_fn: Arc<PollFn>, future: impl Future<Output = ()> + 'static) {
    let id = register(poll_fn, future).id;
    poll(env, id);
}

/// A promise made now and settled with what `work` yields (a string, or `null`); `work` is
/// polled on the JS thread, so settling it needs no thread hop.
pub fn promise<'env>(
    env: &'env napi::Env,
    poll_fn: Arc<PollFn>,
    work: impl Future<Output = Option<String>> + 'static,
) -> napi::Result<napi::bindgen_prelude::PromiseRaw<'env, Option<String>>> {
    let mut deferred = std::ptr::null_mut();
    let mut promise = std::ptr::null_mut();
    napi::check_status!(unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) })?;
    spawn_now(env.raw(), poll_fn, async move {
        let value = work.await;
        // Settled inside a poll, so this is the JS thread and its env is current.
        let Some(env) = current_env() else { return };
        unsafe {
            let mut settled = std::ptr::null_mut();
            match value {
                Some(text) => {
                    sys::napi_create_string_utf8(env, text.as_ptr().cast(), text.len() as isize, &mut settled)
                }
                None => sys::napi_get_null(env, &mut settled),
            };
            sys::napi_resolve_deferred(env, deferred, settled);
        }
    });
    Ok(napi::bindgen_prelude::PromiseRaw::new(env.raw(), promise))
}
