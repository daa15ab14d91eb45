// The C++ scope macros; tests/c_api.rs checks the log. Built twice: against the library,
// and with -DMEMREPLAY_ENABLED=0 without it (then nothing is called or evaluated).
// Usage: raii_test LOG_PATH. Prints "evaluated=N": how many macro arguments ran.
#include "memreplay.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

static int evaluated = 0;

static int count(int v) {
    evaluated++;
    return v;
}

static memreplay_domain pool = MEMREPLAY_NO_DOMAIN;
static uint64_t next_addr = 0x1000;

static uint64_t pool_alloc(uint64_t size) {
    uint64_t at = next_addr;
    next_addr += size;
    MEMREPLAY_DOMAIN_ALLOC(pool, at, size, count(8));
    return at;
}

static void load_texture(const char *name, uint64_t size) {
    MEMREPLAY_INSTANCE_CONTEXT("Texture", "%s.dds", name);
    pool_alloc(size);
}

static void load_broken(void) {
    MEMREPLAY_CONTEXT("Loader", "%s", "broken.pak");
    pool_alloc(11);
    throw std::runtime_error("broken.pak is corrupt");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s LOG\n", argv[0]);
        return 2;
    }
    int started = MEMREPLAY_START(argv[1], "callstacks=off");
    if (started != 0) {
        std::fprintf(stderr, "start failed: %d\n", started);
        return 1;
    }
    pool = MEMREPLAY_DOMAIN_DEFINE_WITHIN("assets", MEMREPLAY_DOMAIN_POOL, count(1 << 20), MEMREPLAY_HEAP);
    MEMREPLAY_FRAME_START(count(1));
    {
        MEMREPLAY_CONTEXT("Level", "%s", "Desert");
        {
            MEMREPLAY_CONTEXT("Streaming", "batch %d", count(1));
            load_texture("sand", 1000);
            load_texture("rock", 2000);
            load_texture("cactus", 3000);
        }
        MEMREPLAY_LABEL("loaded %d textures", count(3));
        {
            static char owner[64];
            MEMREPLAY_ATTACH(owner + count(4));
            pool_alloc(500);
        }
        try {
            load_broken();
        } catch (const std::exception &e) {
            std::printf("caught: %s\n", e.what());
        }
        // The Loader context was left when the exception passed its scope.
        pool_alloc(777);
    }
    pool_alloc(55);  // no context
    int stopped = MEMREPLAY_STOP(NULL);
    std::printf("stopped=%d evaluated=%d\n", stopped, evaluated);
    return 0;
}
