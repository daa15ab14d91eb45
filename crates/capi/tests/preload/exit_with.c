/* Exits as asked: `exit N` calls exit(N), `abort` calls abort(), after allocating. */
#include <stdlib.h>
#include <string.h>

void *volatile block;

int main(int argc, char **argv) {
    block = malloc(123);
    if (argc > 2 && strcmp(argv[1], "exit") == 0) exit(atoi(argv[2]));
    if (argc > 1 && strcmp(argv[1], "abort") == 0) abort();
    return 0;
}
