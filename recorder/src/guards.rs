//! RAII guards for contexts and attaches. With the feature off they are zero-sized and
//! their drop does nothing.

/// Ends a context when dropped. Returned by [`context!`](crate::context),
/// [`instance_context!`](crate::instance_context) and [`push_context`](crate::push_context).
#[must_use = "the context ends when the guard is dropped"]
pub struct ContextGuard {
    // Not Send: a context is popped on the thread that pushed it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl ContextGuard {
    #[doc(hidden)]
    #[inline(always)]
    pub fn new() -> Self {
        ContextGuard { _not_send: std::marker::PhantomData }
    }
}

impl Drop for ContextGuard {
    #[inline(always)]
    fn drop(&mut self) {
        #[cfg(feature = "capture_replay_log")]
        crate::imp::context_pop();
    }
}

/// Ends an attach when dropped. Returned by [`attach`](fn@crate::attach).
#[must_use = "the attach ends when the guard is dropped"]
pub struct AttachGuard {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl AttachGuard {
    /// A guard for an attach already pushed: dropping it pops this thread's innermost
    /// attach. For bindings (the C API) whose push and pop are separate calls.
    #[doc(hidden)]
    #[inline(always)]
    pub fn new() -> Self {
        AttachGuard { _not_send: std::marker::PhantomData }
    }
}

impl Drop for AttachGuard {
    #[inline(always)]
    fn drop(&mut self) {
        #[cfg(feature = "capture_replay_log")]
        crate::imp::attach_pop();
    }
}
