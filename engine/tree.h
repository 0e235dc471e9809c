/* What the two trees share: objects in tree order as double-buffered SoA columns ("slots"), the
 * per-worker memory of the pair search (the parent-to-child list and hit buffers, and whether a
 * worker ran out of memory), emitting the pairs a kernel found through the exact filter, the
 * update policy's rebuild decision, and the moves of a relayout. Running the search jobs, with
 * the pair pool grown and the search run again while it overflows, is the frame's: step.c
 * (find_pairs), the same for every method. */
#pragma once

#include "broadphase.h"
#include "overlap.h"
#include "pairs.h"
#include "method.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Objects in tree order: two buffers, so that a refit can lay them out anew. Every column is
 * padded with sentinels (min = +inf, max = -inf) past its capacity for the SIMD kernels. */
typedef struct tree_slots {
    float *smin[2][3], *smax[2][3];
    uint32_t *sid[2];
    void *block[2];
    int cur;
    size_t capacity;
    uint32_t count;
    bool filled[2]; /* the buffer's sentinels written since the reserve (tree_slots_ready) */
    size_t warm[2]; /* slots [0, warm) of a buffer not filled yet hold sentinels already */
} tree_slots;

/* Room for `need` objects in both buffers; contents are not kept, and neither buffer is ready.
 * False on out of memory. */
bool tree_slots_reserve(const method_world *w, tree_slots *s, size_t need);
/* Before buffer b is first written after a reserve: every slot past the first `written` (which
 * the caller is about to write) takes the sentinels, in parallel; nothing once it is ready. A
 * fresh buffer is touched here, page by page, for the first time: a build readies only the
 * buffer it writes, and the other waits for the first relayout (moving 1e6: 32 MB that the
 * first frame no longer writes; perf/NOTES.md); the kd-tree's build touches the other as its
 * scratch (tree_slots_scratch). */
void tree_slots_ready(const method_world *w, tree_slots *s, int b, size_t written);
/* Buffer b's block as scratch for a build, until the slots are written: what it held is given up
 * (the buffer is neither ready nor warm after). Its size in bytes into *bytes. */
void *tree_slots_scratch(tree_slots *s, int b, size_t *bytes);
/* Before buffer b is ready: up to `slots` more of its slots take the sentinels, from where the
 * last call stopped, so that a fresh buffer's pages are first touched a slice a step rather
 * than all in the step that first lays the slots out (moving 1e6: 110 ms in one step, against
 * 40 a slice spread over 17 steps on this VM; NOTES row 177). Ready once all are. */
void tree_slots_warm(const method_world *w, tree_slots *s, int b, size_t slots);
/* Zeroes [p, p + bytes) on the workers: a build's first touch of the arrays the first refit
 * writes, so that the step after the build does not meet it (the kd-tree at 1e6: 12-17 ms of
 * that step, where the VM had to find the pages; NOTES row 222). */
void tree_touch(const method_world *w, void *p, size_t bytes);

/* A refit's new values for up to TREE_SLOT_BLOCK consecutive slots, when it streams them:
 * gathered object by object (tree_refit_read), then streamed column by column
 * (tree_slots_stream_block). */
enum { TREE_SLOT_BLOCK = 64, TREE_REFIT_AHEAD = 64 };
typedef struct tree_slot_block {
    float min[3][TREE_SLOT_BLOCK], max[3][TREE_SLOT_BLOCK];
} tree_slot_block;

/* Whether a refit should stream its slot writes past the caches (see tree.c). */
bool tree_slots_stream(const method_world *w, const tree_slots *s);

/* A refit's read of slot s of buffer b, in its pass over slots up to `end`: the object's new
 * bounds from the world into mn and mx, and into the slot, or into the block (whose first slot
 * is s0) when streaming. Slots are in tree order and the world's boxes in id order, so the box
 * TREE_REFIT_AHEAD slots on is fetched ahead; without streaming, each slot is written as it is
 * read (stores spread among the reads overlap with them: gathered and written in bursts they
 * cost moving 1e6 on one thread 2 ms more). Free ids hold the world's sentinels (lo = +inf),
 * so a removed object shows as mn[0] == +inf, and its slot takes them. */
static inline void tree_refit_read(const method_world *w, tree_slots *sl, int b,
                                   tree_slot_block *blk, size_t s0, size_t s, size_t end,
                                   bool stream, float mn[3], float mx[3]) {
    uint32_t ahead = sl->sid[b][s + TREE_REFIT_AHEAD < end ? s + TREE_REFIT_AHEAD : s];
    __builtin_prefetch(&w->store->box[ahead]);
    const world_box *box = &w->store->box[sl->sid[b][s]];
    for (int k = 0; k < 3; k++) {
        mn[k] = box->lo[k];
        mx[k] = box->hi[k];
        if (stream) {
            blk->min[k][s - s0] = mn[k];
            blk->max[k][s - s0] = mx[k];
        } else {
            sl->smin[b][k][s] = mn[k];
            sl->smax[b][k][s] = mx[k];
        }
    }
}
/* Slots [s0, s0 + count) of buffer b take the block's values, streamed; simd_stream_fence()
 * before another thread reads them. */
void tree_slots_stream_block(tree_slots *s, int b, size_t s0, size_t count,
                             const tree_slot_block *blk);
void tree_slots_release(const method_world *w, tree_slots *s);
/* The current buffer as the SIMD kernels see it. */
static inline simd_boxes tree_slots_boxes(const tree_slots *s) {
    simd_boxes b;
    for (int a = 0; a < 3; a++) {
        b.min[a] = s->smin[s->cur][a];
        b.max[a] = s->smax[s->cur][a];
    }
    return b;
}

/* Starts loading positions [begin, end) of the current buffer, up to 64 positions (4 lines of
 * each column): a node's own objects, ahead of a query's visit. */
static inline void tree_slots_prefetch(const tree_slots *s, uint32_t begin, uint32_t end,
                                       int dims) {
    if (end - begin > 64) end = begin + 64;
    for (uint32_t at = begin; at < end; at += 16) {
        for (int k = 0; k < dims; k++) {
            __builtin_prefetch(s->smin[s->cur][k] + at);
            __builtin_prefetch(s->smax[s->cur][k] + at);
        }
        __builtin_prefetch(s->sid[s->cur] + at);
    }
}

/* Per-worker search memory: the parent-to-child list (SoA) and hit buffers. Grown inside the
 * parallel search by its owner, through the world's heap (whose counters are atomic). */
typedef struct tree_worker {
    _Alignas(64) float *lmin[3];
    float *lmax[3];
    uint32_t *lid;
    size_t list_capacity;
    uint32_t *hits, *rows, *ids, *scratch; /* rows: the row of each hit of a pair kernel */
    size_t hit_capacity;
    heap *heap; /* the world's (set by tree_workers_ready) */
    bool failed;
} tree_worker;

/* Grows geometrically during the search; `exact` (before it) grows to the need itself, so that
 * workers matching each other's sizes do not keep doubling one another. */
bool tree_worker_reserve(tree_worker *k, size_t list_need, size_t hit_need, bool exact);
/* The list as the SIMD kernels see it (inline: the search asks for it at every node). */
static inline simd_boxes tree_worker_list(const tree_worker *k) {
    simd_boxes b;
    for (int a = 0; a < 3; a++) {
        b.min[a] = k->lmin[a];
        b.max[a] = k->lmax[a];
    }
    return b;
}

typedef struct tree_workers {
    tree_worker *at;
    int count;
} tree_workers;

/* Before a search: one worker per thread, each with the room the hungriest one needed so far
 * (which worker runs which job changes from step to step, and a steady-state step must not
 * allocate). False on out of memory. */
bool tree_workers_ready(const method_world *w, tree_workers *ws);
void tree_workers_release(const method_world *w, tree_workers *ws);

/* Emits the pairs between object qid and the candidates at hit positions k->hits[0..h) (mapped
 * to ids by pos_to_id), after the exact test. */
void tree_emit(const method_world *w, tree_worker *k, pairs_writer *wr, uint32_t qid,
               const uint32_t *pos_to_id, size_t h);
/* Emits the pairs a pair kernel found: (row_id[rows[j]], col_id[hits[j]]), grouped by row. */
void tree_emit_pairs(const method_world *w, tree_worker *k, pairs_writer *wr,
                     const uint32_t *row_id, const uint32_t *col_id, size_t h);

/* Every overlapping pair among entries [lo, hi) of `boxes` (ids by position in `id`), through
 * the exact filter. */
void tree_test_within(const method_world *w, tree_worker *k, pairs_writer *wr,
                      const simd_boxes *boxes, const uint32_t *id, size_t lo, size_t hi, int dims);
/* Every overlapping pair between entries [a_lo, a_hi) of `a` and [b_lo, b_hi) of `b`; the side
 * that needs fewer 8-wide chunks per row is walked as the columns. */
void tree_test_cross(const method_world *w, tree_worker *k, pairs_writer *wr, const simd_boxes *a,
                     const uint32_t *a_id, size_t a_lo, size_t a_hi, const simd_boxes *b,
                     const uint32_t *b_id, size_t b_lo, size_t b_hi, int dims);

/* True when a tree method's update has nothing to do: its last update built an empty tree
 * (`built_empty`), and still no object is to join it (every object rests or is static, and none
 * changed). A build would make the same empty tree after passes over every id. The step then
 * counts as a refit (of nothing). */
bool tree_idle(const method_world *w, bool built_empty);

/* The update policy, one for both trees: whether the update should build the tree anew rather
 * than refit it. Always for REBUILD, for a tree never built (or empty, or made stale by a flag
 * change) and when the objects to hold outgrow its slots' room; for AUTO also when its cost
 * figure (expected box tests per object, `cost` / `count`, only growing while refits pile
 * objects into fewer nodes) passes config.rebuild_threshold times its value after the last
 * build (`base_cost`), or when more than a quarter as many objects as it holds were added. */
bool tree_should_rebuild(const method_world *w, bool built, size_t count, size_t capacity,
                         uint64_t cost, uint64_t base_cost);

/* The tree's cost figure per object (broadphase_stats.quality). */
static inline float tree_quality(uint64_t cost, size_t objects) {
    return (float)((double)cost / (double)(objects ? objects : 1));
}

#ifdef BROADPHASE_DEEP_VALIDATE
#include <stdio.h>
#include <stdlib.h>
/* Deep validation, on in tests whatever NDEBUG says: a broken invariant is a library bug, so
 * stop loudly. */
#define TREE_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: tree invariant broken: %s\n", __FILE__, __LINE__, #cond);      \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#endif

/* Whether a worker ran out of memory in the search just run (and clears the marks). */
bool tree_workers_failed(tree_workers *ws);

/* ---- moving objects between nodes (the refits of both trees) ---- */

/* A slot's destination when its object was removed. */
#define TREE_DEAD (UINT32_MAX - 1)
/* A move is (destination node << 32 | source): the source a slot, or TREE_ADDED | i for entry i
 * of w->added (an object new to the tree). The octree sorts its moves with the halves swapped
 * (tree_copy_node's src_shift says which half holds the source). */
#define TREE_ADDED 0x80000000u

/* node_of (by id: the node holding it, WORLD_NONE when not in the tree) covering every id handed
 * out so far; new ids read as absent. False on out of memory. */
bool tree_node_of_reserve(const method_world *w, uint32_t **node_of, size_t *capacity);
/* Removed ids read as absent (after a rebuild marks the live ones). */
void tree_forget_free_ids(const method_world *w, uint32_t *node_of);
/* The slots in [begin, end) whose dest differs from slot_node, as moves, in slot order. */
void tree_collect_moves(const uint32_t *dest, const uint32_t *slot_node, size_t begin, size_t end,
                        uint64_t *out);
/* Slot src of buffer `from` to slot dst of buffer `to`: its bounds and id. */
static inline void tree_move_slot(tree_slots *t, int from, uint32_t src, int to, uint32_t dst) {
    for (int k = 0; k < 3; k++) {
        t->smin[to][k][dst] = t->smin[from][k][src];
        t->smax[to][k][dst] = t->smax[from][k][src];
    }
    t->sid[to][dst] = t->sid[from][src];
}
/* Slots [s, e) of buffer `from` to [dst, dst + e - s) of buffer `to` (not overlapping them, when
 * the buffers are one), held by node n from now on (slot_node). */
void tree_copy_run(tree_slots *t, int from, int to, uint32_t s, uint32_t e, uint32_t dst,
                   uint32_t *slot_node, uint32_t n);
/* Copies node n's objects into the other slot buffer from dst: those of its old slots
 * [begin, end) that stay (dest == n), then its arrivals moves[first, last), whose sources are
 * bits [src_shift, src_shift + 32) of each move; updates slot_node and node_of, and marks removed
 * objects absent. */
void tree_copy_node(const method_world *w, tree_slots *s, const uint32_t *dest, uint32_t *slot_node,
                    uint32_t *node_of, const uint64_t *moves, unsigned src_shift, uint32_t n,
                    uint32_t begin, uint32_t end, uint32_t dst, size_t first, size_t last);

/* The first position in [lo, hi) of sorted column `key` whose value is above x (or at least x
 * when `inclusive` is false). Branch-free: the keys are data, so a branch mispredicts half the
 * time. */
static inline uint32_t tree_bound(const float *key, uint32_t lo, uint32_t hi, float x,
                                  bool inclusive) {
    if (lo >= hi) return lo;
    const float *base = key + lo;
    uint32_t len = hi - lo;
    while (len > 1) {
        uint32_t half = len / 2;
        bool below = inclusive ? base[half] <= x : base[half] < x;
        base = below ? base + half : base;
        len -= half;
    }
    bool below = inclusive ? *base <= x : *base < x;
    return (uint32_t)(base - key) + below;
}
