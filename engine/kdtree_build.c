/* The kd-tree's rebuild: the live objects gathered as records, partitioned from the root down
 * (each node split at the midpoint of its objects' centres; the top nodes each on all the
 * workers, in chunks, the rest as parallel tasks; no branch on a record's side), laid out in tree
 * order and numbered in preorder; and the measure of the cost figure and statistics after each
 * update. */
#include "kdtree_internal.h"

#include "parallel.h"
#include "tree.h"
#include "method.h"

#include <math.h>
#include <string.h>

static void count_live(size_t chunk, int worker, void *p) {
    (void)worker;
    kd_pass_ctx *c = p;
    size_t begin = chunk * c->t->slot_chunk, end = begin + c->t->slot_chunk;
    if (end > c->w->store->id_end) end = c->w->store->id_end;
    size_t live = 0;
    for (size_t i = begin; i < end; i++) live += method_member(c->w, i);
    c->t->chunk_count[chunk] = live;
}

static void write_records(size_t chunk, int worker, void *p) {
    (void)worker;
    kd_pass_ctx *c = p;
    const method_world *w = c->w;
    size_t begin = chunk * c->t->slot_chunk, end = begin + c->t->slot_chunk;
    if (end > w->store->id_end) end = w->store->id_end;
    kd_record *r = c->t->records + c->t->chunk_count[chunk];
    for (size_t i = begin; i < end; i++) {
        if (!method_member(w, i)) continue;
        for (int k = 0; k < 3; k++) {
            r->min[k] = w->store->box[i].lo[k];
            r->max[k] = w->store->box[i].hi[k];
        }
        r->id = (uint32_t)i;
        r->pad = 0;
        r++;
    }
}

typedef struct build_ctx {
    kdtree *t;
    kd_record *scratch; /* as many records as the tree's, for the partitions (kd_rebuild) */
    int dims, leaf_size, max_depth;
} build_ctx;

/* A node to build: its records [begin, end), and their centres' bounds when the parent's
 * partition found them (bounded). */
typedef struct build_task {
    const build_ctx *b;
    uint32_t node, begin, end;
    bool bounded;
    float lo[3], hi[3];
} build_task;

static void build_node(void *p, int worker);

static float rec_key(const kd_record *r, int axis) {
    return r->min[axis];
}

/* Quicksort of records by min on one axis (median of three, insertion sort below 16). */
static void sort_records(kd_record *r, uint32_t n, int axis) {
    while (n > 16) {
        float a = rec_key(&r[0], axis), m = rec_key(&r[n / 2], axis), z = rec_key(&r[n - 1], axis);
        float pivot = a < m ? (m < z ? m : (a < z ? z : a)) : (a < z ? a : (m < z ? z : m));
        uint32_t i = 0, j = n - 1;
        for (;;) {
            while (rec_key(&r[i], axis) < pivot) i++;
            while (rec_key(&r[j], axis) > pivot) j--;
            if (i >= j) break;
            kd_record tmp = r[i];
            r[i++] = r[j];
            r[j--] = tmp;
        }
        /* Recurse into the smaller side, loop on the larger: bounded stack depth. */
        uint32_t left = j + 1;
        if (left < n - left) {
            sort_records(r, left, axis);
            r += left;
            n -= left;
        } else {
            sort_records(r + left, n - left, axis);
            n = left;
        }
    }
    for (uint32_t i = 1; i < n; i++) {
        kd_record x = r[i];
        uint32_t j = i;
        while (j > 0 && rec_key(&r[j - 1], axis) > rec_key(&x, axis)) {
            r[j] = r[j - 1];
            j--;
        }
        r[j] = x;
    }
}

/* Chooses the sweep axis of a node with many own objects (the axis, other than its split axis,
 * along which they spread most), sorts them along it and records their reach. */
static void finish_own(kd_node *n, kd_record *rec, uint32_t begin, uint32_t end, int dims,
                       int split_axis) {
    n->sweep = NO_SWEEP;
    n->reach = 0.0f;
    if (end - begin <= SWEEP_MIN) return;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (uint32_t i = begin; i < end; i++) {
        for (int k = 0; k < dims; k++) {
            lo[k] = rec[i].min[k] < lo[k] ? rec[i].min[k] : lo[k];
            hi[k] = rec[i].max[k] > hi[k] ? rec[i].max[k] : hi[k];
        }
    }
    int axis = -1;
    for (int k = 0; k < dims; k++)
        if (k != split_axis && (axis < 0 || hi[k] - lo[k] > hi[axis] - lo[axis])) axis = k;
    if (axis < 0) axis = 0;
    sort_records(rec + begin, end - begin, axis);
    float reach = 0.0f;
    for (uint32_t i = begin; i < end; i++) {
        float e = rec[i].max[axis] - rec[i].min[axis];
        reach = e > reach ? e : reach;
    }
    n->sweep = (uint8_t)axis;
    n->slab_lo = split_axis < 0 ? -INFINITY : lo[split_axis];
    n->slab_hi = split_axis < 0 ? INFINITY : hi[split_axis];
    n->reach = nextafterf(reach, INFINITY); /* never below the exact largest extent */
}

/* The bounds of the centres of records [begin, end). */
static void centre_bounds(const kd_record *rec, uint32_t begin, uint32_t end, int dims, float lo[3],
                          float hi[3]) {
    for (int k = 0; k < 3; k++) {
        lo[k] = INFINITY;
        hi[k] = -INFINITY;
    }
    for (uint32_t i = begin; i < end; i++) {
        for (int k = 0; k < dims; k++) {
            float c = rec[i].min[k] * 0.5f + rec[i].max[k] * 0.5f;
            lo[k] = c < lo[k] ? c : lo[k];
            hi[k] = c > hi[k] ? c : hi[k];
        }
    }
}

/* The split for centres within [lo, hi]: the longest side, at its midpoint. False when every
 * centre is the same (nothing separates them). */
static bool choose_split(const float lo[3], const float hi[3], int dims, int *axis_out,
                         float *plane_out) {
    int axis = 0;
    float extent = hi[0] - lo[0];
    for (int k = 1; k < dims; k++) {
        if (hi[k] - lo[k] > extent) {
            extent = hi[k] - lo[k];
            axis = k;
        }
    }
    if (!(extent > 0.0f)) return false;
    *axis_out = axis;
    *plane_out = lo[axis] * 0.5f + hi[axis] * 0.5f;
    return true;
}

/* Three-way partition of records [begin, end) by the plane: the straddlers (kept in the node)
 * in [begin, *own_end), then the left side (max < plane) up to *right, then the right side;
 * each side's centres' bounds into side_lo/side_hi[0] (left) and [1] (right), so that the
 * children need no pass of their own to choose their splits (the same bounds, so the same
 * tree). Without a branch on the record's side, which no predictor guesses (half of them missed,
 * a build's time was mostly those): each record is written where its side goes, the straddlers
 * back into [begin, ...) behind the reading, the sides into the scratch's [begin, end) from
 * either end, copied back after (NOTES row 239). The left side keeps its order, the
 * right side's is reversed: the same for any thread count. */
static void partition(kd_record *rec, kd_record *scratch, uint32_t begin, uint32_t end, int axis,
                      float plane, uint32_t *own_end_out, uint32_t *right_out, float side_lo[2][3],
                      float side_hi[2][3]) {
    /* by side: 0 the straddlers (not kept), 1 left, 2 right; all three axes, without a loop
     * bound the compiler cannot see (a 2D tree never reads the third) */
    float lo[3][3], hi[3][3];
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < 3; k++) {
            lo[s][k] = INFINITY;
            hi[s][k] = -INFINITY;
        }
    uint32_t own = begin, left = begin, right = end;
    for (uint32_t i = begin; i < end; i++) {
        kd_record r = rec[i];
        /* (a box's min is at most its max: never both) */
        uintptr_t is_left = r.max[axis] < plane;
        uintptr_t is_right = r.min[axis] > plane;
        uintptr_t is_own = 1 - is_left - is_right;
        kd_record *dst[3] = {&rec[own], &scratch[left], &scratch[right - 1]};
        *dst[is_left + 2 * is_right] = r;
        own += (uint32_t)is_own;
        left += (uint32_t)is_left;
        right -= (uint32_t)is_right;
        int side = (int)(is_left + 2 * is_right);
        for (int k = 0; k < 3; k++) {
            float c = r.min[k] * 0.5f + r.max[k] * 0.5f;
            lo[side][k] = c < lo[side][k] ? c : lo[side][k];
            hi[side][k] = c > hi[side][k] ? c : hi[side][k];
        }
    }
    uint32_t lefts = left - begin;
    memcpy(rec + own, scratch + begin, (size_t)lefts * sizeof *rec);
    memcpy(rec + own + lefts, scratch + right, (size_t)(end - right) * sizeof *rec);
    for (int s = 0; s < 2; s++) {
        memcpy(side_lo[s], lo[1 + s], sizeof lo[0]);
        memcpy(side_hi[s], hi[1 + s], sizeof hi[0]);
    }
    *own_end_out = own;
    *right_out = own + lefts;
}

/* A node's first steps: its ranges, and its split, or false when it stays a leaf (finished). */
static bool split_of(const build_task *task, int *axis, float *plane) {
    const build_ctx *b = task->b;
    kd_node *n = &b->t->nodes[task->node];
    kd_record *rec = b->t->records;
    uint32_t begin = task->begin, end = task->end;
    n->begin = begin;
    n->end = end;
    n->sub_end = end;
    n->child[0] = n->child[1] = NONE;
    n->sweep = NO_SWEEP;
    if (end - begin <= (uint32_t)b->leaf_size || n->depth >= b->max_depth) {
        finish_own(n, rec, begin, end, b->dims, -1);
        return false;
    }
    float lo[3], hi[3];
    if (task->bounded) {
        memcpy(lo, task->lo, sizeof lo);
        memcpy(hi, task->hi, sizeof hi);
    } else {
        centre_bounds(rec, begin, end, b->dims, lo, hi);
    }
    if (!choose_split(lo, hi, b->dims, axis, plane)) {
        finish_own(n, rec, begin, end, b->dims, -1);
        return false;
    }
    return true;
}

/* A node's last steps, its records partitioned: its own objects finished, its children made,
 * and their tasks into sub. Returns how many (none for a leaf, or when the nodes ran out). */
static int children_of(const build_task *task, int axis, float plane, uint32_t own_end,
                       uint32_t right, float side_lo[2][3], float side_hi[2][3],
                       build_task sub[2]) {
    const build_ctx *b = task->b;
    kdtree *t = b->t;
    kd_node *n = &t->nodes[task->node];
    uint32_t begin = task->begin, end = task->end;
    if (own_end == end) { /* everything straddles: stays a leaf */
        finish_own(n, t->records, begin, end, b->dims, -1);
        return 0;
    }
    uint32_t ranges[2][2] = {{own_end, right}, {right, end}};
    int want = (right > own_end) + (end > right);
    uint32_t first = __atomic_fetch_add(&t->node_count, (uint32_t)want, __ATOMIC_RELAXED);
    if (first + (uint32_t)want > t->node_capacity) {
        /* Out of nodes: keep this node a leaf and let the caller build again with more room. */
        __atomic_store_n(&t->overflow, true, __ATOMIC_RELAXED);
        return 0;
    }
    n->axis = (uint8_t)axis;
    n->plane = plane;
    n->end = own_end;
    finish_own(n, t->records, begin, own_end, b->dims, axis);
    int subs = 0;
    uint32_t next = first;
    for (int side = 0; side < 2; side++) {
        if (ranges[side][1] == ranges[side][0]) continue;
        uint32_t ci = next++;
        kd_node *c = &t->nodes[ci];
        memcpy(c->cell_lo, n->cell_lo, sizeof c->cell_lo);
        memcpy(c->cell_hi, n->cell_hi, sizeof c->cell_hi);
        if (side == 0)
            c->cell_hi[axis] = plane;
        else
            c->cell_lo[axis] = plane;
        c->parent = task->node;
        c->depth = (uint8_t)(n->depth + 1);
        c->axis = 0;
        c->plane = 0.0f;
        n->child[side] = ci;
        build_task *st = &sub[subs++];
        *st = (build_task){b, ci, ranges[side][0], ranges[side][1], true, {0, 0, 0}, {0, 0, 0}};
        memcpy(st->lo, side_lo[side], sizeof st->lo);
        memcpy(st->hi, side_hi[side], sizeof st->hi);
    }
    return subs;
}

static void build_node(void *p, int worker) {
    build_task *task = p;
    int axis;
    float plane;
    if (!split_of(task, &axis, &plane)) return;
    uint32_t own_end, right;
    float side_lo[2][3], side_hi[2][3];
    partition(task->b->t->records, task->b->scratch, task->begin, task->end, axis, plane, &own_end,
              &right, side_lo, side_hi);
    build_task sub[2];
    int subs = children_of(task, axis, plane, own_end, right, side_lo, side_hi, sub);
    if (subs == 2 && task->end - task->begin > TASK_CUTOFF) {
        threads_spawn(build_node, &sub[0]);
        build_node(&sub[1], worker);
        threads_wait_children();
    } else {
        for (int s = 0; s < subs; s++) build_node(&sub[s], worker);
    }
}

/* ---- the top of the tree: nodes split on all the workers ---------------------------------- */

/* Where the tasks above leave workers idle (the root alone, then two nodes, ...), a large node's
 * partition runs on all of them instead, in chunks of TOP_CHUNK records: each chunk counts its
 * records by side and bounds the sides' centres; the counts, summed in chunk order, give each
 * chunk where its records go; each chunk writes them there, into the scratch; the scratch is
 * copied back. The records land where the partition on one thread puts them (the straddlers and
 * the left side in their order, the right side's reversed, from the end), so the tree is the
 * same whichever partition ran. */
typedef struct top_ctx {
    kd_record *rec, *scratch;
    kd_top_part *parts;
    uint32_t begin, end;
    int axis;
    float plane;
} top_ctx;

static void top_range(const top_ctx *c, size_t chunk, uint32_t *from, uint32_t *to) {
    *from = c->begin + (uint32_t)(chunk * TOP_CHUNK);
    *to = c->end - *from > TOP_CHUNK ? *from + TOP_CHUNK : c->end;
}

/* Each chunk's centres' bounds (the root's, before its split). */
static void top_bounds(size_t chunk, int worker, void *p) {
    (void)worker;
    const top_ctx *c = p;
    uint32_t from, to;
    top_range(c, chunk, &from, &to);
    kd_top_part *part = &c->parts[chunk];
    centre_bounds(c->rec, from, to, 3, part->lo[0], part->hi[0]);
}

static void top_count(size_t chunk, int worker, void *p) {
    (void)worker;
    const top_ctx *c = p;
    uint32_t from, to;
    top_range(c, chunk, &from, &to);
    float lo[3][3], hi[3][3];
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < 3; k++) {
            lo[s][k] = INFINITY;
            hi[s][k] = -INFINITY;
        }
    uint32_t n[3] = {0, 0, 0};
    for (uint32_t i = from; i < to; i++) {
        const kd_record *r = &c->rec[i];
        int side = (int)(r->max[c->axis] < c->plane) + 2 * (int)(r->min[c->axis] > c->plane);
        n[side]++;
        for (int k = 0; k < 3; k++) {
            float x = r->min[k] * 0.5f + r->max[k] * 0.5f;
            lo[side][k] = x < lo[side][k] ? x : lo[side][k];
            hi[side][k] = x > hi[side][k] ? x : hi[side][k];
        }
    }
    kd_top_part *part = &c->parts[chunk];
    memcpy(part->n, n, sizeof n);
    memcpy(part->lo, lo[1], sizeof part->lo);
    memcpy(part->hi, hi[1], sizeof part->hi);
}

static void top_scatter(size_t chunk, int worker, void *p) {
    (void)worker;
    const top_ctx *c = p;
    uint32_t from, to;
    top_range(c, chunk, &from, &to);
    const kd_top_part *part = &c->parts[chunk];
    kd_record *own = c->scratch + part->at[0], *left = c->scratch + part->at[1];
    kd_record *right = c->scratch + part->at[2]; /* one past the chunk's first, downwards */
    for (uint32_t i = from; i < to; i++) {
        kd_record r = c->rec[i];
        uintptr_t is_left = r.max[c->axis] < c->plane;
        uintptr_t is_right = r.min[c->axis] > c->plane;
        uintptr_t is_own = 1 - is_left - is_right;
        kd_record *dst[3] = {own, left, right - 1};
        *dst[is_left + 2 * is_right] = r;
        own += is_own;
        left += is_left;
        right -= is_right;
    }
}

static void top_copy_back(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    const top_ctx *c = p;
    memcpy(c->rec + c->begin + begin, c->scratch + c->begin + begin,
           (end - begin) * sizeof *c->rec);
}

/* partition()'s result for records [begin, end), on the workers. */
static void top_partition(const build_ctx *b, int workers, uint32_t begin, uint32_t end, int axis,
                          float plane, uint32_t *own_end_out, uint32_t *right_out,
                          float side_lo[2][3], float side_hi[2][3]) {
    top_ctx c = {b->t->records, b->scratch, b->t->top_parts, begin, end, axis, plane};
    size_t chunks = threads_chunk_count(end - begin, TOP_CHUNK);
    threads_for_chunks(workers, chunks, top_count, &c);
    uint32_t n[3] = {0, 0, 0};
    for (size_t i = 0; i < chunks; i++)
        for (int s = 0; s < 3; s++) n[s] += c.parts[i].n[s];
    uint32_t at[3] = {begin, begin + n[0], end};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 3; k++) {
            side_lo[s][k] = INFINITY;
            side_hi[s][k] = -INFINITY;
        }
    for (size_t i = 0; i < chunks; i++) {
        kd_top_part *part = &c.parts[i];
        uint32_t counts[3];
        memcpy(counts, part->n, sizeof counts);
        memcpy(part->at, at, sizeof at);
        at[0] += counts[0];
        at[1] += counts[1];
        at[2] -= counts[2];
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < 3; k++) {
                side_lo[s][k] = part->lo[s][k] < side_lo[s][k] ? part->lo[s][k] : side_lo[s][k];
                side_hi[s][k] = part->hi[s][k] > side_hi[s][k] ? part->hi[s][k] : side_hi[s][k];
            }
    }
    threads_for_chunks(workers, chunks, top_scatter, &c);
    threads_for_ranges(workers, end - begin, TOP_CHUNK, top_copy_back, &c);
    *own_end_out = begin + n[0];
    *right_out = begin + n[0] + n[1];
}

/* The root's centres' bounds, on the workers. */
static void top_root_bounds(const build_ctx *b, int workers, build_task *root) {
    if (root->end - root->begin < TOP_MIN) return; /* (the root finds them itself) */
    top_ctx c = {b->t->records, b->scratch, b->t->top_parts, root->begin, root->end, 0, 0.0f};
    size_t chunks = threads_chunk_count(root->end - root->begin, TOP_CHUNK);
    threads_for_chunks(workers, chunks, top_bounds, &c);
    for (int k = 0; k < 3; k++) {
        root->lo[k] = INFINITY;
        root->hi[k] = -INFINITY;
    }
    for (size_t i = 0; i < chunks; i++)
        for (int k = 0; k < 3; k++) {
            const kd_top_part *part = &c.parts[i];
            root->lo[k] = part->lo[0][k] < root->lo[k] ? part->lo[0][k] : root->lo[k];
            root->hi[k] = part->hi[0][k] > root->hi[k] ? part->hi[0][k] : root->hi[k];
        }
    root->bounded = true;
}

typedef struct top_tasks {
    build_task *tasks;
    int count;
} top_tasks;

static void build_tasks(void *p, int worker) {
    const top_tasks *tt = p;
    for (int i = 0; i + 1 < tt->count; i++) threads_spawn(build_node, &tt->tasks[i]);
    if (tt->count > 0) build_node(&tt->tasks[tt->count - 1], worker);
    threads_wait_children();
}

/* The tree from the root task: levels split on all the workers while they number fewer nodes than
 * workers (and those nodes are large), then the rest as tasks. */
static void build_tree(const build_ctx *b, int workers, build_task root) {
    build_task level[2][TOP_TASKS];
    int cur = 0, count = 1;
    level[0][0] = root;
    top_root_bounds(b, workers, &level[0][0]);
    while (count < workers && count * 2 <= TOP_TASKS) {
        int next = 0;
        bool split = false;
        for (int i = 0; i < count; i++) {
            build_task *task = &level[cur][i];
            if (task->end - task->begin < TOP_MIN) {
                level[1 - cur][next++] = *task;
                continue;
            }
            split = true;
            int axis;
            float plane;
            if (!split_of(task, &axis, &plane)) continue;
            uint32_t own_end, right;
            float side_lo[2][3], side_hi[2][3];
            top_partition(b, workers, task->begin, task->end, axis, plane, &own_end, &right,
                          side_lo, side_hi);
            next += children_of(task, axis, plane, own_end, right, side_lo, side_hi,
                                &level[1 - cur][next]);
        }
        cur = 1 - cur;
        count = next;
        if (!split) break;
    }
    top_tasks tt = {level[cur], count};
    threads_run_tasks(workers, build_tasks, &tt);
}

typedef struct scatter_ctx {
    kdtree *t;
} scatter_ctx;

static void scatter_records(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    kdtree *t = ((scatter_ctx *)p)->t;
    int b = t->slots.cur;
    for (size_t i = begin; i < end; i++) {
        const kd_record *r = &t->records[i];
        for (int k = 0; k < 3; k++) {
            t->slots.smin[b][k][i] = r->min[k];
            t->slots.smax[b][k][i] = r->max[k];
        }
        t->slots.sid[b][i] = r->id;
    }
}

static void mark_nodes(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((scatter_ctx *)p)->t;
    size_t end = (chunk + 1) * t->node_chunk;
    if (end > t->node_count) end = t->node_count;
    const uint32_t *sid = t->slots.sid[t->slots.cur];
    for (size_t n = chunk * t->node_chunk; n < end; n++) {
        for (uint32_t s = t->nodes[n].begin; s < t->nodes[n].end; s++) {
            t->node_of[sid[s]] = (uint32_t)n;
            t->slot_node[s] = (uint32_t)n;
        }
    }
}

/* Preorder positions of the subtree of n, from position i; returns the position after it. Depth
 * is bounded by max_depth (<= 64), so recursion is safe. */
static uint32_t number_preorder(kdtree *t, uint32_t n, uint32_t i) {
    t->order[i] = n;
    uint32_t next = i + 1;
    for (int s = 0; s < 2; s++)
        if (t->nodes[n].child[s] != NONE) next = number_preorder(t, t->nodes[n].child[s], next);
    t->skip[i] = next;
    return next;
}

/* Ids or slots per chunk: SLOT_CHUNK, and below it, so that every worker has chunks to balance,
 * from SMALL_FROM slots on. Fewer slots stay in chunks of SLOT_CHUNK: a tree of 1e4 cut in three
 * chunks on two workers left half the boxes in the other core's cache, and the next move waited
 * for them (move 0.042 -> 0.082 ms at 1e4 on two threads, NOTES row 115a). */
size_t kd_slot_chunk_size(size_t slots, int workers) {
    return threads_chunk_size(slots, workers, slots < SMALL_FROM ? SLOT_CHUNK : SMALL_CHUNK,
                              SLOT_CHUNK);
}

/* Sets the chunks of the passes over the nodes that follow, for a tree of `objects`, and returns
 * their count. Below SMALL_FROM objects they stay NODE_CHUNK, for the reason kd_slot_chunk_size
 * gives. */
size_t kd_node_chunks(const method_world *w, kdtree *t, size_t objects) {
    t->node_chunk =
        threads_chunk_size(t->node_count, w->workers,
                           objects < SMALL_FROM ? NODE_CHUNK : NODE_SMALL_CHUNK, NODE_CHUNK);
    return threads_chunk_count(t->node_count, t->node_chunk);
}

/* scan[i] = node begins, shifted as pack_counts' prefix sums leave them. */
static void pack_begins(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((kd_pass_ctx *)p)->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last);
    for (uint32_t i = first; i < last; i++) t->scan[i] = (size_t)t->nodes[t->order[i]].begin << 32;
}

/* Subtree ends from the begins in scan (scan[node_count] holds the total): a subtree ends where
 * the node after it in preorder begins. With new_ranges, begin and end too. */
void kd_set_ranges(size_t chunk, int worker, void *p) {
    (void)worker;
    const kd_pass_ctx *c = p;
    kdtree *t = c->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last);
    for (uint32_t i = first; i < last; i++) {
        kd_node *node = &t->nodes[t->order[i]];
        if (c->new_ranges) {
            node->begin = (uint32_t)(t->scan[i] >> 32);
            node->end = node->begin + t->own_count[t->order[i]];
        }
        node->sub_end = (uint32_t)(t->scan[t->skip[i]] >> 32);
    }
}

static void measure_chunk(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((kd_pass_ctx *)p)->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last);
    kd_measure m = {0, 0, 0, 0};
    for (uint32_t i = first; i < last; i++) {
        const kd_node *n = &t->nodes[i];
        uint64_t own = n->end - n->begin;
        m.cost += own * own;
        if (n->depth > m.depth) m.depth = n->depth;
        if (is_leaf(n))
            m.leaves++;
        else
            m.internal += (uint32_t)own;
    }
    t->parts[chunk] = m;
}

/* The cost figure and the statistics, summed over node chunks. False on out of memory. */
bool kd_measure_tree(const method_world *w, kdtree *t) {
    size_t chunks = kd_node_chunks(w, t, t->slots.count);
    if (!heap_grow(w->heap, (void **)&t->parts, &t->part_capacity, chunks + 1, sizeof(kd_measure),
                   0))
        return false;
    kd_pass_ctx c = {w, t, 0, false, 0, 0};
    threads_for_chunks(w->workers, chunks, measure_chunk, &c);
    kd_measure all = {0, 0, 0, 0};
    for (size_t i = 0; i < chunks; i++) {
        all.cost += t->parts[i].cost;
        all.depth = t->parts[i].depth > all.depth ? t->parts[i].depth : all.depth;
        all.leaves += t->parts[i].leaves;
        all.internal += t->parts[i].internal;
    }
    t->cost = all.cost;
    t->depth = all.depth;
    t->leaves = all.leaves;
    t->internal_objects = all.internal;
    return true;
}

static void root_init(kd_node *root) {
    for (int k = 0; k < 3; k++) {
        root->cell_lo[k] = -INFINITY;
        root->cell_hi[k] = INFINITY;
    }
    root->parent = NONE;
    root->depth = 0;
    root->axis = 0;
    root->plane = 0.0f;
}

/* Slots for `count` objects that also hold, in the buffer the build does not write, the build's
 * records as its partitions' scratch: a slot is 28 bytes and a record 32, so 8/7 of them (the
 * slots' spare eighth comes on top). That costs a seventh more slots (9 MB at 1e6 objects)
 * instead of a scratch of its own (32 MB). */
static size_t slots_for_scratch(size_t count) {
    return count + (count + 6) / 7;
}

broadphase_status kd_rebuild(const method_world *w, kdtree *t) {
    t->slot_chunk = kd_slot_chunk_size(w->store->id_end, w->workers);
    size_t chunks = threads_chunk_count(w->store->id_end, t->slot_chunk);
    if (!heap_grow(w->heap, (void **)&t->chunk_count, &t->chunk_capacity, chunks + 1,
                   sizeof(size_t), 0) ||
        !heap_grow(w->heap, (void **)&t->records, &t->record_capacity, w->member_count + 1,
                   sizeof(kd_record), 0) ||
        !tree_slots_reserve(w, &t->slots, slots_for_scratch(w->member_count)) ||
        !heap_grow(w->heap, (void **)&t->top_parts, &t->top_part_capacity,
                   w->member_count / TOP_CHUNK + 2, sizeof(kd_top_part), 0) ||
        !id_tables_reserve(w, t) ||
        !heap_grow(w->heap, (void **)&t->slot_node, &t->slot_node_capacity, t->slots.capacity + 1,
                   sizeof(uint32_t), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    kd_pass_ctx g = {w, t, 0, false, 0, 0};
    threads_for_chunks(w->workers, chunks, count_live, &g);
    threads_exclusive_scan(w->workers, t->chunk_count, chunks);
    threads_for_chunks(w->workers, chunks, write_records, &g);
    uint32_t count = (uint32_t)w->member_count;

    /* Nodes: usually about count / 3; retried with more room in the rare case of overflow. */
    size_t want = count / 2 + MIN_NODE_CAPACITY;
    if (want > t->node_capacity &&
        !heap_grow(w->heap, (void **)&t->nodes, &t->node_capacity, want, sizeof(kd_node), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    /* The partitions' scratch: the slot buffer the build does not write (slots_for_scratch),
     * given up until the first relayout after the build. */
    size_t scratch_bytes;
    kd_record *scratch = tree_slots_scratch(&t->slots, 1, &scratch_bytes);
#ifdef BROADPHASE_DEEP_VALIDATE
    TREE_CHECK(scratch_bytes >= (size_t)count * sizeof(kd_record));
#else
    (void)scratch_bytes;
#endif
    build_ctx b = {t, scratch, w->config->dimensions, w->config->leaf_size, w->config->max_depth};
    for (;;) {
        t->overflow = false;
        t->node_count = 1;
        root_init(&t->nodes[0]);
        build_tree(&b, w->workers, (build_task){&b, 0, 0, count, false, {0, 0, 0}, {0, 0, 0}});
        if (!t->overflow) break;
        /* A partition is not undone, but rebuilding from the same records is still exact. */
        if (!heap_grow(w->heap, (void **)&t->nodes, &t->node_capacity, t->node_capacity * 2,
                       sizeof(kd_node), 0))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
    }
    size_t nodes = t->node_count, node_chunk_count = kd_node_chunks(w, t, count);
    /* Sized by the node pool, not the node count, so that a tree a few nodes larger than the
     * last does not allocate. */
    size_t room = t->node_capacity + 1;
    if (!heap_grow(w->heap, (void **)&t->order, &t->order_capacity, room, sizeof(uint32_t), 0) ||
        !heap_grow(w->heap, (void **)&t->skip, &t->skip_capacity, room, sizeof(uint32_t), 0) ||
        !heap_grow(w->heap, (void **)&t->scan, &t->scan_capacity, room, sizeof(size_t), 0))
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    number_preorder(t, 0, 0);
    kd_pass_ctx r = {w, t, 0, false, 0, 0};
    threads_for_chunks(w->workers, node_chunk_count, pack_begins, &r);
    t->scan[nodes] = (size_t)count << 32;
    threads_for_chunks(w->workers, node_chunk_count, kd_set_ranges, &r);
    t->slots.cur = 0;
    t->slots.count = count;
    tree_slots_ready(w, &t->slots, 0, count);
    scatter_ctx s = {t};
    threads_for_ranges(w->workers, count, t->slot_chunk, scatter_records, &s);
    tree_forget_free_ids(w, t->node_of);
    threads_for_chunks(w->workers, node_chunk_count, mark_nodes, &s);
    if (!kd_measure_tree(w, t)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    t->base_cost = t->cost;
    t->built = true;
    t->built_empty = count == 0;
    w->stats->rebuilds++;
    kd_refit_prepare(w, t);
    return BROADPHASE_OK;
}
