/* The floor of a memory sampler: what any sampler of the same processes pays, and no more.
 *
 * Built and run by benchmarks/cost.py:
 *
 *     cc -O2 -o floor benchmarks/floor.c
 *     floor [-t] [-f] [-m] [-w] [-S] [-P] INTERVAL_NS OUT PID...
 *
 * Opens /proc/PID/status and /proc/PID/task/PID/children of each PID once, then at each tick
 * of an absolute schedule (clock_nanosleep, TIMER_ABSTIME) preads both files of every PID,
 * takes VmRSS from each, and writes one CSV line (wall-clock ms, the summed RSS in bytes, the
 * children count) to OUT through stdio's buffer: flushed when full, not per tick (-f: flushed
 * at every tick, one write, as a sampler that loses no row when it is killed must).
 * -t (a tree): the PIDs after the first are read through /proc/PID/statm instead of status (a
 * fifth of its cost; VmRSS is its second field), the cheapest read that gives their RSS.
 * -m (memmon's reads, for a floor that gathers what a memmon row holds): no children file (memmon
 * hears of new children from the kernel's fork events, which cost nothing while none come);
 * instead /proc/PID/stat (major faults) with each status read, and /proc/pressure/memory (PSI) at
 * every tick. With -t, the PIDs after the first are read as memmon reads a descendant: statm at
 * every tick, status and stat when the last were read a second ago or more.
 * -w (wake only): no reads and no line, only the wake-ups of the schedule: what any sampler at
 * that rate pays before it reads anything.
 * -S and -P (with -m): leave out the stat read, or the PSI read, to price each alone
 * (benchmarks/stat_cost.py).
 * It stops at SIGTERM or SIGINT, flushes, and exits 0. What it leaves out, on purpose: exit
 * records, a check of each process's identity, the children files of threads other than the
 * main one, the summary, PSS, new children (the PIDs are fixed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

/* The value of line `key` (e.g. "VmRSS:") in kB, 0 when absent. */
static unsigned long long field_kb(const char *buf, size_t n, const char *key) {
    const char *p = memmem(buf, n, key, strlen(key));
    if (!p) return 0;
    return strtoull(p + strlen(key), NULL, 10);
}

int main(int argc, char **argv) {
    int tree = 0, flush = 0, mine = 0, wake_only = 0, no_stat = 0, no_psi = 0;
    while (argc > 1 && argv[1][0] == '-') {
        if (!strcmp(argv[1], "-t")) tree = 1;
        else if (!strcmp(argv[1], "-f")) flush = 1;
        else if (!strcmp(argv[1], "-m")) mine = 1;
        else if (!strcmp(argv[1], "-w")) wake_only = 1;
        else if (!strcmp(argv[1], "-S")) no_stat = 1;
        else if (!strcmp(argv[1], "-P")) no_psi = 1;
        else break;
        argv++;
        argc--;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: floor [-t] [-f] [-m] [-w] [-S] [-P] INTERVAL_NS OUT PID...\n");
        return 2;
    }
    long long interval = atoll(argv[1]);
    FILE *out = fopen(argv[2], "w");
    if (!out || interval <= 0) {
        perror(argv[2]);
        return 2;
    }
    int n = argc - 3;
    int *status = calloc(n, sizeof(int)), *children = calloc(n, sizeof(int));
    int *statm = calloc(n, sizeof(int)), *stat = calloc(n, sizeof(int));
    struct timespec *read_at = calloc(n, sizeof(struct timespec));
    char path[128];
    for (int i = 0; i < n; i++) {
        const char *pid = argv[3 + i];
        snprintf(path, sizeof path, "/proc/%s/%s", pid, tree && i > 0 && !mine ? "statm" : "status");
        status[i] = open(path, O_RDONLY | O_CLOEXEC);
        if (mine) {
            snprintf(path, sizeof path, "/proc/%s/stat", pid);
            stat[i] = open(path, O_RDONLY | O_CLOEXEC);
            snprintf(path, sizeof path, "/proc/%s/statm", pid);
            statm[i] = open(path, O_RDONLY | O_CLOEXEC);
            children[i] = stat[i] < 0 ? -1 : statm[i];
        } else {
            snprintf(path, sizeof path, "/proc/%s/task/%s/children", pid, pid);
            children[i] = open(path, O_RDONLY | O_CLOEXEC);
        }
        if (status[i] < 0 || children[i] < 0) {
            perror(path);
            return 1;
        }
    }
    /* Absent where the kernel has no PSI: then not read, as memmon does not. */
    int pressure = mine && !no_psi ? open("/proc/pressure/memory", O_RDONLY | O_CLOEXEC) : -1;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    static char buf[8192];
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (!stop) {
        unsigned long long rss_kb = 0, kids = 0;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        for (int i = 0; i < n && !wake_only; i++) {
            if (mine) {
                /* A descendant of a tree: statm, and status and stat once a second. */
                int full = !tree || i == 0 || now.tv_sec > read_at[i].tv_sec + 1 ||
                           (now.tv_sec == read_at[i].tv_sec + 1 && now.tv_nsec >= read_at[i].tv_nsec);
                ssize_t k = pread(full ? status[i] : statm[i], buf, sizeof buf - 1, 0);
                if (k > 0 && full) {
                    rss_kb += field_kb(buf, (size_t)k, "VmRSS:");
                    k = no_stat ? 1 : pread(stat[i], buf, sizeof buf - 1, 0);
                    kids += k > 0 ? (unsigned long long)buf[0] : 0;
                    read_at[i] = now;
                } else if (k > 0) {
                    buf[k] = 0;
                    rss_kb += strtoull(strchr(buf, ' ') ? strchr(buf, ' ') : buf, NULL, 10) * 4;
                }
                continue;
            }
            ssize_t k = pread(status[i], buf, sizeof buf - 1, 0);
            if (k > 0 && tree && i > 0) {
                buf[k] = 0;
                rss_kb += strtoull(strchr(buf, ' ') ? strchr(buf, ' ') : buf, NULL, 10) * 4;
            } else if (k > 0) {
                rss_kb += field_kb(buf, (size_t)k, "VmRSS:");
            }
            k = pread(children[i], buf, sizeof buf, 0);
            for (ssize_t j = 0; j < k; j++) kids += buf[j] == ' ';
        }
        if (pressure >= 0 && pread(pressure, buf, sizeof buf - 1, 0) > 0) kids += (unsigned char)buf[0];
        if (!wake_only) {
            struct timespec wall;
            clock_gettime(CLOCK_REALTIME, &wall);
            fprintf(out, "%lld,%llu,%llu\n", (long long)wall.tv_sec * 1000 + wall.tv_nsec / 1000000,
                    rss_kb * 1024, kids);
            if (flush) fflush(out);
        }
        /* The next deadline on the absolute schedule; deadlines already past are skipped. */
        clock_gettime(CLOCK_MONOTONIC, &now);
        do {
            next.tv_nsec += interval % 1000000000LL;
            next.tv_sec += interval / 1000000000LL + next.tv_nsec / 1000000000L;
            next.tv_nsec %= 1000000000L;
        } while (next.tv_sec < now.tv_sec || (next.tv_sec == now.tv_sec && next.tv_nsec <= now.tv_nsec));
        while (!stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
        }
    }
    fclose(out);
    return 0;
}
