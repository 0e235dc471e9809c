/* A world driven call by call beside a model of what it must hold, shared by the out-of-memory
 * injection test (test_faults.c) and the call-sequence fuzzer (fuzz_calls.c):
 *   - the model: every object by id (the query reference's mirror), its filter and static flag,
 *     the ids the world must hand out next, and the pairs brute force finds (filters and statics
 *     applied), with the events they imply;
 *   - the status and bad index each call must return, worked out from the model and the call's
 *     arguments alone (broadphase.h's validation rules), for valid and invalid calls alike;
 *   - a snapshot of the world's objects as the store holds them, to show that a failed call
 *     (bad input, or out of memory) changed nothing;
 *   - an allocator that fails the k-th allocation, counts what it holds (leaks) and sees a block
 *     given back with another size than it was asked for.
 * Each drive_* call makes the API call, checks its status and bad index, and on success
 * updates the model; when the allocator made it fail, it checks that nothing changed and makes
 * the call again (the allocator fails once), so that a script goes on to its end. */
#pragma once

#include "query_oracle.h"
#include "world.h"

#include <stdatomic.h>

/* ---- an allocator that fails the k-th allocation ------------------------------------------- */

typedef struct fault_allocator {
    atomic_long calls;      /* allocations asked for so far */
    long fail_at;           /* the one that fails (1-based); 0 = none */
    atomic_long failed;     /* allocations refused */
    atomic_long live;       /* blocks held */
    atomic_long wrong_size; /* blocks given back with a size other than the one asked for */
} fault_allocator;

/* Each block carries the size and alignment it was asked for just before it (in the alignment's
 * room in front of it), so that a free with another size is seen. */
typedef struct fault_header {
    size_t size, alignment;
} fault_header;

void __sanitizer_print_stack_trace(void) __attribute__((weak));

static inline void *fault_alloc(size_t size, size_t alignment, void *user) {
    fault_allocator *f = user;
    long n = atomic_fetch_add(&f->calls, 1) + 1;
    if (n == f->fail_at) {
        atomic_fetch_add(&f->failed, 1);
        if (getenv("DRIVE_TRACE") && __sanitizer_print_stack_trace) __sanitizer_print_stack_trace();
        return NULL;
    }
    unsigned char *base =
        aligned_alloc(alignment, alignment + (size + alignment - 1) / alignment * alignment);
    if (!base) return NULL;
    atomic_fetch_add(&f->live, 1);
    fault_header h = {size, alignment};
    memcpy(base + alignment - sizeof h, &h, sizeof h);
    return base + alignment;
}

static inline void fault_free(void *p, size_t size, void *user) {
    fault_allocator *f = user;
    fault_header h;
    memcpy(&h, (unsigned char *)p - sizeof h, sizeof h);
    if (h.size != size) atomic_fetch_add(&f->wrong_size, 1);
    atomic_fetch_sub(&f->live, 1);
    free((unsigned char *)p - h.alignment);
}

/* ---- the model ----------------------------------------------------------------------------- */

typedef struct model {
    mirror m; /* shapes by id (query_oracle.h); m.alive says which ids are live */
    size_t cap, live;
    broadphase_filter *filter;
    uint8_t *is_static;
    uint32_t *gen, *last_gen; /* times each id was handed out; as of the last good step */
    pair_list last;           /* the pairs of the last successful step */
    bool stepped;             /* a step has succeeded */
} model;

static inline void model_reserve(model *md, size_t cap) {
    mirror_reserve(&md->m, cap);
    if (cap <= md->cap) return;
    size_t n = cap * 2;
    md->filter = realloc(md->filter, n * sizeof *md->filter);
    md->is_static = realloc(md->is_static, n);
    md->gen = realloc(md->gen, n * sizeof *md->gen);
    md->last_gen = realloc(md->last_gen, n * sizeof *md->last_gen);
    memset(md->is_static + md->cap, 0, n - md->cap);
    memset(md->gen + md->cap, 0, (n - md->cap) * sizeof *md->gen);
    memset(md->last_gen + md->cap, 0, (n - md->cap) * sizeof *md->last_gen);
    md->cap = n;
}

static inline void model_free(model *md) {
    mirror_free(&md->m);
    free(md->filter);
    free(md->is_static);
    free(md->gen);
    free(md->last_gen);
    free(md->last.data);
    memset(md, 0, sizeof *md);
}

static inline bool model_live(const model *md, uint32_t id) {
    return id < md->m.cap && md->m.alive[id];
}

/* The ids an add of `count` gets: the lowest free ids, in order. */
static inline void model_next_ids(model *md, size_t count, uint32_t *ids) {
    model_reserve(md, md->live + count + 1);
    uint32_t id = 0;
    for (size_t i = 0; i < count; i++, id++) {
        while (model_live(md, id)) id++;
        ids[i] = id;
    }
}

static inline bool model_pairs_with(const model *md, uint32_t a, uint32_t b) {
    const mirror *m = &md->m;
    if (md->is_static[a] && md->is_static[b]) return false;
    const broadphase_filter *fa = &md->filter[a], *fb = &md->filter[b];
    if (!(fa->category & fb->mask) || !(fb->category & fa->mask)) return false;
    if (fa->group != 0 && fa->group == fb->group) return false;
    int d = m->dims;
    if (!m->sphere[a] && !m->sphere[b])
        return simd_pair_box_box(m->lo[a], m->hi[a], m->lo[b], m->hi[b], d);
    if (m->sphere[a] && m->sphere[b])
        return simd_pair_sphere_sphere(m->c[a], m->r[a], m->c[b], m->r[b], d);
    if (m->sphere[a]) return simd_pair_box_sphere(m->lo[b], m->hi[b], m->c[a], m->r[a], d);
    return simd_pair_box_sphere(m->lo[a], m->hi[a], m->c[b], m->r[b], d);
}

/* Brute force over the model: every pair of live objects that overlap and may pair. */
static inline void model_pairs(const model *md, pair_list *out) {
    out->count = 0;
    for (uint32_t a = 0; a < md->m.cap; a++) {
        if (!md->m.alive[a]) continue;
        for (uint32_t b = a + 1; b < md->m.cap; b++)
            if (md->m.alive[b] && model_pairs_with(md, a, b)) pair_list_push(out, a, b);
    }
}

/* ---- the world's objects, as the store holds them -------------------------------------------- */

typedef struct snapshot {
    size_t size;
    unsigned char *bytes;
} snapshot;

static inline void snap_put(snapshot *s, const void *p, size_t n) {
    s->bytes = realloc(s->bytes, s->size + n);
    memcpy(s->bytes + s->size, p, n);
    s->size += n;
}

/* Everything a caller can observe of the objects: which ids are live, their kinds, boxes,
 * spheres, filters and static flags, and the counts; not capacities or caches. */
static inline snapshot snapshot_take(const broadphase_world *w) {
    snapshot s = {0, NULL};
    const store *st = &w->store;
    snap_put(&s, &st->live_count, sizeof st->live_count);
    snap_put(&s, &st->static_count, sizeof st->static_count);
    snap_put(&s, &st->sphere_count, sizeof st->sphere_count);
    uint32_t free_ids = 0;
    for (uint32_t id = 0; id < st->id_end; id++) {
        uint8_t kind = st->kind[id];
        if (kind == OBJECT_FREE) {
            free_ids++;
            continue;
        }
        snap_put(&s, &id, sizeof id);
        snap_put(&s, &kind, 1);
        snap_put(&s, st->box[id].lo, 3 * sizeof(float));
        snap_put(&s, st->box[id].hi, 3 * sizeof(float));
        if (kind == OBJECT_SPHERE) {
            for (int k = 0; k < 3; k++) snap_put(&s, &st->center[k][id], sizeof(float));
            snap_put(&s, &st->radius[id], sizeof(float));
        }
        broadphase_filter f;
        bool stat;
        if (broadphase_get_filter(w, id, &f) == BROADPHASE_OK) snap_put(&s, &f, sizeof f);
        if (broadphase_get_static(w, id, &stat) == BROADPHASE_OK) snap_put(&s, &stat, 1);
    }
    snap_put(&s, &free_ids, sizeof free_ids);
    return s;
}

/* ---- expected statuses ----------------------------------------------------------------------- */

typedef struct verdict {
    broadphase_status status;
    size_t index; /* the bad element, SIZE_MAX when none */
} verdict;

static const verdict verdict_ok = {BROADPHASE_OK, SIZE_MAX};

/* The first bad box of a batch (non-finite before inverted, within one element). */
static inline verdict expect_boxes(int dims, size_t count, const broadphase_boxes *b) {
    const float *lo[3] = {b->min_x, b->min_y, b->min_z}, *hi[3] = {b->max_x, b->max_y, b->max_z};
    for (size_t i = 0; i < count; i++) {
        bool nonfinite = false, inverted = false;
        for (int k = 0; k < dims; k++) {
            nonfinite |= !isfinite(lo[k][i]) || !isfinite(hi[k][i]);
            inverted |= lo[k][i] > hi[k][i];
        }
        if (nonfinite) return (verdict){BROADPHASE_ERROR_NONFINITE, i};
        if (inverted) return (verdict){BROADPHASE_ERROR_INVERTED_BOX, i};
    }
    return verdict_ok;
}

static inline verdict expect_spheres(int dims, size_t count, const broadphase_spheres *s) {
    const float *c[3] = {s->x, s->y, s->z};
    for (size_t i = 0; i < count; i++) {
        bool nonfinite = !isfinite(s->radius[i]);
        for (int k = 0; k < dims; k++) nonfinite |= !isfinite(c[k][i]);
        if (nonfinite) return (verdict){BROADPHASE_ERROR_NONFINITE, i};
        if (s->radius[i] < 0.0f) return (verdict){BROADPHASE_ERROR_NEGATIVE_RADIUS, i};
    }
    return verdict_ok;
}

static inline bool boxes_columns(int dims, const broadphase_boxes *b) {
    const float *cols[6] = {b->min_x, b->min_y, b->min_z, b->max_x, b->max_y, b->max_z};
    for (int k = 0; k < dims; k++)
        if (!cols[k] || !cols[3 + k]) return false;
    return true;
}

static inline bool spheres_columns(int dims, const broadphase_spheres *s) {
    const float *cols[3] = {s->x, s->y, s->z};
    for (int k = 0; k < dims; k++)
        if (!cols[k]) return false;
    return s->radius != NULL;
}

/* Ids must be live and distinct: the first unknown id, or the second appearance of one. */
static inline verdict expect_ids(const model *md, size_t count, const uint32_t *ids) {
    for (size_t i = 0; i < count; i++) {
        if (!model_live(md, ids[i])) return (verdict){BROADPHASE_ERROR_UNKNOWN_ID, i};
        for (size_t j = 0; j < i; j++)
            if (ids[j] == ids[i]) return (verdict){BROADPHASE_ERROR_INVALID_ARGUMENT, i};
    }
    return verdict_ok;
}

/* A move: the first bad element, the id's fault winning a tie. */
static inline verdict expect_move(verdict ids, verdict values) {
    if (ids.status != BROADPHASE_OK &&
        (values.status == BROADPHASE_OK || ids.index <= values.index))
        return ids;
    return values;
}

/* ---- the drive ------------------------------------------------------------------------------- */

typedef struct drive {
    broadphase_world *w;
    broadphase_config config;
    model md;
    fault_allocator *faults; /* NULL: the C library's allocator */
    long out_of_memory;      /* calls that ran out of memory and changed nothing */
    long calls, bad_calls, steps, checked_pairs;
    pair_list want, begun, ended;
    scratch qs;
    bool failed; /* a check failed: the caller stops */
    /* 0: a script runs to its end. n > 0: once the allocator has failed, the script stops after
     * the n-th successful step that follows (each drive_* call then returns at once). */
    int steps_after_fault, steps_since_fault;
    bool stopped;
} drive;

static inline void drive_fail(drive *d, const char *what, long long got, long long want) {
    fprintf(stderr, "drive: %s: got %lld, want %lld [%s]\n", what, got, want, test_context);
    test_failures++;
    d->failed = true;
}

/* A call's status and bad index against the verdict. */
static inline void drive_expect(drive *d, const char *call, broadphase_status s, verdict v) {
    d->calls++;
    if (getenv("DRIVE_TRACE"))
        fprintf(stderr, "call %ld: %s -> %s (out of memory so far: %ld)\n", d->calls, call,
                broadphase_status_string(s), d->out_of_memory);
    if (v.status != BROADPHASE_OK) d->bad_calls++;
    char what[96];
    if (s != v.status) {
        snprintf(what, sizeof what, "%s status (%s)", call, broadphase_status_string(s));
        drive_fail(d, what, s, v.status);
        return;
    }
    size_t index = broadphase_last_error_index(d->w);
    if (index != v.index) {
        snprintf(what, sizeof what, "%s last_error_index", call);
        drive_fail(d, what, (long long)index, (long long)v.index);
    }
}

/* Runs CALL (an expression giving a status) until it does not run out of memory; each time it
 * does, the world's objects must be as they were. The allocator fails one allocation only, so
 * the second attempt gets past it. */
#define DRIVE_CALL(d, status, CALL)                                                                \
    do {                                                                                           \
        snapshot before_ = snapshot_take((d)->w);                                                  \
        for (int tries_ = 0;; tries_++) {                                                          \
            (status) = (CALL);                                                                     \
            if ((status) != BROADPHASE_ERROR_OUT_OF_MEMORY || !(d)->faults || tries_ > 3) break;   \
            (d)->out_of_memory++;                                                                  \
            snapshot after_ = snapshot_take((d)->w);                                               \
            if (after_.size != before_.size || memcmp(after_.bytes, before_.bytes, after_.size))   \
                drive_fail((d), "objects changed by a call that ran out of memory", 1, 0);         \
            free(after_.bytes);                                                                    \
        }                                                                                          \
        free(before_.bytes);                                                                       \
    } while (0)

/* A mutating call through DRIVE_CALL, its status and bad index checked against the verdict;
 * when the verdict is a failure (or the batch is empty), the objects must be as before. */
#define DRIVE_MUTATE(d, got, name, v, count, CALL)                                                 \
    do {                                                                                           \
        snapshot before_m_ = snapshot_take((d)->w);                                                \
        DRIVE_CALL(d, got, CALL);                                                                  \
        drive_expect((d), (name), (got), (v));                                                     \
        if ((v).status != BROADPHASE_OK || (count) == 0) drive_check_unchanged((d), &before_m_);   \
        free(before_m_.bytes);                                                                     \
    } while (0)

/* After a call that must not have changed the objects. */
static inline void drive_check_unchanged(drive *d, const snapshot *before) {
    snapshot after = snapshot_take(d->w);
    if (after.size != before->size || memcmp(after.bytes, before->bytes, after.size))
        drive_fail(d, "objects changed by a failed call", 1, 0);
    free(after.bytes);
}

static inline bool drive_open(drive *d, const broadphase_config *config, fault_allocator *faults) {
    memset(d, 0, sizeof *d);
    d->config = *config;
    d->faults = faults;
    d->md.m.dims = config->dimensions;
    if (faults) d->config.allocator = (broadphase_allocator){fault_alloc, fault_free, faults};
    broadphase_status s;
    for (int tries = 0;; tries++) {
        s = broadphase_create(&d->config, &d->w);
        if (s != BROADPHASE_ERROR_OUT_OF_MEMORY || !faults || tries > 3) break;
        d->out_of_memory++;
        if (d->w) drive_fail(d, "create set a world while out of memory", 1, 0);
        if (atomic_load(&faults->live) != 0)
            drive_fail(d, "blocks held after a create that ran out of memory",
                       atomic_load(&faults->live), 0);
    }
    if (s != BROADPHASE_OK) {
        drive_fail(d, "create", s, BROADPHASE_OK);
        return false;
    }
    model_reserve(&d->md, 64);
    return true;
}

static inline void drive_close(drive *d) {
    broadphase_destroy(d->w);
    if (d->faults && atomic_load(&d->faults->live) != 0)
        drive_fail(d, "blocks still held after destroy", atomic_load(&d->faults->live), 0);
    if (d->faults && atomic_load(&d->faults->wrong_size) != 0)
        drive_fail(d, "blocks given back with another size than asked for",
                   atomic_load(&d->faults->wrong_size), 0);
    model_free(&d->md);
    free(d->want.data);
    free(d->begun.data);
    free(d->ended.data);
    scratch_free(&d->qs);
    d->w = NULL;
}

/* Records object i of an accepted add or move in the model. */
static inline void model_set_box(model *md, uint32_t id, const broadphase_boxes *b, size_t i) {
    const float *lo[3] = {b->min_x, b->min_y, b->min_z}, *hi[3] = {b->max_x, b->max_y, b->max_z};
    float l[3] = {0}, h[3] = {0}, c[3] = {0};
    for (int k = 0; k < md->m.dims; k++) l[k] = lo[k][i], h[k] = hi[k][i];
    mirror_set(&md->m, id, false, l, h, c, 0.0f);
}

static inline void model_set_sphere(model *md, uint32_t id, const broadphase_spheres *s, size_t i) {
    const float *cs[3] = {s->x, s->y, s->z};
    float l[3] = {0}, h[3] = {0}, c[3] = {0};
    for (int k = 0; k < md->m.dims; k++) {
        c[k] = cs[k][i];
        l[k] = c[k] - s->radius[i];
        h[k] = c[k] + s->radius[i];
    }
    mirror_set(&md->m, id, true, l, h, c, s->radius[i]);
}

/* Object i of an accepted batch of one kind or the other. */
static inline void model_set_shape(model *md, uint32_t id, const broadphase_boxes *boxes,
                                   const broadphase_spheres *spheres, bool sphere_call, size_t i) {
    if (sphere_call)
        model_set_sphere(md, id, spheres, i);
    else
        model_set_box(md, id, boxes, i);
}

/* The arrays of a batch of shapes: the struct and its columns present (INVALID_ARGUMENT, naming
 * no element, when not), then the first bad element. */
static inline verdict expect_shapes(int dims, size_t count, const broadphase_boxes *boxes,
                                    const broadphase_spheres *spheres, bool sphere_call) {
    if (sphere_call ? !spheres || !spheres_columns(dims, spheres)
                    : !boxes || !boxes_columns(dims, boxes))
        return (verdict){BROADPHASE_ERROR_INVALID_ARGUMENT, SIZE_MAX};
    return sphere_call ? expect_spheres(dims, count, spheres) : expect_boxes(dims, count, boxes);
}

static inline void model_added(model *md, uint32_t id) {
    model_reserve(md, (size_t)id + 1);
    md->filter[id] = (broadphase_filter){1u, 0xFFFFFFFFu, 0u};
    md->is_static[id] = 0;
    md->gen[id]++;
    md->live++;
}

/* Adds a batch of boxes, or of spheres when sphere_call (the other pointer is ignored; either
 * may be NULL, to see it refused); ids_null passes no array for the ids. */
static inline void drive_add(drive *d, size_t count, const broadphase_boxes *boxes,
                             const broadphase_spheres *spheres, bool sphere_call, bool ids_null) {
    if (d->stopped) return;
    int dims = d->config.dimensions;
    verdict v = verdict_ok;
    if (count > 0) {
        v = ids_null ? (verdict){BROADPHASE_ERROR_INVALID_ARGUMENT, SIZE_MAX}
                     : expect_shapes(dims, 0, boxes, spheres, sphere_call);
        if (v.status == BROADPHASE_OK && count > d->w->config.max_objects - d->md.live)
            v = (verdict){BROADPHASE_ERROR_CAPACITY, SIZE_MAX};
        if (v.status == BROADPHASE_OK) v = expect_shapes(dims, count, boxes, spheres, sphere_call);
    }
    uint32_t *ids = NULL, *want = NULL;
    if (v.status == BROADPHASE_OK && count > 0) {
        ids = malloc(count * sizeof *ids);
        want = malloc(count * sizeof *want);
        model_next_ids(&d->md, count, want);
    }
    broadphase_status s;
    uint32_t dummy;
    uint32_t *out = ids_null ? NULL : ids ? ids : &dummy;
    DRIVE_MUTATE(d, s, sphere_call ? "add_spheres" : "add_boxes", v, count,
                 sphere_call ? broadphase_add_spheres(d->w, count, spheres, out)
                             : broadphase_add_boxes(d->w, count, boxes, out));
    for (size_t i = 0; s == BROADPHASE_OK && v.status == BROADPHASE_OK && i < count; i++) {
        if (ids[i] != want[i]) drive_fail(d, "add: id handed out", ids[i], want[i]);
        model_added(&d->md, ids[i]);
        model_set_shape(&d->md, ids[i], boxes, spheres, sphere_call, i);
    }
    free(ids);
    free(want);
}

/* Moves a batch, as drive_add. */
static inline void drive_move(drive *d, size_t count, const uint32_t *ids,
                              const broadphase_boxes *boxes, const broadphase_spheres *spheres,
                              bool sphere_call) {
    if (d->stopped) return;
    int dims = d->config.dimensions;
    verdict v = verdict_ok;
    if (count > 0) {
        v = !ids || count > d->md.live ? (verdict){BROADPHASE_ERROR_INVALID_ARGUMENT, SIZE_MAX}
                                       : expect_shapes(dims, 0, boxes, spheres, sphere_call);
        if (v.status == BROADPHASE_OK)
            v = expect_move(expect_ids(&d->md, count, ids),
                            expect_shapes(dims, count, boxes, spheres, sphere_call));
    }
    broadphase_status s;
    DRIVE_MUTATE(d, s, sphere_call ? "move_spheres" : "move_boxes", v, count,
                 sphere_call ? broadphase_move_spheres(d->w, count, ids, spheres)
                             : broadphase_move_boxes(d->w, count, ids, boxes));
    for (size_t i = 0; s == BROADPHASE_OK && v.status == BROADPHASE_OK && i < count; i++)
        model_set_shape(&d->md, ids[i], boxes, spheres, sphere_call, i);
}

static inline verdict expect_id_batch(const drive *d, size_t count, const uint32_t *ids) {
    if (count == 0) return verdict_ok;
    if (!ids || count > d->md.live) return (verdict){BROADPHASE_ERROR_INVALID_ARGUMENT, SIZE_MAX};
    return expect_ids(&d->md, count, ids);
}

static inline void drive_remove(drive *d, size_t count, const uint32_t *ids) {
    if (d->stopped) return;
    verdict v = expect_id_batch(d, count, ids);
    broadphase_status s;
    DRIVE_MUTATE(d, s, "remove", v, count, broadphase_remove(d->w, count, ids));
    for (size_t i = 0; s == BROADPHASE_OK && v.status == BROADPHASE_OK && i < count; i++) {
        d->md.m.alive[ids[i]] = 0;
        d->md.is_static[ids[i]] = 0;
        d->md.live--;
    }
}

static inline void drive_set_filters(drive *d, size_t count, const uint32_t *ids,
                                     const broadphase_filter *filters) {
    if (d->stopped) return;
    verdict v = count > 0 && !filters ? (verdict){BROADPHASE_ERROR_INVALID_ARGUMENT, SIZE_MAX}
                                      : expect_id_batch(d, count, ids);
    broadphase_status s;
    DRIVE_MUTATE(d, s, "set_filters", v, count, broadphase_set_filters(d->w, count, ids, filters));
    for (size_t i = 0; s == BROADPHASE_OK && v.status == BROADPHASE_OK && i < count; i++)
        d->md.filter[ids[i]] = filters[i];
}

static inline void drive_set_static(drive *d, size_t count, const uint32_t *ids, bool flag) {
    if (d->stopped) return;
    verdict v = expect_id_batch(d, count, ids);
    broadphase_status s;
    DRIVE_MUTATE(d, s, "set_static", v, count, broadphase_set_static(d->w, count, ids, flag));
    for (size_t i = 0; s == BROADPHASE_OK && v.status == BROADPHASE_OK && i < count; i++)
        d->md.is_static[ids[i]] = flag;
}

/* A step: its pairs against brute force over the model, and its events against the pairs of
 * the last successful step. */
static inline void drive_step(drive *d) {
    if (d->stopped) return;
    broadphase_pairs p = {NULL, 0};
    broadphase_status s;
    DRIVE_CALL(d, s, broadphase_step(d->w, &p));
    drive_expect(d, "step", s, verdict_ok);
    if (s != BROADPHASE_OK) return;
    d->steps++;
    model_pairs(&d->md, &d->want);
    d->checked_pairs += (long)d->want.count;
    if (!pairs_equal(d->want.data, d->want.count, p.data, p.count, "step pairs")) {
        d->failed = true;
        test_failures++;
        return;
    }
    if (d->config.pair_events) {
        broadphase_events ev;
        if (broadphase_pair_events(d->w, &ev) != BROADPHASE_OK) {
            drive_fail(d, "pair_events", 1, 0);
            return;
        }
        expected_events(&d->md.last, d->md.last_gen, &d->want, d->md.gen, &d->begun, &d->ended);
        if (!pairs_equal(d->begun.data, d->begun.count, ev.begun.data, ev.begun.count, "begun") ||
            !pairs_equal(d->ended.data, d->ended.count, ev.ended.data, ev.ended.count, "ended")) {
            d->failed = true;
            test_failures++;
        }
    }
    d->md.last.count = 0;
    for (size_t i = 0; i < d->want.count; i++)
        pair_list_push(&d->md.last, d->want.data[i].a, d->want.data[i].b);
    memcpy(d->md.last_gen, d->md.gen, d->md.cap * sizeof *d->md.gen);
    d->md.stepped = true;
    if (d->steps_after_fault > 0 && d->faults && atomic_load(&d->faults->failed) > 0 &&
        ++d->steps_since_fault >= d->steps_after_fault)
        d->stopped = true;
}

/* An update without pairs: it succeeds, the last step's pairs stand (and the queries after it see
 * every change: drive_queries). */
static inline void drive_update(drive *d) {
    if (d->stopped) return;
    broadphase_status s;
    DRIVE_CALL(d, s, broadphase_update(d->w));
    drive_expect(d, "update", s, verdict_ok);
    if (s != BROADPHASE_OK || !d->md.stepped) return;
    broadphase_pairs p = broadphase_last_pairs(d->w);
    if (!pairs_equal(d->md.last.data, d->md.last.count, p.data, p.count, "pairs after update")) {
        d->failed = true;
        test_failures++;
    }
}

/* The neighbour rows: the last step's pairs, one row per id handed out. */
static inline void drive_neighbours(drive *d) {
    if (d->stopped) return;
    broadphase_neighbour_rows rows;
    broadphase_status s;
    DRIVE_CALL(d, s, broadphase_neighbours(d->w, &rows));
    drive_expect(d, "neighbours", s, verdict_ok);
    if (s != BROADPHASE_OK) return;
    size_t ids = 0; /* one past the highest live id */
    for (size_t i = 0; i < d->md.m.cap; i++)
        if (d->md.m.alive[i]) ids = i + 1;
    broadphase_pairs p = broadphase_last_pairs(d->w);
    if (!rows_equal_pairs(p.data, p.count, &rows, ids, "neighbour rows")) {
        d->failed = true;
        test_failures++;
    }
}

/* Every object's neighbourhood: for each live object, the reference's k + 1 nearest within the
 * distance of its centre (a sphere's centre, a box's midpoint computed in double), its own id
 * dropped, at most k; empty rows for the other ids. Bad arguments name no element. */
static inline void drive_neighbourhoods(drive *d, size_t k, float distance) {
    if (d->stopped) return;
    broadphase_neighbourhood_rows rows;
    broadphase_status s;
    verdict v = verdict_ok;
    if (k > SIZE_MAX / 16)
        v.status = BROADPHASE_ERROR_INVALID_ARGUMENT;
    else if (isnan(distance))
        v.status = BROADPHASE_ERROR_NONFINITE;
    else if (distance < 0.0f)
        v.status = BROADPHASE_ERROR_NEGATIVE_RADIUS;
    DRIVE_CALL(d, s, broadphase_neighbourhoods(d->w, k, distance, &rows));
    drive_expect(d, "neighbourhoods", s, v);
    if (s != BROADPHASE_OK) return;
    const mirror *m = &d->md.m;
    scratch *sc = &d->qs;
    scratch_reserve(sc, m->cap);
    bool same = rows.k == k;
    for (uint32_t id = 0; id < m->cap && same; id++) {
        if (!m->alive[id]) {
            same = id >= rows.count || rows.counts[id] == 0;
            continue;
        }
        qdesc q = {.type = Q_NEAREST, .k = k + 1, .max_d = distance};
        for (int a = 0; a < m->dims; a++)
            q.lo[a] = m->sphere[id] ? m->c[id][a]
                                    : (float)(((double)m->lo[id][a] + (double)m->hi[id][a]) * 0.5);
        size_t want = reference(m, &q, sc->want), n = 0;
        same = id < rows.count;
        for (size_t t = 0; t < want && n < k && same; t++) {
            if (sc->want[t].id == id) continue;
            same = rows.ids[id * k + n] == sc->want[t].id &&
                   memcmp(&rows.dist2[id * k + n], &sc->want[t].key, sizeof(float)) == 0;
            n++;
        }
        same = same && rows.counts[id] == n;
        if (!same)
            fprintf(stderr, "  neighbourhood of id %u differs (k %zu, distance %g)\n", id, k,
                    (double)distance);
    }
    if (!same) {
        d->failed = true;
        test_failures++;
    }
}

/* ---- queries --------------------------------------------------------------------------------- */

/* `per_type` single queries of every type against the reference, each retried when it runs out
 * of memory (queries change no object: the snapshot shows it). */
static inline void drive_queries(drive *d, int per_type, uint64_t seed) {
    if (d->stopped) return;
    uint64_t rng = seed;
    scratch *sc = &d->qs;
    scratch_reserve(sc, d->md.m.cap);
    for (int t = 0; t < Q_TYPES && !d->failed; t++) {
        for (int i = 0; i < per_type && !d->failed; i++) {
            qdesc q = make_query(&d->md.m, (qtype)t, i, &rng);
            size_t nwant = reference(&d->md.m, &q, sc->want);
            answer a;
            broadphase_status s;
            DRIVE_CALL(d, s,
                       (a = ask(d->w, &q, sc->cap, sc->got, sc->ids, sc->hits, sc->d2)).status);
            if (s != BROADPHASE_OK) {
                drive_fail(d, "query status", s, BROADPHASE_OK);
                return;
            }
            char what[64];
            snprintf(what, sizeof what, "query type %d number %d", t, i);
            if (!same_answer(sc->want, nwant, sc->got, a.count, what)) {
                d->failed = true;
                test_failures++;
            }
        }
    }
}

/* Every batched query on `n` queries made from the model, each row against the single query's
 * answer from the reference. */
static inline void drive_batches(drive *d, size_t n, uint64_t seed) {
    if (d->stopped) return;
    uint64_t rng = seed;
    int dims = d->config.dimensions;
    scratch *sc = &d->qs;
    scratch_reserve(sc, d->md.m.cap);
    float *col = calloc(n * 16, sizeof *col);
    qdesc *qs = calloc(n, sizeof *qs);
    size_t *offsets = calloc(n + 1, sizeof *offsets), *counts = calloc(n, sizeof *counts);
    size_t cap = n * (d->md.m.cap + 1);
    uint32_t *ids = calloc(cap + 1, sizeof *ids);
    broadphase_ray_hit *hits = calloc(cap + 1, sizeof *hits);
    float *d2 = calloc(cap + 1, sizeof *d2);
    float *c[16];
    for (int k = 0; k < 16; k++) c[k] = col + (size_t)k * n;
    for (int kind = 0; kind < 5 && !d->failed; kind++) {
        qtype t = kind == 0 ? Q_BOX : kind == 1 ? Q_SPHERE : kind == 4 ? Q_NEAREST : Q_RAY;
        for (size_t i = 0; i < n; i++) {
            qs[i] = make_query(&d->md.m, t, (int)i, &rng);
            for (int k = 0; k < 3; k++) {
                c[k][i] = t == Q_SPHERE ? qs[i].c[k] : t == Q_RAY ? qs[i].o[k] : qs[i].lo[k];
                c[3 + k][i] = t == Q_RAY ? qs[i].d[k] : qs[i].hi[k];
            }
            c[6][i] = t == Q_SPHERE ? qs[i].r : qs[i].max_t;
        }
        broadphase_boxes bx = {c[0], c[1], dims == 3 ? c[2] : NULL,
                               c[3], c[4], dims == 3 ? c[5] : NULL};
        broadphase_spheres sp = {c[0], c[1], dims == 3 ? c[2] : NULL, c[6]};
        broadphase_rays rays = {c[0], c[1], c[2], c[3], c[4], c[5], c[6]};
        broadphase_points pts = {c[0], c[1], c[2]};
        broadphase_id_rows idr = {offsets, ids, cap, 0, 0};
        broadphase_hit_rows hr = {offsets, hits, cap, 0, 0};
        size_t k = 4, bad = 0;
        broadphase_status s;
        if (kind == 0)
            DRIVE_CALL(d, s, broadphase_query_boxes(d->w, n, &bx, &idr));
        else if (kind == 1)
            DRIVE_CALL(d, s, broadphase_query_spheres(d->w, n, &sp, &idr));
        else if (kind == 2)
            DRIVE_CALL(d, s, broadphase_raycasts(d->w, n, &rays, &hr));
        else if (kind == 3)
            DRIVE_CALL(d, s, broadphase_raycasts_closest(d->w, n, &rays, hits, &bad));
        else if (seed & 1)
            DRIVE_CALL(d, s, broadphase_nearest_many(d->w, n, &pts, k, ids, d2, counts, &bad));
        else /* one greatest distance for the batch: the second query's (make_query) */
            DRIVE_CALL(d, s,
                       broadphase_nearest_many_within(d->w, n, &pts, k, qs[1 % n].max_d, ids, d2,
                                                      counts, &bad));
        if (s != BROADPHASE_OK) {
            drive_fail(d, "batch status", s, kind);
            break;
        }
        for (size_t i = 0; i < n && !d->failed; i++) {
            qdesc q = qs[i];
            if (kind == 4) {
                q.k = k;
                q.max_d = seed & 1 ? INFINITY : qs[1 % n].max_d;
            }
            size_t nwant = reference(&d->md.m, &q, sc->want), ngot = 0;
            if (kind == 3) {
                ngot = hits[i].id != BROADPHASE_NO_HIT;
                if (ngot) sc->got[0] = (ranked){hits[i].t, hits[i].id};
                if (nwant > 1) nwant = 1;
            } else if (kind == 4) {
                ngot = counts[i];
                for (size_t j = 0; j < ngot; j++)
                    sc->got[j] = (ranked){d2[i * k + j], ids[i * k + j]};
            } else {
                ngot = offsets[i + 1] - offsets[i];
                for (size_t j = 0; j < ngot; j++) {
                    size_t at = offsets[i] + j;
                    sc->got[j] =
                        kind == 2 ? (ranked){hits[at].t, hits[at].id} : (ranked){0.0f, ids[at]};
                }
            }
            char what[64];
            snprintf(what, sizeof what, "batch %d query %zu", kind, i);
            if (!same_answer(sc->want, nwant, sc->got, ngot, what)) {
                d->failed = true;
                test_failures++;
            }
        }
    }
    free(col);
    free(qs);
    free(offsets);
    free(counts);
    free(ids);
    free(hits);
    free(d2);
}
