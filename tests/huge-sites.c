/* One mapping written in two page sizes, with sites the tests know (tests/ledger.rs):
 * fill_small writes SMALL MiB of it in 4 KiB pages (the mapping marked MADV_NOHUGEPAGE), then
 * the whole mapping is marked MADV_HUGEPAGE and fill_huge writes HUGE MiB more, 2 MiB-aligned:
 * transparent huge pages where the kernel gives them, one fault for 512 pages. The mapping stays
 * one (the flags are changed for all of it at once), so its Rss is shared out between the two.
 * Built by the tests with -O2 -fomit-frame-pointer.
 *
 *   huge-sites PREFIX SMALL_MIB HUGE_MIB
 *
 * Writes both, prints the mapping's AnonHugePages (`huge-kb N`, from smaps) and "done", waits
 * for the file PREFIX.0, exits. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)
#define HUGE (2 * MIB)

static __attribute__((noinline)) void fill_small(char *p, size_t n) {
    for (size_t i = 0; i < n; i += 4096)
        p[i] = 1;
}

static __attribute__((noinline)) void fill_huge(char *p, size_t n) {
    for (size_t i = 0; i < n; i += 4096)
        p[i] = 2;
}

/* The AnonHugePages of the mapping holding addr, in kB (-1 where smaps has none). */
static long anon_huge_kb(char *addr) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    long kb = -1;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = lo <= (unsigned long)addr && (unsigned long)addr < hi;
        else if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    }
    if (f)
        fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: huge-sites PREFIX SMALL_MIB HUGE_MIB\n");
        return 2;
    }
    size_t small = strtoul(argv[2], NULL, 10) * MIB;
    size_t huge = strtoul(argv[3], NULL, 10) * MIB;
    size_t len = small + huge + 2 * HUGE;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 3;
    madvise(m, len, MADV_NOHUGEPAGE);
    char *base = (char *)(((unsigned long)m + HUGE - 1) & ~(HUGE - 1));
    fill_small(base, small);
    madvise(m, len, MADV_HUGEPAGE);
    char *h = base + ((small + HUGE - 1) & ~(HUGE - 1));
    fill_huge(h, huge);
    printf("huge-kb %ld\ndone\n", anon_huge_kb(h));
    fflush(stdout);
    char path[4096];
    snprintf(path, sizeof path, "%s.0", argv[1]);
    while (access(path, F_OK) != 0)
        usleep(20 * 1000);
    return 0;
}
