/* dlopens the library argv[1], calls its swap_work, dlcloses it, then does the same with
 * argv[2] (the same code with a different frame size, likely mapped at the same address),
 * ROUNDS times. Prints the address of swap_work in each library it loaded, then "ok". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    for (int round = 0; round < 3; round++) {
        for (int which = 1; which <= 2; which++) {
            void *h = dlopen(argv[which], RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                fprintf(stderr, "dlopen: %s\n", dlerror());
                return 3;
            }
            void *(*work)(size_t) = (void *(*)(size_t))dlsym(h, "swap_work");
            if (!work) return 4;
            for (int i = 0; i < 100; i++) free(work(100 + i));
            printf("swap_work %d %p\n", which, (void *)work);
            if (dlclose(h) != 0) return 5;
        }
    }
    printf("ok\n");
    return 0;
}
