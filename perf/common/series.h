/* The figures of a series of times (frames, phases, the host gauge's rounds) that the runner and
 * the benchmarks print. */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct series {
    double median, p99, worst, min; /* p99: the nearest rank, ceil(0.99 n) */
} series;

/* Sorts v[0, n) in place and returns its figures; all 0 when n is 0. */
series series_sorted(double *v, size_t n);

#ifdef __cplusplus
}
#endif
