/* One query's run (see query.c for where the objects are and why the numbers agree): its
 * results (ids, hits, the k nearest), the objects' own tests, and the walk over a structure's
 * nodes (query_view.h) that prunes by their bounds; query_run sends it to every structure. */
#include "bits.h"
#include "method.h"
#include "nearest_list.h"
#include "query_internal.h"
#include "tree.h"
#include "world.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- results ---------------------------------------------------------------------------- */

bool query_buf_room(query_buf *b, size_t need) {
    if (need <= b->capacity) return true;
    size_t cap = b->capacity * 2 > need ? b->capacity * 2 : need;
    if (cap < b->floor) cap = b->floor;
    if (cap > SIZE_MAX / b->elem) return false;
    void *d = heap_alloc(b->heap, cap * b->elem);
    if (!d) return false;
    if (b->capacity) memcpy(d, b->data, b->capacity * b->elem);
    query_buf_release(b);
    b->data = d;
    b->capacity = cap;
    b->owned = true;
    return true;
}

void query_buf_release(query_buf *b) {
    if (b->owned) heap_free(b->heap, b->data, b->capacity * b->elem);
    b->owned = false;
}

static inline void put_id(query_out *o, uint32_t id) {
    if (!query_buf_room(o->buf, o->base + o->count + 1)) {
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
    if (!query_buf_room(o->buf, o->base + o->count + 1)) {
        o->failed = true;
        return;
    }
    ((broadphase_ray_hit *)o->buf->data)[o->base + o->count++] = (broadphase_ray_hit){id, tf};
}

/* (d, a) ranks after (e, b). */
static void heap_sift_down(uint32_t *id, float *d2, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && near_ranks_after(d2[l], id[l], d2[m], id[m])) m = l;
        if (l + 1 < n && near_ranks_after(d2[l + 1], id[l + 1], d2[m], id[m])) m = l + 1;
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
    if (d2 > q->max_d2) return; /* farther than the query's greatest distance */
    float d = (float)d2;
    uint32_t *hid = o->heap_id;
    float *hd = o->heap_d2;
    if (q->k <= SORTED_K_MAX) {
        near_insert(hid, hd, &o->heap_n, q->k, id, d);
        if (o->heap_n == q->k) o->bound = hd[q->k - 1];
        return;
    }
    if (o->heap_n < q->k) {
        size_t i = o->heap_n++;
        while (i > 0 && near_ranks_after(d, id, hd[(i - 1) / 2], hid[(i - 1) / 2])) {
            hid[i] = hid[(i - 1) / 2];
            hd[i] = hd[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        hid[i] = id;
        hd[i] = d;
    } else if (near_ranks_after(hd[0], hid[0], d, id)) {
        hid[0] = id;
        hd[0] = d;
        heap_sift_down(hid, hd, o->heap_n, 0);
    } else {
        return;
    }
    if (o->heap_n == q->k) o->bound = hd[0];
}

/* The k best in ascending (dist2, id) order, in place. */
void query_finish_nearest(const query *q, query_out *o) {
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

void query_sort_hits(broadphase_ray_hit *hits, size_t n) {
    qsort(hits, n, sizeof *hits, compare_hits);
}

/* Up to RANK_SORT_MAX ids: each one's rank counted against all the others, in 32-bit lanes the
 * compiler vectorises (the ids with the top bit flipped, so that signed comparisons order them
 * as unsigned), then each put in its place; the ids are distinct (a query finds each object
 * once). No branch to mispredict: a ball's ids come in the tree's order, and the insertion sort
 * this replaced took 12% of a crowd's batch of balls. */
enum { RANK_SORT_MAX = 64 };
void query_sort_ids(uint32_t *ids, size_t n) {
    if (n < 2) return;
    if (n <= RANK_SORT_MAX) {
        int32_t key[RANK_SORT_MAX];
        for (size_t i = 0; i < n; i++) key[i] = (int32_t)(ids[i] ^ UINT32_C(0x80000000));
        for (size_t j = 0; j < n; j++) {
            int32_t x = key[j], r = 0;
            for (size_t i = 0; i < n; i++) r += key[i] < x;
            ids[r] = (uint32_t)x ^ UINT32_C(0x80000000);
        }
        return;
    }
    qsort(ids, n, sizeof *ids, compare_ids);
}

/* ---- the objects' own tests ------------------------------------------------------------ */

/* Whether a structure's entry for id stands for the object now (see query.h). */
static inline bool member(const broadphase_world *w, query_member m, uint32_t id) {
    if (m == QUERY_MEMBER_CURRENT) return true;
    if (w->store.changed[id] == w->epoch) return false;
    return m == QUERY_MEMBER_TREE || w->rest.at_rest[id];
}

/* A box's entry is its exact box (a sphere's is its bounding box); a world without spheres
 * needs no look at the object. */
static inline bool is_box(const broadphase_world *w, uint32_t id) {
    return w->store.sphere_count == 0 || w->store.kind[id] == OBJECT_BOX;
}

static inline void sphere_of(const broadphase_world *w, uint32_t id, float c[3], float *r) {
    for (int k = 0; k < 3; k++) c[k] = w->store.center[k][id];
    *r = w->store.radius[id];
}

/* The exact test of object id; *value gets a ray's entry t or a squared distance. */
static bool object_hit(const broadphase_world *w, const query *q, uint32_t id, double *value) {
    const world_box *b = &w->store.box[id];
    bool sphere = w->store.kind[id] == OBJECT_SPHERE;
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

void query_offer(const broadphase_world *w, const query *q, query_out *o, uint32_t id) {
    offer(w, q, o, id);
}

void query_take(const query *q, query_out *o, uint32_t id, double value) {
    if (q->kind == QUERY_NEAREST)
        put_near(q, o, id, value);
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
        if (w->store.kind[id] == OBJECT_FREE) continue;
        if (q->candidates) {
            if (simd_pair_box_box(q->lo, q->hi, w->store.box[id].lo, w->store.box[id].hi, q->dims))
                put_id(o, id);
            continue;
        }
        offer(w, q, o, id);
    }
}

/* Every place an object may be, each object found once (after query_sync). */
void query_run(const broadphase_world *w, const query *q, query_out *o) {
    /* A nearest search with a greatest distance starts bounded: every distance it takes rounds
     * to at most that distance's square rounded (rounding is monotone). */
    if (q->kind == QUERY_NEAREST && (double)(float)q->max_d2 < o->bound)
        o->bound = (double)(float)q->max_d2;
    if (!w->method->query_view) { /* no structure: every object */
        scan_ids(w, q, o, NULL, w->store.id_end);
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
        if (w->store.static_count > 0 && field_query_view(&w->statics.pyramid, m, &v))
            walk(w, q, o, &v);
        if (w->rest.count > 0 && field_query_view(&w->rest.field.pyramid, QUERY_MEMBER_REST, &v))
            walk(w, q, o, &v);
    }
    if (s->use_field) {
        if (field_query_view(&s->field, QUERY_MEMBER_CURRENT, &v)) walk(w, q, o, &v);
    } else {
        scan_ids(w, q, o, s->pending, s->pending_count);
    }
}

void query_out_init(query_out *o, query_buf *b) {
    memset(o, 0, sizeof *o);
    o->buf = b;
    o->bound = INFINITY;
    o->best = (broadphase_ray_hit){BROADPHASE_NO_HIT, INFINITY};
}
