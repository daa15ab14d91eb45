/* Prints what the recorder's variables are in its environment, one per line:
 * LD_PRELOAD=..., MEMREPLAY_LOG=..., MEMREPLAY_OPTIONS=... ("-" when unset).
 * Unless built with -DPLAIN it holds the line that only memreplay's recorder holds, as a
 * Rust program built with the recorder does, so `replay-cli record` takes it for a
 * program that records itself. */
#include <stdio.h>
#include <stdlib.h>

static const char *show(const char *name) {
    const char *v = getenv(name);
    return v ? v : "-";
}

#ifndef PLAIN
/* Kept in the executable, as the recorder's is. */
__attribute__((used)) static const char recorder_mark[] = "memreplay: MEMREPLAY_LOG is set but nothing is recorded: ";
#endif

int main(void) {
    printf("LD_PRELOAD=%s\nMEMREPLAY_LOG=%s\nMEMREPLAY_OPTIONS=%s\n", show("LD_PRELOAD"), show("MEMREPLAY_LOG"),
           show("MEMREPLAY_OPTIONS"));
    return 0;
}
