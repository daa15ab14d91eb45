// A small "engine" recorded with memreplay's C API: an engine heap over malloc and an
// entity pool inside it (both reported as domains through the allocator bracket), asset
// loading under instance contexts, a frame loop with labels and frame starts, and GPU
// resources in a VRAM domain with descriptors, budget samples and the display size.
//
//   engine [LOG]   records to LOG (or wherever MEMREPLAY_LOG says, if LOG is left out)
//
// Built with -DMEMREPLAY_ENABLED=0 (make engine-off) every MEMREPLAY_* macro is gone.
#include "memreplay.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// ---- The engine heap: what the game asks for, reported above malloc. -----------------

class EngineHeap {
public:
    EngineHeap() : domain_(MEMREPLAY_DOMAIN_DEFINE_WITHIN("engine.heap", MEMREPLAY_DOMAIN_POOL, 0, MEMREPLAY_HEAP)) {}

    memreplay_domain domain() const { return domain_; }

    // The size recorded is the size asked for, not malloc's (which adds a header).
    void *alloc(size_t size, size_t align = 16) {
        void *p = alloc_raw(size, align);
        if (p) MEMREPLAY_DOMAIN_ALLOC(domain_, addr(p), size, align);
        return p;
    }
    void *realloc(void *old, size_t old_size, size_t size, size_t align = 16) {
        void *p = alloc_raw(size, align);
        if (!p) return nullptr;
        if (old) std::memcpy(p, old, old_size < size ? old_size : size);
        // Recorded before the old block goes back to malloc, as frees are: another
        // thread may get its address next.
        MEMREPLAY_DOMAIN_REALLOC(domain_, addr(old), addr(p), size, align);
        std::free(old);
        return p;
    }
    void free(void *p) {
        if (!p) return;
        MEMREPLAY_DOMAIN_FREE(domain_, addr(p));
        std::free(p);
    }

    static uint64_t addr(const void *p) { return (uint64_t)(uintptr_t)p; }

private:
    static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
    static void *alloc_raw(size_t size, size_t align) { return std::aligned_alloc(align, round_up(size, align)); }
    memreplay_domain domain_;
};

static EngineHeap *g_heap;

// A growable array in the engine heap that reports how much of its block it uses.
template <typename T>
struct HeapArray {
    T *data = nullptr;
    size_t len = 0, cap = 0;
    void push(const T &v) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            data = (T *)g_heap->realloc(data, cap * sizeof(T), ncap * sizeof(T));
            cap = ncap;
        }
        data[len++] = v;
        MEMREPLAY_USAGE(data, len * sizeof(T));
    }
    ~HeapArray() { g_heap->free(data); }
};

// ---- A fixed-size pool whose chunk comes from the engine heap. ------------------------

struct Entity {
    float pos[3], vel[3];
    uint32_t id;
};

class EntityPool {
public:
    explicit EntityPool(size_t count)
        : chunk_((Entity *)g_heap->alloc(count * sizeof(Entity))),
          domain_(MEMREPLAY_DOMAIN_DEFINE_WITHIN("pool.entities", MEMREPLAY_DOMAIN_POOL, count * sizeof(Entity),
                                                 g_heap->domain())) {
        for (size_t i = 0; i < count; i++) free_.push_back(&chunk_[count - 1 - i]);
    }
    ~EntityPool() { g_heap->free(chunk_); }
    Entity *spawn(uint32_t id) {
        if (free_.empty()) return nullptr;
        Entity *e = free_.back();
        free_.pop_back();
        e->id = id;
        MEMREPLAY_DOMAIN_ALLOC(domain_, EngineHeap::addr(e), sizeof(Entity), alignof(Entity));
        return e;
    }
    void despawn(Entity *e) {
        MEMREPLAY_DOMAIN_FREE(domain_, EngineHeap::addr(e));
        free_.push_back(e);
    }

private:
    Entity *chunk_;
    memreplay_domain domain_;
    std::vector<Entity *> free_;
};

// ---- A pretend GPU: a bump allocator of device addresses in a VRAM domain. ------------

class Gpu {
public:
    static const uint64_t kVram = 512ull << 20;
    Gpu() : vram_(MEMREPLAY_DOMAIN_DEFINE("vram.local", MEMREPLAY_DOMAIN_GPU_LOCAL, kVram)) {}

    uint64_t create(int kind, uint32_t w, uint32_t h, uint32_t mips, const char *format, const char *name,
                    uint64_t size) {
        uint64_t at = (next_ + 0xFFFF) & ~0xFFFFull;  // 64 KiB aligned
        next_ = at + size;
        live_ += size;
        memreplay_resource r = {kind, w, h, 1, mips, format, name};
        MEMREPLAY_DOMAIN_ALLOC_RESOURCE(vram_, at, size, 65536, &r);
        sizes_.push_back(std::make_pair(at, size));
        return at;
    }
    void destroy(uint64_t at) {
        for (size_t i = 0; i < sizes_.size(); i++)
            if (sizes_[i].first == at) {
                live_ -= sizes_[i].second;
                sizes_.erase(sizes_.begin() + (long)i);
                MEMREPLAY_DOMAIN_FREE(vram_, at);
                return;
            }
    }
    // What a driver would say (VK_EXT_memory_budget): our bytes plus its own.
    void sample_budget() { MEMREPLAY_DOMAIN_BUDGET(vram_, kVram - (64ull << 20), live_ + (24ull << 20)); }

private:
    memreplay_domain vram_;
    uint64_t next_ = 0x10000, live_ = 0;
    std::vector<std::pair<uint64_t, uint64_t> > sizes_;
};

// ---- Assets and levels. ---------------------------------------------------------------

struct Texture {
    std::string name;
    uint64_t gpu;
};

static Texture load_texture(Gpu &gpu, const char *name, uint32_t size) {
    MEMREPLAY_INSTANCE_CONTEXT("Texture", "%s.dds", name);
    uint64_t bytes = (uint64_t)size * size;  // BC7: one byte per pixel
    // Staging copy in the engine heap, uploaded, then freed.
    void *staging = g_heap->alloc(bytes);
    {
        // A decoder working for this texture: its allocations belong to the staging copy's owner.
        MEMREPLAY_ATTACH(staging);
        void *scratch = g_heap->alloc(4096);
        g_heap->free(scratch);
    }
    uint32_t mips = 1;
    for (uint32_t s = size; s > 1; s /= 2) mips++;
    Texture t = {name, gpu.create(MEMREPLAY_RESOURCE_TEXTURE, size, size, mips, "BC7_UNORM", name, bytes * 4 / 3)};
    g_heap->free(staging);
    return t;
}

static uint64_t load_mesh(Gpu &gpu, const char *name, uint32_t vertices) {
    MEMREPLAY_INSTANCE_CONTEXT("Mesh", "%s.mesh", name);
    return gpu.create(MEMREPLAY_RESOURCE_BUFFER, vertices * 32, 1, 1, nullptr, name, vertices * 32ull);
}

struct RenderTargets {
    uint64_t color = 0, depth = 0;
    void create(Gpu &gpu, uint32_t w, uint32_t h) {
        MEMREPLAY_CONTEXT("Renderer", "%s", "targets");
        MEMREPLAY_DISPLAY_SIZE(w, h);
        color = gpu.create(MEMREPLAY_RESOURCE_RENDER_TARGET, w, h, 1, "RGBA16F", "scene.color", (uint64_t)w * h * 8);
        depth = gpu.create(MEMREPLAY_RESOURCE_DEPTH_STENCIL, w, h, 1, "D32S8", "scene.depth", (uint64_t)w * h * 5);
    }
    void destroy(Gpu &gpu) {
        gpu.destroy(color);
        gpu.destroy(depth);
    }
};

int main(int argc, char **argv) {
    int started = argc > 1 ? MEMREPLAY_START(argv[1], "flush-ms=50") : MEMREPLAY_START_FROM_ENV();
    // Run under `replay-cli record`, the preloaded library already records this process
    // (into record's --output): record into that session, and leave stopping it to it.
    const bool ours = argc > 1 ? started == MEMREPLAY_OK : started == 1;
    if (started < 0 && started != MEMREPLAY_ERROR_ALREADY_RECORDING) {
        std::fprintf(stderr, "engine: memreplay did not start: %s\n", memreplay_last_error());
        return 1;
    }
    MEMREPLAY_SET_THREAD_NAME("main");
    EngineHeap heap;
    g_heap = &heap;
    Gpu gpu;
    RenderTargets targets;
    targets.create(gpu, 1920, 1080);

    std::vector<Texture> textures;
    std::vector<uint64_t> meshes;
    {
        MEMREPLAY_CONTEXT("Level", "%s", "Forest");
        const char *names[] = {"rock", "bark", "moss", "fern", "water"};
        for (int i = 0; i < 5; i++) textures.push_back(load_texture(gpu, names[i], 256u << (i % 3)));
        meshes.push_back(load_mesh(gpu, "tree", 20000));
        meshes.push_back(load_mesh(gpu, "boulder", 8000));
    }
    MEMREPLAY_LABEL("level %s loaded", "Forest");

    {
        EntityPool pool(256);
        HeapArray<Entity *> alive;
        uint32_t next_id = 1;
        for (uint64_t frame = 1; frame <= 12; frame++) {
            MEMREPLAY_FRAME_START(frame);
            {
                MEMREPLAY_CONTEXT("System", "%s", "spawner");
                for (int i = 0; i < 10; i++) {
                    Entity *e = pool.spawn(next_id++);
                    if (e) alive.push(e);
                }
                if (frame % 3 == 0)  // every third frame, half the oldest entities die
                    for (size_t i = 0; i < alive.len / 2; i++) pool.despawn(alive.data[i]);
                if (frame % 3 == 0) {
                    size_t half = alive.len / 2;
                    std::memmove(alive.data, alive.data + half, (alive.len - half) * sizeof(Entity *));
                    alive.len -= half;
                    MEMREPLAY_USAGE(alive.data, alive.len * sizeof(Entity *));
                }
            }
            {
                MEMREPLAY_CONTEXT("System", "%s", "render");
                void *commands = heap.alloc(16384 + 1024 * (frame % 4));  // per-frame command list
                heap.free(commands);
            }
            if (frame == 6) {
                MEMREPLAY_LABEL("window resized to %dx%d", 2560, 1440);
                targets.destroy(gpu);
                targets.create(gpu, 2560, 1440);
            }
            gpu.sample_budget();
        }
        MEMREPLAY_LABEL("unloading %s", "Forest");
        for (size_t i = 0; i < alive.len; i++) pool.despawn(alive.data[i]);
    }  // the pool's chunk and the array go back to the engine heap
    for (size_t i = 0; i < textures.size(); i++) gpu.destroy(textures[i].gpu);
    for (size_t i = 0; i < meshes.size(); i++) gpu.destroy(meshes[i]);
    targets.destroy(gpu);

    memreplay_stats stats;
    if (ours && MEMREPLAY_STOP(&stats) == MEMREPLAY_OK)
        std::printf("engine: %llu events, %llu bytes, %llu lost\n", (unsigned long long)stats.events,
                    (unsigned long long)stats.bytes, (unsigned long long)stats.lost_events);
    return 0;
}
