/* dlopens libmemreplay.so (argv[1]) after start-up and calls its malloc and free: the
 * library must see it was not loaded at start-up and stay out of the way (no recursion
 * into malloc from __tls_get_addr, nothing recorded). Prints "ok". */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *(*lib_malloc)(size_t);
static void (*lib_free)(void *);

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) lib_free(lib_malloc(100));
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
    }
    lib_malloc = (void *(*)(size_t))dlsym(h, "malloc");
    lib_free = (void (*)(void *))dlsym(h, "free");
    if (!lib_malloc || !lib_free) return 4;
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    worker(NULL);
    pthread_join(t, NULL);
    printf("ok\n");
    return 0;
}
