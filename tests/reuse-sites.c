/* Memory an allocator hands out again, with sites the tests know (tests/ledger.rs): first_use
 * writes MIB MiB of 64 KiB blocks from malloc's brk heap and frees them all; glibc keeps them
 * (trimming off), and second_use's blocks are the same memory, written again without a new
 * page. A prover's second proof does this with the buffers of its first. Built by the tests
 * with -O2 -fomit-frame-pointer.
 *
 *   reuse-sites PREFIX MIB [PAUSE_US]
 *
 * Prints "ready" and waits for the file PREFIX.2; fills and frees (first_use), prints "first";
 * waits for PREFIX.1,
 * fills again (second_use), prints "second"; waits for PREFIX.0, exits. PAUSE_US: a pause after
 * each block (a pace a recorder in an emulated machine keeps up with). Each line is flushed: a
 * test reads them as they come. 4 KiB pages only: a transparent huge page faults 2 MiB at once,
 * one fault where the sampling counts 512. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

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

/* n blocks from malloc, every byte written with c. */
static __attribute__((noinline)) void fill(void **blocks, size_t n, int c) {
    for (size_t i = 0; i < n; i++) {
        blocks[i] = malloc(BLOCK);
        if (!blocks[i])
            exit(3);
        memset(blocks[i], c, BLOCK);
        if (pause_us)
            usleep(pause_us);
    }
}

static __attribute__((noinline)) void first_use(void **blocks, size_t n) {
    fill(blocks, n, 1);
    for (size_t i = 0; i < n; i++)
        free(blocks[i]);
}

static __attribute__((noinline)) void second_use(void **blocks, size_t n) {
    fill(blocks, n, 2);
    /* Not a tail call: its frame stays on the stack fill's faults are sampled with. */
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: reuse-sites PREFIX MIB [PAUSE_US]\n");
        return 2;
    }
    prefix = argv[1];
    size_t n = strtoul(argv[2], NULL, 10) * MIB / BLOCK;
    if (argc == 4)
        pause_us = strtoul(argv[3], NULL, 10);
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    /* The blocks from the brk heap, kept when freed: no mmap of 64 KiB, no trim. */
    mallopt(M_MMAP_THRESHOLD, 16 * MIB);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    void **blocks = calloc(n, sizeof(void *));
    if (!blocks)
        return 3;
    printf("ready\n");
    fflush(stdout);
    wait_file(2);
    first_use(blocks, n);
    printf("first\n");
    fflush(stdout);
    wait_file(1);
    second_use(blocks, n);
    printf("second\n");
    fflush(stdout);
    wait_file(0);
    return 0;
}
