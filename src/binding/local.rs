//! Runs a session's futures (its runs, `start` and `close`) on the JS thread. A task is polled
//! whenever it is woken, so the JS functions it calls (tools, hooks) are direct calls, with no
//! thread hop in either direction. What must not run on the JS thread — model HTTP and SSE
//! parsing, webhook delivery — is spawned onto the tokio runtime by the core, and timers come
//! from that runtime too; their wake-ups schedule a poll here.
//!
//! One threadsafe function per env (a JS thread usually has one) schedules every poll: libuv scans all of a loop's async
//! handles on each wake-up, so a handle per session would make each wake-up cost more with every
//! agent alive. A task woken on the JS thread while tasks are being polled is queued and polled
//! in the same turn, without going through the threadsafe function at all.
//!
//! The threadsafe function lives while an agent is open or a task is left: once the last agent
//! closed and its last task ended, it is released (a test runner's open-handle check finds
//! nothing left behind), and made anew when the env needs one again.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Wake, Waker};

use napi::bindgen_prelude::{Function, FunctionRef, PromiseRaw, ToNapiValue};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{sys, Env, Status};
use nohash_hasher::IntMap;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// What another thread asks of the JS thread.
enum Job {
    /// Poll this task.
    Poll(u64),
    /// Run this there, with that thread's env (it usually spawns a task).
    Run(Box<dyn FnOnce(sys::napi_env) + Send>),
}

/// Schedules polls and jobs on the JS thread.
type PollFn = ThreadsafeFunction<Job, (), (), Status, false, true>;

/// Polls done in one turn before the rest are left to the next: a task that keeps waking
/// itself must not starve the event loop.
const POLLS_PER_TURN: usize = 1024;

/// An env's scheduler: its threadsafe function (while in use), and how many runs keep Node
/// alive. A thread usually has one env; a test runner that loads the addon once per test file
/// makes more.
struct Driver {
    /// Tells wakers which scheduler's queue they belong to.
    key: usize,
    env: sys::napi_env,
    /// The JS function the threadsafe function is made on (it does nothing): kept to make a
    /// new one after the last was released.
    wake: FunctionRef<(), ()>,
    /// The threadsafe function in use, if any; shared with [`Remote`]s.
    slot: Slot,
    runs_at_work: Cell<usize>,
    /// Agents made in this env and not closed (nor collected).
    open_agents: Cell<usize>,
    /// The env's libuv loop, whose clock says how long it has been busy.
    event_loop: Option<*const std::ffi::c_void>,
}

type Slot = Arc<Mutex<Option<Arc<PollFn>>>>;

fn lock(slot: &Slot) -> MutexGuard<'_, Option<Arc<PollFn>>> {
    slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct Entry {
    task: Task,
    waker: Arc<TaskWaker>,
    env: sys::napi_env,
}

thread_local! {
    static DRIVERS: RefCell<Vec<Rc<Driver>>> = const { RefCell::new(Vec::new()) };
    /// Keyed by counted ids: no hashing needed (the default hasher resists chosen keys, at a
    /// cost per poll).
    static TASKS: RefCell<IntMap<u64, Entry>> = RefCell::new(IntMap::default());
    static NEXT_ID: Cell<u64> = const { Cell::new(1) };
    /// Tasks woken on this thread while it polls, polled before the turn ends.
    static READY: RefCell<VecDeque<u64>> = const { RefCell::new(VecDeque::new()) };
    /// The key of the scheduler whose turn this thread is in, else 0.
    static DRIVING: Cell<usize> = const { Cell::new(0) };
    /// Set while a task is being polled: user functions can then be called directly.
    static CURRENT_ENV: Cell<Option<sys::napi_env>> = const { Cell::new(None) };
}

static NEXT_DRIVER_KEY: AtomicUsize = AtomicUsize::new(1);

struct TaskWaker {
    id: u64,
    driver: usize,
    scheduled: AtomicBool,
    poll: Arc<PollFn>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        if DRIVING.with(Cell::get) == self.driver {
            READY.with(|ready| ready.borrow_mut().push_back(self.id));
        } else {
            self.poll
                .call(Job::Poll(self.id), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// Hands work to a JS thread from any thread. It does not keep the threadsafe function: a
/// closed agent's host holds nothing open.
#[derive(Clone)]
pub struct Remote(Slot);

impl Remote {
    /// `env`'s, once [`init`] made its scheduler.
    pub fn of(env: sys::napi_env) -> Option<Self> {
        driver(env).map(|driver| Remote(driver.slot.clone()))
    }

    /// Runs `job` on the JS thread with its env, as soon as it is free; dropped unrun if that
    /// environment has shut down or no agent of it is open and no work is left.
    pub fn run(&self, job: impl FnOnce(sys::napi_env) + Send + 'static) {
        let poll = lock(&self.0).clone();
        if let Some(poll) = poll {
            poll.call(Job::Run(Box::new(job)), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// The JS thread's env while one of its tasks is being polled.
pub fn current_env() -> Option<sys::napi_env> {
    CURRENT_ENV.with(Cell::get)
}

/// How long the event loop of the env whose task is being polled has been running callbacks
/// without a turn ([`super::loop_clock::held_for`]); `None` off the JS thread.
pub fn loop_held_for() -> Option<std::time::Duration> {
    let driver = driver(current_env()?)?;
    super::loop_clock::held_for(driver.event_loop?)
}

/// Makes this thread's scheduler for `env`, once (`true` when this call made it); `wake` is a
/// JS function that does nothing (the threadsafe function's callback does the polling). The
/// scheduler never keeps Node alive by itself: see [`KeepAlive`].
pub fn init(env: &Env, wake: Function<(), ()>) -> napi::Result<bool> {
    if driver(env.raw()).is_some() {
        return Ok(false);
    }
    let key = NEXT_DRIVER_KEY.fetch_add(1, Ordering::Relaxed);
    let driver = Driver {
        key,
        env: env.raw(),
        wake: wake.create_ref()?,
        slot: Slot::default(),
        runs_at_work: Cell::new(0),
        open_agents: Cell::new(0),
        event_loop: super::loop_clock::event_loop(env.raw()),
    };
    // When the env shuts down its scheduler goes (a new env may reuse its address).
    env.add_env_cleanup_hook(key, |key| {
        let gone = DRIVERS.with(|drivers| {
            let mut drivers = drivers.borrow_mut();
            let at = drivers.iter().position(|driver| driver.key == key)?;
            Some(drivers.remove(at))
        });
        drop(gone);
    })?;
    DRIVERS.with(|drivers| drivers.borrow_mut().push(Rc::new(driver)));
    Ok(true)
}

/// `env`'s scheduler.
fn driver(env: sys::napi_env) -> Option<Rc<Driver>> {
    DRIVERS.with(|drivers| drivers.borrow().iter().find(|driver| driver.env == env).cloned())
}

impl Driver {
    /// The threadsafe function, made anew if it was released. On the JS thread.
    fn poll(&self) -> napi::Result<Arc<PollFn>> {
        let mut slot = lock(&self.slot);
        if let Some(poll) = slot.as_ref().filter(|poll| !poll.aborted()) {
            return Ok(poll.clone());
        }
        let env = Env::from_raw(self.env);
        let wake = self.wake.borrow_back(&env)?;
        let poll: Arc<PollFn> = Arc::new(
            wake.build_threadsafe_function::<Job>()
                .callee_handled::<false>()
                .weak::<true>()
                .build_callback(|context| {
                    match context.value {
                        Job::Poll(id) => drive(context.env.raw(), || poll_one(id)),
                        Job::Run(job) => {
                            let env = context.env.raw();
                            drive(env, || job(env))
                        }
                    }
                    Ok(())
                })?,
        );
        if self.runs_at_work.get() > 0 {
            // SAFETY: made just now on this env's thread, and not released.
            unsafe { sys::napi_ref_threadsafe_function(self.env, poll.raw()) };
        }
        *slot = Some(poll.clone());
        Ok(poll)
    }

    /// Releases the threadsafe function now: wakers left in timers or channels may still hold
    /// it, and a later wake-up of one is then a no-op.
    fn release(&self) {
        let Some(poll) = lock(&self.slot).take() else { return };
        poll.handle.with_write_aborted(|mut aborted| {
            if !*aborted {
                // SAFETY: the handle is live (not aborted, checked under its lock), and marking
                // it aborted under the same lock keeps napi-rs from releasing it a second time.
                unsafe {
                    sys::napi_release_threadsafe_function(poll.raw(), sys::ThreadsafeFunctionReleaseMode::abort);
                }
                *aborted = true;
            }
        });
    }
}

/// Keeps `future` as a task of `env`'s scheduler, not yet scheduled; returns its waker.
fn register(env: sys::napi_env, future: impl Future<Output = ()> + 'static) -> napi::Result<Arc<TaskWaker>> {
    let driver = driver(env).ok_or_else(|| napi::Error::from_reason("no agent was created in this environment"))?;
    let id = NEXT_ID.with(|next| next.replace(next.get() + 1));
    let waker = Arc::new(TaskWaker {
        id,
        driver: driver.key,
        scheduled: AtomicBool::new(false),
        poll: driver.poll()?,
    });
    let entry = Entry {
        task: Box::pin(future),
        waker: waker.clone(),
        env,
    };
    TASKS.with(|tasks| tasks.borrow_mut().insert(id, entry));
    Ok(waker)
}

fn waker_of(id: u64) -> Option<Arc<TaskWaker>> {
    TASKS.with(|tasks| tasks.borrow().get(&id).map(|entry| entry.waker.clone()))
}

/// Starts `future` on this (the JS) thread; its first poll is scheduled, not done now.
pub fn spawn(env: sys::napi_env, future: impl Future<Output = ()> + 'static) -> napi::Result<()> {
    register(env, future)?.wake_by_ref();
    Ok(())
}

/// Starts `future` on this thread and polls it right away (the caller is on the JS thread,
/// with `env`).
pub fn spawn_now(env: sys::napi_env, future: impl Future<Output = ()> + 'static) -> napi::Result<()> {
    let id = register(env, future)?.id;
    drive(env, || poll_one(id));
    Ok(())
}

/// Does `first` (a poll, or a job that spawns tasks), then polls every task woken meanwhile on
/// this thread.
pub(super) fn drive(env: sys::napi_env, first: impl FnOnce()) {
    if DRIVING.with(Cell::get) != 0 {
        // Already driving (a task's JS call re-entered): what `first` wakes joins that turn.
        first();
        return;
    }
    let key = driver(env).map_or(0, |driver| driver.key);
    DRIVING.with(|driving| driving.set(key));
    let previous = CURRENT_ENV.with(|current| current.replace(Some(env)));
    napi::bindgen_prelude::within_runtime_if_available(|| {
        first();
        for _ in 1..POLLS_PER_TURN {
            let Some(next) = READY.with(|ready| ready.borrow_mut().pop_front()) else {
                break;
            };
            poll_one(next);
        }
    });
    CURRENT_ENV.with(|current| current.set(previous));
    DRIVING.with(|driving| driving.set(0));
    // Whatever is still queued waits for the next turn.
    let left: Vec<u64> = READY.with(|ready| ready.borrow_mut().drain(..).collect());
    for id in left {
        if let Some(waker) = waker_of(id) {
            waker.poll.call(Job::Poll(id), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
    release_if_idle(env);
}

/// Polls task `id` with its own env current.
fn poll_one(id: u64) {
    let Some(mut entry) = TASKS.with(|tasks| tasks.borrow_mut().remove(&id)) else {
        return;
    };
    entry.waker.scheduled.store(false, Ordering::Release);
    let context_waker = Waker::from(entry.waker.clone());
    let previous = CURRENT_ENV.with(|current| current.replace(Some(entry.env)));
    let pending = entry
        .task
        .as_mut()
        .poll(&mut Context::from_waker(&context_waker))
        .is_pending();
    CURRENT_ENV.with(|current| current.set(previous));
    if pending {
        TASKS.with(|tasks| tasks.borrow_mut().insert(id, entry));
    }
}

/// Counts an agent made in `env`, until [`AgentCount`] is dropped (the agent closed or was
/// collected).
pub struct AgentCount {
    env: sys::napi_env,
    counted: Cell<bool>,
}

impl AgentCount {
    pub fn new(env: sys::napi_env) -> napi::Result<Self> {
        let driver = driver(env).ok_or_else(|| napi::Error::from_reason("no agent was created in this environment"))?;
        driver.open_agents.set(driver.open_agents.get() + 1);
        Ok(AgentCount {
            env,
            counted: Cell::new(true),
        })
    }

    /// The agent closed: it no longer keeps the scheduler. Called on the JS thread.
    pub fn release(&self) {
        if !self.counted.replace(false) {
            return;
        }
        if let Some(driver) = driver(self.env) {
            driver.open_agents.set(driver.open_agents.get().saturating_sub(1));
        }
        // Inside a turn, its end looks again, once the turn's tasks are done.
        if DRIVING.with(Cell::get) == 0 {
            release_if_idle(self.env);
        }
    }
}

impl Drop for AgentCount {
    fn drop(&mut self) {
        self.release();
    }
}

/// Releases `env`'s threadsafe function once no agent is open and none of its tasks is left.
fn release_if_idle(env: sys::napi_env) {
    let Some(driver) = driver(env) else { return };
    if driver.open_agents.get() > 0 || driver.runs_at_work.get() > 0 {
        return;
    }
    if TASKS.with(|tasks| tasks.borrow().values().any(|entry| entry.env == env)) {
        return;
    }
    driver.release();
}

/// Lets every task already woken on this thread run first: awaited on the JS thread, it ends
/// within the same turn, after what that turn's polls have published.
pub async fn rest_of_turn() {
    let mut yielded = false;
    std::future::poll_fn(|context| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        context.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

/// Held by a run at work: while any is held, Node stays alive, as it would for a pending
/// request; an idle agent never keeps it alive. Made and dropped on the JS thread.
pub struct KeepAlive(Rc<Driver>);

impl KeepAlive {
    pub fn new(env: sys::napi_env) -> napi::Result<Self> {
        let driver = driver(env).ok_or_else(|| napi::Error::from_reason("no agent was created in this environment"))?;
        driver.poll()?;
        driver.count_run(1);
        Ok(KeepAlive(driver))
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.0.count_run(-1);
        // Inside a turn, its end looks again, once the turn's tasks are done.
        if DRIVING.with(Cell::get) == 0 {
            release_if_idle(self.0.env);
        }
    }
}

impl Driver {
    /// Counts runs at work; the threadsafe function holds the loop open while there are any.
    fn count_run(&self, change: isize) {
        let before = self.runs_at_work.get();
        let after = before.saturating_add_signed(change);
        self.runs_at_work.set(after);
        let Some(poll) = lock(&self.slot).clone() else { return };
        if poll.aborted() || (before == 0) == (after == 0) {
            return;
        }
        // SAFETY: a live threadsafe function of this env, on its thread.
        unsafe {
            if before == 0 {
                sys::napi_ref_threadsafe_function(self.env, poll.raw());
            } else {
                sys::napi_unref_threadsafe_function(self.env, poll.raw());
            }
        }
    }
}

/// A promise made now and settled with what `work` yields; `work` is polled on the JS thread,
/// so settling it needs no thread hop.
pub fn promise<'env, T: ToNapiValue + 'static>(
    env: &'env Env,
    work: impl Future<Output = T> + 'static,
) -> napi::Result<PromiseRaw<'env, T>> {
    let mut deferred = std::ptr::null_mut();
    let mut promise = std::ptr::null_mut();
    // SAFETY: `env` is the live env of this (the JS) thread; both out-pointers are ours.
    napi::check_status!(unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) })?;
    spawn_now(env.raw(), async move {
        let value = work.await;
        // Settled inside a poll, so this is the JS thread and its env is current.
        let Some(env) = current_env() else { return };
        // SAFETY: on the JS thread with its current env; `deferred` was made by that env and is
        // resolved exactly once, here.
        let status = unsafe {
            match T::to_napi_value(env, value) {
                Ok(settled) => sys::napi_resolve_deferred(env, deferred, settled),
                Err(error) => error.status.into(),
            }
        };
        // Only an env shutting down refuses these; nobody is left to tell.
        if status != sys::Status::napi_ok {
            tracing::debug!(status, "a promise could not be settled");
        }
    })?;
    Ok(PromiseRaw::new(env.raw(), promise))
}
