/*
 * memreplay.h: memreplay's recorder for C and C++ programs (libmemreplay).
 *
 * C99 and C++11 or later (C++98 too, where the compiler takes variadic macros).
 * Link with -lmemreplay (libmemreplay.so), or libmemreplay.a plus
 * -lpthread -ldl -lm -lrt -lgcc_s on Linux; see crates/capi/README.md.
 *
 * The switch: MEMREPLAY_ENABLED.
 *   - 1 (the default when undefined): the MEMREPLAY_* macros call the library.
 *   - 0: every MEMREPLAY_* macro compiles to nothing: no call is made and no argument is
 *     evaluated, so a build that defines MEMREPLAY_ENABLED=0 needs no library at link
 *     time as long as it only uses the macros (the memreplay_* functions stay declared,
 *     and calling one directly still needs the library).
 *   Like CryEngine's CAPTURE_REPLAY_LOG: define it to 0 in shipping builds.
 *   Disabled, MEMREPLAY_START and MEMREPLAY_START_FROM_ENV yield 0,
 *   MEMREPLAY_STOP yields MEMREPLAY_ERROR_NOT_RECORDING, and the DOMAIN_DEFINE macros
 *   MEMREPLAY_NO_DOMAIN; every other macro is a void expression, so write the hooks as
 *   statements (their status, in enabled builds, is for checks in debug code).
 *
 * Errors: the functions that can fail return an int status, 0 (MEMREPLAY_OK) or a
 * negative MEMREPLAY_ERROR_* code, and memreplay_last_error() gives the calling thread's
 * message for its last failed call (like errno, successful calls leave it alone). Bad
 * input never crashes the library: NULL pointers, names that are not UTF-8, unknown
 * domains or kinds, bad option strings are all reported this way.
 *
 * Cost: when nothing records, every hook returns after one atomic load (names are not
 * read or formatted). Thread-safety: every function may be called from any thread;
 * contexts and attaches are per thread (pop on the thread that pushed).
 */
#ifndef MEMREPLAY_H
#define MEMREPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>

#ifndef MEMREPLAY_ENABLED
#define MEMREPLAY_ENABLED 1
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MEMREPLAY_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define MEMREPLAY_PRINTF(fmt_index, first_arg)
#endif

/* ---- Status codes -------------------------------------------------------------------- */

#define MEMREPLAY_OK 0
/** A pointer argument that must not be NULL was NULL. */
#define MEMREPLAY_ERROR_NULL (-1)
/** A string argument was not valid UTF-8. */
#define MEMREPLAY_ERROR_UTF8 (-2)
/** The option string (or MEMREPLAY_OPTIONS) is invalid. */
#define MEMREPLAY_ERROR_OPTIONS (-3)
/** The log file could not be created (or the recorder's threads could not start). */
#define MEMREPLAY_ERROR_IO (-4)
/** memreplay_start while a session records. */
#define MEMREPLAY_ERROR_ALREADY_RECORDING (-5)
/** memreplay_stop while nothing records. */
#define MEMREPLAY_ERROR_NOT_RECORDING (-6)
/** The domain handle names no defined domain. */
#define MEMREPLAY_ERROR_DOMAIN (-7)
/** A domain or resource kind out of range. */
#define MEMREPLAY_ERROR_KIND (-8)
/** A bug inside the library, caught before it reached the caller. */
#define MEMREPLAY_ERROR_INTERNAL (-9)

/** The calling thread's message for its last failed call, or NULL if none failed yet.
 *  Valid until the thread's next failed call (or its exit). */
const char *memreplay_last_error(void);

/* ---- Start and stop ------------------------------------------------------------------ */

/** What a finished session wrote (memreplay_stop). */
typedef struct memreplay_stats {
    uint64_t events;             /**< events written to the log */
    uint64_t blocks;             /**< event blocks written */
    uint64_t bytes;              /**< bytes of the log file */
    uint64_t lost_events;        /**< events the recorder had to lose (0 when healthy) */
    uint64_t backpressure_waits; /**< times a thread waited for the writer */
    uint64_t backpressure_ns;    /**< nanoseconds threads waited for the writer */
    uint64_t peak_buffer_bytes;  /**< most buffer memory held at once */
    uint32_t threads;            /**< application threads that recorded events */
    uint32_t stacks;             /**< distinct callstacks */
    uint32_t encoder_threads;    /**< encoder threads (0: the writer encoded alone) */
    uint32_t reserved;           /**< always 0 */
} memreplay_stats;

/** Starts recording to `path`. `options`: MEMREPLAY_OPTIONS syntax, e.g.
 *  "callstacks=off,depth=32,flush-ms=50" (NULL or "": the defaults). Returns 0, or
 *  MEMREPLAY_ERROR_NULL (path), _UTF8 or _OPTIONS (options), _IO (cannot create or
 *  write the log, or the system refused a recorder thread), _ALREADY_RECORDING. */
int memreplay_start(const char *path, const char *options);
/** Starts recording if MEMREPLAY_LOG names a file (options from MEMREPLAY_OPTIONS).
 *  Returns 1 if it started, 0 if MEMREPLAY_LOG is unset or empty, or a negative error. */
int memreplay_start_from_env(void);
/** Stops recording and finishes the log. Fills *out (if not NULL; zeroed on error).
 *  Returns 0 or MEMREPLAY_ERROR_NOT_RECORDING. */
int memreplay_stop(memreplay_stats *out);
/** 1 while a session records, else 0. */
int memreplay_is_recording(void);

/* ---- Contexts, labels, frames, threads ----------------------------------------------- */

/** Enters a context of type `type` ("Level", "Texture") named `name` on this thread until
 *  memreplay_context_pop(). `instance` non-zero: each entry counts as one instance (bytes
 *  per texture). Type names are interned (keep their number small: they are kinds, not
 *  names). The context is entered even on bad input, so the pop stays balanced: NULL is
 *  recorded as "(null)" (MEMREPLAY_ERROR_NULL), non-UTF-8 bytes as U+FFFD (_UTF8). */
int memreplay_context_push(const char *type, const char *name, int instance);
/** Leaves this thread's innermost context. */
void memreplay_context_pop(void);
/** Marks a named point in time. NULL or non-UTF-8 names are refused (nothing recorded). */
int memreplay_label(const char *name);
/** Marks the start of frame `frame`. */
void memreplay_frame_start(uint64_t frame);
/** Names the calling thread in the log. NULL or non-UTF-8 names are refused. */
int memreplay_set_thread_name(const char *name);

/** Longest formatted name (bytes) the printf-style helpers keep; the recorder keeps 1024. */
#ifndef MEMREPLAY_NAME_MAX
#define MEMREPLAY_NAME_MAX 1024
#endif

/** memreplay_context_push with a printf-style name, formatted only while recording
 *  (into a stack buffer of MEMREPLAY_NAME_MAX bytes; longer names are cut). */
static inline int memreplay_context_pushv(const char *type, int instance, const char *fmt, va_list ap) {
    char name[MEMREPLAY_NAME_MAX];
    if (fmt == NULL)
        return memreplay_context_push(type, NULL, instance);
    if (!memreplay_is_recording())
        return MEMREPLAY_OK;
    if (vsnprintf(name, sizeof name, fmt, ap) < 0)
        name[0] = '\0';
    return memreplay_context_push(type, name, instance);
}

static inline int memreplay_context_pushf(const char *type, int instance, const char *fmt, ...)
    MEMREPLAY_PRINTF(3, 4);
static inline int memreplay_context_pushf(const char *type, int instance, const char *fmt, ...) {
    int status;
    va_list ap;
    va_start(ap, fmt);
    status = memreplay_context_pushv(type, instance, fmt, ap);
    va_end(ap);
    return status;
}

/** memreplay_label with a printf-style name, formatted only while recording. */
static inline int memreplay_labelf(const char *fmt, ...) MEMREPLAY_PRINTF(1, 2);
static inline int memreplay_labelf(const char *fmt, ...) {
    char name[MEMREPLAY_NAME_MAX];
    va_list ap;
    if (fmt == NULL)
        return memreplay_label(NULL);
    if (!memreplay_is_recording())
        return MEMREPLAY_OK;
    va_start(ap, fmt);
    if (vsnprintf(name, sizeof name, fmt, ap) < 0)
        name[0] = '\0';
    va_end(ap);
    return memreplay_label(name);
}

/* ---- Attach and usage ---------------------------------------------------------------- */

/** Until memreplay_attach_pop(), this thread's allocations belong to the context owning
 *  the allocation that contains `p` (interior pointers are fine; resolved offline). NULL
 *  is recorded anyway (attaches to nothing, keeps the pop balanced): MEMREPLAY_ERROR_NULL. */
int memreplay_attach_push(const void *p);
/** Ends this thread's innermost attach. */
void memreplay_attach_pop(void);
/** The container whose heap block starts at `p` now uses `used_bytes` of it (for
 *  efficiency reports). NULL: nothing recorded, MEMREPLAY_ERROR_NULL. */
int memreplay_usage(const void *p, size_t used_bytes);

/* ---- Domains: memory malloc never sees (GPU heaps, pools, engine heaps) --------------- */

/** A domain handle. 0 is the heap (malloc's memory). */
typedef uint32_t memreplay_domain;
#define MEMREPLAY_HEAP ((memreplay_domain)0)
/** What memreplay_domain_define returns on bad input. */
#define MEMREPLAY_NO_DOMAIN ((memreplay_domain)0xFFFFFFFFu)

/** Domain kinds (the recorder's DomainKind). */
typedef enum memreplay_domain_kind {
    MEMREPLAY_DOMAIN_HEAP = 0,       /**< the global heap (domain 0 only) */
    MEMREPLAY_DOMAIN_POOL = 1,       /**< a pool, arena or engine heap inside another domain */
    MEMREPLAY_DOMAIN_GPU_LOCAL = 2,  /**< device-local GPU memory (VRAM) */
    MEMREPLAY_DOMAIN_GPU_SHARED = 3, /**< system memory the GPU sees */
    MEMREPLAY_DOMAIN_OTHER = 4       /**< anything else */
} memreplay_domain_kind;

/** Resource kinds (the recorder's ResourceKind). */
typedef enum memreplay_resource_kind {
    MEMREPLAY_RESOURCE_BUFFER = 0,
    MEMREPLAY_RESOURCE_TEXTURE = 1,
    MEMREPLAY_RESOURCE_RENDER_TARGET = 2,
    MEMREPLAY_RESOURCE_DEPTH_STENCIL = 3,
    MEMREPLAY_RESOURCE_OTHER = 4
} memreplay_resource_kind;

/** What a domain allocation holds. Strings may be NULL (empty); they are copied. */
typedef struct memreplay_resource {
    int kind;                 /**< a memreplay_resource_kind */
    uint32_t width;           /**< pixels, or bytes for a buffer */
    uint32_t height;          /**< 1 when it does not apply */
    uint32_t depth_or_layers; /**< depth (3D) or array layers; 1 when neither applies */
    uint32_t mip_levels;      /**< 1 when it does not apply */
    const char *format;       /**< "BC7_UNORM", or NULL */
    const char *name;         /**< debug name, or NULL */
} memreplay_resource;

/** Defines a top-level domain (once, at start-up; remembered across sessions). `kind`: a
 *  memreplay_domain_kind; `capacity`: bytes, 0 if unknown. Returns MEMREPLAY_NO_DOMAIN on
 *  bad input (NULL or non-UTF-8 name, bad kind). */
memreplay_domain memreplay_domain_define(const char *name, int kind, uint64_t capacity);
/** Defines a domain whose allocations live inside allocations of `parent` (a pool or
 *  engine heap whose blocks come from malloc: parent MEMREPLAY_HEAP), so the analyzer
 *  does not count them twice. MEMREPLAY_NO_DOMAIN on bad input or an undefined parent. */
memreplay_domain memreplay_domain_define_within(const char *name, int kind, uint64_t capacity,
                                                memreplay_domain parent);
/** Records an allocation of `size` bytes at `addr` (any id unique among the domain's live
 *  allocations) in `d`, aligned to `align` (a power of two; 0 means 1). */
int memreplay_domain_alloc(memreplay_domain d, uint64_t addr, uint64_t size, uint64_t align);
/** memreplay_domain_alloc for an allocation holding the resource *r. */
int memreplay_domain_alloc_resource(memreplay_domain d, uint64_t addr, uint64_t size, uint64_t align,
                                    const memreplay_resource *r);
/** Records the free of the allocation at `addr` in `d`. */
int memreplay_domain_free(memreplay_domain d, uint64_t addr);
/** A reallocation in `d`, recorded as a free of `old_addr` then an allocation of
 *  `new_size` bytes at `new_addr` (the recorder has no domain realloc event). old_addr 0:
 *  only the allocation; new_addr 0: only the free. */
int memreplay_domain_realloc(memreplay_domain d, uint64_t old_addr, uint64_t new_addr, uint64_t new_size,
                             uint64_t align);
/** What the driver says of the memory `d` stands for: `budget` bytes allowed, `usage`
 *  bytes used (Vulkan heapBudget/heapUsage, DXGI Budget/CurrentUsage). */
int memreplay_domain_budget(memreplay_domain d, uint64_t budget, uint64_t usage);
/** The swap chain's or screen's size in pixels, from now on (at start, on every resize). */
void memreplay_display_size(uint32_t width, uint32_t height);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* ---- Macros: compiled out with MEMREPLAY_ENABLED=0 ----------------------------------- */

#define MEMREPLAY_CONCAT_(a, b) a##b
#define MEMREPLAY_CONCAT(a, b) MEMREPLAY_CONCAT_(a, b)
#ifdef __COUNTER__
#define MEMREPLAY_UNIQUE(prefix) MEMREPLAY_CONCAT(prefix, __COUNTER__)
#else
#define MEMREPLAY_UNIQUE(prefix) MEMREPLAY_CONCAT(prefix, __LINE__)
#endif

#if MEMREPLAY_ENABLED

#define MEMREPLAY_START(path, options) memreplay_start((path), (options))
#define MEMREPLAY_START_FROM_ENV() memreplay_start_from_env()
#define MEMREPLAY_STOP(out) memreplay_stop(out)
/** C: push a context with a printf-style name; pair with MEMREPLAY_CONTEXT_POP(). */
#define MEMREPLAY_CONTEXT_PUSH(type, ...) memreplay_context_pushf((type), 0, __VA_ARGS__)
#define MEMREPLAY_INSTANCE_CONTEXT_PUSH(type, ...) memreplay_context_pushf((type), 1, __VA_ARGS__)
#define MEMREPLAY_CONTEXT_POP() memreplay_context_pop()
#define MEMREPLAY_ATTACH_PUSH(ptr) memreplay_attach_push(ptr)
#define MEMREPLAY_ATTACH_POP() memreplay_attach_pop()
#define MEMREPLAY_FRAME_START(frame) memreplay_frame_start(frame)
#define MEMREPLAY_SET_THREAD_NAME(name) memreplay_set_thread_name(name)
#define MEMREPLAY_USAGE(ptr, used_bytes) memreplay_usage((ptr), (used_bytes))
#define MEMREPLAY_DOMAIN_DEFINE(name, kind, capacity) memreplay_domain_define((name), (kind), (capacity))
#define MEMREPLAY_DOMAIN_DEFINE_WITHIN(name, kind, capacity, parent) \
    memreplay_domain_define_within((name), (kind), (capacity), (parent))
#define MEMREPLAY_DOMAIN_ALLOC(d, addr, size, align) memreplay_domain_alloc((d), (addr), (size), (align))
#define MEMREPLAY_DOMAIN_ALLOC_RESOURCE(d, addr, size, align, resource) \
    memreplay_domain_alloc_resource((d), (addr), (size), (align), (resource))
#define MEMREPLAY_DOMAIN_FREE(d, addr) memreplay_domain_free((d), (addr))
#define MEMREPLAY_DOMAIN_REALLOC(d, old_addr, new_addr, new_size, align) \
    memreplay_domain_realloc((d), (old_addr), (new_addr), (new_size), (align))
#define MEMREPLAY_DOMAIN_BUDGET(d, budget, usage) memreplay_domain_budget((d), (budget), (usage))
#define MEMREPLAY_DISPLAY_SIZE(width, height) memreplay_display_size((width), (height))

#ifdef __cplusplus
/* A label is a point in time, not a scope: the same macro in C and C++. */
#define MEMREPLAY_LABEL(...) memreplay_labelf(__VA_ARGS__)

namespace memreplay {
/** Enters a context for the lifetime of the object (MEMREPLAY_CONTEXT and
 *  MEMREPLAY_INSTANCE_CONTEXT make one); leaves it on scope exit, exceptions included. */
class ContextScope {
public:
    MEMREPLAY_PRINTF(4, 5) ContextScope(const char *type, int instance, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        memreplay_context_pushv(type, instance, fmt, ap);
        va_end(ap);
    }
    ~ContextScope() { memreplay_context_pop(); }

private:
    ContextScope(const ContextScope &);
    ContextScope &operator=(const ContextScope &);
};

/** Attaches this thread's allocations to the owner of `p` for the lifetime of the object. */
class AttachScope {
public:
    explicit AttachScope(const void *p) { memreplay_attach_push(p); }
    ~AttachScope() { memreplay_attach_pop(); }

private:
    AttachScope(const AttachScope &);
    AttachScope &operator=(const AttachScope &);
};
} /* namespace memreplay */

/** C++: a context until the end of the enclosing scope: MEMREPLAY_CONTEXT("Level", "%s", name); */
#define MEMREPLAY_CONTEXT(type, ...) \
    ::memreplay::ContextScope MEMREPLAY_UNIQUE(memreplay_context_scope_)((type), 0, __VA_ARGS__)
/** C++: an instance context (one texture, one mesh) until the end of the scope. */
#define MEMREPLAY_INSTANCE_CONTEXT(type, ...) \
    ::memreplay::ContextScope MEMREPLAY_UNIQUE(memreplay_context_scope_)((type), 1, __VA_ARGS__)
/** C++: attach to the owner of `ptr` until the end of the scope. */
#define MEMREPLAY_ATTACH(ptr) ::memreplay::AttachScope MEMREPLAY_UNIQUE(memreplay_attach_scope_)(ptr)
#else
#define MEMREPLAY_LABEL(...) memreplay_labelf(__VA_ARGS__)
#endif

#else /* !MEMREPLAY_ENABLED: nothing is called, no argument is evaluated */

/* The arguments go into sizeof, which never evaluates its operand and emits no code, so
 * that variables used only in these macros draw no "unused" warnings. The function is
 * declared and never defined: an unevaluated call needs no definition at link time. */
#ifdef __cplusplus
extern "C"
#endif
int memreplay_unused_args_(int, ...);
#define MEMREPLAY_UNUSED(...) ((void)sizeof(memreplay_unused_args_(0, __VA_ARGS__)))

#define MEMREPLAY_START(path, options) (MEMREPLAY_UNUSED(path, options), 0)
#define MEMREPLAY_START_FROM_ENV() (0)
#define MEMREPLAY_STOP(out) (MEMREPLAY_UNUSED(out), MEMREPLAY_ERROR_NOT_RECORDING)
#define MEMREPLAY_CONTEXT_PUSH(type, ...) MEMREPLAY_UNUSED(type, __VA_ARGS__)
#define MEMREPLAY_INSTANCE_CONTEXT_PUSH(type, ...) MEMREPLAY_UNUSED(type, __VA_ARGS__)
#define MEMREPLAY_CONTEXT_POP() ((void)0)
#define MEMREPLAY_ATTACH_PUSH(ptr) MEMREPLAY_UNUSED(ptr)
#define MEMREPLAY_ATTACH_POP() ((void)0)
#define MEMREPLAY_FRAME_START(frame) MEMREPLAY_UNUSED(frame)
#define MEMREPLAY_SET_THREAD_NAME(name) MEMREPLAY_UNUSED(name)
#define MEMREPLAY_USAGE(ptr, used_bytes) MEMREPLAY_UNUSED(ptr, used_bytes)
#define MEMREPLAY_DOMAIN_DEFINE(name, kind, capacity) (MEMREPLAY_UNUSED(name, kind, capacity), MEMREPLAY_NO_DOMAIN)
#define MEMREPLAY_DOMAIN_DEFINE_WITHIN(name, kind, capacity, parent) \
    (MEMREPLAY_UNUSED(name, kind, capacity, parent), MEMREPLAY_NO_DOMAIN)
#define MEMREPLAY_DOMAIN_ALLOC(d, addr, size, align) MEMREPLAY_UNUSED(d, addr, size, align)
#define MEMREPLAY_DOMAIN_ALLOC_RESOURCE(d, addr, size, align, resource) \
    MEMREPLAY_UNUSED(d, addr, size, align, resource)
#define MEMREPLAY_DOMAIN_FREE(d, addr) MEMREPLAY_UNUSED(d, addr)
#define MEMREPLAY_DOMAIN_REALLOC(d, old_addr, new_addr, new_size, align) \
    MEMREPLAY_UNUSED(d, old_addr, new_addr, new_size, align)
#define MEMREPLAY_DOMAIN_BUDGET(d, budget, usage) MEMREPLAY_UNUSED(d, budget, usage)
#define MEMREPLAY_DISPLAY_SIZE(width, height) MEMREPLAY_UNUSED(width, height)
#define MEMREPLAY_LABEL(...) MEMREPLAY_UNUSED(__VA_ARGS__)
#define MEMREPLAY_CONTEXT(type, ...) MEMREPLAY_UNUSED(type, __VA_ARGS__)
#define MEMREPLAY_INSTANCE_CONTEXT(type, ...) MEMREPLAY_UNUSED(type, __VA_ARGS__)
#define MEMREPLAY_ATTACH(ptr) MEMREPLAY_UNUSED(ptr)

#endif /* MEMREPLAY_ENABLED */

#endif /* MEMREPLAY_H */
