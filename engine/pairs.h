/* Pair output: every job writes the pairs it finds to its worker's buffer; the buffers are
 * concatenated in job order (never completion order) and sorted by (a, b), so the final array
 * is the same for every thread count and every method. */
#pragma once

#include "parallel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct broadphase_world broadphase_world;
typedef struct broadphase_pair broadphase_pair;

typedef struct pairs_job {
    uint32_t worker;
    size_t begin, count; /* slice of the worker's buffer */
} pairs_job;

typedef struct pairs_fill {
    uint64_t *keys;
    size_t count, capacity;
    bool failed;
    char pad[64 - 3 * sizeof(size_t) - sizeof(bool)];
} pairs_fill;

typedef struct pairs_state {
    threads_scratch buffers; /* per-worker key buffers */
    pairs_fill *fill;        /* per-worker fill level, one cache line each */
    int fill_count;
    pairs_job *jobs;
    size_t job_capacity;
    uint64_t *keys, *tmp;
    size_t key_capacity;
    broadphase_pair *out;
    size_t out_capacity;
    size_t count; /* pairs in out */
    void *hist;
    size_t hist_bytes;
    int shift; /* key = a << shift | b */
} pairs_state;

/* Collects one job's pairs; keys are (min << shift | max) of the two ids. */
typedef struct pairs_writer {
    uint64_t *keys;
    size_t count, capacity, start;
    int shift, worker;
    bool failed;
    threads_scratch *buffers;
} pairs_writer;

/* Before the jobs: room for job_count jobs and w->workers buffers, key width from the id range.
 * False on out of memory. */
bool pairs_prepare(broadphase_world *w, size_t job_count);
pairs_writer pairs_job_begin(pairs_state *ps, int worker);
void pairs_job_end(pairs_state *ps, size_t job, pairs_writer *wr);
/* After the jobs: concatenate in job order, sort, publish in ps->out. False on out of memory. */
bool pairs_finish(broadphase_world *w, size_t job_count);
void pairs_release(broadphase_world *w);

/* Makes room for `more` keys; on failure marks the writer failed and returns false. */
bool pairs_writer_grow(pairs_writer *wr, size_t more);
static inline bool pairs_writer_reserve(pairs_writer *wr, size_t more) {
    return wr->count + more <= wr->capacity || pairs_writer_grow(wr, more);
}
static inline void pairs_writer_push(pairs_writer *wr, uint32_t a, uint32_t b) {
    uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
    wr->keys[wr->count++] = lo << wr->shift | hi;
}
