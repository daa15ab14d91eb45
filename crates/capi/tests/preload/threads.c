/* A multi-threaded C program for the preloaded recorder's tests: allocation sites
 * behind call chains, calloc, realloc, posix_memalign, blocks freed on another thread
 * (through a mutex-protected queue), and a deliberate leak of N blocks from
 * `leak_n_blocks`. It counts its own calls to the malloc family and prints the tally:
 *   tally allocs=A reallocs=R frees=F leaked=N
 * (allocs: malloc, calloc and posix_memalign; reallocs: realloc of a block to a
 * non-zero size; frees: free of a block).
 * Usage: threads [THREADS] [LEAKED] [ITERATIONS] (4, 7, 2000: each iteration of each
 * thread allocates 4 blocks, reallocates 1 and frees 4). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iterations = 2000;
#define NOINLINE __attribute__((noinline))

static atomic_long allocs, reallocs, frees;

/* The queue of blocks handed to the freeing thread. */
#define QUEUE_CAP 64
static void *queue[QUEUE_CAP];
static int queue_len, producers_left;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;

static void *volatile sink;

NOINLINE static void *make_small(size_t n) {
    void *p = malloc(n);
    atomic_fetch_add(&allocs, 1);
    memset(p, 1, n);
    return p;
}

NOINLINE static void *make_zeroed(size_t n, size_t size) {
    void *p = calloc(n, size);
    atomic_fetch_add(&allocs, 1);
    return p;
}

NOINLINE static void *make_aligned(size_t align, size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, align, n) != 0) abort();
    atomic_fetch_add(&allocs, 1);
    return p;
}

NOINLINE static void *grow(void *p, size_t n) {
    void *q = realloc(p, n);
    atomic_fetch_add(&reallocs, 1);
    return q;
}

NOINLINE static void release(void *p) {
    free(p);
    atomic_fetch_add(&frees, 1);
}

/* A call chain in front of the sites. */
NOINLINE static void *build_record(int i) { return make_small(16 + (size_t)(i % 200)); }
NOINLINE static void *build_table(int i) { return grow(make_zeroed(4, 8 + (size_t)(i % 32)), 512 + (size_t)i % 1000); }

static void hand_to_freer(void *p) {
    pthread_mutex_lock(&queue_lock);
    while (queue_len == QUEUE_CAP) pthread_cond_wait(&queue_cond, &queue_lock);
    queue[queue_len++] = p;
    pthread_cond_broadcast(&queue_cond);
    pthread_mutex_unlock(&queue_lock);
}

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < iterations; i++) {
        void *a = build_record(i);
        void *b = build_table(i);
        void *c = make_aligned(64 << (i % 4), 100 + (size_t)i % 300);
        sink = a;
        release(b);
        if (i % 3 == 0) {
            hand_to_freer(a);
        } else {
            release(a);
        }
        hand_to_freer(c);
    }
    pthread_mutex_lock(&queue_lock);
    producers_left--;
    pthread_cond_broadcast(&queue_cond);
    pthread_mutex_unlock(&queue_lock);
    return NULL;
}

static void *freer(void *arg) {
    (void)arg;
    pthread_mutex_lock(&queue_lock);
    for (;;) {
        while (queue_len == 0 && producers_left > 0) pthread_cond_wait(&queue_cond, &queue_lock);
        if (queue_len == 0) break;
        void *p = queue[--queue_len];
        pthread_cond_broadcast(&queue_cond);
        pthread_mutex_unlock(&queue_lock);
        release(p);
        pthread_mutex_lock(&queue_lock);
    }
    pthread_mutex_unlock(&queue_lock);
    return NULL;
}

static void **leaked;

NOINLINE void leak_n_blocks(int n) {
    leaked = malloc(sizeof(void *) * (size_t)n);
    atomic_fetch_add(&allocs, 1);
    for (int i = 0; i < n; i++) {
        leaked[i] = malloc(4242);
        atomic_fetch_add(&allocs, 1);
    }
    /* The array goes; the blocks stay. */
    release(leaked);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    int leak = argc > 2 ? atoi(argv[2]) : 7;
    if (argc > 3) iterations = atoi(argv[3]);
    pthread_t ids[64], freer_id;
    if (threads < 1 || threads > 64) return 2;
    producers_left = threads;
    pthread_create(&freer_id, NULL, freer, NULL);
    for (int t = 0; t < threads; t++) pthread_create(&ids[t], NULL, worker, NULL);
    for (int t = 0; t < threads; t++) pthread_join(ids[t], NULL);
    pthread_join(freer_id, NULL);
    leak_n_blocks(leak);
    printf("tally allocs=%ld reallocs=%ld frees=%ld leaked=%d\n", atomic_load(&allocs), atomic_load(&reallocs),
           atomic_load(&frees), leak);
    return 0;
}
