//! Operating-system facts a thread reads once, when it registers: its OS id, its name
//! and the bounds of its stack (for a safe frame-pointer walk).

/// The calling thread's OS id.
pub(crate) fn os_thread_id() -> u64 {
    #[cfg(target_os = "linux")]
    {
        unsafe { libc::syscall(libc::SYS_gettid) as u64 }
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        unsafe { libc::pthread_self() as u64 }
    }
    #[cfg(not(unix))]
    {
        0
    }
}

/// The calling thread's OS name into `buf`; returns its length (0 if unknown).
pub(crate) fn os_thread_name(buf: &mut [u8; 64]) -> usize {
    #[cfg(target_os = "linux")]
    {
        let r = unsafe { libc::prctl(libc::PR_GET_NAME, buf.as_mut_ptr() as libc::c_ulong, 0, 0, 0) };
        if r != 0 {
            return 0;
        }
        buf.iter().position(|&b| b == 0).unwrap_or(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = buf;
        0
    }
}

/// The calling thread's stack as (lowest, highest) address, or (0, 0) if unknown.
/// On Linux's main thread this reads /proc/self/maps (through libc's malloc, not ours).
pub(crate) fn stack_bounds() -> (usize, usize) {
    #[cfg(target_os = "linux")]
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return (0, 0);
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if ok {
            (addr as usize, addr as usize + size)
        } else {
            (0, 0)
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        (0, 0)
    }
}
