/* The cost of a page fault, timed inside the program: 8 rounds of SIZE_MIB MiB mapped, written
 * a byte a page, unmapped; the best and the mean round, in ns per fault. MODE `small` faults
 * 4 KiB pages (MADV_NOHUGEPAGE), `huge` transparent huge pages (MADV_HUGEPAGE, 2 MiB-aligned):
 * run beside and under memmon, it gives what the ledger's sampling costs each fault.
 *
 *   gcc -O2 -o fault_cost benchmarks/fault_cost.c
 *   fault_cost small|huge [SIZE_MIB] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv) {
    int huge = argc > 1 && strcmp(argv[1], "huge") == 0;
    size_t n = (argc > 2 ? strtoul(argv[2], NULL, 10) : 512) << 20;
    size_t step = huge ? 2UL << 20 : 4096;
    double best = 1e9, sum = 0;
    for (int r = 0; r < 8; r++) {
        char *m = mmap(NULL, n + (2UL << 20), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return 3;
        char *p = (char *)(((unsigned long)m + (2UL << 20) - 1) & ~((2UL << 20) - 1));
        madvise(p, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (size_t i = 0; i < n; i += step)
            p[i] = 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        double t = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
        if (t < best)
            best = t;
        sum += t;
        munmap(m, n + (2UL << 20));
    }
    printf("%.0f %.0f\n", best * 1e9 / (n / step), sum / 8 * 1e9 / (n / step));
    return 0;
}
