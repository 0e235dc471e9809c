/* Milliseconds on a monotonic clock, for the statistics' phase times. */
#pragma once

#include <time.h>

static inline double clock_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
