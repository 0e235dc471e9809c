/* Brute force: object i against every object above it, 8 at a time with the SIMD box kernel,
 * then the exact shape test. Rows are cut into fixed jobs, independent of the thread count. */
#include "brute_force.h"

#include "overlap.h"
#include "parallel.h"
#include "method.h"

#include <math.h>
#include <string.h>

enum { ROWS_PER_JOB = 32 };

/* The method's state: the boxes as six columns by id, padded with sentinels for the SIMD
 * kernels, copied from the world's boxes at every update; and what the search's jobs read. */
typedef struct brute_ctx {
    const method_world *w;
    simd_boxes boxes;
    size_t n;
    float *flat;
    size_t flat_capacity; /* floats */
} brute_ctx;

static void brute_job(size_t job, int worker, void *p) {
    brute_ctx *ctx = p;
    const method_world *w = ctx->w;
    size_t n = ctx->n;
    /* Reserved for every worker before the search, so this never allocates. */
    uint32_t *hits = threads_scratch_get(w->scratch, worker, 2 * (n + SIMD_PAD) * sizeof(uint32_t));
    pairs_writer wr = pairs_writer_begin(w->pairs, worker);
    uint32_t *scratch = hits + n + SIMD_PAD;
    int dims = w->config->dimensions;
    size_t end = (job + 1) * ROWS_PER_JOB < n ? (job + 1) * ROWS_PER_JOB : n;
    for (size_t i = job * ROWS_PER_JOB; i < end; i++) {
        if (w->store->kind[i] == OBJECT_FREE) continue;
        const world_box *q = &w->store->box[i];
        size_t h = simd_box_vs_boxes(q->lo, q->hi, &ctx->boxes, i + 1, n, dims, hits);
        h = store_exact_filter(w->store, w->config->dimensions, (uint32_t)i, hits, h, hits,
                               scratch);
        if (w->store->static_count > 0 &&
            w->store->is_static[i]) { /* static-static pairs are not reported */
            size_t kept = 0;
            for (size_t k = 0; k < h; k++) {
                hits[kept] = hits[k];
                kept += !w->store->is_static[hits[k]];
            }
            h = kept;
        }
        pairs_writer_push_row(&wr, (uint32_t)i, hits, h);
    }
}

/* The boxes as six columns by id with SIMD_PAD sentinels after the last, for the kernels. */
static bool flatten(const method_world *w, brute_ctx *c, simd_boxes *out) {
    size_t stride = w->store->id_end + SIMD_PAD;
    if (!heap_grow(w->heap, (void **)&c->flat, &c->flat_capacity, 6 * stride, sizeof(float), 0))
        return false;
    for (int k = 0; k < 3; k++) {
        float *lo = c->flat + (size_t)k * stride, *hi = c->flat + (size_t)(3 + k) * stride;
        for (size_t i = 0; i < w->store->id_end; i++) {
            lo[i] = w->store->box[i].lo[k];
            hi[i] = w->store->box[i].hi[k];
        }
        for (size_t i = w->store->id_end; i < stride; i++) {
            lo[i] = INFINITY;
            hi[i] = -INFINITY;
        }
        out->min[k] = lo;
        out->max[k] = hi;
    }
    return true;
}

static broadphase_status update(const method_world *w, void **state) {
    if (!*state) {
        brute_ctx *c = heap_alloc(w->heap, sizeof(brute_ctx));
        if (!c) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        memset(c, 0, sizeof *c);
        *state = c;
    }
    brute_ctx *c = *state;
    c->w = w;
    c->n = w->store->id_end;
    return flatten(w, c, &c->boxes) ? BROADPHASE_OK : BROADPHASE_ERROR_OUT_OF_MEMORY;
}

static broadphase_status plan_search(const method_world *w, void *state, method_search *out) {
    brute_ctx *c = state;
    if (!threads_scratch_reserve(w->scratch, w->workers)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < w->workers; i++)
        if (!threads_scratch_get(w->scratch, i, 2 * (c->n + SIMD_PAD) * sizeof(uint32_t)))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
    *out = (method_search){(c->n + ROWS_PER_JOB - 1) / ROWS_PER_JOB, brute_job, c, NULL, NULL, 0};
    return BROADPHASE_OK;
}

static void destroy(const method_world *w, void *state) {
    brute_ctx *c = state;
    if (!c) return;
    heap_free(w->heap, c->flat, c->flat_capacity * sizeof(float));
    heap_free(w->heap, c, sizeof *c);
}

/* No structure: no figures, no levels, and the queries test every object. */
const method_table brute_force_method = {
    .id = BROADPHASE_METHOD_BRUTE_FORCE,
    .name = "brute_force",
    .leaf_size = 8,
    .uses_fields = false,
    .update = update,
    .plan_search = plan_search,
    .destroy = destroy,
};
