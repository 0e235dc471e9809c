/* The spatial queries: box (and its candidates), ball, point, ray (all hits and the closest),
 * planes and k-nearest, single and batched, for every method.
 *
 * Where the objects are. After a successful step every live object is in exactly one of the
 * step's structures (the tree, the static field, the rest field) with the shape it had then;
 * an object changed since (changed[id] == epoch: moved, added, removed, refiltered, flagged)
 * is skipped there, and the changed ones that are alive are gathered by the first query after
 * the change into a list, and into a field of their own when there are many (query_sync). So
 * every live object is found once, with its current shape, and the step's structures are only
 * read. broadphase_update brings the structures up to date like a step, without the pairs:
 * after it only what changed since counts as changed. Before the first step or update and after
 * a failed one every object counts as changed. Brute
 * force walks no structure: it tests every object.
 *
 * Numbers. A node's bounds contain the boxes of the objects under it and every test is monotone
 * in the bounds (query_math.h), so pruning by the bounds never drops an object the exact test
 * would take; the object tests are the same functions brute force and the tests' reference
 * use, so all methods give the same ids, the same t and the same distances. */
#include "bits.h"
#include "method.h"
#include "query_internal.h"
#include "tree.h"
#include "world.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- catching up with changes ------------------------------------------------------------ */

void query_state_init(query_state *s) {
    threads_mutex_init(&s->lock);
}

void query_state_release(broadphase_world *w) {
    query_state *s = &w->query;
    field_release(&s->field, &w->heap);
    heap_free(&w->heap, s->pending, s->pending_capacity * sizeof(uint32_t));
    heap_free(&w->heap, s->flag, s->flag_capacity);
    query_batch_memory_release(&s->batch_memory, &w->heap);
    threads_mutex_destroy(&s->lock);
}

/* The objects that the structures of the last step do not show as they are now. */
static bool gather(broadphase_world *w) {
    query_state *s = &w->query;
    s->structures = w->structures_ok;
    s->use_field = false;
    s->pending_count = 0;
    s->current = s->structures && w->moved_count == 0;
    if (s->current) return true;
    size_t need = s->structures ? w->moved_count : w->store.live_count;
    if (!heap_grow(&w->heap, (void **)&s->pending, &s->pending_capacity, need + 1, sizeof(uint32_t),
                   0))
        return false;
    for (uint32_t i = 0; i < w->store.id_end; i++)
        if (w->store.kind[i] != OBJECT_FREE && (!s->structures || w->store.changed[i] == w->epoch))
            s->pending[s->pending_count++] = i;
    if (s->pending_count < PENDING_FIELD_MIN) return true;
    if (!heap_grow(&w->heap, (void **)&s->flag, &s->flag_capacity, w->store.id_end, 1, 0))
        return false;
    memset(s->flag, 0, w->store.id_end);
    for (size_t i = 0; i < s->pending_count; i++) s->flag[s->pending[i]] = 1;
    field_source src = {w->store.box,     w->store.kind,        s->flag,   w->store.id_end,
                        s->pending_count, w->config.dimensions, w->workers};
    if (!field_build(&s->field, &w->heap, &src)) return false;
    s->use_field = true;
    return true;
}

/* Brings the queries' view up to date with the world, once per change: the first query after a
 * mutation or step gathers, under the lock, while the others wait; later ones see it done.
 * The world is const to the queries; this is its one lazily written part. */
bool query_sync(const broadphase_world *cw) {
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

/* ---- checking input ---------------------------------------------------------------------- */

broadphase_status query_check_world(const broadphase_world *w) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (__atomic_load_n(&w->busy, __ATOMIC_ACQUIRE)) return BROADPHASE_ERROR_BUSY;
    return BROADPHASE_OK;
}

static bool finite3(const float v[3], int dims) {
    for (int k = 0; k < dims; k++)
        if (!isfinite(v[k])) return false;
    return true;
}

broadphase_status query_make_box(query *q, int dims, const float lo[3], const float hi[3],
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

broadphase_status query_make_sphere(query *q, int dims, const float c[3], float r) {
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

broadphase_status query_make_ray(query *q, const broadphase_world *w, const float o[3],
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
    q->far = __atomic_load_n(&w->store.spheres_past_floats, __ATOMIC_RELAXED);
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

broadphase_status query_make_planes(query *q, const broadphase_world *w, const float (*planes)[4],
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
    q->far = __atomic_load_n(&w->store.spheres_past_floats, __ATOMIC_RELAXED);
    q->dims = dims;
    q->planes = planes;
    q->plane_count = count;
    return BROADPHASE_OK;
}

broadphase_status query_make_nearest(query *q, int dims, const float p[3], size_t k,
                                     float max_distance) {
    if (!p) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!finite3(p, dims) || isnan(max_distance)) return BROADPHASE_ERROR_NONFINITE;
    if (max_distance < 0.0f) return BROADPHASE_ERROR_NEGATIVE_RADIUS;
    memset(q, 0, sizeof *q);
    q->kind = QUERY_NEAREST;
    q->dims = dims;
    q->k = k;
    /* exact in double: a float's square has at most 48 significant bits */
    q->max_d2 = (double)max_distance * (double)max_distance;
    for (int a = 0; a < dims; a++) q->p[a] = p[a];
    return BROADPHASE_OK;
}

/* ---- single queries ------------------------------------------------------------------------ */

/* Runs an id query (box, candidates, ball, point, planes) into the caller's buffer. */
static broadphase_status ids_query(const broadphase_world *w, const query *q, uint32_t *ids_out,
                                   size_t capacity, size_t *count_out) {
    if (!count_out || (!ids_out && capacity > 0)) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    *count_out = 0;
    if (!query_sync(w)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    uint32_t local[STACK_RESULTS];
    query_buf b = {local, STACK_RESULTS, sizeof(uint32_t), false, world_heap(w), 0};
    query_out o;
    query_out_init(&o, &b);
    query_run(w, q, &o);
    broadphase_status s = BROADPHASE_OK;
    if (o.failed) {
        s = BROADPHASE_ERROR_OUT_OF_MEMORY;
    } else {
        *count_out = o.count;
        if (o.count > capacity) {
            s = BROADPHASE_ERROR_BUFFER_TOO_SMALL;
        } else {
            query_sort_ids(b.data, o.count);
            if (o.count) memcpy(ids_out, b.data, o.count * sizeof(uint32_t));
        }
    }
    query_buf_release(&b);
    return s;
}

broadphase_status broadphase_query_box(const broadphase_world *w, const float min[3],
                                       const float max[3], uint32_t *ids_out, size_t capacity,
                                       size_t *count_out) {
    broadphase_status s = query_check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = query_make_box(&q, w->config.dimensions, min, max, false);
    return s == BROADPHASE_OK ? ids_query(w, &q, ids_out, capacity, count_out) : s;
}

broadphase_status broadphase_query_box_candidates(const broadphase_world *w, const float min[3],
                                                  const float max[3], uint32_t *ids_out,
                                                  size_t capacity, size_t *count_out) {
    broadphase_status s = query_check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = query_make_box(&q, w->config.dimensions, min, max, true);
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
    broadphase_status s = query_check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = query_make_sphere(&q, w->config.dimensions, center, radius);
    return s == BROADPHASE_OK ? ids_query(w, &q, ids_out, capacity, count_out) : s;
}

broadphase_status broadphase_query_point(const broadphase_world *w, const float point[3],
                                         uint32_t *ids_out, size_t capacity, size_t *count_out) {
    broadphase_status s = query_check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = query_make_box(&q, w->config.dimensions, point, point, false);
    return s == BROADPHASE_OK ? ids_query(w, &q, ids_out, capacity, count_out) : s;
}

broadphase_status broadphase_query_planes(const broadphase_world *w, const float (*planes)[4],
                                          size_t plane_count, uint32_t *ids_out, size_t capacity,
                                          size_t *count_out) {
    broadphase_status s = query_check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = query_make_planes(&q, w, planes, plane_count);
    return s == BROADPHASE_OK ? ids_query(w, &q, ids_out, capacity, count_out) : s;
}

broadphase_status broadphase_raycast(const broadphase_world *w, const float origin[3],
                                     const float dir[3], float max_t, broadphase_ray_hit *hits_out,
                                     size_t capacity, size_t *count_out) {
    broadphase_status s = query_check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = query_make_ray(&q, w, origin, dir, max_t, false);
    if (s != BROADPHASE_OK) return s;
    if (!count_out || (!hits_out && capacity > 0)) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    *count_out = 0;
    if (!query_sync(w)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    broadphase_ray_hit local[STACK_RESULTS];
    query_buf b = {local, STACK_RESULTS, sizeof(broadphase_ray_hit), false, world_heap(w), 0};
    query_out o;
    query_out_init(&o, &b);
    query_run(w, &q, &o);
    if (o.failed) {
        s = BROADPHASE_ERROR_OUT_OF_MEMORY;
    } else {
        *count_out = o.count;
        if (o.count > capacity) {
            s = BROADPHASE_ERROR_BUFFER_TOO_SMALL;
        } else if (o.count) {
            query_sort_hits(b.data, o.count);
            memcpy(hits_out, b.data, o.count * sizeof(broadphase_ray_hit));
        }
    }
    query_buf_release(&b);
    return s;
}

broadphase_status broadphase_raycast_closest(const broadphase_world *w, const float origin[3],
                                             const float dir[3], float max_t,
                                             broadphase_ray_hit *hit_out, bool *found_out) {
    broadphase_status s = query_check_world(w);
    query q;
    if (s == BROADPHASE_OK) s = query_make_ray(&q, w, origin, dir, max_t, true);
    if (s != BROADPHASE_OK) return s;
    if (!hit_out || !found_out) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!query_sync(w)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    query_buf b = {NULL, 0, sizeof(broadphase_ray_hit), false, world_heap(w), 0};
    query_out o;
    query_out_init(&o, &b);
    query_run(w, &q, &o);
    *hit_out = o.best;
    *found_out = o.found;
    return BROADPHASE_OK;
}

broadphase_status broadphase_nearest(const broadphase_world *w, const float point[3], size_t k,
                                     uint32_t *ids_out, float *dist2_out, size_t *count_out) {
    return broadphase_nearest_within(w, point, k, INFINITY, ids_out, dist2_out, count_out);
}

broadphase_status broadphase_nearest_within(const broadphase_world *w, const float point[3],
                                            size_t k, float max_distance, uint32_t *ids_out,
                                            float *dist2_out, size_t *count_out) {
    broadphase_status s = query_check_world(w);
    query q;
    if (s == BROADPHASE_OK)
        s = query_make_nearest(&q, w->config.dimensions, point, k, max_distance);
    if (s != BROADPHASE_OK) return s;
    if (!count_out || (!ids_out && k > 0)) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    *count_out = 0;
    if (k == 0) return BROADPHASE_OK;
    if (!query_sync(w)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    float local[STACK_RESULTS];
    float *d2 = dist2_out            ? dist2_out
                : k <= STACK_RESULTS ? local
                                     : heap_alloc(world_heap(w), k * sizeof(float));
    if (!d2) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    query_buf b = {NULL, 0, sizeof(uint32_t), false, world_heap(w), 0};
    query_out o;
    query_out_init(&o, &b);
    o.heap_id = ids_out;
    o.heap_d2 = d2;
    query_run(w, &q, &o);
    query_finish_nearest(&q, &o);
    *count_out = o.heap_n;
    if (d2 != dist2_out && d2 != local) heap_free(world_heap(w), d2, k * sizeof(float));
    return BROADPHASE_OK;
}
