/* Frees in `main` the blocks its library (`early_lib.c`) allocated before recording
 * started, and prints the addresses of the first three:
 *   early 0x... 0x... 0x... */
#include <stdio.h>
#include <stdlib.h>

extern void *volatile early_blocks[3];
extern void **early_many;
extern long early_many_n;
void early_stop(void);

int main(void) {
    early_stop();
    printf("early %p %p %p\n", early_blocks[0], early_blocks[1], early_blocks[2]);
    for (int i = 0; i < 3; i++) free(early_blocks[i]);
    for (long i = 0; i < early_many_n; i++) free(early_many[i]);
    free(early_many);
    return 0;
}
