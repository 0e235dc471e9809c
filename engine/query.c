/* The spatial queries: box (and its candidates), ball, point, ray (all hits and the closest),
 * planes and k-nearest, single and batched, for every method.
 *
 * Where the objects are. After a successful step every live object is in exactly one of the
 * step's structures (the tree, the static field, the rest field) with the shape it had then;
 * an object changed since (changed[id] == epoch: moved, added, removed, refiltered, flagged)
 * is skipped there, and the changed ones that are alive are gathered by the first query after
 * the change into a list, and into a field of their own when there are many (query_sync). So
 * every live object is found once, with its current shape, and the step's structures are only
 * read. Before the first step and after a failed one every object counts as changed. Brute
 * force walks no structure: it tests every object.
 *
 * Numbers. A node's bounds contain the boxes of the objects under it and every test is monotone
 * in the bounds (query_math.h), so pruning by the bounds never drops an object the exact test
 * would take; the object tests are the same functions brute force and the tests' reference
 * use, so all methods give the same ids, the same t and the same distances. */
#include "bits.h"
#include "method.h"
#include "query.h"

#include "query_math.h"
#include "tree.h"
#include "world.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    PIECE = 256,            /* own objects per call of the box kernel */
    STACK_MAX = 1024,       /* walk stack: deeper than any structure's depth x 7 siblings */
    PENDING_FIELD_MIN = 64, /* changed objects from which they get a field of their own */
    STACK_RESULTS = 256,    /* results a single query keeps on the stack before the heap */
    BATCH_CHUNK = 64,       /* queries per chunk of a batch */
    SORTED_K_MAX = 32,      /* nearest: up to this k the best are kept sorted */
    ORDER_MIN = 256,        /* queries from which a batch runs them in Morton order */
};

typedef enum query_kind {
    QUERY_BOX,
    QUERY_SPHERE,
    QUERY_PLANES,
    QUERY_RAY,
    QUERY_NEAREST
} query_kind;

typedef struct query {
    query_kind kind;
    int dims;
    bool candidates;    /* box: every object of the nodes it reaches, untested */
    bool closest;       /* ray: the first hit only */
    bool far;           /* rays and planes: a sphere's box may stop at the float range's end
                         * while its ball goes on (unclamp) */
    float lo[3], hi[3]; /* box; for a ball, its bounding box (for the kernel) */
    float c[3], r;      /* ball */
    const float (*planes)[4];
    size_t plane_count;
    qm_ray ray;
    simd_ray kray; /* the float filter's copy of the ray (simd_ray_vs_boxes) */
    bool kray_ok;  /* its reciprocals are in the filter's range */
    float p[3];    /* nearest */
    size_t k;
} query;

/* Results of one query (or of a batch's worker): elements of `elem` bytes, grown on demand. */
typedef struct query_buf {
    void *data;
    size_t capacity; /* elements */
    size_t elem;
    bool owned; /* data is ours to realloc (else it is the caller's stack) */
} query_buf;

typedef struct query_out {
    query_buf *buf;
    size_t base, count;      /* this query's results: buf elements [base, base + count) */
    bool failed;             /* out of memory */
    broadphase_ray_hit best; /* closest ray */
    bool found;
    uint32_t *heap_id; /* nearest: the k best by (dist2, id), sorted or a max-heap (put_near) */
    float *heap_d2;
    size_t heap_n;
    double bound; /* closest ray: best t; nearest (when k are kept): the worst; else +inf */
} query_out;

/* ---- results ---------------------------------------------------------------------------- */

static bool buf_room(query_buf *b, size_t need) {
    if (need <= b->capacity) return true;
    size_t cap = b->capacity * 2 > need ? b->capacity * 2 : need;
    void *d = b->owned ? realloc(b->data, cap * b->elem) : malloc(cap * b->elem);
    if (!d) return false;
    if (!b->owned && b->capacity) memcpy(d, b->data, b->capacity * b->elem);
    b->data = d;
    b->capacity = cap;
    b->owned = true;
    return true;
}

static inline void put_id(query_out *o, uint32_t id) {
    if (!buf_room(o->buf, o->base + o->count + 1)) {
        o->failed = true;
        return;
    }
    ((uint32_t *)o->buf->data)[o->base + o->count++] = id;
}

static inline void put_hit(const query *q, query_out *o, uint32_t id, double t) {
    float tf = (float)t;
    if (q->closest) {
        if (!o->found || tf < o->best.t || (tf == o->best.t && id < o->best.id)) {
            o->best = (broadphase_ray_hit){id, tf};
            o->found = true;
            o->bound = tf;
        }
        return;
    }
    if (!buf_room(o->buf, o->base + o->count + 1)) {
        o->failed = true;
        return;
    }
    ((broadphase_ray_hit *)o->buf->data)[o->base + o->count++] = (broadphase_ray_hit){id, tf};
}

/* (d, a) ranks after (e, b). */
static inline bool ranks_after(float d, uint32_t a, float e, uint32_t b) {
    return d > e || (d == e && a > b);
}

static void heap_sift_down(uint32_t *id, float *d2, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && ranks_after(d2[l], id[l], d2[m], id[m])) m = l;
        if (l + 1 < n && ranks_after(d2[l + 1], id[l + 1], d2[m], id[m])) m = l + 1;
        if (m == i) return;
        uint32_t ti = id[i];
        float td = d2[i];
        id[i] = id[m];
        d2[i] = d2[m];
        id[m] = ti;
        d2[m] = td;
        i = m;
    }
}

/* Up to SORTED_K_MAX the k best are kept sorted (an insertion shifts a few entries, and the
 * result needs no final sort); above, in a max-heap. */
static void put_near(const query *q, query_out *o, uint32_t id, double d2) {
    float d = (float)d2;
    uint32_t *hid = o->heap_id;
    float *hd = o->heap_d2;
    if (q->k <= SORTED_K_MAX) {
        size_t i = o->heap_n;
        if (i == q->k) {
            if (!ranks_after(hd[i - 1], hid[i - 1], d, id)) return;
            i--; /* the worst leaves */
        } else {
            o->heap_n++;
        }
        for (; i > 0 && ranks_after(hd[i - 1], hid[i - 1], d, id); i--) {
            hid[i] = hid[i - 1];
            hd[i] = hd[i - 1];
        }
        hid[i] = id;
        hd[i] = d;
        if (o->heap_n == q->k) o->bound = hd[q->k - 1];
        return;
    }
    if (o->heap_n < q->k) {
        size_t i = o->heap_n++;
        while (i > 0 && ranks_after(d, id, hd[(i - 1) / 2], hid[(i - 1) / 2])) {
            hid[i] = hid[(i - 1) / 2];
            hd[i] = hd[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        hid[i] = id;
        hd[i] = d;
    } else if (ranks_after(hd[0], hid[0], d, id)) {
        hid[0] = id;
        hd[0] = d;
        heap_sift_down(hid, hd, o->heap_n, 0);
    } else {
        return;
    }
    if (o->heap_n == q->k) o->bound = hd[0];
}

/* The k best in ascending (dist2, id) order, in place. */
static void heap_finish(const query *q, query_out *o) {
    if (q->k <= SORTED_K_MAX) return; /* kept sorted */
    for (size_t n = o->heap_n; n > 1; n--) {
        uint32_t ti = o->heap_id[0];
        float td = o->heap_d2[0];
        o->heap_id[0] = o->heap_id[n - 1];
        o->heap_d2[0] = o->heap_d2[n - 1];
        o->heap_id[n - 1] = ti;
        o->heap_d2[n - 1] = td;
        heap_sift_down(o->heap_id, o->heap_d2, n - 1, 0);
    }
}

static int compare_ids(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int compare_hits(const void *a, const void *b) {
    const broadphase_ray_hit *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void sort_ids(uint32_t *ids, size_t n) {
    if (n < 32) { /* insertion sort: most queries find a handful */
        for (size_t i = 1; i < n; i++) {
            uint32_t v = ids[i];
            size_t j = i;
            for (; j > 0 && ids[j - 1] > v; j--) ids[j] = ids[j - 1];
            ids[j] = v;
        }
        return;
    }
    qsort(ids, n, sizeof *ids, compare_ids);
}

/* ---- the objects' own tests ------------------------------------------------------------ */

/* Whether a structure's entry for id stands for the object now (see query.h). */
static inline bool member(const broadphase_world *w, query_member m, uint32_t id) {
    if (m == QUERY_MEMBER_CURRENT) return true;
    if (w->changed[id] == w->epoch) return false;
    return m == QUERY_MEMBER_TREE || w->rest.at_rest[id];
}

/* A box's entry is its exact box (a sphere's is its bounding box); a world without spheres
 * needs no look at the object. */
static inline bool is_box(const broadphase_world *w, uint32_t id) {
    return w->sphere_count == 0 || w->kind[id] == OBJECT_BOX;
}

static inline void sphere_of(const broadphase_world *w, uint32_t id, float c[3], float *r) {
    for (int k = 0; k < 3; k++) c[k] = w->center[k][id];
    *r = w->radius[id];
}

/* The exact test of object id; *value gets a ray's entry t or a squared distance. */
static bool object_hit(const broadphase_world *w, const query *q, uint32_t id, double *value) {
    const world_box *b = &w->box[id];
    bool sphere = w->kind[id] == OBJECT_SPHERE;
    float c[3] = {0, 0, 0}, r = 0.0f;
    if (sphere) sphere_of(w, id, c, &r);
    int dims = q->dims;
    switch (q->kind) {
    case QUERY_BOX:
        return sphere ? simd_pair_box_sphere(q->lo, q->hi, c, r, dims)
                      : simd_pair_box_box(q->lo, q->hi, b->lo, b->hi, dims);
    case QUERY_SPHERE:
        return sphere ? simd_pair_sphere_sphere(q->c, q->r, c, r, dims)
                      : simd_pair_box_sphere(b->lo, b->hi, q->c, q->r, dims);
    case QUERY_PLANES:
        return sphere ? qm_planes_sphere(q->planes, q->plane_count, c, r, dims)
                      : qm_planes_box(q->planes, q->plane_count, b->lo, b->hi, dims);
    case QUERY_RAY:
        return sphere ? qm_ray_sphere(&q->ray, c, r, dims, q->ray.max_t, value)
                      : qm_ray_box(&q->ray, b->lo, b->hi, dims, q->ray.max_t, value);
    case QUERY_NEAREST:
        *value =
            sphere ? qm_sphere_dist2(q->p, c, r, dims) : qm_box_dist2(q->p, b->lo, b->hi, dims);
        return true;
    }
    return false;
}

/* Object id passed the structure's tests; the exact test decides. Candidates take every object
 * the structure reached. */
static void offer(const broadphase_world *w, const query *q, query_out *o, uint32_t id) {
    double v = 0.0;
    if (q->candidates) {
        put_id(o, id);
        return;
    }
    if (!object_hit(w, q, id, &v)) return;
    if (q->kind == QUERY_RAY)
        put_hit(q, o, id, v);
    else if (q->kind == QUERY_NEAREST)
        put_near(q, o, id, v);
    else
        put_id(o, id);
}

/* ---- walking a structure ------------------------------------------------------------------ */

enum { OUTSIDE, PARTIAL, INSIDE };

/* A sphere's box is kept within the float range (bits_round_down), so a sphere reaching past
 * FLT_MAX has a box that ends at FLT_MAX while its ball goes on. A box query, a ball query, a
 * point and a nearest search meet such a ball within the float range if at all (their regions
 * are finite, and the nearest point of a ball lies between the query and its centre); a pair
 * likewise. A ray or a half-space can meet it beyond FLT_MAX only: for them a bound at
 * -FLT_MAX or FLT_MAX reads as unbounded (a box that really ends there is then tested
 * exactly). True when some bound reaches the range's end. */
static bool unclamp(const float lo[3], const float hi[3], int dims, float ulo[3], float uhi[3]) {
    bool any = false;
    for (int k = 0; k < 3; k++) {
        bool l = k < dims && lo[k] <= -FLT_MAX, h = k < dims && hi[k] >= FLT_MAX;
        ulo[k] = l ? -INFINITY : lo[k];
        uhi[k] = h ? INFINITY : hi[k];
        any |= l | h;
    }
    return any;
}

/* The bounds as a ray or a plane query reads them: unclamped in a world where a sphere reached
 * past the float range (q->far), as they are otherwise. */
static inline void reach_bounds(const query *q, const float lo[3], const float hi[3], float ulo[3],
                                float uhi[3]) {
    if (q->far) {
        unclamp(lo, hi, q->dims, ulo, uhi);
        return;
    }
    memcpy(ulo, lo, 3 * sizeof *ulo);
    memcpy(uhi, hi, 3 * sizeof *uhi);
}

/* The query against bounds that contain every object under a node; *key: the least entry t of a
 * ray or the least squared distance, rounded as the results are (0 otherwise). */
static int classify(const query *q, const float lo[3], const float hi[3], double *key) {
    int dims = q->dims;
    *key = 0.0;
    switch (q->kind) {
    case QUERY_BOX: {
        bool inside = true;
        for (int k = 0; k < dims; k++) {
            if (lo[k] > q->hi[k] || hi[k] < q->lo[k]) return OUTSIDE;
            inside = inside && lo[k] >= q->lo[k] && hi[k] <= q->hi[k];
        }
        return inside ? INSIDE : PARTIAL;
    }
    case QUERY_SPHERE: {
        double r2 = (double)q->r * (double)q->r;
        if (qm_box_dist2(q->c, lo, hi, dims) > r2) return OUTSIDE;
        return qm_box_far2(q->c, lo, hi, dims) <= r2 ? INSIDE : PARTIAL;
    }
    case QUERY_PLANES: {
        /* OUTSIDE by the bounds read as unbounded at the range's end; INSIDE by the bounds as
         * they are (every point of them inside: so is the centre of every ball under them) */
        float ulo[3], uhi[3];
        reach_bounds(q, lo, hi, ulo, uhi);
        if (!qm_planes_box(q->planes, q->plane_count, ulo, uhi, dims)) return OUTSIDE;
        return qm_planes_box_inside(q->planes, q->plane_count, lo, hi, dims) ? INSIDE : PARTIAL;
    }
    case QUERY_RAY: {
        double t;
        float ulo[3], uhi[3];
        reach_bounds(q, lo, hi, ulo, uhi);
        if (!qm_ray_box(&q->ray, ulo, uhi, dims, q->ray.max_t, &t)) return OUTSIDE;
        *key = (float)t;
        return PARTIAL;
    }
    case QUERY_NEAREST:
        *key = (float)qm_box_dist2(q->p, lo, hi, dims);
        return PARTIAL;
    }
    return OUTSIDE;
}

/* classify for the ordered walks. A nearest search's key is computed in float and lowered by a
 * relative 4e-6, above the float figure's error, so it stays at or below the exact key (what
 * pruning needs: a node is skipped only when its key exceeds the bound); an overflowed figure
 * takes the exact path. */
static inline int classify_ordered(const query *q, const float lo[3], const float hi[3],
                                   double *key) {
    if (q->kind != QUERY_NEAREST) return classify(q, lo, hi, key);
    float s = 0.0f;
    for (int k = 0; k < q->dims; k++) {
        float a = lo[k] - q->p[k], b = q->p[k] - hi[k];
        float g = a > b ? a : b;
        g = g > 0.0f ? g : 0.0f;
        s += g * g;
    }
    if (!(s < INFINITY)) return classify(q, lo, hi, key);
    *key = (double)(s * 0.999996f);
    return PARTIAL;
}

static inline void box_at(const simd_boxes *b, uint32_t i, int dims, float lo[3], float hi[3]) {
    for (int k = 0; k < 3; k++) {
        lo[k] = k < dims ? b->min[k][i] : 0.0f;
        hi[k] = k < dims ? b->max[k][i] : 0.0f;
    }
}

/* A box holding every point the query can still accept (a ray's segment, a ball around the
 * nearest point with the worst distance kept so far), rounded outward; false when unbounded. */
static bool reach_box(const query *q, const query_out *o, float lo[3], float hi[3]) {
    int dims = q->dims;
    for (int k = dims; k < 3; k++) lo[k] = hi[k] = 0.0f;
    if (q->kind == QUERY_BOX || q->kind == QUERY_SPHERE) {
        memcpy(lo, q->lo, sizeof q->lo);
        memcpy(hi, q->hi, sizeof q->hi);
        return true;
    }
    if (q->kind == QUERY_RAY) {
        double t = q->closest && o->bound < q->ray.max_t ? o->bound : q->ray.max_t;
        if (!isfinite(t)) return false;
        for (int k = 0; k < dims; k++) {
            double a = q->ray.o[k], z = q->ray.o[k] + q->ray.d[k] * t;
            double mn = a < z ? a : z, mx = a < z ? z : a;
            lo[k] = bits_round_down(mn);
            hi[k] = bits_round_up(mx);
        }
        return true;
    }
    if (q->kind == QUERY_NEAREST && isfinite(o->bound)) {
        /* a distance kept rounds to at most the bound: below the next float up (which also
         * covers squared distances that underflowed to 0) */
        double r = sqrt((double)bits_next_up((float)o->bound)) * (1.0 + 1e-6);
        for (int k = 0; k < dims; k++) {
            lo[k] = bits_round_down((double)q->p[k] - r);
            hi[k] = bits_round_up((double)q->p[k] + r);
        }
        return true;
    }
    return false;
}

/* Nearest: the float distance filter first (simd_point_vs_boxes, 8 entries at a time, with the
 * bound as it stands and a relative margin of 1e-5 above the float figure's error), then the
 * exact double test of what it kept, against the bound as it tightens. */
static inline __attribute__((always_inline)) void
nearest_objects_in(const broadphase_world *w, const query *q, query_out *o, query_member m,
                   const query_node *n, uint32_t begin, uint32_t end, int dims) {
    uint32_t kept[PIECE + SIMD_PAD];
    for (uint32_t s = begin; s < end; s += PIECE) {
        uint32_t e = end - s > PIECE ? s + PIECE : end;
        float limit = o->bound < INFINITY ? (float)o->bound * 1.00001f : INFINITY;
        size_t h = simd_point_vs_boxes(q->p, limit, &n->own, s, e, dims, kept);
        for (size_t j = 0; j < h; j++) {
            float lo[3], hi[3];
            box_at(&n->own, kept[j], dims, lo, hi);
            double d2 = qm_box_dist2(q->p, lo, hi, dims);
            uint32_t id = n->own_id[kept[j]];
            if ((double)(float)d2 > o->bound || !member(w, m, id)) continue;
            if (is_box(w, id))
                put_near(q, o, id, d2);
            else
                offer(w, q, o, id);
        }
    }
}

/* dims as a constant in each copy, so that the per-object loops unroll. */
static void nearest_objects(const broadphase_world *w, const query *q, query_out *o, query_member m,
                            const query_node *n, uint32_t begin, uint32_t end) {
    if (q->dims == 3)
        nearest_objects_in(w, q, o, m, n, begin, end, 3);
    else
        nearest_objects_in(w, q, o, m, n, begin, end, 2);
}

/* Rays: the float filter first (8 entries at a time), then the exact test of what it kept. A
 * closest ray's filter stops at the best t so far. A ray whose reciprocals are beyond the
 * filter's range skips it: every entry goes to the exact test. */
static void ray_objects(const broadphase_world *w, const query *q, query_out *o, query_member m,
                        const query_node *n, uint32_t begin, uint32_t end) {
    int dims = q->dims;
    simd_ray kr = q->kray;
    if (q->closest && o->bound < (double)kr.max_t) kr.max_t = (float)o->bound;
    uint32_t kept[PIECE + SIMD_PAD];
    /* The float filter reads a bound at the float range's end as the end (unclamp): it is
     * skipped where a sphere's box may stop there, in a world where one did (q->far) and a
     * node whose bounds reach it (a kd-tree's outer cells are unbounded). */
    float ulo[3], uhi[3];
    bool filter = q->kray_ok && (!q->far || !unclamp(n->own_lo, n->own_hi, dims, ulo, uhi));
    for (uint32_t s = begin; s < end; s += PIECE) {
        uint32_t e = end - s > PIECE ? s + PIECE : end;
        size_t h = 0;
        if (filter)
            h = simd_ray_vs_boxes(&kr, &n->own, s, e, dims, kept);
        else
            for (uint32_t i = s; i < e; i++) kept[h++] = i;
        for (size_t j = 0; j < h; j++) {
            float lo[3], hi[3];
            box_at(&n->own, kept[j], dims, lo, hi);
            /* an entry reaching the range's end: a filter only (its t at most the object's) */
            bool far = q->far && unclamp(lo, hi, dims, lo, hi);
            double t;
            if (!qm_ray_box(&q->ray, lo, hi, dims, q->ray.max_t, &t)) continue;
            if (q->closest && (double)(float)t > o->bound) continue;
            uint32_t id = n->own_id[kept[j]];
            if (!member(w, m, id)) continue;
            if (is_box(w, id) && !far)
                put_hit(q, o, id, t);
            else
                offer(w, q, o, id);
        }
    }
}

/* A node's own objects: the kernel (or the scalar test of the entry's box), the entry's
 * membership, then the object's exact test. */
static void own_objects(const broadphase_world *w, const query *q, query_out *o, query_member m,
                        const query_node *n) {
    int dims = q->dims;
    const simd_boxes *b = &n->own;
    double key;
    if (classify(q, n->own_lo, n->own_hi, &key) == OUTSIDE || key > o->bound) return;
    uint32_t begin = n->own_begin, end = n->own_end;
    float rlo[3], rhi[3];
    if (n->sweep < 3 && reach_box(q, o, rlo, rhi)) {
        /* only the run whose min can reach the box on the sweep axis */
        const float *key_min = b->min[n->sweep];
        float from = bits_next_down(rlo[n->sweep] - n->reach);
        begin = tree_bound(key_min, begin, end, from, false);
        end = tree_bound(key_min, begin, end, rhi[n->sweep], true);
    }
    if (q->kind == QUERY_BOX || q->kind == QUERY_SPHERE) {
        if (q->candidates) {
            for (uint32_t i = begin; i < end; i++)
                if (member(w, m, n->own_id[i])) put_id(o, n->own_id[i]);
            return;
        }
        uint32_t hits[PIECE + SIMD_PAD];
        for (uint32_t s = begin; s < end; s += PIECE) {
            uint32_t e = end - s > PIECE ? s + PIECE : end;
            size_t h = simd_box_vs_boxes(q->lo, q->hi, b, s, e, dims, hits);
            for (size_t j = 0; j < h; j++) {
                uint32_t id = n->own_id[hits[j]];
                if (!member(w, m, id)) continue;
                /* a box's entry is its exact box: the kernel's test was the exact one */
                if (q->kind == QUERY_BOX && is_box(w, id))
                    put_id(o, id);
                else
                    offer(w, q, o, id);
            }
        }
        return;
    }
    if (q->kind == QUERY_NEAREST) {
        nearest_objects(w, q, o, m, n, begin, end);
        return;
    }
    if (q->kind == QUERY_RAY) {
        ray_objects(w, q, o, m, n, begin, end);
        return;
    }
    float lo[3], hi[3]; /* planes */
    for (uint32_t i = begin; i < end; i++) {
        box_at(b, i, dims, lo, hi);
        if (q->far) unclamp(lo, hi, dims, lo, hi); /* a filter: offer() tests the object */
        uint32_t id = n->own_id[i];
        if (qm_planes_box(q->planes, q->plane_count, lo, hi, dims) && member(w, m, id))
            offer(w, q, o, id);
    }
}

/* A walk entry for a node's own objects alone (no handle uses the top bit). */
#define OWN_ONLY (UINT64_C(1) << 63)

/* A node to visit, already classified against the query by its bounds when it was pushed: a
 * child the query misses costs the read of its bounds alone. */
typedef struct walk_entry {
    uint64_t handle;
    double key;
    int cls;
} walk_entry;

static void walk(const broadphase_world *w, const query *q, query_out *o, const query_view *v) {
    walk_entry stack[STACK_MAX];
    int top = 0;
    bool ordered = (q->kind == QUERY_RAY && q->closest) || q->kind == QUERY_NEAREST;
    bool whole = q->kind == QUERY_BOX || q->kind == QUERY_SPHERE || q->kind == QUERY_PLANES;
    float lo[3], hi[3];
    walk_entry root = {v->root, 0.0, OUTSIDE};
    v->bounds(v->structure, v->root, lo, hi);
    root.cls = classify(q, lo, hi, &root.key);
    if (root.cls != OUTSIDE) stack[top++] = root;
    query_node n;
    while (top > 0 && !o->failed) {
        walk_entry e = stack[--top];
        if (ordered && e.key > o->bound) continue; /* the bound tightened since it was pushed */
        v->node(v->structure, e.handle & ~OWN_ONLY, &n);
        if (e.handle & OWN_ONLY) {
            own_objects(w, q, o, v->member, &n);
            continue;
        }
        if (e.cls == INSIDE && whole) { /* the articles' second case: the whole subtree, untested */
            for (uint32_t i = n.sub_begin; i < n.sub_end; i++)
                if (member(w, v->member, n.sub_id[i])) put_id(o, n.sub_id[i]);
            continue;
        }
        if (top + n.children + 1 > STACK_MAX) { /* cannot happen with the structures' depths */
            o->failed = true;
            return;
        }
        if (!ordered) {
            if (n.own_end > n.own_begin) own_objects(w, q, o, v->member, &n);
            for (int j = n.children - 1; j >= 0; j--) {
                walk_entry c = {n.child[j], 0.0, OUTSIDE};
                v->bounds(v->structure, c.handle, lo, hi);
                c.cls = classify(q, lo, hi, &c.key);
                if (c.cls == OUTSIDE) continue;
                if (v->prefetch) v->prefetch(v->structure, c.handle);
                stack[top++] = c;
            }
            continue;
        }
        /* Ordered: the own objects after the children (below them on the stack), so that the
         * nearer subtrees tighten the bound first; a kd-tree's upper nodes hold many. */
        double own_key;
        if (n.own_end > n.own_begin &&
            classify_ordered(q, n.own_lo, n.own_hi, &own_key) != OUTSIDE && own_key <= o->bound) {
            if (n.children == 0)
                own_objects(w, q, o, v->member, &n);
            else
                stack[top++] = (walk_entry){e.handle | OWN_ONLY, own_key, PARTIAL};
        }
        /* Nearer child first: push the farthest first. */
        walk_entry kids[8];
        int m = 0;
        for (int j = 0; j < n.children; j++) {
            walk_entry c = {n.child[j], 0.0, OUTSIDE};
            v->bounds(v->structure, c.handle, lo, hi);
            c.cls = classify_ordered(q, lo, hi, &c.key);
            if (c.cls == OUTSIDE || c.key > o->bound) continue;
            if (v->prefetch) v->prefetch(v->structure, c.handle);
            int at = m++;
            for (; at > 0 && kids[at - 1].key < c.key; at--) kids[at] = kids[at - 1];
            kids[at] = c;
        }
        for (int j = 0; j < m; j++) stack[top++] = kids[j];
    }
}

/* Objects tested one by one: the few changed since the last step, or every object (brute
 * force). The entry box is the object's current bounding box. */
static void scan_ids(const broadphase_world *w, const query *q, query_out *o, const uint32_t *ids,
                     size_t count) {
    for (size_t i = 0; i < count && !o->failed; i++) {
        uint32_t id = ids ? ids[i] : (uint32_t)i;
        if (w->kind[id] == OBJECT_FREE) continue;
        if (q->candidates) {
            if (simd_pair_box_box(q->lo, q->hi, w->box[id].lo, w->box[id].hi, q->dims))
                put_id(o, id);
            continue;
        }
        offer(w, q, o, id);
    }
}

/* ---- catching up with changes ------------------------------------------------------------ */

void query_state_init(query_state *s) {
    threads_mutex_init(&s->lock);
}

void query_state_release(broadphase_world *w) {
    query_state *s = &w->query;
    field_release(&s->field, &w->heap);
    heap_free(&w->heap, s->pending, s->pending_capacity * sizeof(uint32_t));
    heap_free(&w->heap, s->flag, s->flag_capacity);
    threads_mutex_destroy(&s->lock);
}

/* The objects that the structures of the last step do not show as they are now. */
static bool gather(broadphase_world *w) {
    query_state *s = &w->query;
    s->structures = w->last_step_ok;
    s->use_field = false;
    s->pending_count = 0;
    s->current = s->structures && w->moved_count == 0;
    if (s->current) return true;
    size_t need = s->structures ? w->moved_count : w->live_count;
    if (!heap_grow(&w->heap, (void **)&s->pending, &s->pending_capacity, need + 1, sizeof(uint32_t),
                   0))
        return false;
    for (uint32_t i = 0; i < w->id_end; i++)
        if (w->kind[i] != OBJECT_FREE && (!s->structures || w->changed[i] == w->epoch))
            s->pending[s->pending_count++] = i;
    if (s->pending_count < PENDING_FIELD_MIN) return true;
    if (!heap_grow(&w->heap, (void **)&s->flag, &s->flag_capacity, w->id_end, 1, 0)) return false;
    memset(s->flag, 0, w->id_end);
    for (size_t i = 0; i < s->pending_count; i++) s->flag[s->pending[i]] = 1;
    field_source src = {
        w->box, w->kind, s->flag, w->id_end, s->pending_count, w->config.dimensions, w->workers};
    if (!field_build(&s->field, &w->heap, &src)) return false;
    s->use_field = true;
    return true;
}

/* Brings the queries' view up to date with the world, once per change: the first query after a
 * mutation or step gathers, under the lock, while the others wait; later ones see it done.
 * The world is const to the queries; this is its one lazily written part. */
static bool query_sync(const broadphase_world *cw) {
    broadphase_world *w = (broadphase_world *)cw;
    query_state *s = &w->query;
    uint64_t want = w->generation + 1;
    if (__atomic_load_n(&s->synced, __ATOMIC_ACQUIRE) == want) return true;
    threads_mutex_lock(&s->lock);
    bool ok = true;
    if (__atomic_load_n(&s->synced, __ATOMIC_RELAXED) != want) {
        ok = gather(w);
        if (ok) __atomic_store_n(&s->synced, want, __ATOMIC_RELEASE);
    }
    threads_mutex_unlock(&s->lock);
    return ok;
}

/* Every place an object may be, each object found once (after query_sync). */
static void run_query(const broadphase_world *w, const query *q, query_out *o) {
    if (!w->method->query_view) { /* no structure: every object */
        scan_ids(w, q, o, NULL, w->id_end);
        return;
    }
    const query_state *s = &w->query;
    query_view v;
    if (s->structures) {
        /* With nothing changed, no entry of the tree or the static field is stale. */
        query_member m = s->current ? QUERY_MEMBER_CURRENT : QUERY_MEMBER_TREE;
        if (w->method_state && w->method->query_view(w->method_state, &v)) {
            v.member = m;
            walk(w, q, o, &v);
        }
        if (w->static_count > 0 && field_query_view(&w->statics.pyramid, m, &v)) walk(w, q, o, &v);
        if (w->rest.count > 0 && field_query_view(&w->rest.field.pyramid, QUERY_MEMBER_REST, &v))
            walk(w, q, o, &v);
    }
    if (s->use_field) {
        if (field_query_view(&s->field, QUERY_MEMBER_CURRENT, &v)) walk(w, q, o, &v);
    } else {
        scan_ids(w, q, o, s->pending, s->pending_count);
    }
}

/* ---- checking input ---------------------------------------------------------------------- */

static broadphase_status check_world(const broadphase_world *w) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (__atomic_load_n(&w->busy, __ATOMIC_ACQUIRE)) return BROADPHASE_ERROR_BUSY;
    return BROADPHASE_OK;
}

static bool finite3(const float v[3], int dims) {
    for (int k = 0; k < dims; k++)
        if (!isfinite(v[k])) return false;
    return true;
}

static broadphase_status make_box(query *q, int dims, const float lo[3], const float hi[3],
                                  bool candidates) {
    if (!lo || !hi) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!finite3(lo, dims) || !finite3(hi, dims)) return BROADPHASE_ERROR_NONFINITE;
    for (int k = 0; k < dims; k++)
        if (lo[k] > hi[k]) return BROADPHASE_ERROR_INVERTED_BOX;
    memset(q, 0, sizeof *q);
    q->kind = QUERY_BOX;
    q->dims = dims;
    q->candidates = candidates;
    for (int k = 0; k < dims; k++) {
        q->lo[k] = lo[k];
        q->hi[k] = hi[k];
    }
    return BROADPHASE_OK;
}

static broadphase_status make_sphere(query *q, int dims, const float c[3], float r) {
    if (!c) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!finite3(c, dims) || !isfinite(r)) return BROADPHASE_ERROR_NONFINITE;
    if (r < 0.0f) return BROADPHASE_ERROR_NEGATIVE_RADIUS;
    memset(q, 0, sizeof *q);
    q->kind = QUERY_SPHERE;
    q->dims = dims;
    q->r = r;
    for (int k = 0; k < dims; k++) {
        q->c[k] = c[k];
        /* widened outward, so that the kernel's float test keeps all the exact test takes */
        q->lo[k] = bits_round_down((double)c[k] - r);
        q->hi[k] = bits_round_up((double)c[k] + r);
    }
    return BROADPHASE_OK;
}

static broadphase_status make_ray(query *q, const broadphase_world *w, const float o[3],
                                  const float d[3], float max_t, bool closest) {
    int dims = w->config.dimensions;
    if (!o || !d) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!finite3(o, dims) || !finite3(d, dims) || isnan(max_t)) return BROADPHASE_ERROR_NONFINITE;
    bool zero = true;
    for (int k = 0; k < dims; k++) zero = zero && d[k] == 0.0f;
    if (zero || max_t < 0.0f) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    memset(q, 0, sizeof *q);
    q->kind = QUERY_RAY;
    q->dims = dims;
    q->closest = closest;
    q->far = __atomic_load_n(&w->spheres_past_floats, __ATOMIC_RELAXED);
    qm_ray_init(&q->ray, o, d, max_t, dims);
    q->kray.max_t = max_t;
    q->kray_ok = true;
    for (int k = 0; k < dims; k++) {
        q->kray.o[k] = o[k];
        q->kray.flat[k] = d[k] == 0.0f;
        q->kray.inv[k] = q->kray.flat[k] ? 0.0f : (float)q->ray.inv[k];
        double m = fabs(q->ray.inv[k]);
        if (!q->kray.flat[k] && !(m > 1e-30 && m < 1e30)) q->kray_ok = false;
    }
    return BROADPHASE_OK;
}

static broadphase_status make_planes(query *q, const broadphase_world *w, const float (*planes)[4],
                                     size_t count) {
    int dims = w->config.dimensions;
    if (count > 0 && !planes) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < count; i++) {
        bool zero = true;
        for (int k = 0; k < dims; k++) zero = zero && planes[i][k] == 0.0f;
        if (!finite3(planes[i], dims) || !isfinite(planes[i][3])) return BROADPHASE_ERROR_NONFINITE;
        if (zero) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    }
    memset(q, 0, sizeof *q);
    q->kind = QUERY_PLANES;
    q->far = __atomic_load_n(&w->spheres_past_floats, __ATOMIC_RELAXED);
    q->dims = dims;
    q->planes = planes;
    q->plane_count = count;
    return BROADPHASE_OK;
}

static broadphase_status make_nearest(query *q, int dims, const float p[3], size_t k) {
    if (!p) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!finite3(p, dims)) return BROADPHASE_ERROR_NONFINITE;
    memset(q, 0, sizeof *q);
    q->kind = QUERY_NEAREST;
    q->dims = dims;
    q->k = k;
    for (int a = 0; a < dims; a++) q->p[a] = p[a];
    return BROADPHASE_OK;
}

/* ---- single queries ------------------------------------------------------------------------ */

static void out_init(query_out *o, query_buf *b) {
    memset(o, 0, sizeof *o);
    o->buf = b;
    o->bound = INFINITY;
    o->best = (broadphase_ray_hit){BROADPHASE_NO_HIT, INFINITY};
}

/* Runs an id query (box, candidates, ball, point, planes) into the caller's buffer. */
static broadphase_status ids_query(const broadphase_world *w, const query *q, uint32_t *ids_out,
                                   size_t capacity, size_t *count_out) {
    if (!count_out || (!ids_out && capacity > 0)) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    *count_out = 0;
    if (!query_sync(w)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    uint32_t local[STACK_RESULTS];
    query_buf b = {local, STACK_RESULTS, sizeof(uint32_t), false};
    query_out o;
    out_init(&o, &b);
    run_query(w, q, &o);
    broadphase_status s = BROADPHASE_OK;
    if (o.failed) {
        s = BROADPHASE_ERROR_OUT_OF_MEMORY;
    } else {
        *count_out = o.count;
        if (o.count > capacity) {
            s = BROADPHASE_ERROR_BUFFER_TOO_SMALL;
        } else {
            sort_ids(b.data, o.count);
            if (o.count) memcpy(ids_out, b.data, o.count * sizeof(uint32_t));
        }
    }
    if (b.owned) free(b.data);
    return s;
}

broadphase_status broadphase_query_box(const broadphase_world *w, const float min[3],
                                       const float max[3], uint32_t *ids_out, size_t capacity,
                                       size_t *count_out) {
    broadphase_status s = check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = make_box(&q, w->config.dimensions, min, max, false);
    return s == BROADPHASE_OK ? ids_query(w, &q, ids_out, capacity, count_out) : s;
}

broadphase_status broadphase_query_box_candidates(const broadphase_world *w, const float min[3],
                                                  const float max[3], uint32_t *ids_out,
                                                  size_t capacity, size_t *count_out) {
    broadphase_status s = check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = make_box(&q, w->config.dimensions, min, max, true);
    if (s != BROADPHASE_OK) return s;
    if (!w->method->query_view) { /* no structure: every object */
        float lo[3] = {-INFINITY, -INFINITY, -INFINITY}, hi[3] = {INFINITY, INFINITY, INFINITY};
        memcpy(q.lo, lo, sizeof lo);
        memcpy(q.hi, hi, sizeof hi);
    }
    return ids_query(w, &q, ids_out, capacity, count_out);
}

broadphase_status broadphase_query_sphere(const broadphase_world *w, const float center[3],
                                          float radius, uint32_t *ids_out, size_t capacity,
                                          size_t *count_out) {
    broadphase_status s = check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = make_sphere(&q, w->config.dimensions, center, radius);
    return s == BROADPHASE_OK ? ids_query(w, &q, ids_out, capacity, count_out) : s;
}

broadphase_status broadphase_query_point(const broadphase_world *w, const float point[3],
                                         uint32_t *ids_out, size_t capacity, size_t *count_out) {
    broadphase_status s = check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = make_box(&q, w->config.dimensions, point, point, false);
    return s == BROADPHASE_OK ? ids_query(w, &q, ids_out, capacity, count_out) : s;
}

broadphase_status broadphase_query_planes(const broadphase_world *w, const float (*planes)[4],
                                          size_t plane_count, uint32_t *ids_out, size_t capacity,
                                          size_t *count_out) {
    broadphase_status s = check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = make_planes(&q, w, planes, plane_count);
    return s == BROADPHASE_OK ? ids_query(w, &q, ids_out, capacity, count_out) : s;
}

broadphase_status broadphase_raycast(const broadphase_world *w, const float origin[3],
                                     const float dir[3], float max_t, broadphase_ray_hit *hits_out,
                                     size_t capacity, size_t *count_out) {
    broadphase_status s = check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = make_ray(&q, w, origin, dir, max_t, false);
    if (s != BROADPHASE_OK) return s;
    if (!count_out || (!hits_out && capacity > 0)) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    *count_out = 0;
    if (!query_sync(w)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    broadphase_ray_hit local[STACK_RESULTS];
    query_buf b = {local, STACK_RESULTS, sizeof(broadphase_ray_hit), false};
    query_out o;
    out_init(&o, &b);
    run_query(w, &q, &o);
    if (o.failed) {
        s = BROADPHASE_ERROR_OUT_OF_MEMORY;
    } else {
        *count_out = o.count;
        if (o.count > capacity) {
            s = BROADPHASE_ERROR_BUFFER_TOO_SMALL;
        } else if (o.count) {
            qsort(b.data, o.count, sizeof(broadphase_ray_hit), compare_hits);
            memcpy(hits_out, b.data, o.count * sizeof(broadphase_ray_hit));
        }
    }
    if (b.owned) free(b.data);
    return s;
}

broadphase_status broadphase_raycast_closest(const broadphase_world *w, const float origin[3],
                                             const float dir[3], float max_t,
                                             broadphase_ray_hit *hit_out, bool *found_out) {
    broadphase_status s = check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = make_ray(&q, w, origin, dir, max_t, true);
    if (s != BROADPHASE_OK) return s;
    if (!hit_out || !found_out) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!query_sync(w)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    query_buf b = {NULL, 0, sizeof(broadphase_ray_hit), false};
    query_out o;
    out_init(&o, &b);
    run_query(w, &q, &o);
    *hit_out = o.best;
    *found_out = o.found;
    return BROADPHASE_OK;
}

broadphase_status broadphase_nearest(const broadphase_world *w, const float point[3], size_t k,
                                     uint32_t *ids_out, float *dist2_out, size_t *count_out) {
    broadphase_status s = check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = make_nearest(&q, w->config.dimensions, point, k);
    if (s != BROADPHASE_OK) return s;
    if (!count_out || (!ids_out && k > 0)) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    *count_out = 0;
    if (k == 0) return BROADPHASE_OK;
    if (!query_sync(w)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    float local[STACK_RESULTS];
    float *d2 = dist2_out ? dist2_out : k <= STACK_RESULTS ? local : malloc(k * sizeof(float));
    if (!d2) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    query_buf b = {NULL, 0, sizeof(uint32_t), false};
    query_out o;
    out_init(&o, &b);
    o.heap_id = ids_out;
    o.heap_d2 = d2;
    run_query(w, &q, &o);
    heap_finish(&q, &o);
    *count_out = o.heap_n;
    if (d2 != dist2_out && d2 != local) free(d2);
    return BROADPHASE_OK;
}

/* ---- batches ----------------------------------------------------------------------------- */

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
} batch_worker;

typedef struct batch {
    const broadphase_world *w;
    batch_kind kind;
    const void *input;
    size_t count, k;
    size_t *offsets; /* rows: counts, then their exclusive scan */
    size_t *chunk_start;
    int *chunk_worker;
    batch_worker *workers;
    void *dst; /* rows: the caller's ids or hits */
    broadphase_ray_hit *closest;
    uint32_t *near_ids;
    float *near_d2;
    size_t *near_counts;
    uint32_t *order; /* the queries in space-filling-curve order (NULL: as given) */
} batch;

/* Query i of the batch; the input was checked. */
static broadphase_status batch_query(const batch *b, size_t i, query *q) {
    int dims = b->w->config.dimensions;
    if (b->kind == BATCH_BOXES) {
        const broadphase_boxes *x = b->input;
        float lo[3] = {x->min_x[i], x->min_y[i], dims == 3 ? x->min_z[i] : 0.0f};
        float hi[3] = {x->max_x[i], x->max_y[i], dims == 3 ? x->max_z[i] : 0.0f};
        return make_box(q, dims, lo, hi, false);
    }
    if (b->kind == BATCH_SPHERES) {
        const broadphase_spheres *x = b->input;
        float c[3] = {x->x[i], x->y[i], dims == 3 ? x->z[i] : 0.0f};
        return make_sphere(q, dims, c, x->radius[i]);
    }
    if (b->kind == BATCH_NEAREST) {
        const broadphase_points *x = b->input;
        float p[3] = {x->x[i], x->y[i], dims == 3 ? x->z[i] : 0.0f};
        return make_nearest(q, dims, p, b->k);
    }
    const broadphase_rays *x = b->input;
    float o[3] = {x->origin_x[i], x->origin_y[i], dims == 3 ? x->origin_z[i] : 0.0f};
    float d[3] = {x->dir_x[i], x->dir_y[i], dims == 3 ? x->dir_z[i] : 0.0f};
    return make_ray(q, b->w, o, d, x->max_t[i], b->kind == BATCH_CLOSEST);
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
 * but speed. False on out of memory. */
static bool batch_order(batch *b, int workers) {
    if (b->count < ORDER_MIN || b->count > UINT32_MAX) return true;
    int dims = b->w->config.dimensions;
    uint64_t *keys = malloc(b->count * sizeof *keys), *tmp = malloc(b->count * sizeof *tmp);
    uint32_t *tmp_order = malloc(b->count * sizeof *tmp_order);
    void *hist = malloc(threads_radix_scratch_size(workers));
    b->order = malloc(b->count * sizeof *b->order);
    bool ok = keys && tmp && tmp_order && hist && b->order;
    if (ok) {
        float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
        for (size_t i = 0; i < b->count; i++) {
            float p[3];
            batch_anchor(b, i, p);
            for (int k = 0; k < dims; k++) {
                lo[k] = fminf(lo[k], p[k]);
                hi[k] = fmaxf(hi[k], p[k]);
            }
        }
        int bits = dims == 3 ? 10 : 15;
        double scale[3] = {0, 0, 0}, cells = (double)((1u << bits) - 1);
        for (int k = 0; k < dims; k++) {
            double span = (double)hi[k] - (double)lo[k]; /* finite: the input was checked */
            scale[k] = span > 0.0 ? cells / span : 0.0;
        }
        for (size_t i = 0; i < b->count; i++) {
            float p[3];
            batch_anchor(b, i, p);
            uint64_t c[3] = {0, 0, 0};
            for (int k = 0; k < dims; k++) {
                double u = ((double)p[k] - (double)lo[k]) * scale[k];
                c[k] = u < cells ? (uint64_t)u : (uint64_t)cells;
            }
            keys[i] = dims == 3
                          ? bits_spread3(c[0]) | bits_spread3(c[1]) << 1 | bits_spread3(c[2]) << 2
                          : bits_spread2(c[0]) | bits_spread2(c[1]) << 1;
            b->order[i] = (uint32_t)i;
        }
        threads_radix_sort_pairs(workers, keys, b->order, tmp, tmp_order, b->count,
                                 3 * bits - (dims == 2 ? bits : 0), hist);
    }
    free(keys);
    free(tmp);
    free(tmp_order);
    free(hist);
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

/* Every query of the batch is checked before any runs: the first bad one is named. */
static broadphase_status batch_check(const batch *b, size_t *bad) {
    *bad = SIZE_MAX;
    for (size_t i = 0; i < b->count; i++) {
        query q;
        broadphase_status s = batch_query(b, i, &q);
        if (s != BROADPHASE_OK) {
            *bad = i;
            return s;
        }
    }
    return BROADPHASE_OK;
}

static void batch_rows_chunk(size_t c, int worker, void *p) {
    batch *b = p;
    batch_worker *k = &b->workers[worker];
    b->chunk_start[c] = k->used;
    b->chunk_worker[c] = worker;
    size_t end = (c + 1) * BATCH_CHUNK < b->count ? (c + 1) * BATCH_CHUNK : b->count;
    for (size_t j = c * BATCH_CHUNK; j < end && !k->failed; j++) {
        size_t i = b->order ? b->order[j] : j;
        query q;
        batch_query(b, i, &q);
        query_out o;
        out_init(&o, &k->buf);
        o.base = k->used;
        run_query(b->w, &q, &o);
        if (o.failed) {
            k->failed = true;
            return;
        }
        if (o.count > 0) {
            void *row = (char *)k->buf.data + o.base * k->buf.elem;
            if (b->kind == BATCH_RAYS)
                qsort(row, o.count, sizeof(broadphase_ray_hit), compare_hits);
            else
                sort_ids(row, o.count);
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
    for (size_t j = begin; j < end; j++) {
        size_t i = b->order ? b->order[j] : j;
        query q;
        batch_query(b, i, &q);
        query_buf none = {NULL, 0, sizeof(uint32_t), false};
        query_out o;
        out_init(&o, &none);
        if (b->kind == BATCH_NEAREST) {
            o.heap_id = b->near_ids + i * b->k;
            o.heap_d2 = b->near_d2 ? b->near_d2 + i * b->k : k->d2;
        }
        run_query(b->w, &q, &o);
        if (b->kind == BATCH_NEAREST) {
            heap_finish(&q, &o);
            b->near_counts[i] = o.heap_n;
        } else {
            b->closest[i] = o.best;
        }
    }
}

static void batch_release(batch *b, int workers) {
    if (b->workers)
        for (int i = 0; i < workers; i++) {
            if (b->workers[i].buf.owned) free(b->workers[i].buf.data);
            free(b->workers[i].d2);
        }
    free(b->workers);
    free(b->chunk_start);
    free(b->chunk_worker);
    free(b->order);
}

/* Runs a batch; rows: into dst (elements of `elem` bytes) by the offsets protocol. */
static broadphase_status batch_run(batch *b, size_t elem, size_t capacity, size_t *total) {
    const broadphase_world *w = b->w;
    int workers = w->workers;
    size_t chunks = (b->count + BATCH_CHUNK - 1) / BATCH_CHUNK;
    bool rows = b->kind == BATCH_BOXES || b->kind == BATCH_SPHERES || b->kind == BATCH_RAYS;
    broadphase_status s = BROADPHASE_OK;
    if (!query_sync(w)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    /* one cache line each at least (sizeof is a multiple of the 64-byte alignment) */
    b->workers = aligned_alloc(64, (size_t)workers * sizeof *b->workers);
    if (b->workers) memset(b->workers, 0, (size_t)workers * sizeof *b->workers);
    if (rows) {
        b->chunk_start = malloc((chunks + 1) * sizeof(size_t));
        b->chunk_worker = malloc((chunks + 1) * sizeof(int));
    }
    bool ok =
        b->workers && (!rows || (b->chunk_start && b->chunk_worker)) && batch_order(b, workers);
    for (int i = 0; ok && i < workers; i++) {
        b->workers[i].buf.elem = elem;
        if (b->kind == BATCH_NEAREST && !b->near_d2 && b->k > 0) {
            b->workers[i].d2 = malloc(b->k * sizeof(float));
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
        batch_release(b, workers);
        return BROADPHASE_OK;
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
    if (!offsets || (!dst && capacity > 0) || (count > 0 && !input) ||
        (count > 0 && !batch_input_ok(w, kind, input)))
        return BROADPHASE_ERROR_INVALID_ARGUMENT;
    batch b = {
        .w = w, .kind = kind, .input = input, .count = count, .offsets = offsets, .dst = dst};
    broadphase_status s = batch_check(&b, bad_index);
    return s == BROADPHASE_OK ? batch_run(&b, elem, capacity, total) : s;
}

static broadphase_status id_rows(const broadphase_world *w, batch_kind kind, size_t count,
                                 const void *input, broadphase_id_rows *rows) {
    broadphase_status s = check_world(w);
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
    broadphase_status s = check_world(w);
    if (s != BROADPHASE_OK) return s;
    if (!rows) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    return rows_batch(w, BATCH_RAYS, count, rays, rows->offsets, rows->hits,
                      sizeof(broadphase_ray_hit), rows->capacity, &rows->total, &rows->bad_index);
}

broadphase_status broadphase_raycasts_closest(const broadphase_world *w, size_t count,
                                              const broadphase_rays *rays,
                                              broadphase_ray_hit *hits_out, size_t *bad_index_out) {
    broadphase_status s = check_world(w);
    if (s != BROADPHASE_OK) return s;
    size_t bad = SIZE_MAX;
    if (count > 0 && (!rays || !hits_out || !batch_input_ok(w, BATCH_CLOSEST, rays))) {
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
    broadphase_status s = check_world(w);
    if (s != BROADPHASE_OK) return s;
    size_t bad = SIZE_MAX;
    if (count > 0 && (!points || !counts_out || (k > 0 && !ids_out) ||
                      !batch_input_ok(w, BATCH_NEAREST, points))) {
        s = BROADPHASE_ERROR_INVALID_ARGUMENT;
    } else {
        batch b = {.w = w,
                   .kind = BATCH_NEAREST,
                   .input = points,
                   .count = count,
                   .k = k,
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
