/* The octree's relayout spread over steps (see octree.c and octree_refit.c).
 *
 * A full relayout copies every slot, tightens every leaf and reshapes the tree, however few
 * objects move, and the flat list is made again after it: at moving 1e5 that was 4-6 ms of a
 * 7 ms frame once every 33 steps (NOTES rows 158 and 174). So while the movers may
 * wait, the tree is laid out a part at a time, and no step does much more than another:
 * - the windows are the root's subtrees (8 in 3D, 4 in 2D; 16 windows in 2D left the leaves
 *   looser, NOTES row 176). Every few steps two windows whose cells share a face are laid out
 *   anew, in place (octree_in_place.c): their movers bound for a live leaf of either window go
 *   there (as many across in each direction, the first in slot order, so that each window keeps
 *   its total and no other slot moves), and one of the two, when due, has its leaves tightened
 *   into the two windows' leaves, at the step before the turn where turns are far apart (2D).
 *   Each pair comes once every WINDOW_ROUND steps, axis by axis, so a window comes back every
 *   few turns;
 * - every LIGHT_ROUND steps, and at once when a mover that would wait lies outside its leaf's
 *   reach region (the refit sees it before the search, which would lose the flat list), a light
 *   relayout takes the movers no pair took (across unevenly, or between cells that share only
 *   an edge): the whole tree laid out in place as well (octree_refit.c), nothing tightened.
 *   Every 8 steps, it was most of the update's periodic cost (1e5: 0.46 ms, against 0.30 for a
 *   pair of windows); every 32, the reach calls it every 18-20 steps in 3D (NOTES rows 263 and
 *   266);
 * - neither makes, splits, merges or spares a node, so the leaves, and the flat list, stay. A
 *   full relayout still comes with objects new to the tree or removed from it (an id removed
 *   and added again before the step keeps its slot and is neither), an object that must move,
 *   or more waiting movers than oc_refit's pending_limit.
 * The decisions depend on the step count and the objects only, never on the thread count. */
#include "octree_internal.h"

enum {
    WINDOW_ROUND = 36,   /* steps in which each pair of windows is laid out once (oc_window_turn) */
    WINDOW_TIGHTEN = 32, /* steps between two tightenings of a window's leaves, at least */
    LIGHT_ROUND = 32,    /* steps between two light relayouts at most (oc_window_turn) */
    WINDOW_LEVEL = 1,    /* the windows are the subtrees at this level */
    WINDOWS_MOST = 8,    /* windows at most (the cells of WINDOW_LEVEL) */
    WINDOW_CHUNKS = 256, /* chunks of a pair of windows' slots, at most */
    /* Turns at least this many steps apart (2D's 4 pairs, or a 3D tree with few windows)
     * tighten their window at the step before (tighten_ahead). A turn every 3 steps (3D's 12
     * pairs) is a third of the frames, not a spike, and tightening at the step before only put
     * the cost on another third: the update's median at moving 1e5 rose from 0.74-0.79 to
     * 0.77-0.85 ms (NOTES row 294). */
    AHEAD_STRIDE = 4
};

typedef struct window_ctx {
    const method_world *w;
    octree *t;
    uint32_t top[2], begin[2], end[2]; /* the windows' top nodes and slots [begin, end) */
    bool tighten[2];                   /* whether the window's leaves are tightened */
    size_t chunk, chunks0;             /* slots per chunk; the first window's chunks */
    uint32_t movers[WINDOW_CHUNKS];    /* by chunk: movers, then those that go */
    uint32_t across[WINDOW_CHUNKS];    /* by chunk: movers bound for the other window */
    uint32_t keep_from[WINDOW_CHUNKS]; /* by chunk: how many of its window's movers across
                                          come before the chunk's */
    uint32_t out[WINDOW_CHUNKS];       /* by chunk: where its movers go in moves_tmp */
    size_t keep;                       /* movers across that go, in each direction */
} window_ctx;

static void window_chunk(const window_ctx *c, size_t chunk, int *side, size_t *begin, size_t *end) {
    *side = chunk >= c->chunks0;
    *begin = c->begin[*side] + (chunk - (*side ? c->chunks0 : 0)) * c->chunk;
    *end = *begin + c->chunk < c->end[*side] ? *begin + c->chunk : c->end[*side];
}

/* A chunk of a window's slots: movers bound for neither window, or for a node that is not a
 * live leaf, stay; the window's leaves are tightened into the two windows' leaves; the movers
 * and those across are counted. */
static void window_movers(size_t chunk, int worker, void *p) {
    (void)worker;
    window_ctx *c = p;
    octree *t = c->t;
    int side;
    size_t begin, end;
    window_chunk(c, chunk, &side, &begin, &end);
    uint32_t own = c->top[side], other = c->top[1 - side];
    uint32_t movers = 0, across = 0;
    for (size_t s = begin; s < end; s++) {
        uint32_t d = t->dest[s], n = t->slot_node[s];
        if (d == n) continue;
        if (d == DEAD || t->nodes[d].spare || !t->nodes[d].leaf) {
            t->dest[s] = n;
            continue;
        }
        bool in_own = oc_in_subtree(t, d, own);
        if (!in_own && !oc_in_subtree(t, d, other)) {
            t->dest[s] = n;
            continue;
        }
        movers++;
        across += !in_own;
    }
    if (c->tighten[side]) {
        oc_tighten_range(t, begin, end, own, other);
        movers = across = 0;
        for (size_t s = begin; s < end; s++) {
            uint32_t d = t->dest[s];
            if (d == t->slot_node[s]) continue;
            movers++;
            across += !oc_in_subtree(t, d, own);
        }
    }
    c->movers[chunk] = movers;
    c->across[chunk] = across;
}

/* The chunk's movers that go into moves_tmp, in slot order (source << 32 | destination); those
 * across past the first c->keep of their window stay. */
static void window_collect(size_t chunk, int worker, void *p) {
    (void)worker;
    window_ctx *c = p;
    octree *t = c->t;
    int side;
    size_t begin, end;
    window_chunk(c, chunk, &side, &begin, &end);
    uint32_t own = c->top[side], across = c->keep_from[chunk];
    uint64_t *out = t->moves_tmp + c->out[chunk];
    for (size_t s = begin; s < end; s++) {
        uint32_t d = t->dest[s], n = t->slot_node[s];
        if (d == n) continue;
        if (!oc_in_subtree(t, d, own) && across++ >= c->keep) {
            t->dest[s] = n;
            continue;
        }
        *out++ = (uint64_t)s << 32 | d;
    }
}

/* The window of node n (at the windows' level): its cell's index. */
static uint32_t window_index(const octree *t, const oc_node *n) {
    uint32_t index = 0;
    for (int k = t->dims - 1; k >= 0; k--) index = (index << n->level) | n->cell[k];
    return index;
}

/* Which of the windows under a and b a turn at window_steps `steps` tightens: at most one a
 * turn, the one tightened longer ago, if it is due (once every WINDOW_TIGHTEN steps or so);
 * -1 for neither. */
static int due_to_tighten(const octree *t, uint32_t a, uint32_t b, uint32_t steps) {
    uint32_t last[2] = {t->window_tightened[window_index(t, &t->nodes[a])],
                        t->window_tightened[window_index(t, &t->nodes[b])]};
    int older = steps - last[1] > steps - last[0];
    return steps - last[older] >= WINDOW_TIGHTEN ? older : -1;
}

/* Lays the two windows under a and b out anew (see above), in the current buffer itself: each
 * node's objects that stay, then its arrivals (their order within a node is not the full
 * relayout's, which copies the stayers in slot order). The window due to be tightened is, here
 * unless it is `ahead` (tightened at the step before, its marks kept by this step's refit). */
static void lay_out_windows(const method_world *w, octree *t, uint32_t a, uint32_t b,
                            uint32_t ahead) {
    bool tighten[2] = {false, false};
    int due = due_to_tighten(t, a, b, t->window_steps);
    if (due >= 0) {
        uint32_t top = due ? b : a;
        tighten[due] = top != ahead;
        t->window_tightened[window_index(t, &t->nodes[top])] = t->window_steps;
    }
    window_ctx c = {.w = w,
                    .t = t,
                    .tighten = {tighten[0], tighten[1]},
                    .top = {a, b},
                    .begin = {t->nodes[a].begin, t->nodes[b].begin},
                    .end = {t->nodes[a].sub_end, t->nodes[b].sub_end}};
    size_t size = (size_t)(c.end[0] - c.begin[0]) + (c.end[1] - c.begin[1]);
    c.chunk = threads_chunk_size(size, w->workers, SMALL_CHUNK, SLOT_CHUNK);
    size_t least = (size / (WINDOW_CHUNKS / 2) + 64) / 64 * 64; /* each window in 128 at most */
    if (c.chunk < least) c.chunk = least;
    c.chunks0 = threads_chunk_count(c.end[0] - c.begin[0], c.chunk);
    size_t chunks = c.chunks0 + threads_chunk_count(c.end[1] - c.begin[1], c.chunk);
    threads_for_chunks(w->workers, chunks, window_movers, &c);
    t->window_layouts++;
    /* As many movers go across each way: the first in slot order. */
    size_t across[2] = {0, 0};
    for (size_t i = 0; i < chunks; i++) {
        int side = i >= c.chunks0;
        c.keep_from[i] = (uint32_t)across[side];
        across[side] += c.across[i];
    }
    c.keep = across[0] < across[1] ? across[0] : across[1];
    size_t moved = 0;
    for (size_t i = 0; i < chunks; i++) {
        size_t from = c.keep_from[i], to = from + c.across[i];
        size_t dropped = to <= c.keep ? 0 : to - (from > c.keep ? from : c.keep);
        c.out[i] = (uint32_t)moved;
        moved += c.movers[i] - dropped;
    }
    if (moved == 0) return;
    threads_for_chunks(w->workers, chunks, window_collect, &c);
    /* Each window keeps its total: the two are laid out in place, each apart. */
    const uint32_t tops[2] = {a, b};
    oc_lay_out_in_place(w, t, tops, 2, moved, false);
}

/* The live nodes at the windows' level under n, into list (at most WINDOWS_MOST). */
static size_t window_list(const octree *t, uint32_t n, int level, uint32_t *list, size_t k) {
    const oc_node *node = &t->nodes[n];
    if (node->level == level) {
        list[k++] = n;
        return k;
    }
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = node->child[j];
        if (c != NONE && !t->nodes[c].spare) k = window_list(t, c, level, list, k);
    }
    return k;
}

/* Do the cells of nodes a and b (at one level) share a face across axis `axis`? */
static bool face_neighbours(const octree *t, const oc_node *a, const oc_node *b, int axis) {
    for (int k = 0; k < t->dims; k++)
        if (k == axis ? a->cell[k] + 1 != b->cell[k] : a->cell[k] != b->cell[k]) return false;
    return true;
}

/* A chunk of the window tightened ahead of its turn. */
typedef struct ahead_ctx {
    octree *t;
    uint32_t top, other; /* the window tightened, and the other of its pair */
    size_t begin, end, chunk;
} ahead_ctx;

static void tighten_ahead_chunk(size_t chunk, int worker, void *p) {
    (void)worker;
    const ahead_ctx *c = p;
    size_t begin = c->begin + chunk * c->chunk;
    size_t end = begin + c->chunk < c->end ? begin + c->chunk : c->end;
    oc_tighten_range(c->t, begin, end, c->top, c->other);
}

/* The step before a turn: the window that turn is due to tighten is tightened now, its marks
 * (dest) kept by the next refit while their leaves hold the boxes (octree_refit.c), so that the
 * turn's frame does not carry the tightening too: at moving2d 1e5 it was 0.1-0.2 ms of the 2D
 * pair's 0.5 (NOTES row 294). Nothing is laid out between: this is the step's last
 * change to the tree, and the next refit ends the marks' life, whatever it decides. */
static void tighten_ahead(const method_world *w, octree *t, uint32_t a, uint32_t b) {
    int due = due_to_tighten(t, a, b, t->window_steps + 1);
    if (due < 0) return;
    ahead_ctx c = {.t = t, .top = due ? b : a, .other = due ? a : b};
    c.begin = t->nodes[c.top].begin;
    c.end = t->nodes[c.top].sub_end;
    if (c.end <= c.begin) return;
    c.chunk = threads_chunk_size(c.end - c.begin, w->workers, SMALL_CHUNK, SLOT_CHUNK);
    threads_for_chunks(w->workers, threads_chunk_count(c.end - c.begin, c.chunk),
                       tighten_ahead_chunk, &c);
    t->ahead_top = c.top;
    t->ahead_other = c.other;
    t->ahead_begin = (uint32_t)c.begin;
    t->ahead_end = (uint32_t)c.end;
}

bool oc_window_turn(const method_world *w, octree *t, uint32_t ahead) {
    t->window_clock++;
    if (++t->window_steps % LIGHT_ROUND == 0) return false;
    uint32_t list[WINDOWS_MOST];
    size_t windows = window_list(t, 0, WINDOW_LEVEL, list, 0);
    uint32_t pairs = 0, pair_a[WINDOWS_MOST * 3], pair_b[WINDOWS_MOST * 3];
    /* Axis by axis, so that each window comes back every few turns. */
    for (int k = 0; k < t->dims; k++)
        for (size_t i = 0; i < windows; i++)
            for (size_t j = 0; j < windows; j++)
                if (face_neighbours(t, &t->nodes[list[i]], &t->nodes[list[j]], k)) {
                    pair_a[pairs] = list[i];
                    pair_b[pairs++] = list[j];
                }
    t->window_pairs = pairs;
    if (pairs == 0) return true;
    /* Each pair once every WINDOW_ROUND steps, or every step. */
    uint32_t stride = WINDOW_ROUND / pairs;
    if (stride < 1) stride = 1;
    uint32_t p = t->window_next % pairs;
    if (t->window_clock < stride) {
        /* The next step's turn (unless a light relayout comes instead) */
        if (stride >= AHEAD_STRIDE && t->window_clock + 1 == stride &&
            (t->window_steps + 1) % LIGHT_ROUND != 0)
            tighten_ahead(w, t, pair_a[p], pair_b[p]);
        return true;
    }
    t->window_clock = 0;
    t->window_next++;
    lay_out_windows(w, t, pair_a[p], pair_b[p], ahead);
    return true;
}
