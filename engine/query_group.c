/* Queries that share a walk (see query_internal.h): a batch's queries come in Morton order, so a
 * few consecutive ones sit close together; the objects overlapping the box that holds all their
 * regions are gathered once, by one box query, into columns, and each query then tests those
 * with the SIMD filter and the exact test of a single query. The walk over every structure, the
 * cost of many small queries, is paid once a group instead of once a query.
 *
 * The results are the single queries' own. Each query's region (a box, a ball's box, a nearest
 * search's reach) lies inside the group's box, which is widened a float step further: every
 * object a query's exact test takes overlaps its region, so the group's box query takes it too
 * (the margin covers the exact tests' rounding); and every object is gathered once, with the
 * shape it has now, as query_run finds it. */
#include "bits.h"
#include "nearest_list.h"
#include "query_math.h"
#include "query_internal.h"
#include "world.h"

#include <math.h>
#include <string.h>

bool query_groupable(const query *q) {
    if (q->candidates) return false;
    if (q->kind == QUERY_BOX || q->kind == QUERY_SPHERE) return true;
    return q->kind == QUERY_NEAREST && q->k > 0 && q->max_d2 < INFINITY;
}

/* The box holding every point the query can take (groupable queries only). */
static void region(const query *q, float lo[3], float hi[3]) {
    for (int k = 0; k < 3; k++) lo[k] = hi[k] = 0.0f;
    if (q->kind != QUERY_NEAREST) {
        memcpy(lo, q->lo, sizeof q->lo);
        memcpy(hi, q->hi, sizeof q->hi);
        return;
    }
    /* as reach_box: a distance taken is at most the greatest, by a relative 1e-6 at most */
    double r = sqrt(q->max_d2) * (1.0 + 1e-6);
    for (int k = 0; k < q->dims; k++) {
        lo[k] = bits_round_down((double)q->p[k] - r);
        hi[k] = bits_round_up((double)q->p[k] + r);
    }
}

static void release_columns(query_group *g) {
    size_t stride = g->cap + SIMD_PAD;
    if (g->cols) heap_free(g->heap, g->cols, stride * 6 * sizeof(float));
    if (g->hits) heap_free(g->heap, g->hits, stride * 2 * sizeof(uint32_t));
    g->cols = NULL;
    g->hits = g->spheres = NULL;
    g->cap = 0;
}

/* Columns for `need` objects and the kernels' sentinels past them: made even for none (a group
 * whose regions hold no object still writes its sentinels; that wrote through a null pointer
 * when a batch's first group gathered nothing, NOTES row 242). */
static bool group_reserve(query_group *g, size_t need) {
    if (need <= g->cap && g->cols) return true;
    size_t cap = g->cap * 2 > need ? g->cap * 2 : need;
    cap = cap > 64 ? cap : 64;
    size_t stride = cap + SIMD_PAD;
    float *cols = heap_alloc(g->heap, stride * 6 * sizeof(float));
    uint32_t *hits = heap_alloc(g->heap, stride * 2 * sizeof(uint32_t));
    if (!cols || !hits) {
        heap_free(g->heap, cols, stride * 6 * sizeof(float));
        heap_free(g->heap, hits, stride * 2 * sizeof(uint32_t));
        return false;
    }
    release_columns(g);
    g->cols = cols;
    g->hits = hits;
    g->spheres = hits + stride;
    g->cap = cap;
    return true;
}

bool query_group_gather(const broadphase_world *w, query_group *g, const query *qs, size_t n,
                        size_t most) {
    int dims = qs[0].dims;
    float glo[3], ghi[3];
    region(&qs[0], glo, ghi);
    for (size_t i = 1; i < n; i++) {
        float lo[3], hi[3];
        region(&qs[i], lo, hi);
        for (int k = 0; k < dims; k++) {
            glo[k] = lo[k] < glo[k] ? lo[k] : glo[k];
            ghi[k] = hi[k] > ghi[k] ? hi[k] : ghi[k];
        }
    }
    for (int k = 0; k < dims; k++) { /* the margin (see the top) */
        glo[k] = bits_round_down((double)glo[k]);
        ghi[k] = bits_round_up((double)ghi[k]);
    }
    query box;
    if (query_make_box(&box, dims, glo, ghi, false) != BROADPHASE_OK) return false;
    g->ids.heap = g->heap;
    g->ids.elem = sizeof(uint32_t);
    query_out o;
    query_out_init(&o, &g->ids);
    query_run(w, &box, &o);
    g->count = 0;
    if (o.failed || o.count > most) {
        g->failed = o.failed;
        return false;
    }
    if (!group_reserve(g, o.count)) {
        g->failed = true;
        return false;
    }
    size_t stride = g->cap + SIMD_PAD, count = o.count;
    const uint32_t *ids = g->ids.data;
    for (size_t i = 0; i < count; i++) {
        const world_box *b = &w->store.box[ids[i]];
        for (int k = 0; k < 3; k++) {
            g->cols[stride * (size_t)k + i] = b->lo[k];
            g->cols[stride * (size_t)(3 + k) + i] = b->hi[k];
        }
        g->spheres[i] = w->store.kind[ids[i]] == OBJECT_SPHERE;
    }
    for (size_t i = count; i < count + SIMD_PAD; i++) /* sentinels for the kernels */
        for (int k = 0; k < 3; k++) {
            g->cols[stride * (size_t)k + i] = INFINITY;
            g->cols[stride * (size_t)(3 + k) + i] = -INFINITY;
        }
    g->count = count;
    return true;
}

/* A nearest search whose filter kept more objects than it wants: only those whose float
 * distances can rank among the k nearest go on to the exact test (near_bands_keep, in
 * NEAR_BUCKETS bands of the bound). Returns how many stay at the front of hits, in their order. */
enum { NEAR_BUCKETS = 32 };
static size_t nearest_first(const query *q, const query_out *o, const simd_boxes *cols,
                            const uint32_t *spheres, uint32_t *hits, size_t h) {
    uint8_t band[GROUP_BAND_MAX];
    if (h > GROUP_BAND_MAX) return h;
    return near_bands_keep(q->p, q->dims, (double)(float)o->bound, q->k, NEAR_BUCKETS, cols,
                           spheres, hits, h, band);
}

/* qm_box_dist2's number, op for op (the gaps in double, summed in axis order), with the gap's
 * clamp at 0 written as (g + |g|) / 2, exact for every gap of finite float coordinates, which
 * compiles without the branch the compiler gave qm_gap here (half of a crowd's gaps are 0: a
 * mispredicted branch each). Only for the objects' boxes: qm_gap also meets the infinite bounds
 * of empty nodes and unbounded regions, where a gap of -inf would give NaN this way. */
static inline double box_dist2(const float p[3], const float lo[3], const float hi[3], int dims) {
    double s = 0.0;
    for (int k = 0; k < dims; k++) {
        double a = (double)lo[k] - (double)p[k], b = (double)p[k] - (double)hi[k];
        double g = a > b ? a : b;
        g = (g + fabs(g)) * 0.5;
        s = s + g * g;
    }
    return s;
}

/* A nearest search of k <= SORTED_K_MAX whose filter kept at most SIMD_RANK_MAX boxes (the
 * common case of many small searches: a crowd's agent keeps some 20): each one's exact squared
 * distance, ranked as put_near ranks it (the float of the double, then the id), all at once
 * (simd_point_nearest_rank), and the k least put in their places. The same k, in the same order,
 * as offering them one by one; without the bands of nearest_first and put_near's insertions,
 * which took 36% of a crowd's batch. False, with nothing written, when a sphere is among them
 * (its distance is the store's to read). */
static bool nearest_fast(const query *q, query_out *o, const simd_boxes *cols, const query_group *g,
                         size_t h) {
    for (size_t j = 0; j < h; j++)
        if (g->spheres[g->hits[j]]) return false;
    size_t m = simd_point_nearest_rank(q->p, q->max_d2, cols, g->hits, h, g->ids.data, q->dims,
                                       q->k, o->heap_d2, o->heap_id);
    o->heap_n = m;
    if (m == q->k) o->bound = (double)o->heap_d2[m - 1];
    return true;
}

/* A box's or a ball's hits when the filter kept no sphere: a box's filter was its exact test;
 * a ball's exact test (simd_pair_box_sphere's numbers: the gaps in double, summed in axis
 * order) is made here, inline and without a branch, and the kept ids are added at once. The
 * call and the branch per hit took 17% of a crowd's batch of balls. False, with nothing
 * written, when a sphere is among them. */
static bool rows_fast(const query *q, query_out *o, const simd_boxes *cols, const query_group *g,
                      size_t h) {
    const uint32_t *ids = g->ids.data;
    uint32_t *hits = g->hits;
    for (size_t j = 0; j < h; j++)
        if (g->spheres[hits[j]]) return false;
    if (h == 0) return true; /* (and the buffer may have no memory yet) */
    if (!query_buf_room(o->buf, o->base + o->count + h)) {
        o->failed = true;
        return true;
    }
    uint32_t *out = (uint32_t *)o->buf->data + o->base + o->count;
    size_t n = 0;
    if (q->kind == QUERY_BOX) {
        for (size_t j = 0; j < h; j++) out[j] = ids[hits[j]];
        n = h;
    } else {
        double r2 = (double)q->r * (double)q->r;
        for (size_t j = 0; j < h; j++) {
            uint32_t at = hits[j];
            float lo[3], hi[3];
            for (int k = 0; k < 3; k++) {
                lo[k] = cols->min[k][at];
                hi[k] = cols->max[k][at];
            }
            out[n] = ids[at];
            n += box_dist2(q->c, lo, hi, q->dims) <= r2;
        }
    }
    o->count += n;
    return true;
}

void query_group_one(const broadphase_world *w, const query_group *g, const query *q,
                     query_out *o) {
    size_t stride = g->cap + SIMD_PAD;
    simd_boxes cols;
    for (int k = 0; k < 3; k++) {
        cols.min[k] = g->cols + stride * (size_t)k;
        cols.max[k] = g->cols + stride * (size_t)(3 + k);
    }
    const uint32_t *ids = g->ids.data;
    size_t h;
    if (q->kind == QUERY_NEAREST) {
        /* bounded from the start by the greatest distance, as query_run sets it */
        if ((double)(float)q->max_d2 < o->bound) o->bound = (double)(float)q->max_d2;
        h = simd_point_vs_boxes(q->p, (float)o->bound * 1.00001f, &cols, 0, g->count, q->dims,
                                g->hits);
    } else {
        h = simd_box_vs_boxes(q->lo, q->hi, &cols, 0, g->count, q->dims, g->hits);
    }
    bool near = q->kind == QUERY_NEAREST, banded = false;
    bool fast = near && q->k > 0 && q->k <= SORTED_K_MAX && o->heap_n == 0;
    /* More than the ranking takes (where a crowd is dense): the bands first, which leave a few
     * more than k. A crowd converging on its middle keeps hundreds within the distance. */
    if (fast && h > SIMD_RANK_MAX && h > q->k) {
        h = nearest_first(q, o, &cols, g->spheres, g->hits, h);
        banded = true;
    }
    if (fast && h <= SIMD_RANK_MAX && nearest_fast(q, o, &cols, g, h)) return;
    if (!near && rows_fast(q, o, &cols, g, h)) return;
    if (near && h > q->k && !banded) h = nearest_first(q, o, &cols, g->spheres, g->hits, h);
    /* A box's exact test reads the bounds in the columns (the same numbers as the store's);
     * a sphere's goes to the store for its centre and radius. */
    for (size_t j = 0; j < h && !o->failed; j++) {
        uint32_t at = g->hits[j], id = ids[at];
        if (g->spheres[at]) {
            query_offer(w, q, o, id);
            continue;
        }
        float lo[3], hi[3];
        for (int k = 0; k < 3; k++) {
            lo[k] = cols.min[k][at];
            hi[k] = cols.max[k][at];
        }
        if (q->kind == QUERY_NEAREST)
            query_take(q, o, id, qm_box_dist2(q->p, lo, hi, q->dims));
        else if (q->kind == QUERY_BOX || simd_pair_box_sphere(lo, hi, q->c, q->r, q->dims))
            query_take(q, o, id, 0.0); /* the filter was a box's exact test */
    }
}

void query_group_release(query_group *g) {
    release_columns(g);
    query_buf_release(&g->ids);
}
