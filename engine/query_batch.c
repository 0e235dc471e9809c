/* The batched queries (broadphase_query_boxes, _spheres, broadphase_raycasts, _closest,
 * broadphase_nearest_many, _within): checked whole first, run over the workers in fixed chunks (in
 * Morton order when there are many), each worker's results in its own buffer, then copied out in
 * query order, so that the output is the same for every thread count. */
#include "bits.h"
#include "method.h"
#include "neighbourhoods.h"
#include "query_internal.h"
#include "tree.h"
#include "world.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "parallel.h"

/* ---- batches ----------------------------------------------------------------------------- */

enum {
    CHECK_CHUNK = 4096, /* queries per chunk of the check and of the Morton keys */
    STAGE_ROWS = 32     /* nearest rows a worker holds before it copies them out */
};

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
    /* Nearest: the rows of the last few searches (STAGE_ROWS of k ids and k distances), copied
     * to their places together (see batch_fixed_range); rows[] their queries, counts[] theirs. */
    uint32_t *stage_id;
    float *stage_d2;
    size_t stage_cap; /* entries of each */
    size_t staged;
    size_t rows[STAGE_ROWS], counts[STAGE_ROWS];
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
    uint32_t *order;         /* the queries in space-filling-curve order (NULL: as given) */
    bool group;              /* runs of GROUP queries share a walk (query_group.c) */
    query_batch_memory *mem; /* the working memory: the world's (kept) or the call's own */
    bool kept;
    bool no_grid; /* a nearest batch goes through the method's structures (near_grid) */
} batch;

/* ---- working memory ------------------------------------------------------------------------ */

/* What each slot of a query_batch_memory holds. */
enum {
    SLOT_WORKERS,     /* batch_worker records */
    SLOT_CHUNK_START, /* rows: where each chunk's rows start in its worker's buffer */
    SLOT_CHUNK_WORKER,
    SLOT_ORDER, /* the Morton order and the sort's keys and scratch */
    SLOT_KEYS,
    SLOT_TMP,
    SLOT_TMP_ORDER,
    SLOT_HIST,
    SLOT_BOUNDS,
    SLOT_FIRST, /* the check's chunks: first bad query, and why */
    SLOT_STATUS,
    SLOT_GRID, /* a nearest batch's grid of centres (a neighbourhoods_state) */
    SLOTS
};
_Static_assert((int)SLOTS == (int)QUERY_BATCH_SLOTS, "one slot each");
_Static_assert(BATCH_BOXES == 0 && BATCH_SPHERES == 1 && BATCH_RAYS == 2, "last_bytes' kinds");

/* At least `bytes` in the slot (what it held is not kept); NULL on out of memory, with the slot
 * empty. Grows by half again, so that batches that grow a little each frame settle. */
static void *memory_get(query_batch_memory *m, heap *h, int slot, size_t bytes) {
    if (m->at[slot] && m->bytes[slot] >= bytes) return m->at[slot];
    size_t more = m->bytes[slot] + m->bytes[slot] / 2;
    size_t want = bytes > more ? bytes : more;
    heap_free(h, m->at[slot], m->bytes[slot]);
    m->at[slot] = heap_alloc(h, want);
    m->bytes[slot] = m->at[slot] ? want : 0;
    return m->at[slot];
}

static void workers_release(query_batch_memory *m, heap *h) {
    batch_worker *k = m->at[SLOT_WORKERS];
    for (int i = 0; i < m->workers; i++) {
        query_buf_release(&k[i].buf);
        query_group_release(&k[i].group);
        heap_free(h, k[i].stage_id, k[i].stage_cap * sizeof(uint32_t));
        heap_free(h, k[i].stage_d2, k[i].stage_cap * sizeof(float));
    }
    m->workers = 0;
}

void query_batch_memory_release(query_batch_memory *m, heap *h) {
    workers_release(m, h);
    if (m->at[SLOT_GRID]) neighbourhoods_release(m->at[SLOT_GRID], h);
    for (int i = 0; i < SLOTS; i++) heap_free(h, m->at[i], m->bytes[i]);
    memset(m, 0, sizeof *m);
}

/* The world's working memory when no other batch holds it, else a fresh one of the call's own. */
static void batch_claim(batch *b, query_batch_memory *own) {
    query_state *s = (query_state *)&b->w->query;
    int idle = 0;
    b->kept = __atomic_compare_exchange_n(&s->batch_busy, &idle, 1, false, __ATOMIC_ACQUIRE,
                                          __ATOMIC_RELAXED);
    memset(own, 0, sizeof *own);
    b->mem = b->kept ? &s->batch_memory : own;
}

static void batch_give_back(batch *b) {
    if (b->kept)
        __atomic_store_n(&((query_state *)&b->w->query)->batch_busy, 0, __ATOMIC_RELEASE);
    else
        query_batch_memory_release(b->mem, world_heap(b->w));
}

/* `workers` records, made or reused, each ready for a run whose results are `elem` bytes: what a
 * record holds (its result buffer, its group's columns) is kept from batch to batch. A result
 * buffer that must grow grows to `floor` elements at least. */
static batch_worker *batch_workers(batch *b, int workers, size_t elem, size_t floor) {
    query_batch_memory *m = b->mem;
    heap *h = world_heap(b->w);
    if (m->workers < workers) {
        workers_release(m, h);
        batch_worker *k = memory_get(m, h, SLOT_WORKERS, (size_t)workers * sizeof *k);
        if (!k) return NULL;
        memset(k, 0, (size_t)workers * sizeof *k);
        m->workers = workers;
    }
    batch_worker *k = m->at[SLOT_WORKERS];
    for (int i = 0; i < workers; i++) {
        if (k[i].buf.elem != elem) { /* the capacity counts elements of the last batch */
            size_t bytes = k[i].buf.capacity * k[i].buf.elem;
            if (k[i].buf.elem && bytes % elem == 0) {
                k[i].buf.capacity = bytes / elem;
            } else {
                query_buf_release(&k[i].buf);
                k[i].buf = (query_buf){NULL, 0, elem, false, h, 0};
            }
            k[i].buf.elem = elem;
        }
        k[i].buf.heap = h;
        k[i].buf.floor = floor;
        k[i].group.heap = h;
        k[i].group.failed = false;
        k[i].group.count = 0;
        k[i].used = 0;
        k[i].failed = false;
        k[i].group_start = k[i].group_end = 0;
        k[i].grouped = false;
    }
    return k;
}

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
    query_batch_memory *m = b->mem;
    uint64_t *keys = memory_get(m, h, SLOT_KEYS, n * sizeof *keys);
    uint64_t *tmp = memory_get(m, h, SLOT_TMP, n * sizeof *tmp);
    uint32_t *tmp_order = memory_get(m, h, SLOT_TMP_ORDER, n * sizeof *tmp_order);
    void *hist = memory_get(m, h, SLOT_HIST, hist_bytes);
    float *bounds = memory_get(m, h, SLOT_BOUNDS, 6 * chunks * sizeof *bounds);
    b->order = memory_get(m, h, SLOT_ORDER, n * sizeof *b->order);
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
        x.first = memory_get(b->mem, h, SLOT_FIRST, chunks * sizeof *x.first);
        x.status = memory_get(b->mem, h, SLOT_STATUS, chunks * sizeof *x.status);
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

/* The worker's staged nearest rows, to their places. The searches run in Morton order, so each
 * row's place is far from the last one's: written as each search ends, every store missed the
 * cache and held up the next search's work behind it (a third of a crowd's search); copied out
 * together, the misses overlap. */
static void stage_flush(batch *b, batch_worker *k) {
    size_t kk = b->k;
    for (size_t r = 0; r < k->staged; r++) {
        size_t i = k->rows[r], n = k->counts[r];
        memcpy(b->near_ids + i * kk, k->stage_id + r * kk, n * sizeof(uint32_t));
        if (b->near_d2) memcpy(b->near_d2 + i * kk, k->stage_d2 + r * kk, n * sizeof(float));
        b->near_counts[i] = n;
    }
    k->staged = 0;
}

static void batch_fixed_range(size_t begin, size_t end, int worker, void *p) {
    batch *b = p;
    batch_worker *k = &b->workers[worker];
    k->group_end = begin;
    for (size_t j = begin; j < end && !k->failed; j++) {
        size_t i = b->order ? b->order[j] : j;
        query alone;
        const query *q = batch_make(b, k, j, end, &alone);
        query_buf none = {NULL, 0, sizeof(uint32_t), false, world_heap(b->w), 0};
        query_out o;
        query_out_init(&o, &none);
        if (b->kind == BATCH_NEAREST) {
            o.heap_id = k->stage_id + k->staged * b->k;
            o.heap_d2 = k->stage_d2 + k->staged * b->k;
        }
        batch_run_one(b, k, q, &o);
        if (o.failed) {
            k->failed = true;
            return;
        }
        if (b->kind == BATCH_NEAREST) {
            query_finish_nearest(q, &o);
            k->rows[k->staged] = i;
            k->counts[k->staged++] = o.heap_n;
            if (k->staged == STAGE_ROWS) stage_flush(b, k);
        } else {
            b->closest[i] = o.best;
        }
    }
    if (b->kind == BATCH_NEAREST) stage_flush(b, k);
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
    /* A worker's share of the rows depends on which chunks it was free for, so a buffer may
     * have to grow in any batch: to a quarter more than the last such batch's whole, beyond
     * which no share of a batch like it can go (a doubling from a small share could need
     * several). */
    size_t floor = 0;
    if (rows) {
        floor = b->mem->last_bytes[b->kind] / elem;
        floor += floor / 4;
    }
    b->workers = batch_workers(b, workers, elem, floor);
    if (rows) {
        b->chunk_start = memory_get(b->mem, h, SLOT_CHUNK_START, (chunks + 1) * sizeof(size_t));
        b->chunk_worker = memory_get(b->mem, h, SLOT_CHUNK_WORKER, (chunks + 1) * sizeof(int));
    }
    bool ok =
        b->workers && (!rows || (b->chunk_start && b->chunk_worker)) && batch_order(b, workers);
    /* Queries in Morton order share walks, a group at a time; boxes, balls and bounded
     * nearest searches only (the others' regions are not known before they run). */
    b->group = b->order && (b->kind == BATCH_BOXES || b->kind == BATCH_SPHERES ||
                            (b->kind == BATCH_NEAREST && b->max_distance < INFINITY));
    for (int i = 0; ok && i < workers; i++) {
        batch_worker *k = &b->workers[i];
        size_t need = STAGE_ROWS * b->k;
        k->staged = 0;
        if (b->kind == BATCH_NEAREST && k->stage_cap < need) {
            heap_free(h, k->stage_id, k->stage_cap * sizeof(uint32_t));
            heap_free(h, k->stage_d2, k->stage_cap * sizeof(float));
            k->stage_id = heap_alloc(h, need * sizeof(uint32_t));
            k->stage_d2 = heap_alloc(h, need * sizeof(float));
            k->stage_cap = need;
            ok = k->stage_id && k->stage_d2;
            if (!ok) { /* neither kept: stage_cap is the size of both */
                heap_free(h, k->stage_id, need * sizeof(uint32_t));
                heap_free(h, k->stage_d2, need * sizeof(float));
                k->stage_id = NULL;
                k->stage_d2 = NULL;
                k->stage_cap = 0;
            }
        }
    }
    if (!ok) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (!rows) {
        if (b->kind != BATCH_NEAREST || b->k > 0)
            threads_for_ranges(workers, b->count, BATCH_CHUNK, batch_fixed_range, b);
        for (int i = 0; i < workers; i++)
            if (b->workers[i].failed) s = BROADPHASE_ERROR_OUT_OF_MEMORY;
        return s;
    }
    threads_for_chunks(workers, chunks, batch_rows_chunk, b);
    for (int i = 0; i < workers; i++)
        if (b->workers[i].failed) s = BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (s == BROADPHASE_OK) {
        b->offsets[b->count] = 0;
        *total = threads_exclusive_scan(workers, b->offsets, b->count + 1);
        b->mem->last_bytes[b->kind] = *total * elem;
        if (*total > capacity)
            s = BROADPHASE_ERROR_BUFFER_TOO_SMALL;
        else
            threads_for_chunks(workers, chunks, batch_copy_chunk, b);
    }
    return s;
}

/* A large nearest batch (GRID_SHARE of the objects' count or more, GRID_MIN at least) on a grid
 * of the objects' centres made for the call, as broadphase_neighbourhoods searches: time in
 * proportion to the objects and each search's k nearest, not to all within the distance that a
 * dense crowd's searches meet in the structures' walks (NOTES row 241). The same rows:
 * both are broadphase_nearest_within's. *done false where the grid is no use (a few very wide
 * objects, a distance large next to the spacing), or the batch small: the structures then. */
enum { GRID_MIN = 256, GRID_SHARE = 8 };

static broadphase_status near_grid(batch *b, bool *done) {
    const broadphase_world *w = b->w;
    *done = false;
    if (b->kind != BATCH_NEAREST || b->no_grid || b->k == 0 || b->count < GRID_MIN ||
        b->count * GRID_SHARE < w->store.live_count)
        return BROADPHASE_OK;
    heap *h = world_heap(w);
    neighbourhoods_state *g = b->mem->at[SLOT_GRID];
    if (!g) {
        g = memory_get(b->mem, h, SLOT_GRID, sizeof *g);
        if (!g) return BROADPHASE_ERROR_OUT_OF_MEMORY;
        memset(g, 0, sizeof *g);
    }
    const broadphase_points *pts = b->input;
    const float *at[3] = {pts->x, pts->y, pts->z};
    team_apply(&w->team);
    bool ok = neighbourhoods_points(g, &w->store, w->config.dimensions, b->count, at, b->k,
                                    b->max_distance, b->near_ids, b->near_d2, b->near_counts, h,
                                    w->workers);
    team_release();
    if (ok) *done = true;
    return ok || g->unfit ? BROADPHASE_OK : BROADPHASE_ERROR_OUT_OF_MEMORY;
}

/* A checked batch's whole call: its working memory claimed, the checks, the run (rows: into
 * `elem`-byte elements, `capacity` of them), the memory given back. */
static broadphase_status batch_go(batch *b, size_t *bad, size_t elem, size_t capacity,
                                  size_t *total) {
    query_batch_memory own;
    batch_claim(b, &own);
    broadphase_status s = batch_check(b, bad);
    if (s == BROADPHASE_OK && b->kind == BATCH_NEAREST && b->k == 0)
        for (size_t i = 0; i < b->count; i++) b->near_counts[i] = 0;
    bool done = false;
    if (s == BROADPHASE_OK) s = near_grid(b, &done);
    if (s == BROADPHASE_OK && !done) s = batch_run(b, elem, capacity, total);
    batch_give_back(b);
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
    return batch_go(&b, bad_index, elem, capacity, total);
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
        s = batch_go(&b, &bad, sizeof(broadphase_ray_hit), 0, NULL);
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

/* A nearest batch whose arguments were checked: the queries checked and run (on the grid of
 * centres where it serves, unless `grid` is false). */
static broadphase_status nearest_batch(const broadphase_world *w, size_t count,
                                       const broadphase_points *points, size_t k,
                                       float max_distance, uint32_t *ids_out, float *dist2_out,
                                       size_t *counts_out, size_t *bad, bool grid) {
    batch b = {.w = w,
               .kind = BATCH_NEAREST,
               .input = points,
               .count = count,
               .k = k,
               .max_distance = max_distance,
               .near_ids = ids_out,
               .near_d2 = dist2_out,
               .near_counts = counts_out,
               .no_grid = !grid};
    return batch_go(&b, bad, sizeof(uint32_t), 0, NULL);
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
        s = nearest_batch(w, count, points, k, max_distance, ids_out, dist2_out, counts_out, &bad,
                          true);
    }
    if (bad_index_out) *bad_index_out = bad;
    return s;
}

broadphase_status query_nearest_many_held(const broadphase_world *w, size_t count,
                                          const broadphase_points *points, size_t k,
                                          float max_distance, uint32_t *ids_out, float *dist2_out,
                                          size_t *counts_out) {
    size_t bad = SIZE_MAX;
    /* (the neighbourhoods' grid was no use for these objects) */
    return nearest_batch(w, count, points, k, max_distance, ids_out, dist2_out, counts_out, &bad,
                         false);
}
