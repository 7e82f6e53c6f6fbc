//! Replies that come later. A user function that returns a promise is answered by `invoke`
//! with the token the call carried, and its reply arrives through `settleReply(token, reply)`
//! once the promise settles. One function made once serves every call: reading each promise
//! with callbacks of its own would make two native functions per call, and a trip through the
//! scheduler's threadsafe function to wake the run.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use napi::Env;
use napi_derive::napi;
use nohash_hasher::IntMap;
use tokio::sync::oneshot;

enum Slot {
    /// A call is being made with this token; it has not returned yet.
    Expected,
    /// The call returned a promise, and a run waits for its reply.
    Waiting(oneshot::Sender<String>),
    /// The reply came before its run started to wait.
    Arrived(String),
}

thread_local! {
    /// This JS thread's replies still to come, by token.
    static SLOTS: RefCell<IntMap<u32, Slot>> = RefCell::new(IntMap::default());
    static NEXT: Cell<u32> = const { Cell::new(1) };
}

/// A token for a call about to be made: its slot is kept until the call's reply is read at once
/// (dropped) or waited for ([`Expected::later`]).
pub struct Expected(u32);

impl Expected {
    /// Reserves the next token (never 0, never one still in use) and its slot.
    pub fn reserve() -> Self {
        let token = NEXT.with(|next| loop {
            let token = next.get();
            next.set(token.checked_add(1).unwrap_or(1));
            if !SLOTS.with(|slots| slots.borrow().contains_key(&token)) {
                return token;
            }
        });
        SLOTS.with(|slots| slots.borrow_mut().insert(token, Slot::Expected));
        Expected(token)
    }

    pub fn token(&self) -> u32 {
        self.0
    }

    /// The call returned a promise: its reply, when `settleReply` brings it. Dropping the
    /// future gives the wait up (its run was aborted), and a reply arriving later is dropped.
    pub fn later(self) -> Later {
        let token = self.0;
        std::mem::forget(self);
        let (sender, receiver) = oneshot::channel();
        SLOTS.with(|slots| {
            let mut slots = slots.borrow_mut();
            if let Some(Slot::Arrived(reply)) = slots.remove(&token) {
                let _ = sender.send(reply);
            } else {
                slots.insert(token, Slot::Waiting(sender));
            }
        });
        Later { token, receiver }
    }
}

impl Drop for Expected {
    fn drop(&mut self) {
        let _ = SLOTS.try_with(|slots| slots.borrow_mut().remove(&self.0));
    }
}

pub struct Later {
    token: u32,
    receiver: oneshot::Receiver<String>,
}

impl Future for Later {
    /// `None`: the JS thread went away before the reply came.
    type Output = Option<String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.receiver).poll(cx).map(Result::ok)
    }
}

impl Drop for Later {
    /// Dropped on a worker (an abandoned call that was finishing there), it finds nothing in
    /// that thread's table: the JS thread's slot is then cleared by the reply when it comes.
    fn drop(&mut self) {
        let _ = SLOTS.try_with(|slots| slots.borrow_mut().remove(&self.token));
    }
}

/// `settleReply(token, reply)`: the reply of a call that returned a promise. The run waiting
/// for it is polled now, in this callback: it goes on without a trip through the scheduler. A
/// token nobody expects (its run gave up) is ignored; a second reply too.
#[napi(js_name = "settleReply")]
pub fn settle_reply(env: &Env, token: u32, reply: String) {
    super::local::drive(env.raw(), || {
        let waiting = SLOTS.with(|slots| {
            let mut slots = slots.borrow_mut();
            match slots.remove(&token) {
                Some(Slot::Waiting(sender)) => Some((sender, reply)),
                Some(Slot::Expected) => {
                    slots.insert(token, Slot::Arrived(reply));
                    None
                }
                Some(arrived) => {
                    slots.insert(token, arrived);
                    None
                }
                None => None,
            }
        });
        if let Some((sender, reply)) = waiting {
            let _ = sender.send(reply);
        }
    });
}
