/* A library the program `early.c` links. The dynamic loader initialises the libraries a
 * program needs before the ones preloaded, which nothing depends on, and finalises them
 * after: this library's constructor runs before libmemreplay's (recording has not
 * started) and its destructor after libmemreplay's (the log has ended).
 *
 * Before the start: 4 allocations (111, 3 x 74 = 222, 999 and 100 bytes), 1 free (the
 * 999), 1 realloc (100 -> 333): 1765 bytes asked, 3 blocks left (111, 222, 333), which
 * the program frees in `main`.
 * After the end: 2 allocations (4444, 2 x 50 = 100 bytes), 1 realloc (-> 5555), 2 frees:
 * 10099 bytes asked.
 * With EARLY_MANY=N in the environment, the constructor also allocates N blocks of 48
 * bytes that the program frees in `main` (more than the recorder keeps track of before
 * it starts). With EARLY_THREAD=N (1 to 4), the constructor also starts N threads that
 * allocate and free (64-byte blocks, 16 held at a time) until `main` calls `early_stop`:
 * they run through the recorder's start. With EARLY_FORK=N as well, the constructor then forks N
 * children while that thread allocates (so some forks happen while it holds the
 * interposer's table of early blocks); each child allocates, frees and exits at once. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile early_blocks[3];
void **early_many;
long early_many_n;

static atomic_int early_stopping;
static pthread_t early_threads[4];
static int early_thread_started;

static void *churn(void *arg) {
    (void)arg;
    void *volatile held[16] = {0};
    for (unsigned i = 0; !atomic_load(&early_stopping); i++) {
        free(held[i % 16]);
        held[i % 16] = malloc(64);
    }
    for (int i = 0; i < 16; i++) free(held[i]);
    return NULL;
}

/* Stops and joins the threads EARLY_THREAD started, if any. */
void early_stop(void) {
    atomic_store(&early_stopping, 1);
    for (int i = 0; i < early_thread_started; i++) pthread_join(early_threads[i], NULL);
    early_thread_started = 0;
}

__attribute__((constructor)) static void early_init(void) {
    early_blocks[0] = malloc(111);
    early_blocks[1] = calloc(3, 74);
    void *volatile gone = malloc(999);
    free(gone);
    void *grown = malloc(100);
    early_blocks[2] = realloc(grown, 333);
    const char *many = getenv("EARLY_MANY");
    if (many) {
        early_many_n = atol(many);
        early_many = malloc(sizeof(void *) * (size_t)early_many_n);
        for (long i = 0; i < early_many_n; i++) early_many[i] = malloc(48);
    }
    const char *threads = getenv("EARLY_THREAD");
    for (int i = 0; threads && i < atoi(threads) && i < 4; i++)
        early_thread_started += pthread_create(&early_threads[i], NULL, churn, NULL) == 0;
    const char *forks = getenv("EARLY_FORK");
    for (long i = 0; early_thread_started && forks && i < atol(forks); i++) {
        pid_t child = fork();
        if (child == 0) {
            void *volatile p = malloc(32);
            free(p);
            _exit(0);
        }
        if (child > 0) waitpid(child, NULL, 0);
    }
}

__attribute__((destructor)) static void late_fini(void) {
    void *volatile p = malloc(4444);
    p = realloc(p, 5555);
    free(p);
    void *volatile q = calloc(2, 50);
    free(q);
}
