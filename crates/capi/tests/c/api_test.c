/* Drives the whole C API; tests/c_api.rs checks the log it writes.
 * Usage: api_test LOG_PATH. Exits 1 on the first failed check. */
#include "memreplay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
            failures++;                                                                 \
        }                                                                               \
    } while (0)
#define CHECK_ERR(call, code, needle)                                                   \
    do {                                                                                \
        int got_ = (call);                                                              \
        const char *msg_ = memreplay_last_error();                                      \
        if (got_ != (code) || msg_ == NULL || strstr(msg_, (needle)) == NULL) {         \
            fprintf(stderr, "%s:%d: %s returned %d (wanted %d), message: %s\n", __FILE__, \
                    __LINE__, #call, got_, (code), msg_ ? msg_ : "(none)");             \
            failures++;                                                                 \
        }                                                                               \
    } while (0)

/* The engine heap: a bump allocator over one malloc'd block, reported as a domain. */
typedef struct {
    unsigned char *base;
    size_t used, size;
    memreplay_domain domain;
} arena;

static void *arena_alloc(arena *a, size_t size, size_t align) {
    size_t at = (a->used + align - 1) & ~(align - 1);
    if (at + size > a->size)
        return NULL;
    a->used = at + size;
    MEMREPLAY_DOMAIN_ALLOC(a->domain, (uint64_t)(uintptr_t)(a->base + at), size, align);
    return a->base + at;
}

static void arena_free(arena *a, void *p) {
    MEMREPLAY_DOMAIN_FREE(a->domain, (uint64_t)(uintptr_t)p);
}

static void *arena_realloc(arena *a, void *old, size_t size, size_t align) {
    size_t at = (a->used + align - 1) & ~(align - 1);
    void *p = a->base + at;
    a->used = at + size;
    MEMREPLAY_DOMAIN_REALLOC(a->domain, (uint64_t)(uintptr_t)old, (uint64_t)(uintptr_t)p, size, align);
    return p;
}

int main(int argc, char **argv) {
    memreplay_stats st;
    arena heap;
    void *blocks[10];
    memreplay_domain vram, bad;
    memreplay_resource tex;
    int i;

    if (argc != 2) {
        fprintf(stderr, "usage: %s LOG\n", argv[0]);
        return 2;
    }
    /* Before recording: errors of start and stop. */
    CHECK(memreplay_last_error() == NULL);
    CHECK(memreplay_is_recording() == 0);
    CHECK_ERR(memreplay_stop(&st), MEMREPLAY_ERROR_NOT_RECORDING, "no memreplay session");
    CHECK(st.events == 0 && st.bytes == 0);
    CHECK_ERR(memreplay_start(NULL, NULL), MEMREPLAY_ERROR_NULL, "log path is NULL");
    CHECK_ERR(memreplay_start("/nonexistent-dir/sub/x.mrl", NULL), MEMREPLAY_ERROR_IO, "/nonexistent-dir/sub/x.mrl");
    CHECK_ERR(memreplay_start(argv[1], "depht=32"), MEMREPLAY_ERROR_OPTIONS, "unknown option `depht`");
    CHECK_ERR(memreplay_start(argv[1], "depth=500"), MEMREPLAY_ERROR_OPTIONS, "depth takes a number of frames");
    CHECK_ERR(memreplay_start(argv[1], "callstacks=\xff"), MEMREPLAY_ERROR_UTF8, "not valid UTF-8");
    CHECK(memreplay_is_recording() == 0);
    /* Hooks while nothing records: nothing happens, no error. */
    CHECK(MEMREPLAY_CONTEXT_PUSH("Level", "%s", "never") == MEMREPLAY_OK);
    MEMREPLAY_CONTEXT_POP();
    CHECK(MEMREPLAY_LABEL("never") == MEMREPLAY_OK);

    /* Domains are defined once and remembered; bad definitions define nothing. */
    heap.size = 64 * 1024;
    heap.used = 0;
    heap.base = (unsigned char *)malloc(heap.size);
    heap.domain = MEMREPLAY_DOMAIN_DEFINE_WITHIN("engine.heap", MEMREPLAY_DOMAIN_POOL, heap.size, MEMREPLAY_HEAP);
    CHECK(heap.domain != MEMREPLAY_NO_DOMAIN && heap.domain != MEMREPLAY_HEAP);
    bad = memreplay_domain_define(NULL, MEMREPLAY_DOMAIN_POOL, 0);
    CHECK(bad == MEMREPLAY_NO_DOMAIN);
    CHECK(strstr(memreplay_last_error(), "domain name is NULL") != NULL);
    bad = memreplay_domain_define("bad.kind", 9, 0);
    CHECK(bad == MEMREPLAY_NO_DOMAIN);
    CHECK(strstr(memreplay_last_error(), "domain kind 9") != NULL);
    bad = memreplay_domain_define("bad\xc3(utf8", MEMREPLAY_DOMAIN_OTHER, 0);
    CHECK(bad == MEMREPLAY_NO_DOMAIN);
    CHECK(strstr(memreplay_last_error(), "not valid UTF-8") != NULL);
    bad = memreplay_domain_define_within("orphan", MEMREPLAY_DOMAIN_POOL, 0, 4000);
    CHECK(bad == MEMREPLAY_NO_DOMAIN);
    CHECK(strstr(memreplay_last_error(), "domain 4000 is not defined") != NULL);

    CHECK(memreplay_start(argv[1], "callstacks=off,flush-ms=20") == MEMREPLAY_OK);
    CHECK(memreplay_is_recording() == 1);
    CHECK_ERR(memreplay_start(argv[1], NULL), MEMREPLAY_ERROR_ALREADY_RECORDING, "already recording");
    /* Defined while recording. */
    vram = memreplay_domain_define("vram.local", MEMREPLAY_DOMAIN_GPU_LOCAL, 256u << 20);
    CHECK(vram != MEMREPLAY_NO_DOMAIN && vram != heap.domain);

    CHECK(memreplay_set_thread_name("c-main") == MEMREPLAY_OK);
    MEMREPLAY_DISPLAY_SIZE(1920, 1080);
    MEMREPLAY_FRAME_START(1);
    CHECK(MEMREPLAY_CONTEXT_PUSH("Level", "%s", "Forest") == MEMREPLAY_OK);
    CHECK(MEMREPLAY_INSTANCE_CONTEXT_PUSH("Texture", "%s.%s", "rock", "dds") == MEMREPLAY_OK);
    for (i = 0; i < 10; i++) {
        blocks[i] = arena_alloc(&heap, 100 * (size_t)(i + 1), 16);
        CHECK(blocks[i] != NULL);
    }
    tex.kind = MEMREPLAY_RESOURCE_TEXTURE;
    tex.width = 2048;
    tex.height = 2048;
    tex.depth_or_layers = 1;
    tex.mip_levels = 12;
    tex.format = "BC7_UNORM";
    tex.name = "rock.dds";
    CHECK(MEMREPLAY_DOMAIN_ALLOC_RESOURCE(vram, 0x100000, 4u << 20, 65536, &tex) == MEMREPLAY_OK);
    CHECK(MEMREPLAY_DOMAIN_BUDGET(vram, 200u << 20, 5u << 20) == MEMREPLAY_OK);
    MEMREPLAY_CONTEXT_POP();
    CHECK(MEMREPLAY_LABEL("level %s loaded", "Forest") == MEMREPLAY_OK);
    MEMREPLAY_CONTEXT_POP();

    MEMREPLAY_FRAME_START(2);
    blocks[0] = arena_realloc(&heap, blocks[0], 300, 16);
    CHECK(MEMREPLAY_USAGE(heap.base, 1000) == MEMREPLAY_OK);
    CHECK(MEMREPLAY_ATTACH_PUSH(heap.base + 10) == MEMREPLAY_OK);
    arena_alloc(&heap, 64, 8);
    MEMREPLAY_ATTACH_POP();
    for (i = 1; i < 5; i++)
        arena_free(&heap, blocks[i]);
    CHECK(MEMREPLAY_DOMAIN_FREE(vram, 0x100000) == MEMREPLAY_OK);

    /* Bad input while recording. Scoped calls are recorded anyway, so pops stay balanced. */
    CHECK_ERR(memreplay_context_push(NULL, NULL, 0), MEMREPLAY_ERROR_NULL, "context type is NULL");
    memreplay_context_pop();
    CHECK_ERR(memreplay_context_push("Level", "\xff\xfe", 0), MEMREPLAY_ERROR_UTF8, "context name is not valid UTF-8");
    memreplay_context_pop();
    CHECK_ERR(memreplay_label(NULL), MEMREPLAY_ERROR_NULL, "label is NULL");
    CHECK_ERR(memreplay_label("caf\xe9"), MEMREPLAY_ERROR_UTF8, "label is not valid UTF-8");
    CHECK_ERR(memreplay_set_thread_name(NULL), MEMREPLAY_ERROR_NULL, "thread name is NULL");
    CHECK_ERR(memreplay_usage(NULL, 4), MEMREPLAY_ERROR_NULL, "usage pointer is NULL");
    CHECK_ERR(memreplay_domain_alloc(777, 0x10, 16, 1), MEMREPLAY_ERROR_DOMAIN, "domain 777 is not defined");
    CHECK_ERR(memreplay_domain_free(MEMREPLAY_NO_DOMAIN, 0x10), MEMREPLAY_ERROR_DOMAIN, "is not defined");
    CHECK_ERR(memreplay_domain_budget(778, 1, 1), MEMREPLAY_ERROR_DOMAIN, "domain 778");
    tex.kind = 42;
    tex.name = "bad-kind";
    tex.format = NULL;
    CHECK_ERR(memreplay_domain_alloc_resource(vram, 0x900000, 4096, 256, &tex), MEMREPLAY_ERROR_KIND,
              "resource kind 42");
    CHECK_ERR(memreplay_domain_alloc_resource(vram, 0xA00000, 8192, 256, NULL), MEMREPLAY_ERROR_NULL,
              "resource is NULL");
    CHECK(memreplay_domain_free(vram, 0x900000) == MEMREPLAY_OK);
    CHECK(memreplay_domain_free(vram, 0xA00000) == MEMREPLAY_OK);

    CHECK(memreplay_stop(&st) == MEMREPLAY_OK);
    CHECK(memreplay_is_recording() == 0);
    CHECK(st.lost_events == 0 && st.events > 0 && st.bytes > 0 && st.threads >= 1);
    printf("events=%llu bytes=%llu lost=%llu\n", (unsigned long long)st.events, (unsigned long long)st.bytes,
           (unsigned long long)st.lost_events);
    CHECK_ERR(memreplay_stop(NULL), MEMREPLAY_ERROR_NOT_RECORDING, "no memreplay session");
    /* After stop: hooks do nothing and succeed. */
    CHECK(MEMREPLAY_DOMAIN_ALLOC(heap.domain, 1, 1, 1) == MEMREPLAY_OK);
    free(heap.base);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    return 0;
}
