/* fork while recording: the child records nothing of the parent's session (it has no
 * recorder thread), must not hang, and may start a session of its own.
 * Usage: fork_test PARENT_LOG CHILD_LOG. */
#define _POSIX_C_SOURCE 200809L
#include "memreplay.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    memreplay_domain d;
    pid_t pid;
    int status, i;
    if (argc != 3)
        return 2;
    d = memreplay_domain_define("objects", MEMREPLAY_DOMAIN_OTHER, 0);
    if (memreplay_start(argv[1], "callstacks=off") != 0)
        return 3;
    memreplay_label("before fork");
    pid = fork();
    if (pid == 0) {
        /* More events than the recorder's buffers hold: nothing waits for a writer. */
        for (i = 0; i < 300000; i++) {
            memreplay_domain_alloc(d, (uint64_t)i + 1, 64, 8);
            memreplay_domain_free(d, (uint64_t)i + 1);
        }
        if (memreplay_is_recording() != 0 || memreplay_stop(NULL) != MEMREPLAY_ERROR_NOT_RECORDING)
            _exit(10);
        if (memreplay_start(argv[2], "callstacks=off") != 0)
            _exit(11);
        memreplay_label("child");
        memreplay_domain_alloc(d, 7, 700, 1);
        exit(0); /* the child's own session ends at exit */
    }
    memreplay_domain_alloc(d, 1, 100, 1);
    memreplay_label("after fork");
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child failed: %d\n", status);
        return 4;
    }
    return memreplay_stop(NULL) == 0 ? 0 : 5;
}
