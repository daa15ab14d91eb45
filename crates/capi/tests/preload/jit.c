/* Calls malloc from generated code: a small function copied into an anonymous executable
 * mapping (no object, no unwind table), called COUNT times (argv[1], default 100), each
 * call allocating 777 bytes that main frees. Prints "tally jit=N" (x86_64 only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef void *(*alloc_fn)(size_t);
typedef void *(*jit_fn)(size_t, alloc_fn);

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 100;
    /* sub rsp, 8; call rsi; add rsp, 8; ret: calls its second argument with its first. */
    static const unsigned char code[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd6, 0x48, 0x83, 0xc4, 0x08, 0xc3};
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return 2;
    memcpy(page, code, sizeof code);
    if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) return 3;
    jit_fn jit = (jit_fn)page;
    int made = 0;
    for (int i = 0; i < count; i++) {
        void *p = jit(777, malloc);
        if (p) made++;
        free(p);
    }
    printf("tally jit=%d\n", made);
    return 0;
}
