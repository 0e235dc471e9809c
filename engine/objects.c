/* The calls that change objects: add, move and remove boxes and spheres, collision filters,
 * the static flag. Each batch is validated whole before anything is written (all or nothing,
 * the first bad element named), in parallel over fixed chunks; ids are reused lowest first. */
#include "bits.h"
#include "world.h"

#include "overlap.h"
#include "parallel.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- validation ------------------------------------------------------------------------- */

/* A mutation holds the world for its duration, so that one racing a step is refused. */
static bool world_enter(broadphase_world *w) {
    if (__atomic_exchange_n(&w->busy, 1, __ATOMIC_ACQUIRE) != 0) return false;
    w->generation++;
    w->entered_ms = team_enter(&w->team);
    return true;
}

static void world_leave(broadphase_world *w) {
    team_leave(&w->team, w->entered_ms);
    __atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
}

static broadphase_status fail(broadphase_world *w, broadphase_status s, size_t index) {
    w->last_error_index = index;
    return s;
}

/* The first bad element of [begin, end), if any; the arrays are known to be there. The SIMD
 * scan finds it; the element itself then says which fault it has (a bound that is not finite
 * wins over an inverted box, as the order of the checks below). */
static broadphase_status check_boxes_range(const broadphase_world *w, const broadphase_boxes *b,
                                           size_t begin, size_t end, size_t *bad) {
    int dims = w->config.dimensions;
    const float *const lo[3] = {b->min_x, b->min_y, b->min_z};
    const float *const hi[3] = {b->max_x, b->max_y, b->max_z};
    size_t i = simd_boxes_first_invalid(lo, hi, begin, end, dims);
    if (i == end) return BROADPHASE_OK;
    *bad = i;
    for (int k = 0; k < dims; k++)
        if (!isfinite(lo[k][i]) || !isfinite(hi[k][i])) return BROADPHASE_ERROR_NONFINITE;
    return BROADPHASE_ERROR_INVERTED_BOX;
}

static broadphase_status check_spheres_range(const broadphase_world *w, const broadphase_spheres *s,
                                             size_t begin, size_t end, size_t *bad) {
    int dims = w->config.dimensions;
    const float *const c[3] = {s->x, s->y, s->z};
    size_t i = simd_spheres_first_invalid(c, s->radius, begin, end, dims);
    if (i == end) return BROADPHASE_OK;
    *bad = i;
    for (int k = 0; k < dims; k++)
        if (!isfinite(c[k][i])) return BROADPHASE_ERROR_NONFINITE;
    return isfinite(s->radius[i]) ? BROADPHASE_ERROR_NEGATIVE_RADIUS : BROADPHASE_ERROR_NONFINITE;
}

static bool boxes_present(const broadphase_world *w, const broadphase_boxes *b) {
    const float *cols[6] = {b->min_x, b->min_y, b->min_z, b->max_x, b->max_y, b->max_z};
    for (int k = 0; k < w->config.dimensions; k++)
        if (!cols[k] || !cols[3 + k]) return false;
    return true;
}

static bool spheres_present(const broadphase_world *w, const broadphase_spheres *s) {
    const float *cols[3] = {s->x, s->y, s->z};
    for (int k = 0; k < w->config.dimensions; k++)
        if (!cols[k]) return false;
    return s->radius != NULL;
}

/* ---- batches in parallel -------------------------------------------------------------------- */

/* Validation and copying of large batches run over fixed chunks on the worker threads; the
 * first failing chunk holds the first bad element, whatever the thread count. The chunks cost
 * the same, so each worker takes the same contiguous share in every pass (threads_for_chunks_
 * static): the ids it stamped and checked are the ones it writes (move 1e6 2T 4.3-4.4 ->
 * 3.9-4.1 ms). A batch below BATCH_GRAIN is one chunk, on the calling thread; a larger one is
 * cut into BATCH_CHUNKS nearly equal chunks, so that the workers' shares are nearly equal too
 * (chunks of BATCH_GRAIN left 1e5 objects in shares of 65,536 and 34,464). */
enum { BATCH_GRAIN = 32768, BATCH_CHUNKS = 256 };

typedef enum batch_op {
    CHECK_BOXES,
    CHECK_SPHERES,
    CHECK_IDS,
    CHECK_STAMPS,
    CHECK_REPEATS,
    SETTLE_BOXES,
    SETTLE_SPHERES,
    WRITE_BOXES,
    WRITE_SPHERES
} batch_op;

typedef struct batch {
    broadphase_world *w;
    batch_op op;
    const void *shapes;
    const uint32_t *ids;
    size_t count, chunk;
    broadphase_status status[BATCH_CHUNKS];
    size_t bad[BATCH_CHUNKS];
    long sphere_delta[BATCH_CHUNKS]; /* change in the sphere count made by each chunk */
    size_t changed[BATCH_CHUNKS];    /* objects each chunk changed first in this epoch */
    /* Objects each chunk changed that are static or at rest (see note_moves). */
    size_t notable[BATCH_CHUNKS];
    bool rising[BATCH_CHUNKS]; /* CHECK_IDS: each id below the next (the next chunk's first) */
    /* SETTLE_*: the chunk holds an object whose shape differs from the stored one. WRITE_*: when
     * `settled`, only those chunks are written (the others would change nothing). */
    bool dirty[BATCH_CHUNKS];
    bool settled;
} batch;

static long write_boxes_range(broadphase_world *w, const uint32_t *ids, const broadphase_boxes *b,
                              size_t begin, size_t end, size_t *changed, size_t *notable);
static long write_spheres_range(broadphase_world *w, const uint32_t *ids,
                                const broadphase_spheres *s, size_t begin, size_t end,
                                size_t *changed, size_t *notable);

static broadphase_status check_ids_range(broadphase_world *w, const uint32_t *ids, size_t begin,
                                         size_t end, size_t count, size_t *bad, bool *rising);
static size_t first_new_box(const broadphase_world *w, const uint32_t *ids,
                            const broadphase_boxes *b, size_t begin, size_t end);
static size_t first_new_sphere(const broadphase_world *w, const uint32_t *ids,
                               const broadphase_spheres *s, size_t begin, size_t end);
static void stamp_range(broadphase_world *w, const uint32_t *ids, size_t begin, size_t end);
static broadphase_status check_repeats_range(broadphase_world *w, const uint32_t *ids, size_t begin,
                                             size_t end, size_t *bad);

static void batch_chunk(size_t c, int worker, void *p) {
    (void)worker;
    batch *b = p;
    size_t begin = c * b->chunk, end = begin + b->chunk < b->count ? begin + b->chunk : b->count;
    b->status[c] = BROADPHASE_OK;
    b->sphere_delta[c] = 0;
    b->changed[c] = b->notable[c] = 0;
    if (b->settled && !b->dirty[c]) return; /* a write that would change nothing */
    size_t from;
    switch (b->op) {
    case CHECK_BOXES:
        b->status[c] = check_boxes_range(b->w, b->shapes, begin, end, &b->bad[c]);
        break;
    case CHECK_SPHERES:
        b->status[c] = check_spheres_range(b->w, b->shapes, begin, end, &b->bad[c]);
        break;
    case CHECK_IDS:
        b->status[c] =
            check_ids_range(b->w, b->ids, begin, end, b->count, &b->bad[c], &b->rising[c]);
        break;
    case CHECK_STAMPS:
        stamp_range(b->w, b->ids, begin, end);
        break;
    case CHECK_REPEATS:
        b->status[c] = check_repeats_range(b->w, b->ids, begin, end, &b->bad[c]);
        break;
    case SETTLE_BOXES:
        /* A shape equal to the stored one is valid (the stored one was checked); from the
         * first that differs on, the chunk is checked as a new batch would be. */
        from = first_new_box(b->w, b->ids, b->shapes, begin, end);
        b->dirty[c] = from < end;
        if (from < end) b->status[c] = check_boxes_range(b->w, b->shapes, from, end, &b->bad[c]);
        break;
    case SETTLE_SPHERES:
        from = first_new_sphere(b->w, b->ids, b->shapes, begin, end);
        b->dirty[c] = from < end;
        if (from < end) b->status[c] = check_spheres_range(b->w, b->shapes, from, end, &b->bad[c]);
        break;
    case WRITE_BOXES:
        b->sphere_delta[c] =
            write_boxes_range(b->w, b->ids, b->shapes, begin, end, &b->changed[c], &b->notable[c]);
        break;
    case WRITE_SPHERES:
        b->sphere_delta[c] = write_spheres_range(b->w, b->ids, b->shapes, begin, end,
                                                 &b->changed[c], &b->notable[c]);
        break;
    }
}

/* The parts of a batch: after a SETTLE_* run, those holding a new shape (dirty), which the
 * WRITE_* run given these notes then writes alone; after a write, those holding notable objects
 * (changed, and static or at rest). */
typedef struct batch_notes {
    size_t chunk, chunks;
    bool settled;
    bool dirty[BATCH_CHUNKS];
    bool notable[BATCH_CHUNKS];
} batch_notes;

static broadphase_status batch_run(broadphase_world *w, batch_op op, const void *shapes,
                                   const uint32_t *ids, size_t count, size_t *bad,
                                   batch_notes *notes, bool *rising) {
    batch b;
    b.w = w;
    b.op = op;
    b.shapes = shapes;
    b.ids = ids;
    b.count = count;
    b.chunk = count < BATCH_GRAIN ? (count ? count : 1) : (count + BATCH_CHUNKS - 1) / BATCH_CHUNKS;
    size_t chunks = (count + b.chunk - 1) / b.chunk;
    bool write = op == WRITE_BOXES || op == WRITE_SPHERES;
    b.settled = write && notes && notes->settled;
    if (b.settled) memcpy(b.dirty, notes->dirty, chunks * sizeof *b.dirty);
    threads_for_chunks_static(w->workers, chunks, batch_chunk, &b);
    long delta = 0;
    if (rising) *rising = true;
    for (size_t c = 0; c < chunks; c++) {
        if (rising) *rising = *rising && b.rising[c];
        if (b.status[c] != BROADPHASE_OK) {
            *bad = b.bad[c];
            return b.status[c];
        }
        delta += b.sphere_delta[c];
        w->moved_count += b.changed[c];
        if (notes && write) notes->notable[c] = b.notable[c] > 0;
    }
    if (notes && !write) {
        memcpy(notes->dirty, b.dirty, chunks * sizeof *b.dirty);
        notes->settled = true;
    }
    if (notes) {
        notes->chunk = b.chunk;
        notes->chunks = chunks;
    }
    w->store.sphere_count = (size_t)((long)w->store.sphere_count + delta);
    return BROADPHASE_OK;
}

static broadphase_status check_boxes(broadphase_world *w, size_t count, const broadphase_boxes *b,
                                     size_t *bad) {
    if (!boxes_present(w, b)) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    return batch_run(w, CHECK_BOXES, b, NULL, count, bad, NULL, NULL);
}

static broadphase_status check_spheres(broadphase_world *w, size_t count,
                                       const broadphase_spheres *s, size_t *bad) {
    if (!spheres_present(w, s)) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    return batch_run(w, CHECK_SPHERES, s, NULL, count, bad, NULL, NULL);
}

/* Ids are checked in parallel passes (see check_ids): the first rejects unknown ids and finds
 * whether the ids rise. Ids [begin, end) of a batch of `count` are live; *rising when each is
 * below the next (the last below the next chunk's first). */
static broadphase_status check_ids_range(broadphase_world *w, const uint32_t *ids, size_t begin,
                                         size_t end, size_t count, size_t *bad, bool *rising) {
    bool up = true;
    for (size_t i = begin; i < end; i++) {
        uint32_t id = ids[i];
        if (id >= w->store.id_end || w->store.kind[id] == OBJECT_FREE) {
            *bad = i;
            *rising = false;
            return BROADPHASE_ERROR_UNKNOWN_ID;
        }
        if (i + 1 < count) up &= id < ids[i + 1];
    }
    *rising = up;
    return BROADPHASE_OK;
}

/* When they do not rise: each id stamped with its position in the batch; check_repeats_range
 * then finds any id whose stamp is not its own position, which happens exactly when the id
 * appears twice. */
static void stamp_range(broadphase_world *w, const uint32_t *ids, size_t begin, size_t end) {
    for (size_t i = begin; i < end; i++)
        __atomic_store_n(&w->store.stamp[ids[i]], (uint32_t)i, __ATOMIC_RELAXED);
}

static broadphase_status check_repeats_range(broadphase_world *w, const uint32_t *ids, size_t begin,
                                             size_t end, size_t *bad) {
    for (size_t i = begin; i < end; i++) {
        if (__atomic_load_n(&w->store.stamp[ids[i]], __ATOMIC_RELAXED) != (uint32_t)i) {
            *bad = SIZE_MAX; /* not necessarily the first: check_ids finds that one */
            return BROADPHASE_ERROR_INVALID_ARGUMENT;
        }
    }
    return BROADPHASE_OK;
}

/* Every id must be live and appear once in the batch. Checked over chunks in parallel: the ids
 * are live, and when they rise through the batch (as a caller walking its objects in order
 * gives them) none can repeat; otherwise each id is stamped with its position and must find its
 * own stamp. When that finds a fault, again in order, which names the first bad element exactly
 * (an id is bad at its second appearance). Rising ids skip the stamps' two passes (moving2d 1e5,
 * the move on one thread: 0.416 -> 0.344 ms). */
static broadphase_status check_ids(broadphase_world *w, size_t count, const uint32_t *ids,
                                   size_t *bad) {
    bool rising = false;
    if (count < UINT32_MAX &&
        batch_run(w, CHECK_IDS, NULL, ids, count, bad, NULL, &rising) == BROADPHASE_OK &&
        (rising ||
         (batch_run(w, CHECK_STAMPS, NULL, ids, count, bad, NULL, NULL) == BROADPHASE_OK &&
          batch_run(w, CHECK_REPEATS, NULL, ids, count, bad, NULL, NULL) == BROADPHASE_OK)))
        return BROADPHASE_OK;
    for (size_t i = 0; i < count; i++)
        if (ids[i] < w->store.id_end) w->store.stamp[ids[i]] = UINT32_MAX;
    for (size_t i = 0; i < count; i++) {
        uint32_t id = ids[i];
        if (id >= w->store.id_end || w->store.kind[id] == OBJECT_FREE) {
            *bad = i;
            return BROADPHASE_ERROR_UNKNOWN_ID;
        }
        if (w->store.stamp[id] != UINT32_MAX) {
            *bad = i;
            return BROADPHASE_ERROR_INVALID_ARGUMENT;
        }
        w->store.stamp[id] = (uint32_t)i;
    }
    return BROADPHASE_OK;
}

/* The ids of a batch that changes objects: NULL, or more ids than live objects (they could not
 * all be live and distinct; the array is not read), is an argument error, else as check_ids. */
static broadphase_status check_id_batch(broadphase_world *w, size_t count, const uint32_t *ids,
                                        size_t *bad) {
    if (!ids || count > w->store.live_count) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    return check_ids(w, count, ids, bad);
}

/* A move batch names its first bad element, whether its id or its values are at fault (an id
 * error wins a tie); a missing array is an argument error before any element. */
static broadphase_status check_move(broadphase_world *w, size_t count, const uint32_t *ids,
                                    broadphase_status values, const size_t *bad_value,
                                    size_t *bad) {
    if (values == BROADPHASE_ERROR_INVALID_ARGUMENT) return values;
    size_t bad_id = SIZE_MAX;
    broadphase_status s = check_ids(w, count, ids, &bad_id);
    if (s != BROADPHASE_OK && (values == BROADPHASE_OK || bad_id <= *bad_value)) {
        *bad = bad_id;
        return s;
    }
    *bad = *bad_value;
    return values;
}

/* The first object of [begin, end) whose new shape differs from the one stored (end if none):
 * pushing objects that did not move costs a read of both, no check and no write. Ids are live. */
static size_t first_new_box(const broadphase_world *w, const uint32_t *ids,
                            const broadphase_boxes *b, size_t begin, size_t end) {
    const float *lo[3] = {b->min_x, b->min_y, b->min_z};
    const float *hi[3] = {b->max_x, b->max_y, b->max_z};
    int dims = w->config.dimensions;
    for (size_t i = begin; i < end; i++) {
        uint32_t id = ids[i];
        const world_box *r = &w->store.box[id];
        bool same = w->store.kind[id] == OBJECT_BOX;
        for (int k = 0; k < dims; k++) same = same && r->lo[k] == lo[k][i] && r->hi[k] == hi[k][i];
        if (!same) return i;
    }
    return end;
}

static size_t first_new_sphere(const broadphase_world *w, const uint32_t *ids,
                               const broadphase_spheres *s, size_t begin, size_t end) {
    const float *c[3] = {s->x, s->y, s->z};
    int dims = w->config.dimensions;
    for (size_t i = begin; i < end; i++) {
        uint32_t id = ids[i];
        bool same = w->store.kind[id] == OBJECT_SPHERE && w->store.radius[id] == s->radius[i];
        for (int k = 0; k < dims; k++) same = same && w->store.center[k][id] == c[k][i];
        if (!same) return i;
    }
    return end;
}

/* A move's checks. A batch whose first object moved: the values, then the ids, and every chunk
 * to write. Otherwise every id live and once; then, when they are, each chunk from its first new
 * shape on (SETTLE_*), which leaves in *notes the chunks a write must visit. With a bad id, the
 * values are checked in full so that the first bad element is named, whichever it is. */
static broadphase_status check_move_settled(broadphase_world *w, size_t count, const uint32_t *ids,
                                            const void *shapes, bool spheres, size_t *bad,
                                            batch_notes *notes) {
    size_t bad_id = SIZE_MAX, bad_value = SIZE_MAX;
    /* A batch whose first object has a new shape is most likely one where every object moved:
     * its values are checked first, then its ids, and every chunk is written, as before the
     * comparison came in: ids, values from the first new shape, write cost a moving 1e6 push
     * 0.6-0.8 ms more on two threads (NOTES row 160; why is not pinned down). */
    uint32_t id0 = ids[0];
    bool live0 = id0 < w->store.id_end && w->store.kind[id0] != OBJECT_FREE;
    bool moved0 = live0 && (spheres ? first_new_sphere(w, ids, shapes, 0, 1)
                                    : first_new_box(w, ids, shapes, 0, 1)) == 0;
    if (moved0) {
        broadphase_status values = spheres ? check_spheres(w, count, shapes, &bad_value)
                                           : check_boxes(w, count, shapes, &bad_value);
        notes->settled = false;
        return check_move(w, count, ids, values, &bad_value, bad);
    }
    broadphase_status s = check_ids(w, count, ids, &bad_id);
    if (s != BROADPHASE_OK) {
        broadphase_status values = spheres ? check_spheres(w, count, shapes, &bad_value)
                                           : check_boxes(w, count, shapes, &bad_value);
        return check_move(w, count, ids, values, &bad_value, bad);
    }
    return batch_run(w, spheres ? SETTLE_SPHERES : SETTLE_BOXES, shapes, ids, count, bad, notes,
                     NULL);
}

/* ---- writing objects --------------------------------------------------------------------- */

/* The sphere's bounding box on one axis, widened by 2^-10 of the radius and rounded outward, so
 * that it contains every point the exact (double precision) test can accept. */
static void sphere_extent(float c, float r, float *lo, float *hi) {
    double m = (double)r * (1.0 + 0x1p-10);
    /* One step outward, whichever way the conversion rounded: a branch on that mispredicts
     * half the time (moving 1M spheres took 17 ms on two threads with it); one ulp looser is
     * still a bounding box. */
    *lo = bits_round_down((double)c - m);
    *hi = bits_round_up((double)c + m);
}

/* 1 when object id, just changed, is static or at rest: note_moves looks at it after the batch. */
static size_t notable_change(const broadphase_world *w, uint32_t id) {
    return (size_t)((w->store.static_count > 0 && w->store.is_static[id]) ||
                    (w->rest.count > 0 && w->rest.at_rest[id]));
}

/* Marks object id changed in this epoch; 1 the first time in the epoch. */
static size_t mark_changed(broadphase_world *w, uint32_t id) {
    if (w->store.changed[id] == w->epoch) return 0;
    w->store.changed[id] = w->epoch;
    return 1;
}

/* The writes take each object's lines for writing WRITE_AHEAD objects ahead: the last step's
 * refit read them, on whichever worker held the object's slot, so on two threads about half
 * were shared with the other core, and each plain store waited for a cross-core invalidation
 * (moving 1e5, 2 threads, round trip 430 ns: the move 1.06 -> 0.59 ms). */
enum { WRITE_AHEAD = 32 };

/* Each returns the change it made to the sphere count (ids are distinct within a batch) and adds
 * to *changed the objects it changed first in this epoch; an object given the shape it already
 * has is not changed. */
static long write_boxes_range(broadphase_world *w, const uint32_t *ids, const broadphase_boxes *b,
                              size_t begin, size_t end, size_t *changed, size_t *notable) {
    const float *lo[3] = {b->min_x, b->min_y, b->min_z};
    const float *hi[3] = {b->max_x, b->max_y, b->max_z};
    int dims = w->config.dimensions;
    long delta = 0;
    /* Counted here and stored once: *changed sits beside the other chunks' counts, and a store
     * per object (the compiler must keep it in memory, as the stores to kind may alias it) made
     * the two threads fight over that cache line (moving2d 1e5 on 2 threads: 1.15 ms for this
     * pass against 0.35 on one). */
    size_t fresh = 0, marked = 0;
    bool ahead = simd_prefetch_write_ok();
    for (size_t i = begin; i < end; i++) {
        uint32_t id = ids[i];
        world_box *r = &w->store.box[id];
        if (ahead && end - i > WRITE_AHEAD)
            simd_prefetch_write(&w->store.box[ids[i + WRITE_AHEAD]]);
        bool same = w->store.kind[id] == OBJECT_BOX;
        for (int k = 0; k < dims; k++) same = same && r->lo[k] == lo[k][i] && r->hi[k] == hi[k][i];
        if (!same) {
            fresh += mark_changed(w, id);
            marked += notable_change(w, id);
        }
        for (int k = 0; k < 3; k++) {
            r->lo[k] = k < dims ? lo[k][i] : 0.0f;
            r->hi[k] = k < dims ? hi[k][i] : 0.0f;
        }
        /* A box's centre and radius are never read (the exact test reads them for spheres
         * only), so they are left as they are. */
        delta -= w->store.kind[id] == OBJECT_SPHERE;
        w->store.kind[id] = OBJECT_BOX;
    }
    *changed = fresh;
    *notable = marked;
    return delta;
}

static long write_spheres_range(broadphase_world *w, const uint32_t *ids,
                                const broadphase_spheres *s, size_t begin, size_t end,
                                size_t *changed, size_t *notable) {
    const float *c[3] = {s->x, s->y, s->z};
    int dims = w->config.dimensions;
    long delta = 0;
    size_t fresh = 0, marked = 0; /* stored once, as in write_boxes_range */
    bool past = false;            /* a box stopped at the float range's end */
    bool ahead = simd_prefetch_write_ok();
    for (size_t i = begin; i < end; i++) {
        uint32_t id = ids[i];
        float r = s->radius[i];
        if (ahead && end - i > WRITE_AHEAD) {
            uint32_t next = ids[i + WRITE_AHEAD];
            simd_prefetch_write(&w->store.box[next]);
            for (int k = 0; k < dims; k++) simd_prefetch_write(&w->store.center[k][next]);
            simd_prefetch_write(&w->store.radius[next]);
        }
        bool same = w->store.kind[id] == OBJECT_SPHERE && w->store.radius[id] == r;
        for (int k = 0; k < dims; k++) same = same && w->store.center[k][id] == c[k][i];
        if (!same) {
            fresh += mark_changed(w, id);
            marked += notable_change(w, id);
        }
        for (int k = 0; k < 3; k++) {
            float ck = k < dims ? c[k][i] : 0.0f;
            w->store.center[k][id] = ck;
            if (k < dims) {
                sphere_extent(ck, r, &w->store.box[id].lo[k], &w->store.box[id].hi[k]);
                past |= (w->store.box[id].lo[k] == -FLT_MAX) | (w->store.box[id].hi[k] == FLT_MAX);
            } else {
                w->store.box[id].lo[k] = w->store.box[id].hi[k] = 0.0f;
            }
        }
        w->store.radius[id] = r;
        delta += w->store.kind[id] != OBJECT_SPHERE;
        w->store.kind[id] = OBJECT_SPHERE;
    }
    if (past) __atomic_store_n(&w->store.spheres_past_floats, true, __ATOMIC_RELAXED);
    *changed = fresh;
    *notable = marked;
    return delta;
}

static int compare_desc(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x < y) - (x > y);
}

/* Room in w->added for the objects of a batch of `count` that may leave the rest. */
static bool wake_reserve(broadphase_world *w, size_t count) {
    return w->rest.count == 0 ||
           heap_grow(&w->heap, (void **)&w->added, &w->added_capacity, w->added_count + count,
                     sizeof(uint32_t), w->added_count);
}

/* Object id, at rest, leaves the rest; `to_tree`: back into the tree (as if added). */
static void leave_rest(broadphase_world *w, uint32_t id, bool to_tree) {
    w->rest.at_rest[id] = 0;
    w->rest.count--;
    if (to_tree) w->added[w->added_count++] = id;
}

/* The objects of a batch that changed while at rest go back into the tree (room reserved by
 * wake_reserve). */
static void wake_changed(broadphase_world *w, size_t count, const uint32_t *ids) {
    if (w->rest.count == 0) return;
    for (size_t i = 0; i < count; i++)
        if (w->rest.at_rest[ids[i]] && w->store.changed[ids[i]] == w->epoch)
            leave_rest(w, ids[i], true);
}

/* Reserves everything an add of `count` objects needs, then hands out the ids. */
static broadphase_status add_ids(broadphase_world *w, size_t count, uint32_t *ids_out) {
    size_t reuse = count < w->store.free_count ? count : w->store.free_count;
    size_t fresh = count - reuse;
    if (fresh > (size_t)(WORLD_NONE - 1) - w->store.id_end)
        return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!store_reserve(w, w->store.id_end + fresh)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (w->store.filter_category && !store_filter_reserve(w, w->store.id_end + fresh))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (w->store.is_static && !store_static_reserve(w, w->store.id_end + fresh))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (w->rest.at_rest && !rest_reserve(w, w->store.id_end + fresh))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (w->config.pair_events &&
        !events_fresh_reserve(&w->events, &w->heap, w->store.id_end + fresh + 1))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (!heap_grow(&w->heap, (void **)&w->added, &w->added_capacity, w->added_count + count,
                   sizeof(uint32_t), w->added_count))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (reuse && !w->store.free_sorted) {
        qsort(w->store.free_ids, w->store.free_count, sizeof(uint32_t), compare_desc);
        w->store.free_sorted = true;
    }
    for (size_t i = 0; i < reuse; i++) ids_out[i] = w->store.free_ids[--w->store.free_count];
    for (size_t i = reuse; i < count; i++) ids_out[i] = w->store.id_end++;
    memcpy(w->added + w->added_count, ids_out, count * sizeof(uint32_t));
    w->added_count += count;
    w->store.live_count += count;
    for (size_t i = 0; w->config.pair_events && i < count; i++)
        w->events.fresh.data[ids_out[i]] = 1;
    if (w->store.filter_category) { /* a reused id starts with the default filter again */
        for (size_t i = 0; i < count; i++) {
            w->store.filter_category[ids_out[i]] = store_default_filter.category;
            w->store.filter_mask[ids_out[i]] = store_default_filter.mask;
            w->store.filter_group[ids_out[i]] = store_default_filter.group;
        }
    }
    return BROADPHASE_OK;
}

broadphase_status broadphase_add_boxes(broadphase_world *w, size_t count,
                                       const broadphase_boxes *boxes, uint32_t *ids_out) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!world_enter(w)) return BROADPHASE_ERROR_BUSY;
    broadphase_status s = BROADPHASE_OK;
    size_t bad = SIZE_MAX;
    if (count > 0) {
        if (!boxes || !ids_out || !boxes_present(w, boxes))
            s = BROADPHASE_ERROR_INVALID_ARGUMENT;
        else if (count > w->config.max_objects - w->store.live_count)
            s = BROADPHASE_ERROR_CAPACITY;
        else
            s = check_boxes(w, count, boxes, &bad);
        if (s == BROADPHASE_OK) s = add_ids(w, count, ids_out);
        if (s == BROADPHASE_OK) batch_run(w, WRITE_BOXES, boxes, ids_out, count, &bad, NULL, NULL);
    }
    fail(w, s, bad);
    world_leave(w);
    return s;
}

broadphase_status broadphase_add_spheres(broadphase_world *w, size_t count,
                                         const broadphase_spheres *spheres, uint32_t *ids_out) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!world_enter(w)) return BROADPHASE_ERROR_BUSY;
    broadphase_status s = BROADPHASE_OK;
    size_t bad = SIZE_MAX;
    if (count > 0) {
        if (!spheres || !ids_out || !spheres_present(w, spheres))
            s = BROADPHASE_ERROR_INVALID_ARGUMENT;
        else if (count > w->config.max_objects - w->store.live_count)
            s = BROADPHASE_ERROR_CAPACITY;
        else
            s = check_spheres(w, count, spheres, &bad);
        if (s == BROADPHASE_OK) s = add_ids(w, count, ids_out);
        if (s == BROADPHASE_OK)
            batch_run(w, WRITE_SPHERES, spheres, ids_out, count, &bad, NULL, NULL);
    }
    fail(w, s, bad);
    world_leave(w);
    return s;
}

/* A static object that moved calls for the static field to be built again, and for the rest to
 * go: pairs with statics can no longer be carried over. Then the moved objects at rest wake, in
 * the batch's order. Only the parts of the batch where the write found such objects are read
 * (in a world at rest that is pushed unchanged, none). */
static void note_moves(broadphase_world *w, size_t count, const uint32_t *ids,
                       const batch_notes *notes) {
    for (size_t c = 0; c < notes->chunks; c++) {
        if (!notes->notable[c]) continue;
        size_t begin = c * notes->chunk,
               end = count - begin < notes->chunk ? count : begin + notes->chunk;
        for (size_t i = begin; w->store.static_count > 0 && i < end; i++) {
            if (w->store.is_static[ids[i]] && w->store.changed[ids[i]] == w->epoch) {
                w->statics_dirty = w->rest.drop = true;
                break;
            }
        }
        wake_changed(w, end - begin, ids + begin);
    }
}

broadphase_status broadphase_move_boxes(broadphase_world *w, size_t count, const uint32_t *ids,
                                        const broadphase_boxes *boxes) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!world_enter(w)) return BROADPHASE_ERROR_BUSY;
    broadphase_status s = BROADPHASE_OK;
    size_t bad = SIZE_MAX;
    if (count > 0) {
        batch_notes notes;
        notes.settled = false; /* until a SETTLE_* run says which chunks to write */
        if (!boxes || !ids || count > w->store.live_count || !boxes_present(w, boxes))
            s = BROADPHASE_ERROR_INVALID_ARGUMENT;
        else
            s = check_move_settled(w, count, ids, boxes, false, &bad, &notes);
        if (s == BROADPHASE_OK && !wake_reserve(w, count)) s = BROADPHASE_ERROR_OUT_OF_MEMORY;
        if (s == BROADPHASE_OK) {
            batch_run(w, WRITE_BOXES, boxes, ids, count, &bad, &notes, NULL);
            note_moves(w, count, ids, &notes);
        }
    }
    fail(w, s, bad);
    world_leave(w);
    return s;
}

broadphase_status broadphase_move_spheres(broadphase_world *w, size_t count, const uint32_t *ids,
                                          const broadphase_spheres *spheres) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!world_enter(w)) return BROADPHASE_ERROR_BUSY;
    broadphase_status s = BROADPHASE_OK;
    size_t bad = SIZE_MAX;
    if (count > 0) {
        batch_notes notes;
        notes.settled = false; /* until a SETTLE_* run says which chunks to write */
        if (!spheres || !ids || count > w->store.live_count || !spheres_present(w, spheres))
            s = BROADPHASE_ERROR_INVALID_ARGUMENT;
        else
            s = check_move_settled(w, count, ids, spheres, true, &bad, &notes);
        if (s == BROADPHASE_OK && !wake_reserve(w, count)) s = BROADPHASE_ERROR_OUT_OF_MEMORY;
        if (s == BROADPHASE_OK) {
            batch_run(w, WRITE_SPHERES, spheres, ids, count, &bad, &notes, NULL);
            note_moves(w, count, ids, &notes);
        }
    }
    fail(w, s, bad);
    world_leave(w);
    return s;
}

broadphase_status broadphase_set_filters(broadphase_world *w, size_t count, const uint32_t *ids,
                                         const broadphase_filter *filters) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!world_enter(w)) return BROADPHASE_ERROR_BUSY;
    broadphase_status s = BROADPHASE_OK;
    size_t bad = SIZE_MAX;
    if (count > 0) {
        if (!ids || !filters || count > w->store.live_count)
            s = BROADPHASE_ERROR_INVALID_ARGUMENT;
        else
            s = check_ids(w, count, ids, &bad);
        if (s == BROADPHASE_OK &&
            (!store_filter_reserve(w, w->store.id_end) || !wake_reserve(w, count)))
            s = BROADPHASE_ERROR_OUT_OF_MEMORY;
        if (s == BROADPHASE_OK) {
            for (size_t i = 0; i < count; i++) {
                uint32_t id = ids[i];
                if (w->store.filter_category[id] == filters[i].category &&
                    w->store.filter_mask[id] == filters[i].mask &&
                    w->store.filter_group[id] == filters[i].group)
                    continue;
                w->store.filter_category[id] = filters[i].category;
                w->store.filter_mask[id] = filters[i].mask;
                w->store.filter_group[id] = filters[i].group;
                w->moved_count += mark_changed(w, id);
                if (w->store.is_static && w->store.is_static[id]) w->rest.drop = true;
            }
            wake_changed(w, count, ids);
        }
    }
    fail(w, s, bad);
    world_leave(w);
    return s;
}

broadphase_status broadphase_get_filter(const broadphase_world *w, uint32_t id,
                                        broadphase_filter *filter_out) {
    if (!w || !filter_out) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (id >= w->store.id_end || w->store.kind[id] == OBJECT_FREE)
        return BROADPHASE_ERROR_UNKNOWN_ID;
    if (!w->store.filter_category) {
        *filter_out = store_default_filter;
        return BROADPHASE_OK;
    }
    *filter_out = (broadphase_filter){w->store.filter_category[id], w->store.filter_mask[id],
                                      w->store.filter_group[id]};
    return BROADPHASE_OK;
}

broadphase_status broadphase_set_static(broadphase_world *w, size_t count, const uint32_t *ids,
                                        bool is_static) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!world_enter(w)) return BROADPHASE_ERROR_BUSY;
    broadphase_status s = BROADPHASE_OK;
    size_t bad = SIZE_MAX;
    if (count > 0) {
        s = check_id_batch(w, count, ids, &bad);
        if (s == BROADPHASE_OK && !w->store.is_static && !store_static_reserve(w, w->store.id_end))
            s = BROADPHASE_ERROR_OUT_OF_MEMORY;
        if (s == BROADPHASE_OK) {
            uint8_t flag = is_static ? 1 : 0;
            size_t changed = 0;
            for (size_t i = 0; i < count; i++) {
                uint32_t id = ids[i];
                if (w->store.is_static[id] == flag) continue;
                changed++;
                w->store.is_static[id] = flag;
                w->moved_count += mark_changed(w, id);
                if (w->rest.at_rest && w->rest.at_rest[id]) leave_rest(w, id, false);
            }
            if (changed) {
                w->store.static_count =
                    is_static ? w->store.static_count + changed : w->store.static_count - changed;
                /* A new static's pairs with resting objects would be found by no one. */
                w->statics_dirty = w->trees_stale = true;
                w->rest.drop = w->rest.drop || is_static;
            }
        }
    }
    fail(w, s, bad);
    world_leave(w);
    return s;
}

broadphase_status broadphase_get_static(const broadphase_world *w, uint32_t id, bool *static_out) {
    if (!w || !static_out) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (id >= w->store.id_end || w->store.kind[id] == OBJECT_FREE)
        return BROADPHASE_ERROR_UNKNOWN_ID;
    *static_out = w->store.is_static && w->store.is_static[id];
    return BROADPHASE_OK;
}

broadphase_status broadphase_remove(broadphase_world *w, size_t count, const uint32_t *ids) {
    if (!w) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (!world_enter(w)) return BROADPHASE_ERROR_BUSY;
    broadphase_status s = BROADPHASE_OK;
    size_t bad = SIZE_MAX;
    if (count > 0) {
        s = check_id_batch(w, count, ids, &bad);
        if (s == BROADPHASE_OK &&
            !heap_grow(&w->heap, (void **)&w->store.free_ids, &w->store.free_capacity,
                       w->store.free_count + count, sizeof(uint32_t), w->store.free_count))
            s = BROADPHASE_ERROR_OUT_OF_MEMORY;
        if (s == BROADPHASE_OK) {
            for (size_t i = 0; i < count; i++) {
                uint32_t id = ids[i];
                if (w->store.kind[id] == OBJECT_SPHERE) w->store.sphere_count--;
                w->moved_count += mark_changed(w, id);
                if (w->rest.at_rest && w->rest.at_rest[id]) leave_rest(w, id, false);
                if (w->store.is_static && w->store.is_static[id]) {
                    w->store.is_static[id] = 0;
                    w->store.static_count--;
                    w->statics_dirty = true;
                }
                store_set_sentinel(w, id);
                w->store.free_ids[w->store.free_count++] = id;
            }
            w->store.free_sorted = false;
            w->store.live_count -= count;
        }
    }
    fail(w, s, bad);
    world_leave(w);
    return s;
}
