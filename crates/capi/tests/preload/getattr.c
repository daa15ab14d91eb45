/* Each thread's first allocation is the C library's, inside pthread_getattr_np (which
 * allocates while it holds the thread's lock: fopen of /proc/self/maps on the main
 * thread, its affinity buffer on others). The recorder registers a thread at its first
 * recorded allocation and must not call pthread_getattr_np then. Prints "ok N" with the
 * number of threads that read their stack. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int stack_known(void) {
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
    int ok = pthread_attr_getstack(&attr, &addr, &size) == 0 && size > 0;
    pthread_attr_destroy(&attr);
    return ok;
}

static void *worker(void *arg) {
    (void)arg;
    return (void *)(long)stack_known();
}

int main(void) {
    int known = stack_known();
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        known += (int)(long)r;
    }
    void *volatile p = malloc(10);
    free(p);
    printf("ok %d\n", known);
    return 0;
}
