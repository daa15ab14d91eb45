/* Frees in `main` the blocks its library (`early_lib.c`) allocated before recording
 * started, and prints their addresses:
 *   early 0x... 0x... 0x... */
#include <stdio.h>
#include <stdlib.h>

extern void *volatile early_blocks[3];

int main(void) {
    printf("early %p %p %p\n", early_blocks[0], early_blocks[1], early_blocks[2]);
    for (int i = 0; i < 3; i++) free(early_blocks[i]);
    return 0;
}
