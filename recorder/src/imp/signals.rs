//! Termination signals: a program ended by SIGTERM or SIGINT (Ctrl-C) loses nothing.
//!
//! Nothing that finishes a log is async-signal-safe (locks, allocation, I/O through
//! buffers), so the handler only notes the signal. The writer sees the note when it
//! next wakes (within one flush interval), finishes the log as `stop` would, restores
//! the default action and raises the signal again: the process then ends as it would
//! have, only later by at most that interval.
//!
//! The handler is installed only over the default action, never over the program's own
//! handler or an ignored signal. A program that installs its own handler later replaces
//! it; one that chains to the handler it replaced (as `signal-hook` does) keeps its own
//! way of ending: the writer sees that its handler is no longer installed, flushes what
//! was recorded and records on.

#[cfg(unix)]
mod unix {
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::OnceLock;

    /// The signal whose handling the writer has not yet seen, or 0.
    static PENDING: AtomicI32 = AtomicI32::new(0);

    const SIGNALS: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGINT];

    /// Installs the handler for each termination signal left at its default action.
    /// Once per process.
    pub(crate) fn install() {
        static ONCE: OnceLock<()> = OnceLock::new();
        ONCE.get_or_init(|| {
            for sig in SIGNALS {
                // SAFETY: sigaction with valid, zero-initialized structs.
                unsafe {
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL {
                        continue;
                    }
                    let mut act: libc::sigaction = std::mem::zeroed();
                    act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                    act.sa_flags = libc::SA_RESTART;
                    libc::sigemptyset(&mut act.sa_mask);
                    libc::sigaction(sig, &act, std::ptr::null_mut());
                }
            }
        });
    }

    /// Async-signal-safe: an atomic load, an atomic swap, and `signal`/`raise`.
    extern "C" fn on_signal(sig: libc::c_int) {
        // Nothing to finish, or a second signal while the writer finishes: end now.
        if !super::super::is_recording() || PENDING.swap(sig, Ordering::AcqRel) != 0 {
            default_action(sig);
        }
    }

    /// Restores the default action of `sig` and raises it (delivered when the handler
    /// returns, or at once on the writer thread).
    fn default_action(sig: libc::c_int) {
        // SAFETY: both are async-signal-safe and take plain values.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }

    /// A termination signal the handler noted since the last call, if any, and whether
    /// the handler is still the signal's action (else a handler installed since chained
    /// to it, and the program ends on its own terms).
    pub(crate) fn take() -> Option<(libc::c_int, bool)> {
        let sig = PENDING.swap(0, Ordering::AcqRel);
        if sig == 0 {
            return None;
        }
        // SAFETY: queries the action into a zero-initialized struct.
        let ours = unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut cur) == 0
                && cur.sa_sigaction == on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t
        };
        Some((sig, ours))
    }

    /// Ends the process by `sig`, as it would have ended without the recorder (sent to
    /// the process: any thread that does not block it takes it).
    pub(crate) fn end_by(sig: libc::c_int) {
        // SAFETY: plain calls with plain values.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::kill(libc::getpid(), sig);
        }
    }
}

#[cfg(unix)]
pub(crate) use unix::{end_by, install, take};

#[cfg(not(unix))]
pub(crate) fn install() {}

#[cfg(not(unix))]
pub(crate) fn take() -> Option<(i32, bool)> {
    None
}

#[cfg(not(unix))]
pub(crate) fn end_by(_sig: i32) {}
