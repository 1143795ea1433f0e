/* Faults of each kind, with sites the tests know (tests/ledger.rs): write_pages writes MIB MiB
 * of anonymous memory (write faults in user mode), read_into reads MIB MiB from /dev/urandom into
 * fresh anonymous memory (the kernel's write faults on user addresses, in read()), read_file
 * reads every page of FILE mapped privately (read faults: resident, and no one's writing).
 * Built by the tests with -O2 -fomit-frame-pointer.
 *
 *   fault-kinds PREFIX MIB FILE
 *
 * Does all three, prints "done", waits for the file PREFIX.0, exits. 4 KiB pages only. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)

volatile long sink;

/* n bytes of anonymous memory between two inaccessible pages: a mapping of its own, which the
 * kernel merges with no other. */
static char *fresh(size_t n) {
    char *p = mmap(NULL, n + 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mprotect(p + 4096, n, PROT_READ | PROT_WRITE) != 0)
        exit(3);
    return p + 4096;
}

/* 64 KiB at a time, 2 ms apart: a pace the recorder's rings keep up with in an emulated
 * machine running two tests at once (a MiB at a time, read_into got no sample in 2 of 3 such
 * runs on 6.12; its rings' losses the likely cause). */
#define CHUNK (64UL * 1024UL)

static __attribute__((noinline)) char *write_pages(size_t n) {
    char *p = fresh(n);
    for (size_t at = 0; at < n; at += CHUNK) {
        memset(p + at, 1, CHUNK);
        usleep(2000);
    }
    __asm__ volatile("" ::: "memory");
    return p;
}

static __attribute__((noinline)) char *read_into(size_t n) {
    char *p = fresh(n);
    int fd = open("/dev/urandom", O_RDONLY);
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, p + got, n - got < CHUNK ? n - got : CHUNK);
        if (r <= 0)
            exit(3);
        got += (size_t)r;
        usleep(2000);
    }
    close(fd);
    __asm__ volatile("" ::: "memory");
    return p;
}

static __attribute__((noinline)) long read_file(const char *path) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        exit(3);
    const volatile char *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        exit(3);
    long sum = 0;
    for (off_t i = 0; i < st.st_size; i += 4096)
        sum += p[i];
    __asm__ volatile("" ::: "memory");
    return sum;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: fault-kinds PREFIX MIB FILE\n");
        return 2;
    }
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    size_t n = strtoul(argv[2], NULL, 10) * MIB;
    char *a = write_pages(n);
    char *b = read_into(n);
    long s = read_file(argv[3]);
    sink = a[1] + b[1] + s;
    printf("done\n");
    fflush(stdout);
    char path[4096];
    snprintf(path, sizeof path, "%s.0", argv[1]);
    while (access(path, F_OK) != 0)
        usleep(20 * 1000);
    return 0;
}
