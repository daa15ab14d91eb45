/* dlopens the library argv[1] (plugin.c), calls its plugin_leak, dlcloses it at once and
 * exits: the library is mapped for a few milliseconds only. Prints "ok". */
#include <dlfcn.h>
#include <stdio.h>

void *volatile kept;

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
    }
    void *(*leak)(void) = (void *(*)(void))dlsym(h, "plugin_leak");
    if (!leak) return 4;
    kept = leak();
    if (dlclose(h) != 0) return 5;
    /* Unloaded: the loader no longer knows it. */
    if (dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD)) return 6;
    printf("ok\n");
    return 0;
}
