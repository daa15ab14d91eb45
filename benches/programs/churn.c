/* The random churn of issue 17's second log shape: 2 threads, each keeping 5,000 slots;
 * each step frees a random slot and allocates into it a block of a random size from
 * 16 B to 1 MiB (log-uniform), through a chain of 16 calls. `churn OPS` runs OPS steps
 * per thread (default 1,800,000), then frees every slot.
 *
 * Heap events: 2 x OPS allocations and 2 x OPS frees (the first 5,000 frees of each
 * thread are free(NULL), which no recorder counts), plus each thread's slot table. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define SLOTS 5000
static long ops = 1800000;

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

__attribute__((noinline)) static void *alloc_at(int depth, size_t n) {
    if (depth == 0) {
        void *p = malloc(n);
        __asm__ volatile("" ::"r"(p) : "memory");
        return p;
    }
    void *p = alloc_at(depth - 1, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *work(void *arg) {
    uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
    void **slot = calloc(SLOTS, sizeof *slot);
    for (long i = 0; i < ops; i++) {
        uint64_t x = next(&s);
        int k = (int)(x % SLOTS);
        free(slot[k]);
        int bits = 4 + (int)((x >> 20) % 17);
        size_t n = ((size_t)1 << bits) + ((x >> 40) & (((size_t)1 << bits) - 1));
        slot[k] = alloc_at(15, n);
    }
    for (int k = 0; k < SLOTS; k++)
        free(slot[k]);
    free(slot);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1)
        ops = atol(argv[1]);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], 0, work, (void *)(i + 1));
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], 0);
    return 0;
}
