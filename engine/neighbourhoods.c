/* Neighbourhoods on a grid of centres (see neighbourhoods.h).
 *
 * Why the cells hold every candidate: let object j be within the distance R of centre p, by the
 * exact figure (in double, within a relative 2^-50 of the true one). On each axis the gap from p
 * to j's box (for a sphere, to its ball) is then at most R (1 + 2^-50), and j's own centre lies
 * inside that box (ball), so |c_j - p| <= R (1 + 2^-50) + w_j on the axis, where w_j is j's width
 * (a box's hi - lo, a sphere's diameter). The cells are (R + the widest w) (1 + 1e-4) / REACH
 * across or more, so c_j and p lie at most REACH cells apart along each axis: the cell index
 * floor((x - origin) * (1 / size)), computed in double, is monotone in x, and its roundings move
 * a figure below 2^33 (the most cells along an axis) by less than 2^-18, far less than the
 * REACH * 1e-4 to spare. */
#include "neighbourhoods.h"

#include "overlap.h"
#include "parallel.h"
#include "query_math.h"

#include <math.h>
#include <string.h>

enum {
    ID_CHUNK = 1 << 12,   /* ids a worker takes at a time in the passes over the store */
    CELL_CHUNK = 1 << 10, /* cells at a time in the runs pass */
    CENTRE_CHUNK = 128,   /* centres at a time in the search */
    FIGURES = 10,         /* doubles a worker: lo[3], hi[3], widest[3], live (bounds pass) */
    REACH = 2,            /* cells a centre's candidates lie within, along each axis */
    RUNS_MAX = (2 * REACH + 1) * (2 * REACH + 1),
};

typedef struct make_ctx {
    neighbourhoods_state *n;
    const store *s;
    int dims;
    size_t k;
    double max_d2;
    float limit;       /* the float filter's bound */
    double origin[3];  /* the grid: its least corner, */
    double size;       /* its cells' side, */
    double per_size;   /* and 1 / that, rounded */
    uint64_t along[3]; /* and cells along each axis (1 past dims) */
    size_t stride;     /* of the box columns */
    size_t most;       /* the most candidates a centre has */
    bool boxes_only;   /* no sphere: the runs go straight to the ranking */
    simd_boxes cols;
} make_ctx;

static inline bool is_round(const store *s, uint32_t id) {
    return s->kind[id] == OBJECT_SPHERE;
}

/* The point a neighbourhood is measured from. */
static inline void centre_of(const store *s, uint32_t id, int dims, float c[3]) {
    for (int a = 0; a < 3; a++) {
        if (a >= dims)
            c[a] = 0.0f;
        else if (is_round(s, id))
            c[a] = s->center[a][id];
        else
            c[a] = (float)(((double)s->box[id].lo[a] + (double)s->box[id].hi[a]) * 0.5);
    }
}

/* ---- the grid ------------------------------------------------------------------------------- */

static void bounds_pass(size_t begin, size_t end, int worker, void *p) {
    make_ctx *c = p;
    double *to = c->n->partial.data + (size_t)worker * FIGURES, f[FIGURES];
    memcpy(f, to, sizeof f); /* (the workers' figures share cache lines: written once a range) */
    const store *s = c->s;
    for (size_t i = begin; i < end; i++) {
        uint32_t id = (uint32_t)i;
        if (s->kind[id] == OBJECT_FREE) continue;
        float ctr[3];
        centre_of(s, id, c->dims, ctr);
        for (int a = 0; a < c->dims; a++) {
            double w = is_round(s, id) ? 2.0 * (double)s->radius[id]
                                       : (double)s->box[id].hi[a] - (double)s->box[id].lo[a];
            f[a] = ctr[a] < f[a] ? ctr[a] : f[a];
            f[3 + a] = ctr[a] > f[3 + a] ? ctr[a] : f[3 + a];
            f[6 + a] = w > f[6 + a] ? w : f[6 + a];
        }
        f[9] += 1.0;
    }
    memcpy(to, f, sizeof f);
}

static inline uint64_t cell_along(const make_ctx *c, int a, float x) {
    double t = floor(((double)x - c->origin[a]) * c->per_size);
    uint64_t i = t > 0.0 ? (uint64_t)t : 0;
    return i < c->along[a] ? i : c->along[a] - 1;
}

static inline uint64_t cell_key(const make_ctx *c, const uint64_t at[3]) {
    return at[0] + c->along[0] * (at[1] + c->along[1] * at[2]);
}

static void keys_pass(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    make_ctx *c = p;
    neighbourhoods_state *n = c->n;
    for (size_t i = begin; i < end; i++) {
        uint32_t id = (uint32_t)i;
        n->order.data[i] = id;
        if (c->s->kind[id] == OBJECT_FREE) {
            n->keys.data[i] = n->cells; /* after every cell */
            continue;
        }
        float ctr[3];
        centre_of(c->s, id, c->dims, ctr);
        uint64_t at[3] = {0, 0, 0};
        for (int a = 0; a < c->dims; a++) at[a] = cell_along(c, a, ctr[a]);
        n->keys.data[i] = cell_key(c, at);
    }
}

/* Positions [begin, end) of the sorted objects: their boxes and centres into columns. */
static void gather_pass(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    make_ctx *c = p;
    neighbourhoods_state *n = c->n;
    size_t cs = n->live + 1;
    for (size_t j = begin; j < end; j++) {
        uint32_t id = n->order.data[j];
        const world_box *b = &c->s->box[id];
        float ctr[3];
        centre_of(c->s, id, c->dims, ctr);
        for (int a = 0; a < 3; a++) {
            n->cols.data[c->stride * (size_t)a + j] = b->lo[a];
            n->cols.data[c->stride * (size_t)(3 + a) + j] = b->hi[a];
            n->centre.data[cs * (size_t)a + j] = ctr[a];
        }
        n->round.data[j] = is_round(c->s, id);
    }
}

static void free_rows_pass(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    neighbourhoods_state *n = p;
    for (size_t j = begin; j < end; j++) n->counts.data[n->order.data[n->live + j]] = 0;
}

/* start[r], for the cells r whose run begins at a position in [begin, end) of [0, live]: that
 * position (an empty cell's run begins where the next one's does; start[cells] is live). */
static void starts_pass(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    make_ctx *c = p;
    neighbourhoods_state *n = c->n;
    for (size_t j = begin; j < end; j++) {
        uint64_t v = j < n->live ? n->keys.data[j] : n->cells;
        uint64_t from = j == 0 ? 0 : n->keys.data[j - 1] + 1;
        for (uint64_t r = from; r <= v; r++) n->start.data[r] = (uint32_t)j;
    }
}

/* The runs of the cells within REACH of a cell along each axis (itself included): one a row of
 * 2 REACH + 1 cells along x. Returns how many (at most RUNS_MAX), with their position ranges. */
static int runs_of(const make_ctx *c, uint64_t key, uint32_t (*runs)[2]) {
    int64_t at[3], along[3];
    for (int a = 0; a < 3; a++) along[a] = (int64_t)c->along[a];
    at[0] = (int64_t)(key % c->along[0]);
    at[1] = (int64_t)((key / c->along[0]) % c->along[1]);
    at[2] = (int64_t)(key / c->along[0] / c->along[1]);
    int64_t x0 = at[0] > REACH ? at[0] - REACH : 0;
    int64_t x1 = at[0] + REACH < along[0] ? at[0] + REACH : along[0] - 1;
    const uint32_t *start = c->n->start.data;
    int count = 0;
    for (int64_t z = at[2] - REACH; z <= at[2] + REACH; z++) {
        if (z < 0 || z >= along[2]) continue;
        for (int64_t y = at[1] - REACH; y <= at[1] + REACH; y++) {
            if (y < 0 || y >= along[1]) continue;
            uint64_t row[3] = {(uint64_t)x0, (uint64_t)y, (uint64_t)z};
            uint64_t first = cell_key(c, row);
            runs[count][0] = start[first];
            runs[count][1] = start[first + (uint64_t)(x1 - x0) + 1];
            count += runs[count][1] > runs[count][0];
        }
    }
    return count;
}

/* Per worker: the most candidates of a centre, and the sum over centres. */
static void runs_pass(size_t begin, size_t end, int worker, void *p) {
    make_ctx *c = p;
    neighbourhoods_state *n = c->n;
    double *to = n->partial.data + (size_t)worker * FIGURES, f[2] = {to[0], to[1]};
    for (size_t r = begin; r < end; r++) {
        uint32_t own = n->start.data[r + 1] - n->start.data[r];
        if (own == 0) continue;
        uint32_t runs[RUNS_MAX][2];
        int m = runs_of(c, r, runs);
        double sum = 0.0;
        for (int x = 0; x < m; x++) sum += runs[x][1] - runs[x][0];
        f[0] = sum > f[0] ? sum : f[0];
        f[1] += sum * own;
    }
    to[0] = f[0];
    to[1] = f[1];
}

/* ---- the search ----------------------------------------------------------------------------- */

/* j at squared distance d2 offered to a list kept sorted by (d2 as float, id), *m of k used. */
static inline void keep(uint32_t *ids, float *d2s, size_t *m, size_t k, uint32_t j, double d2) {
    float d = (float)d2;
    size_t at = *m;
    if (at == k) {
        if (d > d2s[k - 1] || (d == d2s[k - 1] && j > ids[k - 1])) return;
        at--;
    } else {
        (*m)++;
    }
    while (at > 0 && (d2s[at - 1] > d || (d2s[at - 1] == d && ids[at - 1] > j))) {
        ids[at] = ids[at - 1];
        d2s[at] = d2s[at - 1];
        at--;
    }
    ids[at] = j;
    d2s[at] = d;
}

static void search_pass(size_t begin, size_t end, int worker, void *p) {
    make_ctx *c = p;
    neighbourhoods_state *n = c->n;
    const store *s = c->s;
    size_t k = c->k, cs = n->live + 1;
    uint32_t *hits = n->hits.data + (size_t)worker * (c->most + SIMD_PAD);
    uint32_t *best_id = n->best_id.data + (size_t)worker * (k + 1);
    float *best_d2 = n->best_d2.data + (size_t)worker * (k + 1);
    uint32_t runs[RUNS_MAX][2];
    int m = 0;
    for (size_t j = begin; j < end; j++) {
        uint32_t self = n->order.data[j];
        float q[3] = {n->centre.data[j], n->centre.data[cs + j], n->centre.data[2 * cs + j]};
        if (j == begin || n->keys.data[j] != n->keys.data[j - 1]) /* a cell's centres are a run */
            m = runs_of(c, n->keys.data[j], runs);
        uint32_t *out_id = n->ids.data + (size_t)self * k;
        float *out_d2 = n->d2.data + (size_t)self * k;
        size_t got = 0;
        if (c->boxes_only) {
            /* the k + 1 nearest, this object among them unless k + 1 others tie with it at 0
             * ahead of it: the first k others either way */
            size_t r =
                simd_point_nearest_runs(q, c->max_d2, &c->cols, (const uint32_t(*)[2])runs,
                                        (size_t)m, n->order.data, c->dims, k + 1, best_d2, best_id);
            if (r != SIZE_MAX) {
                for (size_t t = 0; t < r && got < k; t++) {
                    if (best_id[t] == self) continue;
                    out_id[got] = best_id[t];
                    out_d2[got] = best_d2[t];
                    got++;
                }
                n->counts.data[self] = (uint32_t)got;
                continue;
            }
        }
        size_t h = 0;
        for (int x = 0; x < m; x++)
            h += simd_point_vs_boxes(q, c->limit, &c->cols, runs[x][0], runs[x][1], c->dims,
                                     hits + h);
        bool round = false;
        for (size_t t = 0; t < h; t++) round |= n->round.data[hits[t]];
        if (!round && h <= SIMD_RANK_MAX) {
            size_t r = simd_point_nearest_rank(q, c->max_d2, &c->cols, hits, h, n->order.data,
                                               c->dims, k + 1, best_d2, best_id);
            for (size_t t = 0; t < r && got < k; t++) {
                if (best_id[t] == self) continue;
                out_id[got] = best_id[t];
                out_d2[got] = best_d2[t];
                got++;
            }
        } else {
            for (size_t t = 0; t < h; t++) {
                uint32_t at = hits[t], id = n->order.data[at];
                if (id == self) continue;
                double d2;
                if (n->round.data[at]) {
                    float ctr[3] = {s->center[0][id], s->center[1][id], s->center[2][id]};
                    d2 = qm_sphere_dist2(q, ctr, s->radius[id], c->dims);
                } else {
                    float lo[3], hi[3];
                    for (int a = 0; a < 3; a++) {
                        lo[a] = c->cols.min[a][at];
                        hi[a] = c->cols.max[a][at];
                    }
                    d2 = qm_box_dist2(q, lo, hi, c->dims);
                }
                if (d2 <= c->max_d2) keep(out_id, out_d2, &got, k, id, d2);
            }
        }
        n->counts.data[self] = (uint32_t)got;
    }
}

/* ---- the call ------------------------------------------------------------------------------- */

static bool reserve_partial(neighbourhoods_state *n, heap *h, int workers) {
    return heap_array_reserve(h, &n->partial, (size_t)workers * FIGURES, 0);
}

/* The grid's cells: (R + widest) (1 + 1e-4) / REACH across, or wider until they number at most
 * 2 live + 64 (a sparse world, huge coordinates). */
static void choose_grid(make_ctx *c, const double lo[3], const double hi[3], double widest,
                        float max_distance) {
    neighbourhoods_state *n = c->n;
    double size = ((double)max_distance + widest) * (1.0 + 1e-4) / REACH, span = 0.0;
    for (int a = 0; a < c->dims; a++) span = hi[a] - lo[a] > span ? hi[a] - lo[a] : span;
    if (!(size > 0.0)) size = span > 0.0 ? span : 1.0;
    double limit = 2.0 * (double)n->live + 64.0;
    for (;;) {
        double cells = 1.0;
        for (int a = 0; a < c->dims; a++) cells *= floor((hi[a] - lo[a]) / size) + 1.0;
        if (cells <= limit) break;
        size *= 1.5;
    }
    c->size = size;
    c->per_size = 1.0 / size;
    n->cells = 1;
    for (int a = 0; a < 3; a++) {
        c->origin[a] = a < c->dims ? lo[a] : 0.0;
        c->along[a] = a < c->dims ? (uint64_t)floor((hi[a] - lo[a]) / size) + 1 : 1;
        n->cells *= c->along[a];
    }
}

bool neighbourhoods_make(neighbourhoods_state *n, const store *s, int dims, size_t k,
                         float max_distance, heap *h, int workers) {
    size_t rows = s->id_end;
    n->unfit = false;
    n->rows = rows;
    n->k = k;
    n->live = s->live_count;
    if (!heap_array_reserve(h, &n->counts, rows + 1, 0) ||
        !heap_array_reserve(h, &n->ids, rows * k + 1, 0) ||
        !heap_array_reserve(h, &n->d2, rows * k + 1, 0) || !reserve_partial(n, h, workers))
        return false;
    if (k == 0 || n->live == 0) {
        memset(n->counts.data, 0, (rows + 1) * sizeof *n->counts.data);
        return true;
    }
    make_ctx c = {.n = n, .s = s, .dims = dims, .k = k};
    c.max_d2 = (double)max_distance * (double)max_distance;
    c.limit = (float)c.max_d2 * 1.00001f;

    /* the bounds of the centres, the widest object */
    for (int w = 0; w < workers; w++) {
        double *f = n->partial.data + (size_t)w * FIGURES;
        for (int a = 0; a < 3; a++) {
            f[a] = INFINITY;
            f[3 + a] = -INFINITY;
            f[6 + a] = 0.0;
        }
        f[9] = 0.0;
    }
    threads_for_ranges(workers, rows, ID_CHUNK, bounds_pass, &c);
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    double widest = 0.0;
    for (int w = 0; w < workers; w++) {
        const double *f = n->partial.data + (size_t)w * FIGURES;
        for (int a = 0; a < dims; a++) {
            lo[a] = f[a] < lo[a] ? f[a] : lo[a];
            hi[a] = f[3 + a] > hi[a] ? f[3 + a] : hi[a];
            widest = f[6 + a] > widest ? f[6 + a] : widest;
        }
    }
    choose_grid(&c, lo, hi, widest, max_distance);

    /* the objects sorted by cell, ascending ids within one (the sort is stable) */
    c.stride = n->live + SIMD_PAD;
    size_t hist = threads_radix_scratch_size(workers);
    if (!heap_array_reserve(h, &n->keys, rows + 1, 0) ||
        !heap_array_reserve(h, &n->keys_tmp, rows + 1, 0) ||
        !heap_array_reserve(h, &n->order, rows + SIMD_PAD, 0) ||
        !heap_array_reserve(h, &n->order_tmp, rows + 1, 0) ||
        !heap_array_reserve(h, &n->cols, 6 * c.stride, 0) ||
        !heap_array_reserve(h, &n->centre, 3 * (n->live + 1), 0) ||
        !heap_array_reserve(h, &n->round, n->live + 1, 0) ||
        !heap_array_reserve(h, &n->start, n->cells + 2, 0))
        return false;
    if (hist > n->hist_bytes) {
        void *x = heap_alloc(h, hist);
        if (!x) return false;
        heap_free(h, n->hist, n->hist_bytes);
        n->hist = x;
        n->hist_bytes = hist;
    }
    threads_for_ranges(workers, rows, ID_CHUNK, keys_pass, &c);
    int bits = 1;
    while (bits < 64 && (n->cells >> bits) != 0) bits++;
    threads_radix_sort_pairs(workers, n->keys.data, n->order.data, n->keys_tmp.data,
                             n->order_tmp.data, rows, bits, n->hist);
    threads_for_ranges(workers, n->live, ID_CHUNK, gather_pass, &c);
    for (size_t j = n->live; j < c.stride; j++) /* sentinels past the end, for the filter */
        for (int a = 0; a < 3; a++) {
            n->cols.data[c.stride * (size_t)a + j] = INFINITY;
            n->cols.data[c.stride * (size_t)(3 + a) + j] = -INFINITY;
        }
    for (int a = 0; a < 3; a++) {
        c.cols.min[a] = n->cols.data + c.stride * (size_t)a;
        c.cols.max[a] = n->cols.data + c.stride * (size_t)(3 + a);
    }
    if (rows > n->live) threads_for_ranges(workers, rows - n->live, ID_CHUNK, free_rows_pass, n);
    threads_for_ranges(workers, n->live + 1, ID_CHUNK, starts_pass, &c);

    /* how many candidates: the grid is no use past NEIGHBOURHOODS_MOST_CANDIDATES a centre */
    for (int w = 0; w < workers; w++) n->partial.data[(size_t)w * FIGURES] = 0.0;
    for (int w = 0; w < workers; w++) n->partial.data[(size_t)w * FIGURES + 1] = 0.0;
    threads_for_ranges(workers, n->cells, CELL_CHUNK, runs_pass, &c);
    double most = 0.0, total = 0.0;
    for (int w = 0; w < workers; w++) {
        const double *f = n->partial.data + (size_t)w * FIGURES;
        most = f[0] > most ? f[0] : most;
        total += f[1];
    }
    if (total > (double)NEIGHBOURHOODS_MOST_CANDIDATES * (double)n->live) {
        n->unfit = true;
        return false;
    }
    c.most = (size_t)most;
    c.boxes_only = s->sphere_count == 0;
    if (!heap_array_reserve(h, &n->hits, (size_t)workers * (c.most + SIMD_PAD), 0) ||
        !heap_array_reserve(h, &n->best_id, (size_t)workers * (k + 1), 0) ||
        !heap_array_reserve(h, &n->best_d2, (size_t)workers * (k + 1), 0))
        return false;
    threads_for_ranges(workers, n->live, CENTRE_CHUNK, search_pass, &c);
    return true;
}

bool neighbourhoods_batch_reserve(neighbourhoods_state *n, heap *h) {
    size_t slots = n->live * (n->k + 1) + 1;
    return heap_array_reserve(h, &n->batch_ids, slots, 0) &&
           heap_array_reserve(h, &n->batch_d2, slots, 0) &&
           heap_array_reserve(h, &n->batch_counts, n->live + 1, 0);
}

static void from_batch_pass(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    neighbourhoods_state *n = p;
    size_t k = n->k;
    for (size_t j = begin; j < end; j++) {
        uint32_t self = n->order.data[j];
        const uint32_t *in_id = n->batch_ids.data + j * (k + 1);
        const float *in_d2 = n->batch_d2.data + j * (k + 1);
        size_t got = 0;
        for (size_t t = 0; t < n->batch_counts.data[j] && got < k; t++) {
            if (in_id[t] == self) continue;
            n->ids.data[(size_t)self * k + got] = in_id[t];
            n->d2.data[(size_t)self * k + got] = in_d2[t];
            got++;
        }
        n->counts.data[self] = (uint32_t)got;
    }
}

void neighbourhoods_from_batch(neighbourhoods_state *n, int workers) {
    threads_for_ranges(workers, n->live, ID_CHUNK, from_batch_pass, n);
}

void neighbourhoods_release(neighbourhoods_state *n, heap *h) {
    heap_array_release(h, &n->keys);
    heap_array_release(h, &n->keys_tmp);
    heap_array_release(h, &n->order);
    heap_array_release(h, &n->order_tmp);
    heap_array_release(h, &n->cols);
    heap_array_release(h, &n->centre);
    heap_array_release(h, &n->round);
    heap_array_release(h, &n->start);
    heap_array_release(h, &n->partial);
    heap_array_release(h, &n->hits);
    heap_array_release(h, &n->best_id);
    heap_array_release(h, &n->best_d2);
    heap_array_release(h, &n->ids);
    heap_array_release(h, &n->d2);
    heap_array_release(h, &n->counts);
    heap_array_release(h, &n->batch_ids);
    heap_array_release(h, &n->batch_d2);
    heap_array_release(h, &n->batch_counts);
    heap_free(h, n->hist, n->hist_bytes);
    n->hist = NULL;
    n->hist_bytes = 0;
    n->rows = n->k = n->live = 0;
}
