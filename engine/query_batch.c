/* The batched queries (broadphase_query_boxes, _spheres, broadphase_raycasts, _closest,
 * broadphase_nearest_many, _within): checked whole first, run over the workers in fixed chunks (in
 * Morton order when there are many), each worker's results in its own buffer, then copied out in
 * query order, so that the output is the same for every thread count. */
#include "bits.h"
#include "method.h"
#include "query_internal.h"
#include "tree.h"
#include "world.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "parallel.h"

/* ---- batches ----------------------------------------------------------------------------- */

enum { CHECK_CHUNK = 4096 }; /* queries per chunk of the check and of the Morton keys */

typedef enum batch_kind {
    BATCH_BOXES,
    BATCH_SPHERES,
    BATCH_RAYS,
    BATCH_CLOSEST,
    BATCH_NEAREST
} batch_kind;

typedef struct batch_worker {
    _Alignas(64) query_buf buf;
    size_t used;
    float *d2; /* nearest without dist2_out: k floats */
    bool failed;
    query_group group; /* GROUP consecutive queries' shared objects (query_group.c) */
    query group_q[GROUP];
    size_t group_start, group_end; /* the group's queries: ordered positions [start, end) */
    bool grouped;                  /* they run from the group */
} batch_worker;

typedef struct batch {
    const broadphase_world *w;
    batch_kind kind;
    const void *input;
    size_t count, k;
    float max_distance; /* nearest */
    size_t chunks;      /* of BATCH_CHUNK queries */
    size_t *offsets;    /* rows: counts, then their exclusive scan */
    size_t *chunk_start;
    int *chunk_worker;
    batch_worker *workers;
    void *dst; /* rows: the caller's ids or hits */
    broadphase_ray_hit *closest;
    uint32_t *near_ids;
    float *near_d2;
    size_t *near_counts;
    uint32_t *order; /* the queries in space-filling-curve order (NULL: as given) */
    bool group;      /* runs of GROUP queries share a walk (query_group.c) */
} batch;

/* Query i of the batch; the input was checked. */
static broadphase_status batch_query(const batch *b, size_t i, query *q) {
    int dims = b->w->config.dimensions;
    if (b->kind == BATCH_BOXES) {
        const broadphase_boxes *x = b->input;
        float lo[3] = {x->min_x[i], x->min_y[i], dims == 3 ? x->min_z[i] : 0.0f};
        float hi[3] = {x->max_x[i], x->max_y[i], dims == 3 ? x->max_z[i] : 0.0f};
        return query_make_box(q, dims, lo, hi, false);
    }
    if (b->kind == BATCH_SPHERES) {
        const broadphase_spheres *x = b->input;
        float c[3] = {x->x[i], x->y[i], dims == 3 ? x->z[i] : 0.0f};
        return query_make_sphere(q, dims, c, x->radius[i]);
    }
    if (b->kind == BATCH_NEAREST) {
        const broadphase_points *x = b->input;
        float p[3] = {x->x[i], x->y[i], dims == 3 ? x->z[i] : 0.0f};
        return query_make_nearest(q, dims, p, b->k, b->max_distance);
    }
    const broadphase_rays *x = b->input;
    float o[3] = {x->origin_x[i], x->origin_y[i], dims == 3 ? x->origin_z[i] : 0.0f};
    float d[3] = {x->dir_x[i], x->dir_y[i], dims == 3 ? x->dir_z[i] : 0.0f};
    return query_make_ray(q, b->w, o, d, x->max_t[i], b->kind == BATCH_CLOSEST);
}

/* Where query i of the batch is: a box's or ball's centre, a ray's origin, a point. */
static void batch_anchor(const batch *b, size_t i, float p[3]) {
    const float *col[3];
    float half = 0.5f;
    if (b->kind == BATCH_BOXES) {
        const broadphase_boxes *x = b->input;
        const float *lo[3] = {x->min_x, x->min_y, x->min_z},
                    *hi[3] = {x->max_x, x->max_y, x->max_z};
        for (int k = 0; k < 3; k++)
            p[k] = k < b->w->config.dimensions ? half * lo[k][i] + half * hi[k][i] : 0.0f;
        return;
    }
    if (b->kind == BATCH_SPHERES) {
        const broadphase_spheres *x = b->input;
        col[0] = x->x, col[1] = x->y, col[2] = x->z;
    } else if (b->kind == BATCH_NEAREST) {
        const broadphase_points *x = b->input;
        col[0] = x->x, col[1] = x->y, col[2] = x->z;
    } else {
        const broadphase_rays *x = b->input;
        col[0] = x->origin_x, col[1] = x->origin_y, col[2] = x->origin_z;
    }
    for (int k = 0; k < 3; k++) p[k] = k < b->w->config.dimensions ? col[k][i] : 0.0f;
}

/* Queries near each other in space read the same nodes and objects: a batch runs them in Morton
 * order of their anchors over the anchors' bounding box, so that one query finds in cache what
 * the one before it loaded. Results go to each query's own place, so the order changes nothing
 * but speed. The bounds and the keys are made in chunks over the workers. False on out of
 * memory. */
typedef struct batch_keys {
    const batch *b;
    uint64_t *keys;
    float *bounds; /* per chunk: lo[3], hi[3] */
    float lo[3];
    double scale[3], cells;
    int bits;
} batch_keys;

static void anchor_bounds(size_t c, int worker, void *p) {
    (void)worker;
    batch_keys *x = p;
    const batch *b = x->b;
    int dims = b->w->config.dimensions;
    size_t end = (c + 1) * CHECK_CHUNK < b->count ? (c + 1) * CHECK_CHUNK : b->count;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = c * CHECK_CHUNK; i < end; i++) {
        float q[3];
        batch_anchor(b, i, q);
        for (int k = 0; k < dims; k++) {
            lo[k] = fminf(lo[k], q[k]);
            hi[k] = fmaxf(hi[k], q[k]);
        }
    }
    memcpy(x->bounds + 6 * c, lo, sizeof lo);
    memcpy(x->bounds + 6 * c + 3, hi, sizeof hi);
}

static void anchor_keys(size_t c, int worker, void *p) {
    (void)worker;
    batch_keys *x = p;
    const batch *b = x->b;
    int dims = b->w->config.dimensions;
    size_t end = (c + 1) * CHECK_CHUNK < b->count ? (c + 1) * CHECK_CHUNK : b->count;
    for (size_t i = c * CHECK_CHUNK; i < end; i++) {
        float q[3];
        batch_anchor(b, i, q);
        uint64_t cell[3] = {0, 0, 0};
        for (int k = 0; k < dims; k++) {
            double u = ((double)q[k] - (double)x->lo[k]) * x->scale[k];
            cell[k] = u < x->cells ? (uint64_t)u : (uint64_t)x->cells;
        }
        x->keys[i] = dims == 3 ? bits_spread3(cell[0]) | bits_spread3(cell[1]) << 1 |
                                     bits_spread3(cell[2]) << 2
                               : bits_spread2(cell[0]) | bits_spread2(cell[1]) << 1;
        b->order[i] = (uint32_t)i;
    }
}

static bool batch_order(batch *b, int workers) {
    if (b->count < ORDER_MIN || b->count > UINT32_MAX) return true;
    int dims = b->w->config.dimensions;
    heap *h = world_heap(b->w);
    size_t n = b->count, hist_bytes = threads_radix_scratch_size(workers);
    size_t chunks = (n + CHECK_CHUNK - 1) / CHECK_CHUNK;
    uint64_t *keys = heap_alloc(h, n * sizeof *keys), *tmp = heap_alloc(h, n * sizeof *tmp);
    uint32_t *tmp_order = heap_alloc(h, n * sizeof *tmp_order);
    void *hist = heap_alloc(h, hist_bytes);
    float *bounds = heap_alloc(h, 6 * chunks * sizeof *bounds);
    b->order = heap_alloc(h, n * sizeof *b->order);
    bool ok = keys && tmp && tmp_order && hist && bounds && b->order;
    if (ok) {
        batch_keys x = {.b = b, .keys = keys, .bounds = bounds};
        threads_for_chunks(workers, chunks, anchor_bounds, &x);
        float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
        for (size_t c = 0; c < chunks; c++)
            for (int k = 0; k < dims; k++) {
                lo[k] = fminf(lo[k], bounds[6 * c + (size_t)k]);
                hi[k] = fmaxf(hi[k], bounds[6 * c + 3 + (size_t)k]);
            }
        x.bits = dims == 3 ? 10 : 15;
        x.cells = (double)((1u << x.bits) - 1);
        for (int k = 0; k < 3; k++) {
            x.lo[k] = lo[k];
            x.scale[k] = 0.0;
        }
        for (int k = 0; k < dims; k++) {
            double span = (double)hi[k] - (double)lo[k]; /* finite: the input was checked */
            x.scale[k] = span > 0.0 ? x.cells / span : 0.0;
        }
        threads_for_chunks(workers, chunks, anchor_keys, &x);
        threads_radix_sort_pairs(workers, keys, b->order, tmp, tmp_order, b->count,
                                 3 * x.bits - (dims == 2 ? x.bits : 0), hist);
    }
    heap_free(h, keys, n * sizeof *keys);
    heap_free(h, tmp, n * sizeof *tmp);
    heap_free(h, tmp_order, n * sizeof *tmp_order);
    heap_free(h, hist, hist_bytes);
    heap_free(h, bounds, 6 * chunks * sizeof *bounds);
    return ok;
}

static bool batch_input_ok(const broadphase_world *w, batch_kind kind, const void *input) {
    bool z = w->config.dimensions == 3;
    switch (kind) {
    case BATCH_BOXES: {
        const broadphase_boxes *x = input;
        return x->min_x && x->min_y && x->max_x && x->max_y && (!z || (x->min_z && x->max_z));
    }
    case BATCH_SPHERES: {
        const broadphase_spheres *x = input;
        return x->x && x->y && x->radius && (!z || x->z);
    }
    case BATCH_NEAREST: {
        const broadphase_points *x = input;
        return x->x && x->y && (!z || x->z);
    }
    default: {
        const broadphase_rays *x = input;
        return x->origin_x && x->origin_y && x->dir_x && x->dir_y && x->max_t &&
               (!z || (x->origin_z && x->dir_z));
    }
    }
}

/* Every query of the batch is checked before any runs: the first bad one is named. In chunks
 * over the workers, each chunk's first bad query noted, then the first of those (a serial
 * check of 1e5 queries held the second worker idle for a tenth of a crowd's batch). */
typedef struct batch_checking {
    const batch *b;
    size_t *first;             /* per chunk: its first bad query, or SIZE_MAX */
    broadphase_status *status; /* and why */
} batch_checking;

static void check_chunk(size_t c, int worker, void *p) {
    (void)worker;
    batch_checking *x = p;
    size_t end = (c + 1) * CHECK_CHUNK < x->b->count ? (c + 1) * CHECK_CHUNK : x->b->count;
    x->first[c] = SIZE_MAX;
    for (size_t i = c * CHECK_CHUNK; i < end; i++) {
        query q;
        broadphase_status s = batch_query(x->b, i, &q);
        if (s != BROADPHASE_OK) {
            x->first[c] = i;
            x->status[c] = s;
            return;
        }
    }
}

static broadphase_status batch_check(const batch *b, size_t *bad) {
    *bad = SIZE_MAX;
    heap *h = world_heap(b->w);
    size_t chunks = (b->count + CHECK_CHUNK - 1) / CHECK_CHUNK;
    batch_checking x = {b, NULL, NULL};
    if (chunks > 1) {
        x.first = heap_alloc(h, chunks * sizeof *x.first);
        x.status = heap_alloc(h, chunks * sizeof *x.status);
    }
    broadphase_status s = BROADPHASE_OK;
    if (x.first && x.status) {
        team_apply(&b->w->team);
        threads_for_chunks(b->w->workers, chunks, check_chunk, &x);
        team_release();
        for (size_t c = 0; c < chunks && s == BROADPHASE_OK; c++)
            if (x.first[c] != SIZE_MAX) {
                *bad = x.first[c];
                s = x.status[c];
            }
    } else { /* one chunk, or no room for the chunks' notes: in order, here */
        for (size_t i = 0; i < b->count && s == BROADPHASE_OK; i++) {
            query q;
            s = batch_query(b, i, &q);
            if (s != BROADPHASE_OK) *bad = i;
        }
    }
    heap_free(h, x.first, chunks * sizeof *x.first);
    heap_free(h, x.status, chunks * sizeof *x.status);
    return s;
}

/* The query at ordered position j of [.., end), made: from its group when the batch groups (the
 * GROUP positions from j are made and their objects gathered when j reaches them; a group whose
 * objects are too many to share runs its queries alone), else into *alone. */
static const query *batch_make(batch *b, batch_worker *k, size_t j, size_t end, query *alone) {
    if (b->group && j >= k->group_end) {
        size_t n = end - j < GROUP ? end - j : GROUP;
        bool all = true;
        for (size_t x = 0; x < n; x++) {
            batch_query(b, b->order[j + x], &k->group_q[x]);
            all = all && query_groupable(&k->group_q[x]);
        }
        k->group_start = j;
        k->group_end = j + n;
        k->grouped = all && query_group_gather(b->w, &k->group, k->group_q, n, GROUP_MOST * n);
    }
    if (b->group) return &k->group_q[j - k->group_start];
    batch_query(b, b->order ? b->order[j] : j, alone);
    return alone;
}

/* Runs it, from the group's objects or alone. */
static void batch_run_one(batch *b, batch_worker *k, const query *q, query_out *o) {
    if (k->group.failed) {
        o->failed = true;
        return;
    }
    if (b->group && k->grouped)
        query_group_one(b->w, &k->group, q, o);
    else
        query_run(b->w, q, o);
}

static void batch_rows_chunk(size_t c, int worker, void *p) {
    batch *b = p;
    batch_worker *k = &b->workers[worker];
    b->chunk_start[c] = k->used;
    b->chunk_worker[c] = worker;
    size_t end = (c + 1) * BATCH_CHUNK < b->count ? (c + 1) * BATCH_CHUNK : b->count;
    k->group_end = 0; /* groups start at the chunk's first query */
    for (size_t j = c * BATCH_CHUNK; j < end && !k->failed; j++) {
        size_t i = b->order ? b->order[j] : j;
        query alone;
        const query *q = batch_make(b, k, j, end, &alone);
        query_out o;
        query_out_init(&o, &k->buf);
        o.base = k->used;
        batch_run_one(b, k, q, &o);
        if (o.failed) {
            k->failed = true;
            return;
        }
        if (o.count > 0) {
            void *row = (char *)k->buf.data + o.base * k->buf.elem;
            if (b->kind == BATCH_RAYS)
                query_sort_hits(row, o.count);
            else
                query_sort_ids(row, o.count);
        }
        k->used += o.count;
        b->offsets[i] = o.count;
    }
}

/* A chunk's rows, from its worker's buffer (in the order they ran) to their places. */
static void batch_copy_chunk(size_t c, int worker, void *p) {
    (void)worker;
    batch *b = p;
    size_t first = c * BATCH_CHUNK,
           end = first + BATCH_CHUNK < b->count ? first + BATCH_CHUNK : b->count;
    const batch_worker *k = &b->workers[b->chunk_worker[c]];
    size_t elem = k->buf.elem;
    if (!k->buf.data) return; /* its worker found nothing at all (no offset from NULL) */
    const char *src = (const char *)k->buf.data + b->chunk_start[c] * elem;
    if (!b->order) {
        size_t n = b->offsets[end] - b->offsets[first];
        if (n) memcpy((char *)b->dst + b->offsets[first] * elem, src, n * elem);
        return;
    }
    for (size_t j = first; j < end; j++) {
        size_t i = b->order[j], n = b->offsets[i + 1] - b->offsets[i];
        if (n) memcpy((char *)b->dst + b->offsets[i] * elem, src, n * elem);
        src += n * elem;
    }
}

static void batch_fixed_range(size_t begin, size_t end, int worker, void *p) {
    batch *b = p;
    batch_worker *k = &b->workers[worker];
    k->group_end = begin;
    for (size_t j = begin; j < end && !k->failed; j++) {
        size_t i = b->order ? b->order[j] : j;
        query alone;
        const query *q = batch_make(b, k, j, end, &alone);
        query_buf none = {NULL, 0, sizeof(uint32_t), false, world_heap(b->w)};
        query_out o;
        query_out_init(&o, &none);
        if (b->kind == BATCH_NEAREST) {
            o.heap_id = b->near_ids + i * b->k;
            o.heap_d2 = b->near_d2 ? b->near_d2 + i * b->k : k->d2;
        }
        batch_run_one(b, k, q, &o);
        if (o.failed) {
            k->failed = true;
            return;
        }
        if (b->kind == BATCH_NEAREST) {
            query_finish_nearest(q, &o);
            b->near_counts[i] = o.heap_n;
        } else {
            b->closest[i] = o.best;
        }
    }
}

static void batch_release(batch *b, int workers) {
    heap *h = world_heap(b->w);
    if (b->workers)
        for (int i = 0; i < workers; i++) {
            query_buf_release(&b->workers[i].buf);
            query_group_release(&b->workers[i].group);
            heap_free(h, b->workers[i].d2, b->k * sizeof(float));
        }
    heap_free(h, b->workers, (size_t)workers * sizeof *b->workers);
    heap_free(h, b->chunk_start, (b->chunks + 1) * sizeof(size_t));
    heap_free(h, b->chunk_worker, (b->chunks + 1) * sizeof(int));
    heap_free(h, b->order, b->count * sizeof *b->order);
}

/* Runs a batch; rows: into dst (elements of `elem` bytes) by the offsets protocol. */
static broadphase_status batch_run_on_team(batch *b, size_t elem, size_t capacity, size_t *total);

/* A batch runs on the threads the last step ran on (team.h). */
static broadphase_status batch_run(batch *b, size_t elem, size_t capacity, size_t *total) {
    team_apply(&b->w->team);
    broadphase_status s = batch_run_on_team(b, elem, capacity, total);
    team_release();
    return s;
}

static broadphase_status batch_run_on_team(batch *b, size_t elem, size_t capacity, size_t *total) {
    const broadphase_world *w = b->w;
    int workers = w->workers;
    size_t chunks = (b->count + BATCH_CHUNK - 1) / BATCH_CHUNK;
    bool rows = b->kind == BATCH_BOXES || b->kind == BATCH_SPHERES || b->kind == BATCH_RAYS;
    broadphase_status s = BROADPHASE_OK;
    if (!query_sync(w)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    heap *h = world_heap(w);
    b->chunks = chunks;
    /* one cache line each at least (sizeof is a multiple of the 64-byte alignment) */
    b->workers = heap_alloc(h, (size_t)workers * sizeof *b->workers);
    if (b->workers) memset(b->workers, 0, (size_t)workers * sizeof *b->workers);
    if (rows) {
        b->chunk_start = heap_alloc(h, (chunks + 1) * sizeof(size_t));
        b->chunk_worker = heap_alloc(h, (chunks + 1) * sizeof(int));
    }
    bool ok =
        b->workers && (!rows || (b->chunk_start && b->chunk_worker)) && batch_order(b, workers);
    /* Queries in Morton order share walks, a group at a time; boxes, balls and bounded
     * nearest searches only (the others' regions are not known before they run). */
    b->group = b->order && (b->kind == BATCH_BOXES || b->kind == BATCH_SPHERES ||
                            (b->kind == BATCH_NEAREST && b->max_distance < INFINITY));
    for (int i = 0; ok && i < workers; i++) {
        b->workers[i].buf.elem = elem;
        b->workers[i].buf.heap = h;
        b->workers[i].group.heap = h;
        if (b->kind == BATCH_NEAREST && !b->near_d2 && b->k > 0) {
            b->workers[i].d2 = heap_alloc(h, b->k * sizeof(float));
            ok = b->workers[i].d2 != NULL;
        }
    }
    if (!ok) {
        batch_release(b, workers);
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    }
    if (!rows) {
        if (b->kind != BATCH_NEAREST || b->k > 0)
            threads_for_ranges(workers, b->count, BATCH_CHUNK, batch_fixed_range, b);
        for (int i = 0; i < workers; i++)
            if (b->workers[i].failed) s = BROADPHASE_ERROR_OUT_OF_MEMORY;
        batch_release(b, workers);
        return s;
    }
    threads_for_chunks(workers, chunks, batch_rows_chunk, b);
    for (int i = 0; i < workers; i++)
        if (b->workers[i].failed) s = BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (s == BROADPHASE_OK) {
        b->offsets[b->count] = 0;
        *total = threads_exclusive_scan(workers, b->offsets, b->count + 1);
        if (*total > capacity)
            s = BROADPHASE_ERROR_BUFFER_TOO_SMALL;
        else
            threads_for_chunks(workers, chunks, batch_copy_chunk, b);
    }
    batch_release(b, workers);
    return s;
}

/* A batch with results in rows (ids or ray hits): the checks, then the run. */
static broadphase_status rows_batch(const broadphase_world *w, batch_kind kind, size_t count,
                                    const void *input, size_t *offsets, void *dst, size_t elem,
                                    size_t capacity, size_t *total, size_t *bad_index) {
    *bad_index = SIZE_MAX;
    *total = 0;
    if (!offsets || (!dst && capacity > 0) || count > BROADPHASE_MAX_BATCH ||
        (count > 0 && !input) || (count > 0 && !batch_input_ok(w, kind, input)))
        return BROADPHASE_ERROR_INVALID_ARGUMENT;
    batch b = {
        .w = w, .kind = kind, .input = input, .count = count, .offsets = offsets, .dst = dst};
    broadphase_status s = batch_check(&b, bad_index);
    return s == BROADPHASE_OK ? batch_run(&b, elem, capacity, total) : s;
}

static broadphase_status id_rows(const broadphase_world *w, batch_kind kind, size_t count,
                                 const void *input, broadphase_id_rows *rows) {
    broadphase_status s = query_check_world(w);
    if (s != BROADPHASE_OK) return s;
    if (!rows) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    return rows_batch(w, kind, count, input, rows->offsets, rows->ids, sizeof(uint32_t),
                      rows->capacity, &rows->total, &rows->bad_index);
}

broadphase_status broadphase_query_boxes(const broadphase_world *w, size_t count,
                                         const broadphase_boxes *boxes, broadphase_id_rows *rows) {
    return id_rows(w, BATCH_BOXES, count, boxes, rows);
}

broadphase_status broadphase_query_spheres(const broadphase_world *w, size_t count,
                                           const broadphase_spheres *spheres,
                                           broadphase_id_rows *rows) {
    return id_rows(w, BATCH_SPHERES, count, spheres, rows);
}

broadphase_status broadphase_raycasts(const broadphase_world *w, size_t count,
                                      const broadphase_rays *rays, broadphase_hit_rows *rows) {
    broadphase_status s = query_check_world(w);
    if (s != BROADPHASE_OK) return s;
    if (!rows) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    return rows_batch(w, BATCH_RAYS, count, rays, rows->offsets, rows->hits,
                      sizeof(broadphase_ray_hit), rows->capacity, &rows->total, &rows->bad_index);
}

broadphase_status broadphase_raycasts_closest(const broadphase_world *w, size_t count,
                                              const broadphase_rays *rays,
                                              broadphase_ray_hit *hits_out, size_t *bad_index_out) {
    broadphase_status s = query_check_world(w);
    if (s != BROADPHASE_OK) return s;
    size_t bad = SIZE_MAX;
    if (count > 0 && (!rays || !hits_out || count > BROADPHASE_MAX_BATCH ||
                      !batch_input_ok(w, BATCH_CLOSEST, rays))) {
        s = BROADPHASE_ERROR_INVALID_ARGUMENT;
    } else {
        batch b = {
            .w = w, .kind = BATCH_CLOSEST, .input = rays, .count = count, .closest = hits_out};
        s = batch_check(&b, &bad);
        if (s == BROADPHASE_OK) s = batch_run(&b, sizeof(broadphase_ray_hit), 0, NULL);
    }
    if (bad_index_out) *bad_index_out = bad;
    return s;
}

broadphase_status broadphase_nearest_many(const broadphase_world *w, size_t count,
                                          const broadphase_points *points, size_t k,
                                          uint32_t *ids_out, float *dist2_out, size_t *counts_out,
                                          size_t *bad_index_out) {
    return broadphase_nearest_many_within(w, count, points, k, INFINITY, ids_out, dist2_out,
                                          counts_out, bad_index_out);
}

broadphase_status broadphase_nearest_many_within(const broadphase_world *w, size_t count,
                                                 const broadphase_points *points, size_t k,
                                                 float max_distance, uint32_t *ids_out,
                                                 float *dist2_out, size_t *counts_out,
                                                 size_t *bad_index_out) {
    broadphase_status s = query_check_world(w);
    if (s != BROADPHASE_OK) return s;
    size_t bad = SIZE_MAX;
    if (count > 0 &&
        (!points || !counts_out || (k > 0 && !ids_out) || count > BROADPHASE_MAX_BATCH ||
         (k > 0 && k > SIZE_MAX / 4 / count) || !batch_input_ok(w, BATCH_NEAREST, points))) {
        s = BROADPHASE_ERROR_INVALID_ARGUMENT;
    } else if (isnan(max_distance) || max_distance < 0.0f) {
        /* the call's own argument: no query is named */
        s = isnan(max_distance) ? BROADPHASE_ERROR_NONFINITE : BROADPHASE_ERROR_NEGATIVE_RADIUS;
    } else {
        batch b = {.w = w,
                   .kind = BATCH_NEAREST,
                   .input = points,
                   .count = count,
                   .k = k,
                   .max_distance = max_distance,
                   .near_ids = ids_out,
                   .near_d2 = dist2_out,
                   .near_counts = counts_out};
        s = batch_check(&b, &bad);
        for (size_t i = 0; s == BROADPHASE_OK && k == 0 && i < count; i++) counts_out[i] = 0;
        if (s == BROADPHASE_OK) s = batch_run(&b, sizeof(uint32_t), 0, NULL);
    }
    if (bad_index_out) *bad_index_out = bad;
    return s;
}
