/* The grid guide's platform on a host: standard output and exit(). */
#include <stdio.h>
#include <stdlib.h>

#include "platform.h"

void platform_write(const char *s) { fputs(s, stdout); }

void platform_exit(bool success) {
    fflush(stdout);
    exit(success ? 0 : 1);
}
