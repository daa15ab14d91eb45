/* dlopens every library named in argv[1..] (copies of plugin.c), calls each one's
 * plugin_leak and keeps them all loaded: a program of many libraries, as engines with a
 * module per subsystem are. Prints "ok". */
#include <dlfcn.h>
#include <stdio.h>

void *volatile kept;

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 3;
        }
        void *(*leak)(void) = (void *(*)(void))dlsym(h, "plugin_leak");
        if (!leak) return 4;
        kept = leak();
    }
    printf("ok\n");
    return 0;
}
