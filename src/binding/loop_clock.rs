//! How long the JS thread's event loop has been busy with callbacks: libuv's loop time, which
//! the loop takes each time it comes back from waiting for I/O, set against libuv's clock now.
//! A run that was woken by its model's answer or a timer started on a fresh turn of the loop,
//! and needs to give none back until the loop has been held for a slice (`crate::pace`).
//!
//! libuv is linked into Node and exports its functions, but Node-API does not wrap these two:
//! they are looked up once in the process's own symbols.

use std::ffi::c_void;
use std::sync::OnceLock;
use std::time::Duration;

use napi::sys;

/// `uv_now(loop)`: the loop's time in ms, taken when it last came back from waiting.
type UvNow = unsafe extern "C" fn(*const c_void) -> u64;
/// `uv_hrtime()`: libuv's monotonic clock in ns (the loop's time is in its ms).
type UvHrtime = unsafe extern "C" fn() -> u64;

struct UvClock {
    now: UvNow,
    hrtime: UvHrtime,
}

fn uv_clock() -> Option<&'static UvClock> {
    static CLOCK: OnceLock<Option<UvClock>> = OnceLock::new();
    CLOCK.get_or_init(lookup).as_ref()
}

#[cfg(unix)]
fn lookup() -> Option<UvClock> {
    // SAFETY: dlsym with RTLD_DEFAULT searches the symbols already loaded, Node's among them;
    // the two are libuv's public functions with these signatures (uv.h).
    unsafe {
        let now = libc::dlsym(libc::RTLD_DEFAULT, c"uv_now".as_ptr());
        let hrtime = libc::dlsym(libc::RTLD_DEFAULT, c"uv_hrtime".as_ptr());
        if now.is_null() || hrtime.is_null() {
            return None;
        }
        Some(UvClock {
            now: std::mem::transmute::<*mut c_void, UvNow>(now),
            hrtime: std::mem::transmute::<*mut c_void, UvHrtime>(hrtime),
        })
    }
}

/// Elsewhere the pace falls back to counting from the session's own last turn.
#[cfg(not(unix))]
fn lookup() -> Option<UvClock> {
    None
}

/// `env`'s libuv loop, for [`held_for`].
pub fn event_loop(env: sys::napi_env) -> Option<*const c_void> {
    let mut event_loop = std::ptr::null_mut();
    // SAFETY: called on the env's own thread with its live env.
    let status = unsafe { sys::napi_get_uv_event_loop(env, &mut event_loop) };
    (status == sys::Status::napi_ok && !event_loop.is_null()).then_some(event_loop as *const c_void)
}

/// How long the loop has been running callbacks since it last came back from waiting (to within
/// libuv's 1 ms); `None` where libuv's clock cannot be read. Called on the loop's own thread.
pub fn held_for(event_loop: *const c_void) -> Option<Duration> {
    let clock = uv_clock()?;
    // SAFETY: `event_loop` is the live loop of the thread calling (see `event_loop`).
    let (since_ms, now_ns) = unsafe { ((clock.now)(event_loop), (clock.hrtime)()) };
    Some(Duration::from_millis((now_ns / 1_000_000).saturating_sub(since_ms)))
}
