/* A stack the kernel cannot copy whole, with sites the tests know (tests/ledger.rs). With each
 * sampled page fault the kernel copies the top of the thread's stack, without faulting: a page
 * it cannot read at once (one NUMA balancing has made inaccessible to see who touches it next,
 * or one swapped out) ends the copy there. Here the page that holds outer's return address is
 * made inaccessible (PROT_NONE, as NUMA balancing marks it) while write_under writes MIB MiB of
 * fresh memory, a kilobyte or so below it, and accessible again once it is written.
 * Built by the tests with -O2 -fomit-frame-pointer.
 *
 *   stack-gap PREFIX MIB
 *
 * Writes, prints "done" and waits for the file PREFIX.0 still in write_under (its callers'
 * frames as they were while it wrote), returns, exits. 4 KiB pages only. */
#define _GNU_SOURCE
#include <alloca.h>
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

static const char *prefix;

/* Writes n bytes of fresh memory, 64 KiB at a time, 2 ms apart (a pace the recorder's rings
 * keep up with in an emulated machine), with the stack page at `gap` inaccessible meanwhile;
 * then says so and waits for the file PREFIX.0. */
static __attribute__((noinline)) char *write_under(char *gap, size_t n) {
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        exit(3);
    if (mprotect(gap, PAGE, PROT_NONE) != 0)
        exit(4);
    for (size_t at = 0; at < n; at += CHUNK) {
        memset(p + at, 1, CHUNK);
        usleep(2000);
    }
    if (mprotect(gap, PAGE, PROT_READ | PROT_WRITE) != 0)
        exit(5);
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

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: stack-gap PREFIX MIB\n");
        return 2;
    }
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        return 4;
    prefix = argv[1];
    char *p = outer(strtoul(argv[2], NULL, 10) * MIB);
    return p[0] == 1 ? 0 : 6;
}
