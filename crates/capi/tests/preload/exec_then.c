/* Replaces itself as asked, after allocating: `exec_then v PATH ARGS...` calls
 * execv(PATH, ...), `exec_then p FILE ARGS...` execvp(FILE, ...). If the exec returns,
 * it allocates again, prints "exec failed" and exits 0. `exec_then f PATH ARGS...` has
 * the child of a vfork call execv(PATH, ...), waits for it, allocates again and prints
 * "child done". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile block;

int main(int argc, char **argv) {
    block = malloc(123);
    if (argc < 3) return 2;
    if (strcmp(argv[1], "v") == 0) execv(argv[2], argv + 2);
    if (strcmp(argv[1], "p") == 0) execvp(argv[2], argv + 2);
    if (strcmp(argv[1], "f") == 0) {
        pid_t child = vfork();
        if (child == 0) {
            execv(argv[2], argv + 2);
            _exit(127);
        }
        int status;
        if (child < 0 || waitpid(child, &status, 0) != child) return 3;
        block = malloc(789);
        printf("child done\n");
        return 0;
    }
    block = malloc(456);
    printf("exec failed\n");
    return 0;
}
