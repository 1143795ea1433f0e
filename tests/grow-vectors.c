/* Vectors that grow as a prover's constraint system does (tests/ledger.rs): three (`enforce`)
 * and a fourth (`alloc_aux`) pushed in turn, 32 bytes at a time, each grown by doubling with
 * realloc, which glibc does with mremap once a vector is mmapped: their pages move to another
 * address, without a fault, again and again while the recorder reads its first anatomies.
 * Built by the tests with -O2 -fomit-frame-pointer.
 *
 *   grow-vectors PREFIX MIB
 *
 * Grows each vector to MIB MiB, prints "grown", waits for the file PREFIX.0, frees them, exits.
 * Each line is flushed: a test reads them as they come. 4 KiB pages only: a transparent huge
 * page faults 2 MiB at once, one fault where the sampling counts 512 (the VM lane's guests have
 * THP always). */
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ELEM 32

typedef struct {
    char *p;
    size_t n, cap;
} vec;

static __attribute__((noinline, noclone)) void push(vec *v) {
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 4;
        v->p = realloc(v->p, v->cap * ELEM);
        if (!v->p)
            exit(3);
    }
    memset(v->p + v->n * ELEM, 1, ELEM);
    v->n++;
}

/* Each site does something after its pushes: no tail call, so it stays on the stack. */
static volatile long calls;

static __attribute__((noinline, noclone)) void enforce(vec *a, vec *b, vec *c) {
    push(a);
    push(b);
    push(c);
    calls++;
}

static __attribute__((noinline, noclone)) void alloc_aux(vec *x) {
    push(x);
    calls++;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: grow-vectors PREFIX MIB\n");
        return 2;
    }
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        return 4;
    size_t n = strtoul(argv[2], NULL, 10) * 1024 * 1024 / ELEM;
    static vec a, b, c, x;
    for (size_t i = 0; i < n; i++) {
        alloc_aux(&x);
        enforce(&a, &b, &c);
    }
    printf("grown\n");
    fflush(stdout);
    char path[4096];
    snprintf(path, sizeof path, "%s.0", argv[1]);
    while (access(path, F_OK) != 0)
        usleep(20 * 1000);
    free(a.p);
    free(b.p);
    free(c.p);
    free(x.p);
    return 0;
}
