/* Every interposed entry point, with good and bad arguments; prints what each returned
 * (so that the run under the recorder can be compared with a plain run) and the tally:
 *   tally allocs=A reallocs=R
 * (allocs: calls that returned a new block; reallocs: reallocs of a block to a new
 * size). Keeps four blocks: valloc(4096), pvalloc(5000), aligned_alloc(64, 100),
 * memalign(24, 300). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long allocs, reallocs;
void *volatile keep[4];

static int aligned(void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

int main(void) {
    void *p = malloc(10);
    allocs++;
    p = realloc(p, 1000);
    reallocs++;
    errno = 0;
    void *q = realloc(p, 0); /* glibc: frees p, returns NULL */
    printf("realloc(p, 0) = %s\n", q ? "block" : "NULL");
    if (q) free(q);
    p = realloc(NULL, 50); /* a malloc */
    allocs++;
    free(p);
    free(NULL);
    p = calloc(10, 10);
    allocs++;
    errno = 0;
    q = calloc(SIZE_MAX / 2, 4);
    printf("calloc overflow = %s errno=%d\n", q ? "block" : "NULL", errno);
    errno = 0;
    q = reallocarray(p, SIZE_MAX / 2, 4);
    printf("reallocarray overflow = %s errno=%d\n", q ? "block" : "NULL", errno);
    p = reallocarray(p, 20, 10);
    reallocs++;
    free(p);
    void *r = NULL;
    int rc = posix_memalign(&r, 3, 10);
    printf("posix_memalign(3) = %d\n", rc);
    rc = posix_memalign(&r, 4, 10); /* not a multiple of sizeof(void *) */
    printf("posix_memalign(4) = %d\n", rc);
    rc = posix_memalign(&r, 256, 10);
    allocs++;
    printf("posix_memalign(256) = %d aligned=%d\n", rc, aligned(r, 256));
    free(r);
    errno = 0;
    q = aligned_alloc(3, 10);
    printf("aligned_alloc(3) = %s errno=%d\n", q ? "block" : "NULL", errno); /* NULL from 2.38 */
    if (q) {
        allocs++;
        free(q);
    }
    keep[0] = aligned_alloc(64, 100);
    allocs++;
    printf("aligned_alloc(64) aligned=%d\n", aligned(keep[0], 64));
    keep[1] = memalign(24, 300);
    allocs++;
    printf("memalign(24) aligned=%d\n", aligned(keep[1], 32));
    keep[2] = valloc(4096);
    allocs++;
    printf("valloc aligned=%d\n", aligned(keep[2], 4096));
    keep[3] = pvalloc(5000);
    allocs++;
    printf("pvalloc aligned=%d usable>=8192: %d\n", aligned(keep[3], 4096), malloc_usable_size(keep[3]) >= 8192);
    printf("tally allocs=%ld reallocs=%ld\n", allocs, reallocs);
    return 0;
}
