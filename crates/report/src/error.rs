//! Why a report could not be made: [`Error`].

use std::path::PathBuf;

use memreplay_format::FormatError;

/// Why a report could not be made. Each displays as one line, but for a command refusing
/// several options it does not take: one line each. What the program running the
/// command does with it (an exit status, a message) is its own business.
#[derive(Debug)]
pub enum Error {
    /// The log could not be opened or is not a log this build reads.
    Open {
        /// The log.
        path: PathBuf,
        /// What the reader found.
        error: FormatError,
    },
    /// An option names something the log does not have (a domain, thread, label or
    /// frame), does not apply to the command, or a budget or an input cannot be used.
    Usage(String),
    /// The log nests contexts deeper than the replay follows.
    TooDeep {
        /// The log.
        path: PathBuf,
        /// How deep it nests.
        depth: u64,
    },
    /// Replaying the log took more memory than the ceiling allows.
    OutOfRoom {
        /// The log.
        path: PathBuf,
        /// What took the room.
        what: memreplay_replay::OutOfRoom,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Open { path, error: FormatError::Io(e) } => {
                write!(f, "cannot read {}: {e}", path.display())
            }
            Error::Open { path, error } => write!(f, "{}: {error}", path.display()),
            Error::Usage(what) => write!(f, "{what}"),
            Error::TooDeep { path, depth } => write!(
                f,
                "{}: contexts nested {depth} levels deep; replay-cli follows at most {} levels",
                path.display(),
                memreplay_replay::MAX_CONTEXT_DEPTH
            ),
            Error::OutOfRoom { path, what } => {
                use crate::table::size;
                write!(
                    f,
                    "{}: stopped after {} of {} events: {} of memory in use, past the ceiling of {} \
                     (--max-memory, or MEMREPLAY_MAX_MEMORY)",
                    path.display(),
                    what.events_done,
                    what.events_total,
                    size(what.in_use),
                    size(what.limit)
                )?;
                let parts: Vec<String> = what
                    .parts
                    .iter()
                    .filter(|&&(_, bytes, _)| bytes > 0)
                    .take(3)
                    .map(|&(part, bytes, n)| format!("{part} {} ({n})", size(bytes)))
                    .collect();
                if !parts.is_empty() {
                    write!(f, "; what grew: {}", parts.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {}
