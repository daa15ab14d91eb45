/* A library the program `early.c` links. The dynamic loader initialises the libraries a
 * program needs before the ones preloaded, which nothing depends on, and finalises them
 * after: this library's constructor runs before libmemreplay's (recording has not
 * started) and its destructor after libmemreplay's (the log has ended).
 *
 * Before the start: 4 allocations (111, 3 x 74 = 222, 999 and 100 bytes), 1 free (the
 * 999), 1 realloc (100 -> 333): 1765 bytes asked, 3 blocks left (111, 222, 333), which
 * the program frees in `main`.
 * After the end: 2 allocations (4444, 2 x 50 = 100 bytes), 1 realloc (-> 5555), 2 frees:
 * 10099 bytes asked. */
#include <stdlib.h>

void *volatile early_blocks[3];

__attribute__((constructor)) static void early_init(void) {
    early_blocks[0] = malloc(111);
    early_blocks[1] = calloc(3, 74);
    void *volatile gone = malloc(999);
    free(gone);
    void *grown = malloc(100);
    early_blocks[2] = realloc(grown, 333);
}

__attribute__((destructor)) static void late_fini(void) {
    void *volatile p = malloc(4444);
    p = realloc(p, 5555);
    free(p);
    void *volatile q = calloc(2, 50);
    free(q);
}
