/* A daemon shaped like a prover, for benchmarks/ledger_cost.py: it loops over "proofs", each
 * mapping PARTITIONS partitions of MIB MiB from THREADS worker threads, writing every page (a
 * page fault each), and unmapping them. Every second it prints, as one JSON line, the proofs
 * done, the mmap calls made, and the mean time of a page's first write (the page-fault latency,
 * nanoseconds), so a benchmark reads its throughput and fault latency with and without a
 * recorder attached.
 *
 *   prover PARTITIONS MIB THREADS SECONDS
 *   prover calls N MIB
 *
 * The second form times the calls alone: N pairs of mmap and munmap of MIB MiB (no page
 * written), and prints the CPU time (user and system, getrusage) of a pair in nanoseconds: what
 * each traced call costs the process, measured in its own CPU time (a busy machine's other work
 * is not in it). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static size_t part_bytes;
static int partitions, threads;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

struct work {
    int first, count;
    uint64_t fault_ns, pages;
};

__attribute__((noinline)) static void *alloc_partition(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *synthesize(void *arg) {
    struct work *w = arg;
    for (int i = 0; i < w->count; i++) {
        char *p = alloc_partition(part_bytes);
        uint64_t t0 = now_ns();
        for (size_t off = 0; off < part_bytes; off += 4096)
            ((volatile char *)p)[off] = 1;
        w->fault_ns += now_ns() - t0;
        w->pages += part_bytes / 4096;
        munmap(p, part_bytes);
    }
    return NULL;
}

static uint64_t cpu_ns(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return ((uint64_t)u.ru_utime.tv_sec + (uint64_t)u.ru_stime.tv_sec) * 1000000000ULL +
           ((uint64_t)u.ru_utime.tv_usec + (uint64_t)u.ru_stime.tv_usec) * 1000ULL;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "calls") == 0) {
        long n = atol(argv[2]);
        size_t len = (size_t)atoi(argv[3]) << 20;
        uint64_t c0 = cpu_ns();
        for (long i = 0; i < n; i++)
            munmap(alloc_partition(len), len);
        printf("{\"pair_ns\":%.1f}\n", (double)(cpu_ns() - c0) / (double)n);
        return 0;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: prover PARTITIONS MIB THREADS SECONDS\n");
        return 2;
    }
    partitions = atoi(argv[1]);
    part_bytes = (size_t)atoi(argv[2]) << 20;
    threads = atoi(argv[3]);
    int seconds = atoi(argv[4]);
    uint64_t end = now_ns() + (uint64_t)seconds * 1000000000ULL;
    uint64_t next = now_ns() + 1000000000ULL;
    uint64_t proofs = 0, calls = 0, fault_ns = 0, pages = 0;
    while (now_ns() < end) {
        pthread_t t[64];
        struct work w[64] = {0};
        int per = partitions / threads;
        for (int i = 0; i < threads; i++) {
            w[i].count = per + (i < partitions % threads);
            pthread_create(&t[i], NULL, synthesize, &w[i]);
        }
        for (int i = 0; i < threads; i++) {
            pthread_join(t[i], NULL);
            fault_ns += w[i].fault_ns;
            pages += w[i].pages;
        }
        proofs++;
        calls += 2 * partitions;
        if (now_ns() >= next) {
            printf("{\"proofs\":%llu,\"calls\":%llu,\"fault_ns\":%.1f}\n", (unsigned long long)proofs,
                   (unsigned long long)calls, pages ? (double)fault_ns / pages : 0.0);
            fflush(stdout);
            proofs = calls = fault_ns = pages = 0;
            next += 1000000000ULL;
        }
    }
    return 0;
}
