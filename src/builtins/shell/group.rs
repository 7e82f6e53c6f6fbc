//! A command's process group. Every command leads a group of its own (`process_group(0)`), so
//! a kill reaches the children and grandchildren it started, not only `bash`.

use std::io;
use std::time::{Duration, Instant};

/// How long a group has after SIGTERM before SIGKILL.
pub(super) const GRACE: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(20);

/// Sends `signal` to every process of the group.
pub(super) fn signal(pgid: u32, signal: i32) -> io::Result<()> {
    // SAFETY: killpg takes plain integers and only sends a signal.
    if unsafe { libc::killpg(pgid as libc::pid_t, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn gone(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ESRCH)
}

/// Whether a process of the group still runs. Zombies do not count: an orphan reparented to
/// an init that never reaps stays in the table, dead, for good.
pub(super) fn alive(pgid: u32) -> bool {
    if signal(pgid, 0).is_err_and(|error| gone(&error)) {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        live_member_in_proc(pgid).unwrap_or(true)
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

/// Scans /proc for a member of the group that is not a zombie; `None` when /proc is unreadable.
#[cfg(target_os = "linux")]
fn live_member_in_proc(pgid: u32) -> Option<bool> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|name| name.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
        let Some(after_comm) = stat.rfind(')').map(|end| &stat[end + 1..]) else {
            continue;
        };
        let mut fields = after_comm.split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let group = fields.nth(1).and_then(|pgrp| pgrp.parse::<u32>().ok());
        if group == Some(pgid) && state != "Z" && state != "X" {
            return Some(true);
        }
    }
    Some(false)
}

/// SIGTERM to the group, then SIGKILL after [`GRACE`] if anything of it still runs; answers
/// once the group is gone (or a last grace after SIGKILL has passed). `reap` collects the
/// leader's exit where the caller owns it. An error means SIGTERM could not be sent at all
/// (a group already gone is not one).
pub(super) async fn terminate(pgid: u32, mut reap: impl FnMut()) -> io::Result<()> {
    match signal(pgid, libc::SIGTERM) {
        Err(error) if gone(&error) => return Ok(()),
        Err(error) => return Err(error),
        Ok(()) => {}
    }
    if wait_gone(pgid, &mut reap).await {
        return Ok(());
    }
    let _ = signal(pgid, libc::SIGKILL);
    wait_gone(pgid, &mut reap).await;
    Ok(())
}

async fn wait_gone(pgid: u32, reap: &mut impl FnMut()) -> bool {
    let deadline = Instant::now() + GRACE;
    loop {
        reap();
        if !alive(pgid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A group to be killed if it is dropped while still armed: the future running a command was
/// dropped, or the runtime shut down. No await is possible there, so a thread gives the group
/// its grace before SIGKILL.
pub(super) struct Group {
    pgid: u32,
    armed: bool,
}

impl Group {
    pub fn lead(pgid: u32) -> Group {
        Group { pgid, armed: true }
    }

    /// The command finished on its own: what it left running is left alone.
    pub fn release(&mut self) {
        self.armed = false;
    }

    /// Armed until the group is gone: a future dropped mid-terminate (the run aborted while
    /// its command winds down) still leaves the kill to `Drop`.
    pub async fn terminate(&mut self, reap: impl FnMut()) -> io::Result<()> {
        let ended = terminate(self.pgid, reap).await;
        self.armed = false;
        ended
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.armed || signal(self.pgid, libc::SIGTERM).is_err() {
            return;
        }
        let pgid = self.pgid;
        let killer = std::thread::Builder::new()
            .name("shell-group-kill".into())
            .spawn(move || {
                let deadline = Instant::now() + GRACE;
                while Instant::now() < deadline {
                    if !alive(pgid) {
                        return;
                    }
                    std::thread::sleep(POLL);
                }
                let _ = signal(pgid, libc::SIGKILL);
            });
        if killer.is_err() {
            let _ = signal(pgid, libc::SIGKILL);
        }
    }
}

/// `SIGTERM`, as Node names the signal that ended a process.
pub(super) fn signal_name(number: i32) -> String {
    let known = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGCHLD, "SIGCHLD"),
        (libc::SIGCONT, "SIGCONT"),
        (libc::SIGSTOP, "SIGSTOP"),
        (libc::SIGTSTP, "SIGTSTP"),
        (libc::SIGTTIN, "SIGTTIN"),
        (libc::SIGTTOU, "SIGTTOU"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGVTALRM, "SIGVTALRM"),
        (libc::SIGPROF, "SIGPROF"),
        (libc::SIGWINCH, "SIGWINCH"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    known
        .iter()
        .find(|(known, _)| *known == number)
        .map_or_else(|| format!("SIG{number}"), |(_, name)| (*name).to_string())
}
