/* A library that plugin_host.c dlopens: plugin_leak leaks one block of 31337 bytes
 * (returned to the host, never freed), allocated in this library's own code. */
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void *plugin_leak(void) {
    char *p = malloc(31337);
    if (p) memset(p, 7, 31337);
    return p;
}
