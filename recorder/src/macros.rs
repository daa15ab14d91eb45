//! The context and label macros. Each has two definitions, chosen by the feature at
//! *this* crate's compile time: with the feature off, the format arguments are type
//! checked but never evaluated, and the result is a zero-sized guard.

/// Enters a typed, named context until the returned guard drops:
/// `let _g = memreplay::context!("Level", "{}", level_name);`
///
/// The type is a string literal ("Level", "Texture", "Physics"): the log defines each
/// type by name, so no enum has to be kept in sync between the game and the analyzer.
#[cfg(feature = "capture_replay_log")]
#[macro_export]
macro_rules! context {
    ($ty:expr, $($arg:tt)+) => {{
        $crate::__private::context_push($ty, ::core::format_args!($($arg)+), false);
        $crate::__private::ContextGuard::new()
    }};
}

/// Enters a typed, named context until the returned guard drops:
/// `let _g = memreplay::context!("Level", "{}", level_name);`
#[cfg(not(feature = "capture_replay_log"))]
#[macro_export]
macro_rules! context {
    ($ty:expr, $($arg:tt)+) => {{
        if false {
            let _ = ($ty, ::core::format_args!($($arg)+));
        }
        $crate::__private::ContextGuard::new()
    }};
}

/// Like [`context!`], but each entry counts as one instance (one texture, one mesh,
/// one entity), so reports can give the average bytes per instance.
#[cfg(feature = "capture_replay_log")]
#[macro_export]
macro_rules! instance_context {
    ($ty:expr, $($arg:tt)+) => {{
        $crate::__private::context_push($ty, ::core::format_args!($($arg)+), true);
        $crate::__private::ContextGuard::new()
    }};
}

/// Like [`context!`], but each entry counts as one instance.
#[cfg(not(feature = "capture_replay_log"))]
#[macro_export]
macro_rules! instance_context {
    ($ty:expr, $($arg:tt)+) => {{
        if false {
            let _ = ($ty, ::core::format_args!($($arg)+));
        }
        $crate::__private::ContextGuard::new()
    }};
}

/// Marks a named point in time with a `format!`-style name: `memreplay::label!("level {} loaded", n);`
#[cfg(feature = "capture_replay_log")]
#[macro_export]
macro_rules! label {
    ($($arg:tt)+) => {
        $crate::__private::label_fmt(::core::format_args!($($arg)+))
    };
}

/// Marks a named point in time with a `format!`-style name.
#[cfg(not(feature = "capture_replay_log"))]
#[macro_export]
macro_rules! label {
    ($($arg:tt)+) => {
        if false {
            let _ = ::core::format_args!($($arg)+);
        }
    };
}

/// Attaches this thread's following allocations to the owner of the allocation containing
/// `ptr`, until the returned guard drops: `let _a = memreplay::attach!(asset.as_ptr());`
#[macro_export]
macro_rules! attach {
    ($ptr:expr) => {
        $crate::attach($ptr)
    };
}
