/* Allocations at every stage of a process's life, for the preloaded recorder's tests:
 * a constructor, main, an atexit handler and a destructor each allocate one block and
 * free it, and one more each that stays (a 1000-, 2000-, 3000- and 4000-byte block).
 * With `fork`, a child of fork allocates and calls exit (it must neither hang nor write
 * into the parent's log); with `exec`, the program runs itself again (`child`), which
 * must not be recorded into the same log. The tally, on stderr at the very end:
 *   tally allocs=A frees=F */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static atomic_long allocs, frees;
static void *volatile kept[4];

NOINLINE static void stage(int i) {
    void *volatile p = malloc(100); /* volatile: the compiler may not elide the pair */
    free(p);
    kept[i] = malloc(1000 * (size_t)(i + 1));
    atomic_fetch_add(&allocs, 2);
    atomic_fetch_add(&frees, 1);
}

__attribute__((constructor)) static void before_main(void) { stage(0); }

static void at_exit(void) { stage(2); }

__attribute__((destructor)) static void after_exit(void) {
    stage(3);
    fprintf(stderr, "tally allocs=%ld frees=%ld\n", atomic_load(&allocs), atomic_load(&frees));
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        /* Run again by exec: allocate a little and leave. */
        void *volatile p = malloc(777);
        (void)p;
        _exit(0);
    }
    atexit(at_exit);
    stage(1);
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int i = 0; i < 100000; i++) free(malloc(64));
            exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 5;
    }
    if (argc > 1 && strcmp(argv[1], "exec") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], "child", (char *)NULL);
            _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 6;
    }
    return 0;
}
