/* Pair events: one merge of the previous and the current sorted pair lists, cut into chunks of
 * the longer list (the other list's share found by binary search), counted, then written. */
#include "events.h"

#include "parallel.h"

#include <string.h>

enum { EVENT_CHUNK = 65536 }; /* pairs of the longer list per chunk */

typedef struct merge_ctx {
    events_state *e;
    const broadphase_pair *lead, *other; /* chunks are cut along lead */
    size_t lead_count, other_count;
    bool lead_is_current;
    size_t chunks;
    bool write;
    bool any_fresh; /* ids were added since the previous step */
} merge_ctx;

static void merge_chunk(size_t chunk, int worker, void *p) {
    (void)worker;
    const merge_ctx *c = p;
    events_state *e = c->e;
    size_t l0 = chunk * EVENT_CHUNK,
           l1 = l0 + EVENT_CHUNK < c->lead_count ? l0 + EVENT_CHUNK : c->lead_count;
    size_t o0 =
        chunk == 0 ? 0 : pairs_lower_bound(c->other, c->other_count, pairs_order_key(c->lead[l0]));
    size_t o1 = chunk + 1 >= c->chunks
                    ? c->other_count
                    : pairs_lower_bound(c->other, c->other_count, pairs_order_key(c->lead[l1]));
    const broadphase_pair *cur = c->lead_is_current ? c->lead : c->other;
    const broadphase_pair *prev = c->lead_is_current ? c->other : c->lead;
    size_t i = c->lead_is_current ? l0 : o0, i_end = c->lead_is_current ? l1 : o1;
    size_t j = c->lead_is_current ? o0 : l0, j_end = c->lead_is_current ? o1 : l1;
    size_t nb = c->write ? e->chunk_count.data[2 * chunk] : 0;
    size_t ne = c->write ? e->chunk_count.data[2 * chunk + 1] : 0;
    const uint8_t *fresh = e->fresh.data;
    while (i < i_end || j < j_end) {
        uint64_t kc = i < i_end ? pairs_order_key(cur[i]) : UINT64_MAX;
        uint64_t kp = j < j_end ? pairs_order_key(prev[j]) : UINT64_MAX;
        bool begins = kc < kp, ends = kp < kc;
        if (kc == kp && c->any_fresh) begins = ends = fresh[cur[i].a] | fresh[cur[i].b];
        if (begins && c->write) e->begun.data[nb] = cur[i];
        if (ends && c->write) e->ended.data[ne] = prev[j];
        nb += begins;
        ne += ends;
        i += kc <= kp;
        j += kp <= kc;
    }
    if (!c->write) {
        e->chunk_count.data[2 * chunk] = nb;
        e->chunk_count.data[2 * chunk + 1] = ne;
    }
}

bool events_fresh_reserve(events_state *e, heap *h, size_t need) {
    size_t old = e->fresh.capacity;
    if (need <= old) return true;
    /* The marks already set (ids handed out again since the last step) are kept: a grow for a
     * later add call must not forget that an earlier one reused an id. */
    if (!heap_array_reserve(h, &e->fresh, need, old)) return false;
    memset(e->fresh.data + old, 0, e->fresh.capacity - old);
    return true;
}

bool events_update(events_state *e, const pairs_state *ps, heap *h, int workers,
                   const uint32_t *added, size_t added_count, bool fresh_before) {
    e->begun_count = e->ended_count = 0;
    merge_ctx c = {e,         ps->out,        ps->prev,
                   ps->count, ps->prev_count, true,
                   0,         false,          added_count > 0 || fresh_before};
    if (ps->prev_count > ps->count) {
        c.lead = ps->prev;
        c.other = ps->out;
        c.lead_count = ps->prev_count;
        c.other_count = ps->count;
        c.lead_is_current = false;
    }
    c.chunks = c.lead_count == 0 ? 1 : (c.lead_count + EVENT_CHUNK - 1) / EVENT_CHUNK;
    if (!heap_array_reserve(h, &e->chunk_count, 2 * c.chunks, 0)) return false;
    threads_for_chunks(workers, c.chunks, merge_chunk, &c);
    size_t nb = 0, ne = 0;
    for (size_t i = 0; i < c.chunks; i++) {
        size_t b = e->chunk_count.data[2 * i], d = e->chunk_count.data[2 * i + 1];
        e->chunk_count.data[2 * i] = nb;
        e->chunk_count.data[2 * i + 1] = ne;
        nb += b;
        ne += d;
    }
    bool ok =
        heap_array_reserve(h, &e->begun, nb + 1, 0) && heap_array_reserve(h, &e->ended, ne + 1, 0);
    if (ok) {
        c.write = true;
        threads_for_chunks(workers, c.chunks, merge_chunk, &c);
        e->begun_count = nb;
        e->ended_count = ne;
    }
    /* The marks of this step's new ids go (`added` holds them, and resting objects that went
     * back into the tree, which were never marked); after a failure they stay for the next. */
    if (ok && fresh_before)
        memset(e->fresh.data, 0, e->fresh.capacity);
    else
        for (size_t i = 0; ok && i < added_count; i++) e->fresh.data[added[i]] = 0;
    return ok;
}

void events_none(events_state *e) {
    e->begun_count = e->ended_count = 0;
}

void events_release(events_state *e, heap *h) {
    heap_array_release(h, &e->begun);
    heap_array_release(h, &e->ended);
    heap_array_release(h, &e->fresh);
    heap_array_release(h, &e->chunk_count);
    memset(e, 0, sizeof *e);
}
