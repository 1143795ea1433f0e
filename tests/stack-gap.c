/* A stack the kernel cannot copy whole, with sites the tests know (tests/ledger.rs). With each
 * sampled page fault the kernel copies the top of the thread's stack without faulting: a page of
 * it that is not present at once (one NUMA balancing has unmapped to see who touches it next,
 * or one swapped out) ends the copy there. Here a thread runs on a stack of shared memory (a
 * memfd), and before each 64 KiB write_under writes, the page that holds outer's return address
 * is dropped from the thread's page table (MADV_DONTNEED: its contents stay in the memfd, and a
 * read maps them again), a kilobyte or so above the stack pointer.
 * Built by the tests with -O2 -fomit-frame-pointer.
 *
 *   stack-gap PREFIX MIB
 *
 * Writes MIB MiB of fresh memory, prints "done" and waits for the file PREFIX.0 still in
 * write_under (its callers' frames as they were while it wrote), returns, exits. 4 KiB pages
 * only. */
#define _GNU_SOURCE
#include <alloca.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)
#define PAGE 4096UL
#define CHUNK (64UL * 1024UL)
#define STACK (1024UL * 1024UL)

static const char *prefix;

/* Writes n bytes of fresh memory, 64 KiB at a time, 2 ms apart (a pace the recorder's rings
 * keep up with in an emulated machine), the stack page at `gap` dropped before each; then says
 * so and waits for the file PREFIX.0. */
static __attribute__((noinline)) char *write_under(char *gap, size_t n) {
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        exit(3);
    for (size_t at = 0; at < n; at += CHUNK) {
        if (madvise(gap, PAGE, MADV_DONTNEED) != 0)
            exit(4);
        memset(p + at, 1, CHUNK);
        usleep(2000);
    }
    printf("done\n");
    fflush(stdout);
    char path[512];
    snprintf(path, sizeof path, "%s.0", prefix);
    while (access(path, F_OK) != 0)
        usleep(20 * 1000);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* Moves the stack down to a kilobyte below the page `gap` (alloca), so that write_under and
 * what it calls run on the pages below it, and calls write_under. */
static __attribute__((noinline)) char *descend(char *gap, size_t n) {
    char here;
    uintptr_t sp = (uintptr_t)&here, floor = (uintptr_t)gap - 1024;
    volatile char *pad = alloca(sp > floor ? sp - floor : 16);
    pad[0] = 0;
    char *p = write_under(gap, n);
    pad[0] = 1;
    return p;
}

/* The page that holds this function's return address: the one the kernel's copy stops at. */
static __attribute__((noinline)) char *outer(size_t n) {
    uintptr_t ret = (uintptr_t)__builtin_frame_address(0) + sizeof(void *);
    char *p = descend((char *)(ret & ~(PAGE - 1)), n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *run(void *arg) {
    return outer(*(size_t *)arg);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: stack-gap PREFIX MIB\n");
        return 2;
    }
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        return 4;
    prefix = argv[1];
    size_t n = strtoul(argv[2], NULL, 10) * MIB;
    /* The thread's stack: shared memory, whose pages a drop leaves in the memfd. */
    int fd = memfd_create("stack-gap", 0);
    if (fd < 0 || ftruncate(fd, STACK) != 0)
        return 5;
    void *stack = mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (stack == MAP_FAILED)
        return 5;
    pthread_attr_t attr;
    pthread_t t;
    void *p;
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setstack(&attr, stack, STACK) != 0 ||
        pthread_create(&t, &attr, run, &n) != 0 || pthread_join(t, &p) != 0)
        return 6;
    return ((char *)p)[0] == 1 ? 0 : 7;
}
