/* Neighbourhoods on a grid of centres (see neighbourhoods.h).
 *
 * Why a search misses no object. Let object j be within the distance R of centre p by the exact
 * figure (in double, within a relative 2^-50 of the true one). On each axis the gap from p to
 * j's box (for a sphere, to its ball) is then at most R (1 + 2^-50), and j's own centre lies
 * inside that box (ball), so |c_j - p| <= R (1 + 2^-50) + w_j along the axis, where w_j is j's
 * width (a box's hi - lo, a sphere's diameter): less than need = (R + the widest w) (1 + 1e-4).
 * The cell index floor((x - origin) * (1 / size)), computed in double, is monotone in x, and its
 * roundings move a figure below 2^33 (the most cells along an axis) by less than 2^-18; so two
 * points less than d apart along an axis lie at most ceil(d / size) cells apart, with that 1e-4
 * (over 2^-14 of a cell once d / size >= 1) to spare. Hence every candidate of p lies within
 * r_max = ceil(need / size) cells of p's own along each axis (set_grid), and a search over those
 * cells misses none. A search that stops sooner, at r cells, has found k + 1 objects, the
 * (k + 1)-th at float distance F, and every object that ranks before it is nearer than
 * D = sqrt(nextafterf(F)); it stops only when (D + widest) (1 + 1e-4) <= r size, which by the
 * same rule puts all of those within r cells (search_pass). Sizes: (R + widest) (1 + 1e-4) /
 * REACH, so that r_max is REACH; or smaller, from the centres' density, where R is large next
 * to their spacing (set_grid, first_size). A search from a given point p (neighbourhoods_points)
 * is the same, with p's cell clamped to the grid along each axis where p lies outside it: the
 * clamped cell lies between p's and every object's, so it is no more cells from any object than
 * p is, and the reaches above hold for it (cell_along). */
#include "neighbourhoods.h"

#include "nearest_list.h"
#include "overlap.h"
#include "parallel.h"
#include "query_math.h"

#include <math.h>
#include <string.h>

enum {
    ID_CHUNK = 1 << 12,     /* ids a worker takes at a time in the passes over the store */
    CELL_CHUNK = 1 << 10,   /* cells at a time in the runs pass */
    CENTRE_CHUNK = 128,     /* centres at a time in the search */
    SERIAL_BELOW = 1 << 12, /* ids below which the passes before the search run on one thread */
    FIGURES = 9,            /* doubles a worker: lo[3], hi[3], widest[3] (bounds pass) */
    REACH = 2,              /* cells a centre's candidates lie within, along each axis */
    RUNS_MAX = (2 * REACH + 1) * (2 * REACH + 1),
};

typedef struct make_ctx {
    neighbourhoods_state *n;
    const store *s;
    int dims;
    size_t k;    /* a row's entries */
    size_t want; /* what a search ranks: k + 1 from an object's centre (itself among them), k
                  * from a point */
    double max_d2;
    double origin[3];  /* the grid: its least corner, */
    double size;       /* its cells' side, */
    double per_size;   /* and 1 / that, rounded */
    uint64_t along[3]; /* and cells along each axis (1 past dims) */
    size_t stride;     /* of the box columns */
    size_t most;       /* the most candidates a centre has at reach r_start */
    double need;       /* (R + widest) (1 + 1e-4): what a centre's candidates lie within */
    double widest;
    double lo[3], hi[3]; /* the centres' bounds */
    int spread;          /* axes along which they spread */
    int64_t r_start;     /* the cells a search first reaches along each axis, */
    int64_t r_max;       /* and the most it may need (need / size, rounded up) */
    size_t runs_cap;     /* runs a worker's buffer holds: (2 r_max + 1)^(dims - 1) */
    size_t hits_cap;     /* hits a worker's buffer holds */
    bool boxes_only;     /* no sphere: the runs go straight to the ranking */
    simd_boxes cols;
    double fig[3]; /* the runs pass's figures (sort_into_cells) */
    /* a search from given points (neighbourhoods_points): them, and where their rows go */
    const float *at[3];
    uint32_t *out_ids;
    float *out_d2;
    size_t *out_counts;
} make_ctx;

static inline bool is_round(const store *s, uint32_t id) {
    return s->kind[id] == OBJECT_SPHERE;
}

/* The centres a cell holds on average in a dense world: twice what a search ranks over the next
 * cells. */
static inline double per_cell(const make_ctx *c) {
    return 2.0 * (double)c->want / (c->dims == 3 ? 27.0 : 9.0);
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
    }
    memcpy(to, f, sizeof f);
}

/* The cell along axis a of a coordinate, clamped to the grid: a point outside it (a search from a
 * given point) takes the nearest cell at its edge, which is no farther in cells from any object
 * than the point is, so the reaches below hold for it too. */
static inline uint64_t cell_along(const make_ctx *c, int a, float x) {
    double t = floor(((double)x - c->origin[a]) * c->per_size);
    if (!(t > 0.0)) return 0;
    return t < (double)c->along[a] ? (uint64_t)t : c->along[a] - 1;
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

/* The runs of the cells within `reach` of a cell along each axis (itself included): one a row of
 * 2 reach + 1 cells along x. Returns how many (at most (2 reach + 1)^(dims - 1)), with their
 * position ranges. */
static int runs_of(const make_ctx *c, uint64_t key, int64_t reach, uint32_t (*runs)[2]) {
    int64_t at[3], along[3];
    for (int a = 0; a < 3; a++) along[a] = (int64_t)c->along[a];
    at[0] = (int64_t)(key % c->along[0]);
    at[1] = (int64_t)((key / c->along[0]) % c->along[1]);
    at[2] = (int64_t)(key / c->along[0] / c->along[1]);
    int64_t x0 = at[0] > reach ? at[0] - reach : 0;
    int64_t x1 = at[0] + reach < along[0] ? at[0] + reach : along[0] - 1;
    const uint32_t *start = c->n->start.data;
    int count = 0;
    for (int64_t z = at[2] - reach; z <= at[2] + reach; z++) {
        if (z < 0 || z >= along[2]) continue;
        for (int64_t y = at[1] - reach; y <= at[1] + reach; y++) {
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

/* Per worker: the most candidates of a centre, the sum over centres, and the sum over cells of
 * their centres squared (over the centres, the mean of their cells' centres). */
static void runs_pass(size_t begin, size_t end, int worker, void *p) {
    make_ctx *c = p;
    neighbourhoods_state *n = c->n;
    double *to = n->partial.data + (size_t)worker * FIGURES, f[3] = {to[0], to[1], to[2]};
    for (size_t r = begin; r < end; r++) {
        uint32_t own = n->start.data[r + 1] - n->start.data[r];
        if (own == 0) continue;
        uint32_t runs[RUNS_MAX][2];
        int m = runs_of(c, r, c->r_start, runs);
        double sum = 0.0;
        for (int x = 0; x < m; x++) sum += runs[x][1] - runs[x][0];
        f[0] = sum > f[0] ? sum : f[0];
        f[1] += sum * own;
        f[2] += (double)own * own;
    }
    to[0] = f[0];
    to[1] = f[1];
    to[2] = f[2];
}

/* ---- the search ----------------------------------------------------------------------------- */

/* The `want` nearest within the distance (and within `bound`, squared, a distance no nearer one
 * can be past) among the objects of the runs, ranked, into best_*; returns how many. For the
 * searches the runs kernel could not rank at once (search_pass tries it first): more than the
 * ranking takes within the bound, or spheres among the objects. */
static size_t block_best(const make_ctx *c, const float q[3], const uint32_t (*runs)[2], int m,
                         double bound, size_t want, uint32_t *hits, uint32_t *best_id,
                         float *best_d2) {
    const neighbourhoods_state *n = c->n;
    if (c->boxes_only) {
        size_t r;
        /* More than the ranking takes are within the bound (a dense crowd): a nearer bound
         * found by halving steps, first as far as the want-th would be if their squared
         * distances spread evenly (as they do over an area or a volume). A bound b serves when
         * it keeps want or more but no more than the ranking takes, and the want-th's float
         * (all that may rank before it) lies below b whole. */
        double lo = 0.0, hi = bound, b = bound * (2.0 * (double)want / (SIMD_RANK_MAX + 1));
        for (int tries = 0; tries < 12 && b > lo && b < hi; tries++) {
            r = simd_point_nearest_runs(q, b, &c->cols, runs, (size_t)m, n->order.data, c->dims,
                                        want, best_d2, best_id);
            if (r == SIZE_MAX) {
                hi = b;
            } else if (r < want) {
                lo = b;
            } else {
                double edge = (double)nextafterf(best_d2[want - 1], INFINITY);
                if (edge <= b) return r;
                lo = b; /* the want-th's float reaches past b: b a little farther */
                b = edge < hi ? edge : hi;
                continue;
            }
            b = hi < bound ? 0.5 * (lo + hi) : 2.0 * b;
            b = b < hi ? b : 0.5 * (lo + hi);
        }
    }
    size_t total = 0;
    for (int x = 0; x < m; x++) total += runs[x][1] - runs[x][0];
    size_t h = 0;
    if (total <= c->hits_cap) { /* the filter, the bands, the ranking */
        float limit = (float)bound * 1.00001f;
        for (int x = 0; x < m; x++)
            h += simd_point_vs_boxes(q, limit, &c->cols, runs[x][0], runs[x][1], c->dims, hits + h);
        if (h > want) /* only those that can rank among the first want */
            h = near_bands_keep(q, c->dims, bound, want, NEAR_BANDS_MAX, &c->cols, n->round.data,
                                hits, h, NULL);
        bool round = false;
        for (size_t t = 0; t < h; t++) round |= n->round.data[hits[t]];
        if (!round && h <= SIMD_RANK_MAX)
            return simd_point_nearest_rank(q, bound, &c->cols, hits, h, n->order.data, c->dims,
                                           want, best_d2, best_id);
    }
    /* one at a time: spheres among them, or too many for the buffer */
    size_t got = 0;
    for (int x = 0; x < m; x++) {
        size_t count = total <= c->hits_cap ? h : runs[x][1] - runs[x][0];
        for (size_t t = 0; t < count; t++) {
            uint32_t at = total <= c->hits_cap ? hits[t] : runs[x][0] + (uint32_t)t;
            uint32_t id = n->order.data[at];
            double d2;
            if (n->round.data[at]) {
                const store *s = c->s;
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
            if (d2 <= bound) near_insert(best_id, best_d2, &got, want, id, (float)d2);
        }
        if (total <= c->hits_cap) break; /* the hits were the whole block */
    }
    return got;
}

/* A worker's share of a buffer of 4-byte entries (a run is two), in whole cache lines: two
 * workers writing next to each other in one line (a centre's runs, its k + 1 best) slowed two
 * threads below one. */
static inline size_t lines(size_t entries) {
    return (entries + 15) / 16 * 16;
}

/* Row `self`: the first k of a ranked k + 1 other than self itself. Returns how many. */
static size_t drop_self(const uint32_t *ids, const float *d2, size_t n, uint32_t self, size_t k,
                        uint32_t *out_id, float *out_d2) {
    size_t out = 0;
    for (size_t t = 0; t < n && out < k; t++) {
        if (ids[t] == self) continue;
        out_id[out] = ids[t];
        out_d2[out] = d2[t];
        out++;
    }
    return out;
}

/* A worker's buffers for its searches. */
typedef struct search_room {
    uint32_t *hits, *best_id;
    float *best_d2;
    uint32_t (*runs)[2];
} search_room;

static search_room room_of(const make_ctx *c, int worker) {
    neighbourhoods_state *n = c->n;
    return (search_room){
        n->hits.data + (size_t)worker * lines(c->hits_cap + SIMD_PAD),
        n->best_id.data + (size_t)worker * lines(c->want),
        n->best_d2.data + (size_t)worker * lines(c->want),
        (uint32_t(*)[2])(n->runs.data + (size_t)worker * lines(2 * c->runs_cap)),
    };
}

/* The want nearest of q (in cell `key`), ranked into the room's best, searched over the cells
 * within r_start of its cell, then farther while the want-th found may have a nearer one beyond
 * the cells searched: the cells within r hold every object within r size / (1 + 1e-4) - widest
 * of q. A farther search is bounded by the want-th found: no object past it can rank before it.
 * The room's runs hold the m runs of the cell at r_start, before and after. Returns how many. */
static size_t search_one(const make_ctx *c, const float q[3], uint64_t key, search_room *room,
                         int *m) {
    size_t want = c->want;
    int64_t r = c->r_start;
    double bound = c->max_d2;
    size_t got;
    for (;;) {
        /* the common case first, without block_best's call */
        got = c->boxes_only
                  ? simd_point_nearest_runs(q, bound, &c->cols, (const uint32_t(*)[2])room->runs,
                                            (size_t)*m, c->n->order.data, c->dims, want,
                                            room->best_d2, room->best_id)
                  : SIZE_MAX;
        if (got == SIZE_MAX)
            got = block_best(c, q, (const uint32_t(*)[2])room->runs, *m, bound, want, room->hits,
                             room->best_id, room->best_d2);
        if (r >= c->r_max) break;
        int64_t next = r * 2 < c->r_max ? r * 2 : c->r_max;
        if (got == want) {
            /* every object ranking before the want-th is nearer than this */
            double far = (double)nextafterf(room->best_d2[want - 1], INFINITY);
            double reach = sqrt(far);
            if ((reach + c->widest) * (1.0 + 1e-4) <= (double)r * c->size) break;
            double want_r = ceil((reach + c->widest) * (1.0 + 1e-4) / c->size);
            next = want_r < (double)c->r_max ? (int64_t)want_r : c->r_max;
            next = next > r ? next : r + 1;
            bound = far < bound ? far : bound;
        }
        r = next;
        *m = runs_of(c, key, r, room->runs);
    }
    if (r != c->r_start) *m = runs_of(c, key, c->r_start, room->runs); /* (for the next one) */
    return got;
}

/* Each centre's k + 1 nearest (itself among them, unless k + 1 others tie with it at 0 ahead of
 * it: the first k others either way), its row the first k others. */
static void search_pass(size_t begin, size_t end, int worker, void *p) {
    make_ctx *c = p;
    neighbourhoods_state *n = c->n;
    size_t k = c->k, cs = n->live + 1;
    search_room room = room_of(c, worker);
    int m = 0;
    for (size_t j = begin; j < end; j++) {
        uint32_t self = n->order.data[j];
        float q[3] = {n->centre.data[j], n->centre.data[cs + j], n->centre.data[2 * cs + j]};
        uint64_t key = n->keys.data[j];
        /* a cell's centres are a run: its runs at r_start are found once */
        if (j == begin || key != n->keys.data[j - 1]) m = runs_of(c, key, c->r_start, room.runs);
        size_t got = search_one(c, q, key, &room, &m);
        n->counts.data[self] =
            (uint32_t)drop_self(room.best_id, room.best_d2, got, self, k,
                                n->ids.data + (size_t)self * k, n->d2.data + (size_t)self * k);
    }
}

/* The given points' cells, and their indices, for the sort. */
static void point_keys_pass(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    make_ctx *c = p;
    neighbourhoods_state *n = c->n;
    for (size_t i = begin; i < end; i++) {
        uint64_t at[3] = {0, 0, 0};
        for (int a = 0; a < c->dims; a++) at[a] = cell_along(c, a, c->at[a][i]);
        n->point_keys.data[i] = cell_key(c, at);
        n->point_order.data[i] = (uint32_t)i;
    }
}

/* Each given point's k nearest, in the points' cell order, into its row. */
static void points_pass(size_t begin, size_t end, int worker, void *p) {
    make_ctx *c = p;
    neighbourhoods_state *n = c->n;
    size_t k = c->k;
    search_room room = room_of(c, worker);
    int m = 0;
    for (size_t j = begin; j < end; j++) {
        uint32_t row = n->point_order.data[j];
        float q[3] = {0.0f, 0.0f, 0.0f};
        for (int a = 0; a < c->dims; a++) q[a] = c->at[a][row];
        uint64_t key = n->point_keys.data[j];
        if (j == begin || key != n->point_keys.data[j - 1])
            m = runs_of(c, key, c->r_start, room.runs);
        size_t got = search_one(c, q, key, &room, &m);
        /* (a loop: a few entries, where a call to memcpy for each took a tenth of a batch) */
        uint32_t *ids = c->out_ids + (size_t)row * k;
        for (size_t t = 0; t < got; t++) ids[t] = room.best_id[t];
        if (c->out_d2) {
            float *d2 = c->out_d2 + (size_t)row * k;
            for (size_t t = 0; t < got; t++) d2[t] = room.best_d2[t];
        }
        c->out_counts[row] = got;
    }
}

/* ---- the call ------------------------------------------------------------------------------- */

static bool reserve_partial(neighbourhoods_state *n, heap *h, int workers) {
    return heap_array_reserve(h, &n->partial, (size_t)workers * FIGURES, 0);
}

/* Cells `size` across (or wider, until they number at most 2 live + 64: a sparse world, huge
 * coordinates), and the reaches a search takes on them. */
static void set_grid(make_ctx *c, double size) {
    neighbourhoods_state *n = c->n;
    double span = 0.0;
    for (int a = 0; a < c->dims; a++)
        span = c->hi[a] - c->lo[a] > span ? c->hi[a] - c->lo[a] : span;
    if (!(size > 0.0)) size = span > 0.0 ? span : 1.0;
    double limit = 2.0 * (double)n->live + 64.0;
    for (;;) {
        double cells = 1.0;
        for (int a = 0; a < c->dims; a++) cells *= floor((c->hi[a] - c->lo[a]) / size) + 1.0;
        if (cells <= limit) break;
        size *= 1.5;
    }
    c->size = size;
    c->per_size = 1.0 / size;
    n->cells = 1;
    double most_along = 1.0;
    for (int a = 0; a < 3; a++) {
        c->origin[a] = a < c->dims ? c->lo[a] : 0.0;
        c->along[a] = a < c->dims ? (uint64_t)floor((c->hi[a] - c->lo[a]) / size) + 1 : 1;
        n->cells *= c->along[a];
        most_along = (double)c->along[a] > most_along ? (double)c->along[a] : most_along;
    }
    /* the reach that holds every candidate; more than the grid's width is all of it */
    double r = ceil(c->need / size * (1.0 - 1e-6));
    r = r < 1.0 ? 1.0 : r;
    if (!(r < most_along)) r = most_along; /* also an infinite distance (or an infinite size) */
    c->r_max = (int64_t)r;
    c->r_start = c->r_max <= REACH ? c->r_max : 1;
}

/* The grid's first cells. Where the distance is small next to the objects' spacing: (R +
 * widest) (1 + 1e-4) / REACH across, each centre searching REACH cells along each axis. Where it
 * is large (a dense crowd, whose k nearest lie well within R): cells that hold about per_cell
 * centres on average, a search starting at the next cells and going farther only as far as its
 * (k + 1)-th nearest found so far may need (search_pass). */
static double first_size(make_ctx *c) {
    double size = c->need / REACH, volume = 1.0;
    c->spread = 0; /* axes along which the centres spread */
    for (int a = 0; a < c->dims; a++)
        if (c->hi[a] > c->lo[a]) {
            volume *= c->hi[a] - c->lo[a];
            c->spread++;
        }
    if (c->spread > 0) {
        double dense = pow(volume * per_cell(c) / (double)c->n->live, 1.0 / c->spread);
        if (dense < size) size = dense;
    }
    return size;
}

/* The objects sorted by cell (ascending ids within one: the sort is stable), their boxes and
 * centres gathered in that order, the cells' starts, and the candidates' figures (runs_pass).
 * False on out of memory. */
static bool sort_into_cells(make_ctx *c, heap *h, int workers, double fig[3]) {
    neighbourhoods_state *n = c->n;
    size_t rows = n->rows;
    if (!heap_array_reserve(h, &n->start, n->cells + 2, 0)) return false;
    n->sorts++;
    threads_for_ranges(workers, rows, ID_CHUNK, keys_pass, c);
    int bits = 1;
    while (bits < 64 && (n->cells >> bits) != 0) bits++;
    threads_radix_sort_pairs(workers, n->keys.data, n->order.data, n->keys_tmp.data,
                             n->order_tmp.data, rows, bits, n->hist);
    threads_for_ranges(workers, n->live, ID_CHUNK, gather_pass, c);
    for (size_t j = n->live; j < c->stride; j++) /* sentinels past the end, for the filter */
        for (int a = 0; a < 3; a++) {
            n->cols.data[c->stride * (size_t)a + j] = INFINITY;
            n->cols.data[c->stride * (size_t)(3 + a) + j] = -INFINITY;
        }
    for (int a = 0; a < 3; a++) {
        c->cols.min[a] = n->cols.data + c->stride * (size_t)a;
        c->cols.max[a] = n->cols.data + c->stride * (size_t)(3 + a);
    }
    threads_for_ranges(workers, n->live + 1, ID_CHUNK, starts_pass, c);
    for (int w = 0; w < workers; w++)
        for (int x = 0; x < 3; x++) n->partial.data[(size_t)w * FIGURES + (size_t)x] = 0.0;
    threads_for_ranges(workers, n->cells, CELL_CHUNK, runs_pass, c);
    fig[0] = fig[1] = fig[2] = 0.0;
    for (int w = 0; w < workers; w++) {
        const double *f = n->partial.data + (size_t)w * FIGURES;
        fig[0] = f[0] > fig[0] ? f[0] : fig[0];
        fig[1] += f[1];
        fig[2] += f[2];
    }
    return true;
}

/* The grid for the context's want, max_d2, k and store: the objects' bounds, the cells, the
 * objects sorted into them (made again, smaller, where they crowd, or as large as at first where
 * a crowd of the last call has thinned out). False on out of memory. */
static bool grid_make(make_ctx *c, float max_distance, heap *h, int workers, int few) {
    neighbourhoods_state *n = c->n;
    size_t rows = n->rows;
    int dims = c->dims;
    c->max_d2 = (double)max_distance * (double)max_distance;
    /* the bounds of the centres, the widest object */
    for (int w = 0; w < workers; w++) {
        double *f = n->partial.data + (size_t)w * FIGURES;
        for (int a = 0; a < 3; a++) {
            f[a] = INFINITY;
            f[3 + a] = -INFINITY;
            f[6 + a] = 0.0;
        }
    }
    threads_for_ranges(few, rows, ID_CHUNK, bounds_pass, c);
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
    memcpy(c->lo, lo, sizeof lo);
    memcpy(c->hi, hi, sizeof hi);
    c->widest = widest;
    c->need = ((double)max_distance + widest) * (1.0 + 1e-4);
    double first = first_size(c);
    /* (a share learnt for another k or distance is not this call's) */
    bool same = n->dense_want == c->want && n->dense_distance == max_distance;
    double share = same && n->dense_share > 0.0 && n->dense_share < 1.0 ? n->dense_share : 1.0;
    set_grid(c, first * share);

    c->stride = n->live + SIMD_PAD;
    size_t hist = threads_radix_scratch_size(workers);
    if (!heap_array_reserve(h, &n->keys, rows + 1, 0) ||
        !heap_array_reserve(h, &n->keys_tmp, rows + 1, 0) ||
        !heap_array_reserve(h, &n->order, rows + SIMD_PAD, 0) ||
        !heap_array_reserve(h, &n->order_tmp, rows + 1, 0) ||
        !heap_array_reserve(h, &n->cols, 6 * c->stride, 0) ||
        !heap_array_reserve(h, &n->centre, 3 * (n->live + 1), 0) ||
        !heap_array_reserve(h, &n->round, n->live + 1, 0))
        return false;
    /* past the last id: read (and masked out) by the runs kernel's last lanes */
    memset(n->order.data + rows, 0, SIMD_PAD * sizeof *n->order.data);
    if (!heap_grow(h, &n->hist, &n->hist_bytes, hist, 1, 0)) return false; /* the sort's */
    if (!sort_into_cells(c, h, few, c->fig)) return false;
    /* A crowd denser in places than on average (most of it in its middle): where the centres'
     * cells hold on average (over the centres, each counting itself) more than twice per_cell,
     * smaller cells, and searches that start near and go farther only where they must. The
     * cells' share of the first size is kept for the next call with the same k and distance (a
     * crowd moves little between two), which then sorts once. Cells of a share that the crowd
     * has since thinned out of (at the first size its centres' cells would hold no more than
     * twice per_cell: the others scaled by the cells' volume) go back to the first size. Where the
     * cells' cap (set_grid) holds them where they were, they stay. The rows do not depend on
     * the cells. */
    double crowded = c->fig[2] / (double)n->live;
    double at_first = first > 0.0 && share < 1.0
                          ? 1.0 + (crowded - 1.0) * pow(first / c->size, (double)c->spread)
                          : crowded;
    bool shrink = crowded > 2.0 * per_cell(c);
    bool grow = !shrink && share < 1.0 && at_first <= 2.0 * per_cell(c);
    if (c->spread > 0 && c->size > 0.0 && (shrink || grow)) {
        double size = shrink ? c->size * pow(per_cell(c) / crowded, 1.0 / c->spread) : first;
        if (first > 0.0 && size > first) size = first;
        make_ctx was = *c;
        uint64_t cells = n->cells;
        set_grid(c, size);
        /* no smaller (no larger) by a twentieth, where the cells' cap holds them: as they were */
        if (shrink ? c->size > 0.95 * was.size : c->size < 1.05 * was.size) {
            *c = was;
            n->cells = cells;
            n->held++;
        } else if (!sort_into_cells(c, h, few, c->fig)) {
            return false;
        }
    }
    n->dense_share = first > 0.0 && c->size < first ? c->size / first : 1.0;
    n->dense_want = c->want;
    n->dense_distance = max_distance;
    return true;
}

/* Whether the grid is of use (else n->unfit), and the searches' buffers. False on out of memory,
 * or when unfit. */
static bool grid_ready(make_ctx *c, heap *h, int workers) {
    neighbourhoods_state *n = c->n;
    double most = c->fig[0], total = c->fig[1];
    double rows_max = c->r_max * 2.0 + 1.0;
    if (c->dims == 3) rows_max *= rows_max;
    if (total > (double)NEIGHBOURHOODS_MOST_CANDIDATES * (double)n->live ||
        rows_max > NEIGHBOURHOODS_MOST_RUNS) {
        n->unfit = true;
        return false;
    }
    c->most = (size_t)most;
    c->boxes_only = c->s->sphere_count == 0;
    c->runs_cap = (size_t)rows_max;
    c->hits_cap = c->most > 4096 ? c->most : 4096;
    return heap_array_reserve(h, &n->hits, (size_t)workers * lines(c->hits_cap + SIMD_PAD), 0) &&
           heap_array_reserve(h, &n->runs, (size_t)workers * lines(2 * c->runs_cap), 0) &&
           heap_array_reserve(h, &n->best_id, (size_t)workers * lines(c->want), 0) &&
           heap_array_reserve(h, &n->best_d2, (size_t)workers * lines(c->want), 0);
}

/* The passes before the search take a few hundredths of a millisecond a pass below this many
 * ids: on one thread, without the fork and join each would cost on several. (At 1e4 ids they
 * are a sixth of a call on one thread; on two, 4% faster a call.) */
static int workers_for(size_t rows, int workers) {
    return rows < SERIAL_BELOW ? 1 : workers;
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
    make_ctx c = {.n = n, .s = s, .dims = dims, .k = k, .want = k + 1};
    int few = workers_for(rows, workers);
    if (!grid_make(&c, max_distance, h, workers, few)) return false;
    if (rows > n->live) threads_for_ranges(few, rows - n->live, ID_CHUNK, free_rows_pass, n);
    if (!grid_ready(&c, h, workers)) return false;
    threads_for_ranges(workers, n->live, CENTRE_CHUNK, search_pass, &c);
    return true;
}

bool neighbourhoods_points(neighbourhoods_state *n, const store *s, int dims, size_t count,
                           const float *const at[3], size_t k, float max_distance,
                           uint32_t *ids_out, float *d2_out, size_t *counts_out, heap *h,
                           int workers) {
    size_t rows = s->id_end;
    n->unfit = false;
    n->rows = rows;
    n->k = k;
    n->live = s->live_count;
    if (!reserve_partial(n, h, workers)) return false;
    if (n->live == 0) {
        memset(counts_out, 0, count * sizeof *counts_out);
        return true;
    }
    make_ctx c = {.n = n, .s = s, .dims = dims, .k = k, .want = k};
    for (int a = 0; a < 3; a++) c.at[a] = at[a];
    c.out_ids = ids_out;
    c.out_d2 = d2_out;
    c.out_counts = counts_out;
    int few = workers_for(rows > count ? rows : count, workers);
    if (!grid_make(&c, max_distance, h, workers, few) || !grid_ready(&c, h, workers) ||
        !heap_array_reserve(h, &n->point_keys, count + 1, 0) ||
        !heap_array_reserve(h, &n->point_keys_tmp, count + 1, 0) ||
        !heap_array_reserve(h, &n->point_order, count + 1, 0) ||
        !heap_array_reserve(h, &n->point_order_tmp, count + 1, 0))
        return false;
    /* the points sorted by cell: neighbours search near each other, a cell's runs found once */
    threads_for_ranges(few, count, ID_CHUNK, point_keys_pass, &c);
    int bits = 1;
    while (bits < 64 && (n->cells >> bits) != 0) bits++;
    threads_radix_sort_pairs(few, n->point_keys.data, n->point_order.data, n->point_keys_tmp.data,
                             n->point_order_tmp.data, count, bits, n->hist);
    threads_for_ranges(workers, count, CENTRE_CHUNK, points_pass, &c);
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
        n->counts.data[self] =
            (uint32_t)drop_self(n->batch_ids.data + j * (k + 1), n->batch_d2.data + j * (k + 1),
                                n->batch_counts.data[j], self, k, n->ids.data + (size_t)self * k,
                                n->d2.data + (size_t)self * k);
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
    heap_array_release(h, &n->runs);
    heap_array_release(h, &n->best_id);
    heap_array_release(h, &n->best_d2);
    heap_array_release(h, &n->ids);
    heap_array_release(h, &n->d2);
    heap_array_release(h, &n->counts);
    heap_array_release(h, &n->batch_ids);
    heap_array_release(h, &n->batch_d2);
    heap_array_release(h, &n->batch_counts);
    heap_array_release(h, &n->point_keys);
    heap_array_release(h, &n->point_keys_tmp);
    heap_array_release(h, &n->point_order);
    heap_array_release(h, &n->point_order_tmp);
    heap_free(h, n->hist, n->hist_bytes);
    n->hist = NULL;
    n->hist_bytes = 0;
    n->rows = n->k = n->live = 0;
}
