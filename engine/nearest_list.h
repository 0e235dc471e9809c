/* What the nearest searches share: the order they rank by (the squared distance rounded to
 * float, then the id), a best-k list kept sorted in that order, and the bands that cut a long
 * list of filter hits down to those that can rank among the first `want` before the exact test
 * (the queries' groups, query_group.c; every object's neighbourhood, neighbourhoods.c). */
#pragma once

#include "overlap.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* (d, a) ranks after (e, b). */
static inline bool near_ranks_after(float d, uint32_t a, float e, uint32_t b) {
    return d > e || (d == e && a > b);
}

/* (id, d) offered to ids/d2s, kept sorted, *n of k used (k >= 1). */
static inline void near_insert(uint32_t *ids, float *d2s, size_t *n, size_t k, uint32_t id,
                               float d) {
    size_t i = *n;
    if (i == k) {
        if (!near_ranks_after(d2s[i - 1], ids[i - 1], d, id)) return;
        i--; /* the worst leaves */
    } else {
        (*n)++;
    }
    for (; i > 0 && near_ranks_after(d2s[i - 1], ids[i - 1], d, id); i--) {
        ids[i] = ids[i - 1];
        d2s[i] = d2s[i - 1];
    }
    ids[i] = id;
    d2s[i] = d;
}

/* The band of `bands` across [0, bound) (bands: at or past it) that the box at column position
 * `at` lies in, by its float squared distance from p (within a relative 1e-5 of the exact one,
 * as the SIMD filter's), lowered by that margin so that a band never sits above the exact
 * figure's. scale is bands / bound. */
static inline uint32_t near_band(const float p[3], int dims, const simd_boxes *cols, uint32_t at,
                                 float scale, uint32_t bands) {
    float s = 0.0f;
    for (int k = 0; k < dims; k++) {
        float a = cols->min[k][at] - p[k], b = p[k] - cols->max[k][at];
        float gap = a > b ? a : b;
        gap = gap > 0.0f ? gap : 0.0f;
        s += gap * gap;
    }
    float x = s * 0.99998f * scale;
    return x < (float)bands ? (uint32_t)x : bands;
}

enum { NEAR_BANDS_MAX = 64 };

/* Hits (column positions) of a nearest search within `bound` (squared) that wants `want`: only
 * those that can rank among the first `want` stay, at the front of hits, in their order; returns
 * how many. Their float distances are counted into `bands` (at most NEAR_BANDS_MAX) bands of the
 * bound; the band where the count reaches `want` holds the want-th nearest, whose exact figure
 * may reach the next band, so the hits up to that one stay. A sphere's box (round[at] nonzero) is
 * nearer than its ball: it stays by its box, but does not count towards the `want`. band, when
 * not NULL, has room for h entries and saves computing each band twice. */
static inline size_t near_bands_keep(const float p[3], int dims, double bound, size_t want,
                                     uint32_t bands, const simd_boxes *cols, const uint32_t *round,
                                     uint32_t *hits, size_t h, uint8_t *band) {
    float b = (float)bound;
    if (!(b > 0.0f) || !(b < INFINITY)) return h;
    float scale = (float)bands / b;
    uint32_t count[NEAR_BANDS_MAX + 1] = {0};
    for (size_t j = 0; j < h; j++) {
        uint32_t x = near_band(p, dims, cols, hits[j], scale, bands);
        if (band) band[j] = (uint8_t)x;
        count[x] += round[hits[j]] ? 0u : 1u;
    }
    uint32_t last = 0;
    size_t seen = 0;
    while (last < bands && seen + count[last] < want) seen += count[last++];
    size_t n = 0;
    for (size_t j = 0; j < h; j++) {
        uint32_t x = band ? band[j] : near_band(p, dims, cols, hits[j], scale, bands);
        if (x <= last + 1) hits[n++] = hits[j];
    }
    return n;
}
