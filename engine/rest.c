/* Only-moved updates (see rest.h): when the rest is built or dropped, and the carry-over of the
 * last step's pairs between objects out of the tree. */
#include "bits.h"
#include "rest.h"

#include "parallel.h"
#include "world.h"

#include <string.h>

enum {
    SETTLE_CHUNKS = 256,  /* chunks of ids of the build's pass, at most */
    SETTLE_GRAIN = 16384, /* ids per chunk, at least */
    /* Pairs of the last list per chunk of the carry-over (whole words). Large: on two threads
     * 1e5 pairs took 0.14 ms in two chunks against 0.08 in one; 1e6 the same in 4 or 16. */
    CARRY_CHUNK = 262144,
};

bool rest_reserve(broadphase_world *w, size_t need) {
    rest_state *r = &w->rest;
    size_t old = r->capacity;
    if (!heap_grow(&w->heap, (void **)&r->at_rest, &r->capacity, need, 1, old)) return false;
    memset(r->at_rest + old, 0, r->capacity - old);
    return true;
}

/* Everything at rest goes back into the tree, which is then built anew. */
static void wake_all(broadphase_world *w) {
    rest_state *r = &w->rest;
    if (r->count > 0) {
        memset(r->at_rest, 0, w->store.id_end);
        w->trees_stale = true;
    }
    r->count = 0;
    r->field.pyramid.levels = 0;
}

typedef struct settle_ctx {
    broadphase_world *w;
    size_t chunk;
    size_t count[SETTLE_CHUNKS]; /* by chunk: objects at rest after the pass */
} settle_ctx;

/* The tree's objects that did not change since the last step come to rest. */
static void settle_chunk(size_t chunk, int worker, void *p) {
    (void)worker;
    settle_ctx *c = p;
    broadphase_world *w = c->w;
    size_t begin = chunk * c->chunk,
           end = begin + c->chunk < w->store.id_end ? begin + c->chunk : w->store.id_end;
    size_t n = 0;
    for (size_t i = begin; i < end; i++) {
        if (world_tree_member(w, i) && w->store.changed[i] < w->step_epoch) w->rest.at_rest[i] = 1;
        n += w->rest.at_rest[i];
    }
    c->count[chunk] = n;
}

static bool build(broadphase_world *w) {
    rest_state *r = &w->rest;
    if (!rest_reserve(w, w->store.id_end)) return false;
    settle_ctx c = {.w = w, .chunk = w->store.id_end / SETTLE_CHUNKS + 1};
    if (c.chunk < SETTLE_GRAIN) c.chunk = SETTLE_GRAIN;
    size_t chunks = (w->store.id_end + c.chunk - 1) / c.chunk;
    threads_for_chunks(w->workers, chunks, settle_chunk, &c);
    r->count = 0;
    for (size_t i = 0; i < chunks; i++) r->count += c.count[i];
    w->trees_stale = true;
    if (!statics_field_build(w, &r->field, r->at_rest, r->count)) {
        wake_all(w);
        return false;
    }
    return true;
}

bool rest_update(broadphase_world *w) {
    rest_state *r = &w->rest;
    double share = w->config.rest_share;
    /* A static that changed since the last step forbids carrying any pair over from it, also
     * at an update after the one that dropped the rest (broadphase_update). */
    r->dropped |= r->drop;
    bool carry = w->last_step_ok && !r->dropped;
    r->drop = false;
    if (share <= 0.0) return true;
    size_t tree = world_tree_count(w), all = tree + r->count;
    /* Too many objects in the tree: their queries into the rest cost more than the tree. */
    if (!carry || (r->count > 0 && (double)tree > 2.0 * share * (double)all)) {
        wake_all(w);
        return true;
    }
    /* Changed since the last step: those since the structures' last update, and those an
     * update took in before them (an object counted in both only makes the share larger). */
    size_t moved = w->moved_count + w->moved_before, settled = tree > moved ? tree - moved : 0;
    if (settled == 0 || (double)moved > share * (double)all) return true;
    /* Built again only when at least half the tree settled and the build's cost (a pass over
     * the rest) is paid back by what the settled objects no longer cost in the tree. */
    if (r->count > 0 && (settled < tree / 2 || settled < r->count / 16)) return true;
    return build(w);
}

/* ---- the carry-over ------------------------------------------------------------------------ */

typedef struct carry_ctx {
    const broadphase_world *w;
    const broadphase_pair *last, *found; /* the last step's list, this search's pairs */
    size_t last_count, found_count, chunks;
    size_t *kept;   /* by chunk */
    uint64_t *keep; /* bit i: pair i of the last list is carried over */
    broadphase_pair *out;
} carry_ctx;

/* 1 when object id is out of the tree (at rest or static), else 0. */
static inline uint64_t out_of_tree(const uint8_t *at_rest, const uint8_t *is_static, uint32_t id) {
    return (uint64_t)(at_rest[id] | (is_static ? is_static[id] : 0u));
}

/* Chunk `chunk` of the last list: which of its pairs are carried over (both objects out of the
 * tree), as bits, and how many. Chunks are whole words of bits. */
static void carry_count(size_t chunk, int worker, void *p) {
    (void)worker;
    carry_ctx *c = p;
    const uint8_t *at_rest = c->w->rest.at_rest, *is_static = c->w->store.is_static;
    size_t l0 = chunk * CARRY_CHUNK,
           l1 = l0 + CARRY_CHUNK < c->last_count ? l0 + CARRY_CHUNK : c->last_count;
    size_t n = 0;
    for (size_t i = l0; i < l1; i += 64) {
        size_t end = i + 64 < l1 ? i + 64 : l1;
        uint64_t bits = 0;
        for (size_t k = i; k < end; k++)
            bits |= (out_of_tree(at_rest, is_static, c->last[k].a) &
                     out_of_tree(at_rest, is_static, c->last[k].b))
                    << (k - i);
        c->keep[i / 64] = bits;
        n += bits_popcount64(bits);
    }
    c->kept[chunk] = n;
}

/* The chunk's carried pairs merged with the found pairs in its key range, at its offset. A word
 * whose 64 pairs are all carried and come before the next found pair is copied whole. */
static void carry_write(size_t chunk, int worker, void *p) {
    (void)worker;
    carry_ctx *c = p;
    size_t l0 = chunk * CARRY_CHUNK,
           l1 = l0 + CARRY_CHUNK < c->last_count ? l0 + CARRY_CHUNK : c->last_count;
    size_t j =
        chunk == 0 ? 0 : pairs_lower_bound(c->found, c->found_count, pairs_order_key(c->last[l0]));
    size_t j_end = chunk + 1 == c->chunks
                       ? c->found_count
                       : pairs_lower_bound(c->found, c->found_count, pairs_order_key(c->last[l1]));
    broadphase_pair *o = c->out + c->kept[chunk] + j;
    uint64_t next = j < j_end ? pairs_order_key(c->found[j]) : UINT64_MAX;
    for (size_t i = l0; i < l1; i += 64) {
        size_t end = i + 64 < l1 ? i + 64 : l1;
        uint64_t bits = c->keep[i / 64];
        if (end - i == 64 && bits == UINT64_MAX && pairs_order_key(c->last[end - 1]) < next) {
            memcpy(o, c->last + i, 64 * sizeof *o);
            o += 64;
            continue;
        }
        for (; bits; bits &= bits - 1) {
            broadphase_pair a = c->last[i + (size_t)__builtin_ctzll(bits)];
            uint64_t k = pairs_order_key(a);
            while (next < k) {
                *o++ = c->found[j++];
                next = j < j_end ? pairs_order_key(c->found[j]) : UINT64_MAX;
            }
            *o++ = a;
        }
    }
    while (j < j_end) *o++ = c->found[j++];
}

/* Grows *p (of *capacity elements of `size` bytes; allocated even for none) to `need` with a
 * quarter to spare: the pair list's buffers take turns (the merged list is the next step's
 * previous one, and so on), and a count that creeps up must not grow one every step. */
static bool grow_spare(broadphase_world *w, void **p, size_t *capacity, size_t need, size_t size) {
    return (*p && need <= *capacity) || heap_grow(&w->heap, p, capacity, need + need / 4, size, 0);
}

bool rest_carry_over(broadphase_world *w) {
    rest_state *r = &w->rest;
    if (r->count == 0) return true;
    pairs_state *ps = &w->pairs;
    carry_ctx c = {.w = w,
                   .last = ps->prev,
                   .found = ps->out,
                   .last_count = ps->prev_count,
                   .found_count = ps->count};
    c.chunks = (c.last_count + CARRY_CHUNK - 1) / CARRY_CHUNK;
    if (c.chunks == 0) return true; /* nothing to carry over */
    if (!grow_spare(w, (void **)&r->chunk_kept, &r->chunk_capacity, c.chunks, sizeof(size_t)) ||
        !grow_spare(w, (void **)&r->keep, &r->keep_capacity, (c.last_count + 63) / 64,
                    sizeof(uint64_t)))
        return false;
    c.kept = r->chunk_kept;
    c.keep = r->keep;
    threads_for_chunks(w->workers, c.chunks, carry_count, &c);
    size_t total = threads_exclusive_scan(w->workers, c.kept, c.chunks) + c.found_count;
    if (!grow_spare(w, (void **)&r->merged, &r->merged_capacity, total, sizeof(broadphase_pair)))
        return false;
    c.out = r->merged;
    threads_for_chunks(w->workers, c.chunks, carry_write, &c);
    /* The merged list becomes the step's; its old buffer is the next merge's. */
    broadphase_pair *out = ps->out;
    size_t capacity = ps->out_capacity;
    ps->out = r->merged;
    ps->out_capacity = r->merged_capacity;
    ps->count = total;
    r->merged = out;
    r->merged_capacity = capacity;
    return true;
}

void rest_release(broadphase_world *w) {
    rest_state *r = &w->rest;
    heap_free(&w->heap, r->at_rest, r->capacity);
    heap_free(&w->heap, r->chunk_kept, r->chunk_capacity * sizeof(size_t));
    heap_free(&w->heap, r->keep, r->keep_capacity * sizeof(uint64_t));
    heap_free(&w->heap, r->merged, r->merged_capacity * sizeof(broadphase_pair));
    statics_field_release(w, &r->field);
    memset(r, 0, sizeof *r);
}
