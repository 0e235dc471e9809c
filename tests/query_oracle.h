/* The spatial queries' reference, shared by test_query and test_methods: a mirror of every object
 * by id as the test last set it, random queries of every type (and their edge cases), the
 * reference's answer from the exact predicates, and the comparison of a world's answers with it
 * (check_queries); the mirror's helpers that change a world and the mirror alike. */
#pragma once

#include "oracle.h"
#include "query_math.h"

#include <float.h>
#include <math.h>

/* ---- the reference: every object by id, as the test last set it -------------------------- */

typedef struct mirror {
    size_t cap;
    int dims;
    uint8_t *alive, *sphere;
    float (*lo)[3], (*hi)[3], (*c)[3];
    float *r;
} mirror;

static inline void mirror_reserve(mirror *m, size_t cap) {
    if (cap <= m->cap) return;
    size_t n = cap * 2;
    m->alive = realloc(m->alive, n);
    m->sphere = realloc(m->sphere, n);
    m->lo = realloc(m->lo, n * sizeof *m->lo);
    m->hi = realloc(m->hi, n * sizeof *m->hi);
    m->c = realloc(m->c, n * sizeof *m->c);
    m->r = realloc(m->r, n * sizeof *m->r);
    memset(m->alive + m->cap, 0, n - m->cap);
    m->cap = n;
}

static inline void mirror_free(mirror *m) {
    free(m->alive);
    free(m->sphere);
    free(m->lo);
    free(m->hi);
    free(m->c);
    free(m->r);
}

static inline void mirror_set(mirror *m, uint32_t id, bool sphere, const float lo[3],
                              const float hi[3], const float c[3], float r) {
    mirror_reserve(m, (size_t)id + 1);
    m->alive[id] = 1;
    m->sphere[id] = sphere;
    for (int k = 0; k < 3; k++) {
        m->lo[id][k] = k < m->dims ? lo[k] : 0.0f;
        m->hi[id][k] = k < m->dims ? hi[k] : 0.0f;
        m->c[id][k] = k < m->dims ? c[k] : 0.0f;
    }
    m->r[id] = r;
}

/* The bounds of every live object (for placing queries). */
static inline void mirror_extent(const mirror *m, float lo[3], float hi[3]) {
    for (int k = 0; k < 3; k++) {
        lo[k] = 0.0f;
        hi[k] = 1.0f;
    }
    bool first = true;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->alive[i]) continue;
        for (int k = 0; k < m->dims; k++) {
            /* within the float range (the edge scenes' spheres reach past it) */
            float a = m->sphere[i] ? fmaxf(m->c[i][k] - m->r[i], -FLT_MAX) : m->lo[i][k];
            float b = m->sphere[i] ? fminf(m->c[i][k] + m->r[i], FLT_MAX) : m->hi[i][k];
            lo[k] = first || a < lo[k] ? a : lo[k];
            hi[k] = first || b > hi[k] ? b : hi[k];
        }
        first = false;
    }
}

typedef enum qtype { Q_BOX, Q_SPHERE, Q_POINT, Q_PLANES, Q_RAY, Q_NEAREST, Q_TYPES } qtype;

typedef struct qdesc {
    qtype type;
    float lo[3], hi[3]; /* box; point in lo */
    float c[3], r;
    float planes[6][4];
    size_t plane_count;
    float o[3], d[3], max_t;
    size_t k;
    float max_d; /* nearest: the greatest distance (make_query sets it; INFINITY: none) */
} qdesc;

/* The reference's value for object id: hit or not, and a ray's t or a squared distance. */
static inline bool ref_object(const mirror *m, uint32_t id, const qdesc *q, double *v) {
    int dims = m->dims;
    bool s = m->sphere[id];
    const float *lo = m->lo[id], *hi = m->hi[id], *c = m->c[id];
    float r = m->r[id];
    switch (q->type) {
    case Q_BOX:
        return s ? simd_pair_box_sphere(q->lo, q->hi, c, r, dims)
                 : simd_pair_box_box(q->lo, q->hi, lo, hi, dims);
    case Q_POINT:
        return s ? simd_pair_box_sphere(q->lo, q->lo, c, r, dims)
                 : simd_pair_box_box(q->lo, q->lo, lo, hi, dims);
    case Q_SPHERE:
        return s ? simd_pair_sphere_sphere(q->c, q->r, c, r, dims)
                 : simd_pair_box_sphere(lo, hi, q->c, q->r, dims);
    case Q_PLANES:
        return s ? qm_planes_sphere((const float(*)[4])q->planes, q->plane_count, c, r, dims)
                 : qm_planes_box((const float(*)[4])q->planes, q->plane_count, lo, hi, dims);
    case Q_RAY: {
        qm_ray ray;
        qm_ray_init(&ray, q->o, q->d, q->max_t, dims);
        return s ? qm_ray_sphere(&ray, c, r, dims, q->max_t, v)
                 : qm_ray_box(&ray, lo, hi, dims, q->max_t, v);
    }
    case Q_NEAREST:
        *v = s ? qm_sphere_dist2(q->lo, c, r, dims) : qm_box_dist2(q->lo, lo, hi, dims);
        return *v <= (double)q->max_d * (double)q->max_d; /* closed, in double */
    default:
        return false;
    }
}

typedef struct ranked {
    float key;
    uint32_t id;
} ranked;

static inline int ranked_compare(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The reference's answer: ids ascending, or (t, id) / (dist2, id) ascending, cut to k. */
static inline size_t reference(const mirror *m, const qdesc *q, ranked *out) {
    size_t n = 0;
    for (uint32_t id = 0; id < m->cap; id++) {
        if (!m->alive[id]) continue;
        double v = 0.0;
        if (!ref_object(m, id, q, &v)) continue;
        out[n++] = (ranked){(q->type == Q_RAY || q->type == Q_NEAREST) ? (float)v : 0.0f, id};
    }
    qsort(out, n, sizeof *out, ranked_compare);
    if (q->type == Q_NEAREST && n > q->k) n = q->k;
    return n;
}

/* ---- random queries ------------------------------------------------------------------------- */

static inline float in_range(uint64_t *rng, float a, float b) {
    /* in double: b - a may pass FLT_MAX */
    return (float)((double)a + ((double)b - (double)a) * (double)scene_uniform(rng));
}

/* A live id, or UINT32_MAX when there is none. */
static inline uint32_t some_live(const mirror *m, uint64_t *rng) {
    for (int tries = 0; tries < 64 && m->cap; tries++) {
        uint32_t id = (uint32_t)(scene_splitmix64(rng) % m->cap);
        if (m->alive[id]) return id;
    }
    for (uint32_t id = 0; id < m->cap; id++)
        if (m->alive[id]) return id;
    return UINT32_MAX;
}

static inline void clip_floats(float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        v[i] = v[i] < -FLT_MAX ? -FLT_MAX : v[i] > FLT_MAX ? FLT_MAX : v[i];
}

/* A query's numbers kept within the float range: near its end (the edge scenes) the sums above
 * overflow, and an infinite input is the caller's error, not a query. max_t may be infinite. */
static inline void keep_finite(qdesc *q) {
    clip_floats(q->lo, 3);
    clip_floats(q->hi, 3);
    clip_floats(q->c, 3);
    clip_floats(&q->r, 1);
    clip_floats(&q->planes[0][0], 6 * 4);
    clip_floats(q->o, 3);
    clip_floats(q->d, 3);
}

/* Query number i of a set: random ones of every size, and the edge cases (touching an object
 * exactly, covering everything, rays along the axes and from inside objects). */
static inline qdesc make_query(const mirror *m, qtype type, int i, uint64_t *rng) {
    qdesc q;
    memset(&q, 0, sizeof q);
    q.type = type;
    int dims = m->dims;
    float lo[3], hi[3];
    mirror_extent(m, lo, hi);
    float ext[3];
    for (int k = 0; k < 3; k++) /* (as large as a float goes, at the edge scenes) */
        ext[k] = hi[k] - lo[k] > 0 ? fminf(hi[k] - lo[k], FLT_MAX) : 1.0f;
    float scale = i % 4 == 0 ? 0.5f : i % 4 == 1 ? 0.1f : 0.02f;
    uint32_t obj = some_live(m, rng);
    float p[3];
    for (int k = 0; k < 3; k++) p[k] = k < dims ? in_range(rng, lo[k], hi[k]) : 0.0f;
    switch (type) {
    case Q_BOX:
    case Q_POINT:
        for (int k = 0; k < dims; k++) {
            float h = ext[k] * scale * scene_uniform(rng);
            q.lo[k] = p[k] - h;
            q.hi[k] = p[k] + h;
        }
        if (obj != UINT32_MAX && i % 5 == 1) { /* the object's own box (or a corner of it) */
            for (int k = 0; k < dims; k++) {
                q.lo[k] = m->sphere[obj] ? m->c[obj][k] : m->lo[obj][k];
                q.hi[k] = m->sphere[obj] ? m->c[obj][k] + m->r[obj] : m->hi[obj][k];
            }
        }
        if (obj != UINT32_MAX && i % 5 == 2 && !m->sphere[obj]) { /* touching its max face */
            for (int k = 0; k < dims; k++) {
                q.lo[k] = m->hi[obj][k];
                q.hi[k] = m->hi[obj][k] + ext[k] * 0.01f;
            }
        }
        if (i % 7 == 3)
            for (int k = 0; k < dims; k++) { /* the whole world and more */
                q.lo[k] = lo[k] - ext[k];
                q.hi[k] = hi[k] + ext[k];
            }
        if (type == Q_POINT && i % 3 == 0)
            for (int k = 0; k < dims; k++) q.lo[k] = p[k];
        break;
    case Q_SPHERE:
        memcpy(q.c, p, sizeof p);
        q.r = i % 6 == 5 ? 0.0f : ext[0] * scale * scene_uniform(rng);
        if (obj != UINT32_MAX && i % 5 == 1 && !m->sphere[obj]) {
            /* centred on a box's max corner, radius 0: touches it */
            for (int k = 0; k < dims; k++) q.c[k] = m->hi[obj][k];
            q.r = 0.0f;
        }
        if (i % 7 == 3) q.r = 4.0f * (ext[0] + ext[1] + ext[2]);
        break;
    case Q_PLANES: {
        q.plane_count = (size_t)(i % 7);
        for (size_t j = 0; j < q.plane_count; j++) {
            float n[3] = {0, 0, 0};
            for (int k = 0; k < dims; k++) n[k] = in_range(rng, -1.0f, 1.0f);
            if (j % 3 == 2) { /* axis-aligned */
                for (int k = 0; k < dims; k++) n[k] = 0.0f;
                n[j % (size_t)dims] = j % 2 ? 1.0f : -1.0f;
            }
            if (n[0] == 0.0f && n[1] == 0.0f) n[0] = 1.0f;
            double s = 0.0;
            for (int k = 0; k < dims; k++) s += (double)n[k] * p[k];
            for (int k = 0; k < 3; k++) q.planes[j][k] = n[k];
            q.planes[j][3] = (float)(-s + (double)ext[0] * scale * (scene_uniform(rng) - 0.2));
        }
        break;
    }
    case Q_RAY: {
        memcpy(q.o, p, sizeof p);
        for (int k = 0; k < dims; k++) q.d[k] = in_range(rng, -1.0f, 1.0f) * ext[k];
        if (i % 5 == 1) { /* along an axis */
            for (int k = 0; k < dims; k++) q.d[k] = 0.0f;
            q.d[i % dims] = i % 2 ? ext[0] : -ext[0];
        }
        if (obj != UINT32_MAX && i % 5 == 2) /* from inside an object */
            for (int k = 0; k < dims; k++) q.o[k] = m->sphere[obj] ? m->c[obj][k] : m->lo[obj][k];
        if (i % 7 == 4) /* a reciprocal beyond the float filter's range: the exact path */
            q.d[1] = 1e-32f;
        if (q.d[0] == 0.0f && q.d[1] == 0.0f) q.d[0] = 1.0f;
        q.max_t = i % 4 == 3 ? INFINITY : i % 4 == 2 ? 0.0f : scale * 2.0f;
        break;
    }
    case Q_NEAREST:
        memcpy(q.lo, p, sizeof p);
        if (obj != UINT32_MAX && i % 5 == 1)
            for (int k = 0; k < dims; k++) q.lo[k] = m->sphere[obj] ? m->c[obj][k] : m->lo[obj][k];
        q.k = i % 4 == 0 ? 1 : i % 4 == 1 ? 16 : i % 4 == 2 ? 3 : 5000;
        /* a greatest distance on some (no draw from rng: the other queries stay as they were):
         * none, a part of the world's size, 0 (only what holds the point), or the distance of
         * an object's own corner from the point, so that one lies exactly on it */
        q.max_d = INFINITY;
        if (i % 6 == 1 || i % 6 == 4) q.max_d = fminf(ext[0], ext[1]) * scale;
        if (i % 6 == 5) q.max_d = 0.0f;
        if (i % 6 == 2 && obj != UINT32_MAX && !m->sphere[obj]) {
            double d2 = qm_box_dist2(q.lo, m->lo[obj], m->hi[obj], dims);
            float d = (float)sqrt(d2);
            /* the float whose square, in double, is nearest d2 from above: the object is in */
            while ((double)d * (double)d < d2) d = nextafterf(d, INFINITY);
            q.max_d = d;
        }
        break;
    default:
        break;
    }
    keep_finite(&q);
    return q;
}

/* ---- running a query and comparing ------------------------------------------------------- */

typedef struct answer {
    broadphase_status status;
    size_t count;
    ranked *items;
} answer;

static inline answer ask(const broadphase_world *w, const qdesc *q, size_t capacity, ranked *items,
                         uint32_t *ids, broadphase_ray_hit *hits, float *d2) {
    answer a = {BROADPHASE_OK, 0, items};
    switch (q->type) {
    case Q_BOX:
        a.status = broadphase_query_box(w, q->lo, q->hi, ids, capacity, &a.count);
        break;
    case Q_POINT:
        a.status = broadphase_query_point(w, q->lo, ids, capacity, &a.count);
        break;
    case Q_SPHERE:
        a.status = broadphase_query_sphere(w, q->c, q->r, ids, capacity, &a.count);
        break;
    case Q_PLANES:
        a.status = broadphase_query_planes(w, (const float(*)[4])q->planes, q->plane_count, ids,
                                           capacity, &a.count);
        break;
    case Q_RAY:
        a.status = broadphase_raycast(w, q->o, q->d, q->max_t, hits, capacity, &a.count);
        break;
    case Q_NEAREST:
        a.status =
            q->max_d == INFINITY
                ? broadphase_nearest(w, q->lo, q->k < capacity ? q->k : capacity, ids, d2, &a.count)
                : broadphase_nearest_within(w, q->lo, q->k < capacity ? q->k : capacity, q->max_d,
                                            ids, d2, &a.count);
        break;
    default:
        break;
    }
    for (size_t i = 0; a.status == BROADPHASE_OK && i < a.count; i++) {
        if (q->type == Q_RAY)
            items[i] = (ranked){hits[i].t, hits[i].id};
        else
            items[i] = (ranked){q->type == Q_NEAREST ? d2[i] : 0.0f, ids[i]};
    }
    return a;
}

static inline bool same_answer(const ranked *want, size_t nwant, const ranked *got, size_t ngot,
                               const char *what) {
    size_t n = nwant < ngot ? nwant : ngot;
    for (size_t i = 0; i < n; i++) {
        if (want[i].id != got[i].id || want[i].key != got[i].key) {
            fprintf(stderr, "%s: entry %zu: want (%g, %u), got (%g, %u) [%s]\n", what, i,
                    (double)want[i].key, want[i].id, (double)got[i].key, got[i].id, test_context);
            return false;
        }
    }
    if (nwant != ngot) {
        fprintf(stderr, "%s: want %zu results, got %zu [%s]\n", what, nwant, ngot, test_context);
        return false;
    }
    return true;
}

typedef struct scratch {
    size_t cap;
    ranked *want, *got;
    uint32_t *ids, *cand;
    broadphase_ray_hit *hits;
    float *d2;
} scratch;

static inline void scratch_reserve(scratch *s, size_t n) {
    n += 16;
    if (n <= s->cap) return;
    s->cap = n;
    s->want = realloc(s->want, n * sizeof *s->want);
    s->got = realloc(s->got, n * sizeof *s->got);
    s->ids = realloc(s->ids, n * sizeof *s->ids);
    s->cand = realloc(s->cand, n * sizeof *s->cand);
    s->hits = realloc(s->hits, n * sizeof *s->hits);
    s->d2 = realloc(s->d2, n * sizeof *s->d2);
}

static inline void scratch_free(scratch *s) {
    free(s->want);
    free(s->got);
    free(s->ids);
    free(s->cand);
    free(s->hits);
    free(s->d2);
}

/* Results compared by check_queries, so that a test cannot pass on empty answers. */
static long checked_results;

/* `per_type` queries of every type against the reference; the box queries' candidates too. */
static inline void check_queries(const broadphase_world *w, const mirror *m, int per_type,
                                 uint64_t seed, scratch *s) {
    uint64_t rng = seed;
    scratch_reserve(s, m->cap);
    for (int t = 0; t < Q_TYPES; t++) {
        for (int i = 0; i < per_type; i++) {
            qdesc q = make_query(m, (qtype)t, i, &rng);
            size_t nwant = reference(m, &q, s->want);
            answer a = ask(w, &q, s->cap, s->got, s->ids, s->hits, s->d2);
            CHECK_EQ_INT(a.status, BROADPHASE_OK);
            if (a.status != BROADPHASE_OK) return;
            char what[64];
            snprintf(what, sizeof what, "query type %d number %d seed %d", t, i, (int)seed);
            if (!same_answer(s->want, nwant, s->got, a.count, what)) {
                test_failures++;
                return;
            }
            checked_results += (long)nwant;
            if (q.type == Q_RAY) { /* the closest hit is the first of all hits */
                broadphase_ray_hit h;
                bool found;
                CHECK_EQ_INT(broadphase_raycast_closest(w, q.o, q.d, q.max_t, &h, &found),
                             BROADPHASE_OK);
                CHECK(found == (nwant > 0));
                if (found && nwant) {
                    CHECK_EQ_INT(h.id, s->want[0].id);
                    CHECK(h.t == s->want[0].key);
                }
            }
            if (q.type == Q_BOX) { /* candidates: hits <= candidates <= live objects */
                size_t nc = 0;
                CHECK_EQ_INT(broadphase_query_box_candidates(w, q.lo, q.hi, s->cand, s->cap, &nc),
                             BROADPHASE_OK);
                CHECK(nc >= nwant && nc <= broadphase_object_count(w));
                size_t j = 0;
                for (size_t h = 0; h < nwant; h++) {
                    while (j < nc && s->cand[j] < s->want[h].id) j++;
                    CHECK(j < nc && s->cand[j] == s->want[h].id);
                }
                for (size_t c = 0; c < nc; c++) {
                    CHECK(s->cand[c] < m->cap && m->alive[s->cand[c]]);
                    if (c) CHECK(s->cand[c - 1] < s->cand[c]);
                }
            }
        }
    }
}

/* ---- worlds that change ---------------------------------------------------------------------- */

static inline void add_scene_mirrored(const scene *sc, broadphase_world *w, uint32_t *ids,
                                      mirror *m) {
    CHECK_EQ_INT(scene_add_to_world(sc, w, ids), BROADPHASE_OK);
    for (size_t i = 0; i < sc->count; i++) {
        float lo[3], hi[3], c[3], r;
        scene_object(sc, i, lo, hi, c, &r);
        mirror_set(m, ids[i], sc->is_sphere[i], lo, hi, c, r);
    }
}

/* Moves every `stride`-th live object a little (boxes and spheres by their own calls). */
static inline void move_some(broadphase_world *w, mirror *m, size_t stride, size_t offset,
                             uint64_t *rng) {
    for (uint32_t id = (uint32_t)offset; id < m->cap; id += (uint32_t)stride) {
        if (!m->alive[id]) continue;
        float dx[3];
        for (int k = 0; k < 3; k++) dx[k] = k < m->dims ? in_range(rng, -2.0f, 2.0f) : 0.0f;
        if (m->sphere[id]) {
            float c[3];
            for (int k = 0; k < 3; k++) c[k] = m->c[id][k] + dx[k];
            float r = m->r[id];
            broadphase_spheres sp = {&c[0], &c[1], &c[2], &r};
            CHECK_EQ_INT(broadphase_move_spheres(w, 1, &id, &sp), BROADPHASE_OK);
            mirror_set(m, id, true, c, c, c, r);
        } else {
            float lo[3], hi[3];
            for (int k = 0; k < 3; k++) {
                lo[k] = m->lo[id][k] + dx[k];
                hi[k] = m->hi[id][k] + dx[k];
            }
            broadphase_boxes b = {&lo[0], &lo[1], &lo[2], &hi[0], &hi[1], &hi[2]};
            CHECK_EQ_INT(broadphase_move_boxes(w, 1, &id, &b), BROADPHASE_OK);
            mirror_set(m, id, false, lo, hi, lo, 0.0f);
        }
    }
}

static inline void remove_some(broadphase_world *w, mirror *m, size_t stride, size_t offset) {
    for (uint32_t id = (uint32_t)offset; id < m->cap; id += (uint32_t)stride) {
        if (!m->alive[id]) continue;
        CHECK_EQ_INT(broadphase_remove(w, 1, &id), BROADPHASE_OK);
        m->alive[id] = 0;
    }
}

/* A few new objects, a box and a sphere each time, near live ones. */
static inline void add_some(broadphase_world *w, mirror *m, int count, uint64_t *rng) {
    float lo[3], hi[3];
    mirror_extent(m, lo, hi);
    for (int i = 0; i < count; i++) {
        float c[3], h[3];
        for (int k = 0; k < 3; k++) {
            c[k] = k < m->dims ? in_range(rng, lo[k], hi[k]) : 0.0f;
            h[k] = k < m->dims ? in_range(rng, 0.5f, 1.0f) : 0.0f;
        }
        uint32_t id;
        if (i % 2) {
            float r = h[0];
            broadphase_spheres sp = {&c[0], &c[1], &c[2], &r};
            CHECK_EQ_INT(broadphase_add_spheres(w, 1, &sp, &id), BROADPHASE_OK);
            mirror_set(m, id, true, c, c, c, r);
        } else {
            float a[3], b[3];
            for (int k = 0; k < 3; k++) {
                a[k] = c[k] - h[k];
                b[k] = c[k] + h[k];
            }
            broadphase_boxes bx = {&a[0], &a[1], &a[2], &b[0], &b[1], &b[2]};
            CHECK_EQ_INT(broadphase_add_boxes(w, 1, &bx, &id), BROADPHASE_OK);
            mirror_set(m, id, false, a, b, c, 0.0f);
        }
    }
}
