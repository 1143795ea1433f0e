/* A program whose names are chosen to attack a terminal (tests/hostile.rs): a memfd, a function
 * (its ELF symbol) and its process name hold escape sequences that set a terminal's title,
 * clear the screen, colour the text, return the carriage, move the cursor up and erase a line.
 *
 *   hostile-names GO_FILE HOLD_MS
 *
 * Waits for GO_FILE to exist, maps and writes 16 MiB of the memfd and 24 MiB through the
 * hostile function (so the ledger names it as the code that made them), holds HOLD_MS, exits. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)

/* The symbol holds the control bytes themselves (the assembler takes a quoted name as it is). */
__attribute__((noinline)) void *hostile(size_t len)
    __asm__("\"evil\033]0;PWNED\007\033[2J\033[31mRED\r\033[1A\033[KFAKE\"");

__attribute__((noinline)) void *hostile(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    for (size_t off = 0; off < len; off += 4096)
        ((volatile char *)p)[off] = 1;
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: hostile-names GO_FILE HOLD_MS\n");
        return 2;
    }
    while (access(argv[1], F_OK) != 0)
        usleep(20 * 1000);
    const char *name = "\033]0;PWNED\007\033[2J\033[31mRED\r\033[1A\033[KFAKE\nLINE";
    int fd = memfd_create(name, 0);
    if (fd < 0 || ftruncate(fd, 16 * MIB) != 0) {
        perror("memfd");
        return 1;
    }
    char *m = mmap(NULL, 16 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        perror("mmap memfd");
        return 1;
    }
    memset(m, 1, 16 * MIB);
    prctl(PR_SET_NAME, "\033[2J\033]0;X\007\n", 0, 0, 0);
    void *p = hostile(24 * MIB);
    usleep(atoi(argv[2]) * 1000);
    return p == NULL;
}
