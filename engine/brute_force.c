/* Brute force: object i against every object above it, 8 at a time with the SIMD box kernel,
 * then the exact shape test. Rows are cut into fixed jobs, independent of the thread count. */
#include "clock.h"
#include "brute_force.h"

#include "overlap.h"
#include "parallel.h"
#include "world.h"

#include <math.h>

enum { ROWS_PER_JOB = 32 };

typedef struct brute_ctx {
    broadphase_world *w;
    simd_boxes boxes;
    size_t n;
} brute_ctx;

static void brute_job(size_t job, int worker, void *p) {
    brute_ctx *ctx = p;
    broadphase_world *w = ctx->w;
    size_t n = ctx->n;
    /* Reserved for every worker before the search, so this never allocates. */
    uint32_t *hits =
        threads_scratch_get(&w->scratch, worker, 2 * (n + SIMD_PAD) * sizeof(uint32_t));
    pairs_writer wr = pairs_writer_begin(&w->pairs, worker);
    uint32_t *scratch = hits + n + SIMD_PAD;
    int dims = w->config.dimensions;
    size_t end = (job + 1) * ROWS_PER_JOB < n ? (job + 1) * ROWS_PER_JOB : n;
    for (size_t i = job * ROWS_PER_JOB; i < end; i++) {
        if (w->kind[i] == OBJECT_FREE) continue;
        const world_box *q = &w->box[i];
        size_t h = simd_box_vs_boxes(q->lo, q->hi, &ctx->boxes, i + 1, n, dims, hits);
        h = world_exact_filter(w, (uint32_t)i, hits, h, hits, scratch);
        if (w->static_count > 0 && w->is_static[i]) { /* static-static pairs are not reported */
            size_t kept = 0;
            for (size_t k = 0; k < h; k++) {
                hits[kept] = hits[k];
                kept += !w->is_static[hits[k]];
            }
            h = kept;
        }
        pairs_writer_push_row(&wr, (uint32_t)i, hits, h);
    }
}

/* The boxes as six columns by id with SIMD_PAD sentinels after the last, for the kernels. */
static bool flatten(broadphase_world *w, simd_boxes *out) {
    size_t stride = w->id_end + SIMD_PAD;
    if (!heap_grow(&w->heap, (void **)&w->flat, &w->flat_capacity, 6 * stride, sizeof(float), 0))
        return false;
    for (int k = 0; k < 3; k++) {
        float *lo = w->flat + (size_t)k * stride, *hi = w->flat + (size_t)(3 + k) * stride;
        for (size_t i = 0; i < w->id_end; i++) {
            lo[i] = w->box[i].lo[k];
            hi[i] = w->box[i].hi[k];
        }
        for (size_t i = w->id_end; i < stride; i++) {
            lo[i] = INFINITY;
            hi[i] = -INFINITY;
        }
        out->min[k] = lo;
        out->max[k] = hi;
    }
    return true;
}

broadphase_status brute_force_step(broadphase_world *w) {
    double t0 = clock_now_ms();
    brute_ctx ctx = {.w = w, .n = w->id_end};
    if (!flatten(w, &ctx.boxes)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    size_t jobs = (ctx.n + ROWS_PER_JOB - 1) / ROWS_PER_JOB;
    if (!threads_scratch_reserve(&w->scratch, w->workers)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < w->workers; i++)
        if (!threads_scratch_get(&w->scratch, i, 2 * (ctx.n + SIMD_PAD) * sizeof(uint32_t)))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
    pairs_result r = PAIRS_RETRY;
    double t1 = t0;
    for (bool grow = false; r == PAIRS_RETRY; grow = true) {
        if (!pairs_prepare(w, grow)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        threads_for_chunks(w->workers, jobs, brute_job, &ctx);
        t1 = clock_now_ms();
        r = pairs_finish(w);
    }
    if (r != PAIRS_DONE) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    w->stats.update_ms = 0.0;
    w->stats.search_ms = t1 - t0;
    w->stats.output_ms = clock_now_ms() - t1;
    return BROADPHASE_OK;
}
