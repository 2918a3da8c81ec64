/*
 * What the grid guide needs from where it runs: a line of output and an exit status.
 * startup.c provides them on the Cortex-M4F (semihosting, under QEMU or a debug
 * probe), host.c on a host (stdio), so the same guide runs on both and prints the same.
 */
#ifndef LAQ_EXAMPLE_PLATFORM_H
#define LAQ_EXAMPLE_PLATFORM_H

#include <stdbool.h>

/* Writes the NUL-terminated string `s` as it is (no newline added). */
void platform_write(const char *s);

/* Ends the program: exit status 0 if `success`, else non-zero. */
void platform_exit(bool success) __attribute__((noreturn));

#endif
