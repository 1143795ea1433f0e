/* A daemon shaped like a prover, with allocation sites the tests know (tests/ledger.rs): its
 * parameters mapped and locked by load_params, partitions mapped by worker threads through
 * synthesize_partition -> alloc_partition, and a helper process whose buffer helper_buffer
 * maps. Built by the tests with -O2 -fomit-frame-pointer: the stacks the ledger unwinds have no
 * frame pointers, as release builds do not.
 *
 *   known-sites PREFIX PARTITIONS PARTITION_MIB
 *
 * Prints "ready", waits for the file PREFIX.0, maps everything, prints "mapped", waits for
 * PREFIX.1, unmaps the partitions (the helper exits), prints "freed", waits for PREFIX.2, exits.
 * Each line is flushed: a test reads them as they come. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)

static const char *prefix;
static size_t partition_bytes;

static void wait_file(int n) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", prefix, n);
    while (access(path, F_OK) != 0)
        usleep(20 * 1000);
}

static void say(const char *what) {
    printf("%s\n", what);
    fflush(stdout);
}

/* Each mapping written page by page: resident, as a prover's buffers are. Inlined into each
 * caller, so that the caller is the function that calls mmap (`return map_written(len)` in a
 * function of its own would be a tail call at -O2, its caller's frame gone). */
static inline __attribute__((always_inline)) void *map_written(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    for (size_t off = 0; off < len; off += 4096)
        ((volatile char *)p)[off] = 1;
    return p;
}

__attribute__((noinline)) void *load_params(size_t len) {
    void *p = map_written(len);
    if (mlock(p, len) != 0)
        perror("mlock (the parameters stay unlocked)");
    return p;
}

__attribute__((noinline)) void *alloc_partition(size_t len) {
    void *p = map_written(len);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void *synthesize_partition(void *slot) {
    *(void **)slot = alloc_partition(partition_bytes);
    /* Not a tail call: the frame of synthesize_partition stays on the stack. */
    __asm__ volatile("" ::: "memory");
    return NULL;
}

__attribute__((noinline)) void *helper_buffer(size_t len) {
    void *p = map_written(len);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* The helper maps its buffer, tells the parent through `done`, and holds it until PREFIX.1. */
__attribute__((noinline)) static int helper_main(int done) {
    void *b = helper_buffer(16 * MIB);
    char c = 1;
    if (write(done, &c, 1) != 1)
        return 1;
    wait_file(1);
    munmap(b, 16 * MIB);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: known-sites PREFIX PARTITIONS PARTITION_MIB\n");
        return 2;
    }
    prefix = argv[1];
    int n = atoi(argv[2]);
    partition_bytes = (size_t)atoi(argv[3]) * MIB;
    say("ready");
    wait_file(0);
    /* The helper first: forked later, it would hold a copy of the partitions' mappings. */
    int done[2];
    if (pipe(done) != 0) {
        perror("pipe");
        return 1;
    }
    pid_t helper = fork();
    if (helper == 0)
        _exit(helper_main(done[1]));
    void *params = load_params(32 * MIB);
    pthread_t threads[64];
    void *parts[64];
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++)
        pthread_create(&threads[i], NULL, synthesize_partition, &parts[i]);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    char c;
    if (read(done[0], &c, 1) != 1) {
        fprintf(stderr, "the helper ended early\n");
        return 1;
    }
    say("mapped");
    wait_file(1);
    for (int i = 0; i < n; i++)
        munmap(parts[i], partition_bytes);
    waitpid(helper, NULL, 0);
    say("freed");
    wait_file(2);
    munmap(params, 32 * MIB);
    return 0;
}
