/* A library that swap_host.c loads twice, built with two sizes of FRAME: `swap_work`
 * allocates from a frame of FRAME bytes, so the unwind rule at its call into `malloc`
 * (the CFA's offset from rsp) differs between the two builds while the code around the
 * call is laid out the same (both sizes take a 32-bit immediate). */
#include <stdlib.h>

__attribute__((noinline)) void *swap_work(size_t n) {
    volatile char frame[FRAME];
    frame[0] = (char)n;
    void *p = malloc(n + (size_t)frame[0] * 0);
    frame[FRAME - 1] = 1;
    return p;
}
