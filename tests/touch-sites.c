/* Memory no mmap call of its own makes, with sites the tests know (tests/ledger.rs): fill_heap
 * writes 64 KiB blocks malloc hands out from the brk heap (below its mmap threshold: no mmap at
 * all), fill_arena does the same from a worker thread, whose blocks come from one of glibc's
 * arenas (reserved 64 MiB at a time, grown by mprotect: one mmap for all of them). The mapping
 * ledger sees only brk raises and an arena's reservation; the sampled page faults see the code
 * that wrote each page. Built by the tests with -O2 -fomit-frame-pointer.
 *
 *   touch-sites PREFIX HEAP_MIB ARENA_MIB [PAUSE_US]
 *
 * Fills both (pausing PAUSE_US microseconds after each block: a pace a recorder in an emulated
 * machine keeps up with), prints "filled", waits for the file PREFIX.0, frees everything,
 * exits. With TOUCH_SITES_GATE=1 in its environment it first prints "ready" and waits for the
 * file PREFIX.1 (a recorder attached by then). Each line is flushed: a test reads them as they
 * come. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef NO_THP
#include <sys/prctl.h>
#endif

#define MIB (1024UL * 1024UL)
#define BLOCK (64UL * 1024UL)

static const char *prefix;
static unsigned pause_us;

static void wait_file(int n) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", prefix, n);
    while (access(path, F_OK) != 0)
        usleep(20 * 1000);
}

/* mib MiB in 64 KiB blocks from malloc, every byte written; the blocks in `out`. */
static __attribute__((noinline)) size_t fill_blocks(void **out, size_t mib, int c) {
    size_t n = mib * MIB / BLOCK;
    for (size_t i = 0; i < n; i++) {
        out[i] = malloc(BLOCK);
        if (!out[i])
            exit(3);
        memset(out[i], c, BLOCK);
        if (pause_us)
            usleep(pause_us);
    }
    return n;
}

static void **heap_blocks;
static size_t heap_n;

static __attribute__((noinline)) void fill_heap(size_t mib) {
    heap_blocks = calloc(mib * MIB / BLOCK, sizeof(void *));
    heap_n = fill_blocks(heap_blocks, mib, 1);
}

static void **arena_blocks;
static size_t arena_n;
static size_t arena_mib;

static __attribute__((noinline)) void *fill_arena(void *arg) {
    (void)arg;
    arena_blocks = calloc(arena_mib * MIB / BLOCK, sizeof(void *));
    arena_n = fill_blocks(arena_blocks, arena_mib, 2);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: touch-sites PREFIX HEAP_MIB ARENA_MIB [PAUSE_US]\n");
        return 2;
    }
    if (argc == 5)
        pause_us = strtoul(argv[4], NULL, 10);
#ifdef NO_THP
    /* Built with -DNO_THP: 4 KiB pages only (a transparent huge page faults 2 MiB at once, one
     * fault where the sampling counts 512). */
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        return 4;
#endif
    prefix = argv[1];
    size_t heap_mib = strtoul(argv[2], NULL, 10);
    arena_mib = strtoul(argv[3], NULL, 10);
    const char *gate = getenv("TOUCH_SITES_GATE");
    if (gate && strcmp(gate, "1") == 0) {
        printf("ready\n");
        fflush(stdout);
        wait_file(1);
    }
    fill_heap(heap_mib);
    pthread_t t;
    if (pthread_create(&t, NULL, fill_arena, NULL) != 0)
        return 3;
    pthread_join(t, NULL);
    printf("filled\n");
    fflush(stdout);
    wait_file(0);
    for (size_t i = 0; i < heap_n; i++)
        free(heap_blocks[i]);
    for (size_t i = 0; i < arena_n; i++)
        free(arena_blocks[i]);
    return 0;
}
