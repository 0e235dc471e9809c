#include "series.h"

#include <stdlib.h>

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

series series_sorted(double *v, size_t n) {
    series r = {0};
    if (n == 0) return r;
    qsort(v, n, sizeof *v, by_value);
    r.min = v[0];
    r.worst = v[n - 1];
    r.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    r.p99 = v[(99 * n + 99) / 100 - 1];
    return r;
}
