//! The cached unwinder (`StackCapture::Unwinder` on x86_64 Linux with glibc): DWARF call
//! frame information (`.eh_frame`, found through `.eh_frame_hdr`) read from each loaded
//! object's memory, turned into one small rule per return address and kept in a
//! per-thread cache. A capture whose every frame is in the cache costs a lookup, an
//! addition and one or two bounds-checked loads per frame: no lock, no allocation, no
//! system call.
//!
//! **Finding an object's unwind information.** On a cache miss, glibc's
//! `_dl_find_object` (glibc 2.35 and later; what libgcc's own unwinder uses) gives the
//! object containing the address and its `PT_GNU_EH_FRAME` segment, without a lock and
//! always in step with what the loader has mapped; `gimli` then finds the address's FDE
//! in the header's sorted table and evaluates its rules. No module list is kept.
//!
//! **What it cannot do, `_Unwind_Backtrace` does.** A frame whose address is in no loaded
//! object (generated code), whose object has no unwind table, or whose rule is more than
//! "CFA = rsp or rbp + offset, return address and rbp saved at offsets from the CFA" (a
//! DWARF expression: signal frames, realigned stacks), or a step that leaves the thread's
//! stack or does not move up it: the whole capture is redone by the platform unwinder,
//! so a callstack is never worse than `_Unwind_Backtrace`'s (`stack::unwind`). A rule that
//! fails is cached too, so such a frame costs one lookup before the fallback.
//!
//! **Same frames as `_Unwind_Backtrace`.** The walk starts in this function's own frame
//! and leaves out every return address whose frame's stack pointer (the CFA of the frame
//! it called) is at or below the anchor, as `stack::unwind` does with `_Unwind_GetCFA`
//! (with an anchor at the interposer's frame record, `Anchor::at`, it starts at that
//! record: its return address is the first such frame, and the recorder's own are skipped);
//! it ends where libgcc does: at a return address of 0, at a frame whose return address
//! rule is "undefined" (`_start`, a thread's first frame), or at `max` frames. Debug
//! builds redo every cached capture with `_Unwind_Backtrace` and abort on a difference.
//!
//! **Unloaded objects.** Cached rules belong to a generation: `modules_changed` starts a
//! new one, and each thread empties its cache at its next capture. The preloaded
//! library's `dlclose` calls it before glibc's `dlclose` and as soon as it returns (so
//! no thread keeps a rule of the library for a `dlopen` that maps other code there,
//! unless it ran the library's code while it was being closed); the writer's module
//! scan calls it when a module it saw before is gone (a program recorded through
//! `Allocator`, whose `dlclose` is not interposed: until that scan, at most a second, a
//! frame of code mapped where the unloaded object was may be walked with a stale rule and
//! give a wrong stack). A stale rule can only misdirect the walk within the thread's
//! stack (every load is bounds-checked), never make it read an unmapped object. A miss
//! reads the object `_dl_find_object` names; an object unloaded by another thread during
//! that read is the same hazard libgcc's own lookup has.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, LittleEndian, Pointer, RegisterRule, UnwindContext, UnwindSection,
    X86_64,
};

/// Cached rules per thread (a power of two): 16 bytes each.
const ENTRIES: usize = 1024;

/// glibc's `struct dl_find_object` on x86_64 (`<bits/dl_find_object.h>`: no `dlfo_eh_dbase`).
#[repr(C)]
struct DlFindObject {
    flags: u64,
    map_start: *mut c_void,
    map_end: *mut c_void,
    link_map: *mut c_void,
    eh_frame: *mut c_void,
    reserved: [u64; 7],
}

type FindObjectFn = unsafe extern "C" fn(*mut c_void, *mut DlFindObject) -> i32;

/// `_dl_find_object`, looked up once by `init` (0: this glibc has none, and every capture
/// is `_Unwind_Backtrace`'s).
static FIND_OBJECT: AtomicUsize = AtomicUsize::new(0);

/// The generation of cached rules: a thread's cache is emptied when it sees a new one.
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// Looks up `_dl_find_object`. Called by `start`, where the recorder's own allocations
/// (`dlsym` may allocate) pass through.
pub(crate) fn init() {
    if FIND_OBJECT.load(Ordering::Acquire) != 0 {
        return;
    }
    // SAFETY: `dlsym` with the default scope and a constant C string.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr()) };
    FIND_OBJECT.store(f as usize, Ordering::Release);
}

/// Whether the cached unwinder can run in this process (`init` found `_dl_find_object`).
pub(crate) fn available() -> bool {
    FIND_OBJECT.load(Ordering::Acquire) != 0
}

/// Objects were unloaded: every rule cached so far is forgotten.
pub(crate) fn modules_changed() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// What to do with a frame: where its CFA is, and where the caller's return address and
/// rbp were saved (offsets from the CFA). Eight bytes.
#[derive(Clone, Copy, Default)]
struct Rule {
    cfa_offset: i32,
    /// The caller's rbp is at CFA + this; 0: rbp is unchanged (a saved register is
    /// always below the CFA).
    rbp_offset: i16,
    /// The caller's return address is at CFA + this (-8 in all x86_64 code).
    ra_offset: i8,
    kind: u8,
}

/// Not a rule this unwinder follows: the capture falls back (and an empty entry's).
const FALLBACK: u8 = 0;
/// CFA = rsp + offset.
const CFA_RSP: u8 = 1;
/// CFA = rbp + offset.
const CFA_RBP: u8 = 2;
/// The outermost frame: its return address is undefined.
const END: u8 = 3;

const FALLBACK_RULE: Rule = Rule { cfa_offset: 0, rbp_offset: 0, ra_offset: 0, kind: FALLBACK };

/// A cached rule; an empty entry (all zero) says "fall back" for address 0.
#[derive(Clone, Copy, Default)]
struct Entry {
    address: u64,
    rule: Rule,
}
const _: () = assert!(std::mem::size_of::<Entry>() == 16);

/// gimli's evaluation state in fixed arrays: evaluating rules never allocates. A row
/// with more register rules than fit (x86_64 code describes at most the 17 general
/// registers and the return address) is an error, and the capture falls back.
struct NoAlloc;

impl<T: gimli::ReaderOffset> gimli::UnwindContextStorage<T> for NoAlloc {
    type Rules = [(gimli::Register, RegisterRule<T>); 32];
    type Stack = [gimli::UnwindTableRow<T, Self>; 4];
}

/// A thread's cached rules and gimli's evaluation state, allocated when the thread
/// registers (`new_cache`) and used only by that thread.
pub(crate) struct UnwindCache {
    entries: [Entry; ENTRIES],
    /// The `GENERATION` the entries belong to.
    generation: u32,
    ctx: UnwindContext<usize, NoAlloc>,
}

/// A new, empty cache, owned by the thread state that holds it (freed by the thread's exit
/// flush, `stack::free_unwind_cache`). Allocates: call it where the recorder's own
/// allocations pass through.
pub(crate) fn new_cache() -> *mut UnwindCache {
    let mut b = Box::<UnwindCache>::new_uninit();
    let p = b.as_mut_ptr();
    // SAFETY: `p` points to room for an `UnwindCache`; an all-zero `Entry` is a valid
    // (empty) entry, and the other fields are written in place before `assume_init`.
    unsafe {
        std::ptr::addr_of_mut!((*p).entries).write_bytes(0, 1);
        std::ptr::addr_of_mut!((*p).generation).write(GENERATION.load(Ordering::Acquire));
        std::ptr::addr_of_mut!((*p).ctx).write(UnwindContext::new_in());
        Box::into_raw(b.assume_init())
    }
}

impl UnwindCache {
    /// Empties the cache if objects were unloaded since it was filled.
    #[inline(always)]
    fn sync_generation(&mut self) {
        let now = GENERATION.load(Ordering::Acquire);
        if self.generation != now {
            self.entries.fill(Entry::default());
            self.generation = now;
        }
    }

    /// The rule for the frame at `address` (a return address less one, or the first
    /// frame's own pc).
    #[inline(always)]
    fn rule(&mut self, address: usize) -> Rule {
        // The low bits vary most between nearby call sites.
        let slot = (address ^ (address >> 10)) & (ENTRIES - 1);
        let e = &self.entries[slot];
        if e.address == address as u64 {
            return e.rule;
        }
        self.miss(slot, address)
    }

    #[cold]
    #[inline(never)]
    fn miss(&mut self, slot: usize, address: usize) -> Rule {
        let rule = self.evaluate(address).unwrap_or(FALLBACK_RULE);
        self.entries[slot] = Entry { address: address as u64, rule };
        rule
    }

    /// The rule at `address` from its object's `.eh_frame`, or None where this unwinder
    /// cannot follow it.
    fn evaluate(&mut self, address: usize) -> Option<Rule> {
        let find = FIND_OBJECT.load(Ordering::Acquire);
        if find == 0 {
            return None;
        }
        // SAFETY: a non-zero `FIND_OBJECT` is `_dl_find_object`'s address.
        let find: FindObjectFn = unsafe { std::mem::transmute::<usize, FindObjectFn>(find) };
        // SAFETY: an all-zero `dl_find_object` is a valid value of this plain C struct.
        let mut found: DlFindObject = unsafe { std::mem::zeroed() };
        // SAFETY: `_dl_find_object` reads nothing at `address` and fills `found`.
        if unsafe { find(address as *mut c_void, &mut found) } != 0 || found.eh_frame.is_null() {
            return None;
        }
        let (start, end, hdr) = (found.map_start as usize, found.map_end as usize, found.eh_frame as usize);
        if !(start <= hdr && hdr < end) {
            return None;
        }
        // The sections are read in place, up to the end of the object's mapping: gimli
        // reads only the header, the records its table points at, and their CIEs.
        // SAFETY: glibc's answer: `hdr..end` lies in the object, mapped until it is
        // unloaded (`modules_changed`).
        let hdr_bytes = unsafe { std::slice::from_raw_parts(hdr as *const u8, end - hdr) };
        let bases = BaseAddresses::default().set_eh_frame_hdr(hdr as u64);
        let parsed = EhFrameHdr::new(hdr_bytes, LittleEndian).parse(&bases, 8).ok()?;
        let Pointer::Direct(eh_frame) = parsed.eh_frame_ptr() else { return None };
        let eh_frame = usize::try_from(eh_frame).ok().filter(|&a| start <= a && a < end)?;
        // SAFETY: as above, checked to lie in the object's mapping.
        let frame_bytes = unsafe { std::slice::from_raw_parts(eh_frame as *const u8, end - eh_frame) };
        let frame = EhFrame::new(frame_bytes, LittleEndian);
        let bases = bases.set_eh_frame(eh_frame as u64);
        let table = parsed.table()?;
        let row = table
            .unwind_info_for_address(&frame, &bases, &mut self.ctx, address as u64, EhFrame::cie_from_offset)
            .ok()?;
        let (kind, cfa_offset) = match *row.cfa() {
            CfaRule::RegisterAndOffset { register: X86_64::RSP, offset } => (CFA_RSP, offset),
            CfaRule::RegisterAndOffset { register: X86_64::RBP, offset } => (CFA_RBP, offset),
            _ => return None,
        };
        let cfa_offset = i32::try_from(cfa_offset).ok()?;
        let ra_offset = match row.register(X86_64::RA) {
            RegisterRule::Offset(o) => i8::try_from(o).ok()?,
            RegisterRule::Undefined => return Some(Rule { kind: END, ..Rule::default() }),
            _ => return None,
        };
        let rbp_offset = match row.register(X86_64::RBP) {
            RegisterRule::Undefined | RegisterRule::SameValue => 0,
            RegisterRule::Offset(o) if o != 0 => i16::try_from(o).ok()?,
            _ => return None,
        };
        Some(Rule { cfa_offset, rbp_offset, ra_offset, kind })
    }
}

/// Captures up to `max` return addresses into `out` as `stack::unwind` does (the same
/// frames, see the module's comment) from the cached rules; None where it cannot, and
/// then the caller asks `_Unwind_Backtrace`. `lo..hi` are the thread's stack bounds.
/// With `record`, `anchor` holds a frame record pushed by the hook's caller, the
/// interposer's entry point (the caller's rbp, then the return address into the program):
/// the walk starts there instead of stepping through the recorder's own frames.
///
/// # Safety
/// `out` (any alignment) has room for `max` addresses.
#[inline(never)]
pub(crate) unsafe fn unwind(
    cache: &mut UnwindCache,
    out: *mut u64,
    max: usize,
    anchor: usize,
    record: bool,
    lo: usize,
    hi: usize,
) -> Option<usize> {
    let (mut pc, mut sp, mut bp): (usize, usize, usize);
    // SAFETY: reads this instruction's address and the stack and frame pointers together,
    // so that the rule at `pc` describes `sp` and `bp`; touches no memory and no flags.
    unsafe {
        std::arch::asm!(
            "lea {pc}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            pc = out(reg) pc,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags)
        )
    };
    if lo >= hi || sp < lo || sp >= hi {
        return None;
    }
    cache.sync_generation();
    // A word of the stack, or None outside it.
    let read = |at: usize| -> Option<usize> {
        if at < lo || at > hi.checked_sub(8)? {
            return None;
        }
        // SAFETY: `at..at + 8` lies inside this thread's stack (checked above).
        Some(unsafe { (at as *const usize).read_unaligned() })
    };
    let mut n = 0;
    // The first frame's pc is where it is; a return address is looked up less one (the
    // call it follows may be its function's last instruction).
    let mut lookup = pc;
    if record && max > 0 {
        // The entry point's frame: its CFA (the program's stack pointer) is `anchor + 16`,
        // the first above the anchor, so its return address is the first one kept.
        let (saved_bp, ra) = (read(anchor)?, read(anchor.checked_add(8)?)?);
        if anchor < sp || ra == 0 {
            return if ra == 0 { Some(0) } else { None };
        }
        // SAFETY: `max > 0`, and `out` has room for `max` addresses.
        unsafe { out.write_unaligned(ra as u64) };
        (n, sp, bp, lookup) = (1, anchor + 16, saved_bp, ra - 1);
    }
    while n < max {
        let rule = cache.rule(lookup);
        let base = match rule.kind {
            CFA_RSP => sp,
            CFA_RBP => bp,
            END => return Some(n),
            _ => return None,
        };
        let cfa = base.wrapping_add(rule.cfa_offset as isize as usize);
        if cfa <= sp {
            return None;
        }
        let ra = read(cfa.wrapping_add(rule.ra_offset as isize as usize))?;
        if rule.rbp_offset != 0 {
            bp = read(cfa.wrapping_add(rule.rbp_offset as isize as usize))?;
        }
        if ra == 0 {
            return Some(n);
        }
        (pc, sp) = (ra, cfa);
        // The caller's frame, whose stack pointer is `cfa`: the recorder's own frames
        // are at or below the anchor.
        if sp > anchor {
            // SAFETY: `n < max`, and `out` has room for `max` addresses.
            unsafe { out.add(n).write_unaligned(pc as u64) };
            n += 1;
        }
        lookup = pc - 1;
    }
    Some(n)
}

/// Debug builds: the cached capture `out[..n]` must equal what `platform` (the
/// `_Unwind_Backtrace` capture with the same anchor) gives; a difference is printed and
/// the process aborts. Counts the captures checked for `counts`.
#[cfg(debug_assertions)]
pub(crate) fn check(out: *const u64, n: usize, max: usize, platform: impl FnOnce(*mut u64, usize) -> usize) {
    let mut theirs = [0u64; crate::config::MAX_STACK_DEPTH];
    let m = platform(theirs.as_mut_ptr(), max.min(theirs.len()));
    // SAFETY: the caller wrote `n` addresses at `out`.
    let ours: Vec<u64> = (0..n).map(|i| unsafe { out.add(i).read_unaligned() }).collect();
    if ours[..] != theirs[..m] {
        super::say_on_stderr(&format!(
            "memreplay: the cached unwinder and _Unwind_Backtrace disagree:\n  cached   {ours:x?}\n  platform {:x?}\n",
            &theirs[..m]
        ));
        std::process::abort();
    }
    CHECKED.fetch_add(1, Ordering::Relaxed);
}

/// Debug builds: captures the cached unwinder did (each checked), and those it left to
/// `_Unwind_Backtrace`.
#[cfg(debug_assertions)]
pub(crate) static CHECKED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
#[cfg(debug_assertions)]
pub(crate) static FELL_BACK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
