/* Brute force: object i against every object above it, 8 at a time with the SIMD box kernel,
 * then the exact shape test. Rows are cut into fixed jobs, independent of the thread count. */
#include "brute_force.h"

#include "overlap.h"
#include "parallel.h"
#include "world.h"

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
        float qmin[3] = {w->min[0][i], w->min[1][i], w->min[2][i]};
        float qmax[3] = {w->max[0][i], w->max[1][i], w->max[2][i]};
        size_t h = simd_box_vs_boxes(qmin, qmax, &ctx->boxes, i + 1, n, dims, hits);
        h = world_exact_filter(w, (uint32_t)i, hits, h, hits, scratch);
        if (!pairs_writer_reserve(&wr, h)) break;
        for (size_t k = 0; k < h; k++) pairs_writer_push(&wr, (uint32_t)i, hits[k]);
    }
    pairs_writer_end(&wr);
}

broadphase_status brute_force_step(broadphase_world *w) {
    double t0 = world_now_ms();
    brute_ctx ctx = {.w = w, .n = w->id_end};
    world_box_columns(w, &ctx.boxes);
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
        t1 = world_now_ms();
        r = pairs_finish(w);
    }
    if (r != PAIRS_DONE) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    w->stats.update_ms = 0.0;
    w->stats.search_ms = t1 - t0;
    w->stats.output_ms = world_now_ms() - t1;
    return BROADPHASE_OK;
}
