/* Neighbourhoods: every object's k nearest other objects within a distance of its centre (for
 * broadphase_neighbourhoods), or the k nearest objects of given points (for large nearest
 * batches, query_batch.c), found on a uniform grid of the objects' centres made for the call.
 * It takes the store, a heap and the worker count, not the world.
 *
 * The objects are sorted by the cell of their centre, so that a row of cells along x is one run
 * of them. Where the distance is small next to the objects' spacing, the cells are half the
 * distance plus the widest object across and each centre reads the 5 x 5 (x 5) cells around its
 * own, which hold every object that can be within the distance; where it is large (a dense
 * crowd), the cells are sized to hold a few centres and a search reads farther only as far as
 * its (k + 1)-th nearest found so far may need. Each centre's runs go through a SIMD pass that
 * ranks them exactly (simd_point_nearest_runs), or through the SIMD filter and the ranking of a
 * nearest search where they hold spheres or more than the ranking takes (simd/overlap.h). The
 * proof that no object is missed is at the top of neighbourhoods.c. */
#pragma once

#include "heap.h"
#include "store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct neighbourhoods_state {
    /* by position, after the sort: each object's cell (then the free ids, past every cell) and
     * its id */
    HEAP_ARRAY(uint64_t) keys;
    HEAP_ARRAY(uint64_t) keys_tmp;
    HEAP_ARRAY(uint32_t) order;
    HEAP_ARRAY(uint32_t) order_tmp;
    HEAP_ARRAY(float) cols;     /* the boxes by position: six columns of stride live + SIMD_PAD */
    HEAP_ARRAY(float) centre;   /* the centres by position: three columns of stride live + 1 */
    HEAP_ARRAY(uint32_t) round; /* by position: 1 for a sphere */
    HEAP_ARRAY(uint32_t) start; /* by cell: its first position (cells + 1) */
    HEAP_ARRAY(double) partial; /* by worker: the bounds pass's and the runs pass's figures */
    HEAP_ARRAY(uint32_t) hits;  /* by worker: a centre's filter hits */
    HEAP_ARRAY(uint32_t) runs;  /* by worker: a centre's runs (two positions each) */
    HEAP_ARRAY(uint32_t)
    best_id; /* by worker: what a search ranks, k + 1 from a centre and k
              * from a point (the ranking's and the slow path's) */
    HEAP_ARRAY(float) best_d2;
    /* the rows: object i's neighbours are ids[i * k .. i * k + counts[i]) */
    HEAP_ARRAY(uint32_t) ids;
    HEAP_ARRAY(float) d2;
    HEAP_ARRAY(uint32_t) counts;
    /* a search from given points (neighbourhoods_points): their cells and indices, sorted */
    HEAP_ARRAY(uint64_t) point_keys;
    HEAP_ARRAY(uint64_t) point_keys_tmp;
    HEAP_ARRAY(uint32_t) point_order;
    HEAP_ARRAY(uint32_t) point_order_tmp;
    /* the batch the call falls back on (neighbourhoods_make's false with unfit set) */
    HEAP_ARRAY(uint32_t) batch_ids;
    HEAP_ARRAY(float) batch_d2;
    HEAP_ARRAY(size_t) batch_counts;
    void *hist;
    size_t hist_bytes;
    size_t rows, k, live;
    uint64_t cells;
    /* the last grid's cells against the first size that call took (at most 1; 0 before any),
     * for that call's want and distance: a crowd that was dense a call ago is sorted into cells
     * of that share at once */
    double dense_share;
    size_t dense_want;
    float dense_distance;
    /* sorts into cells made, and cells not made again (smaller or larger) where the cells' cap
     * would hold them where they were */
    size_t sorts, held;
    bool unfit;
} neighbourhoods_state;

/* Cells hold this many candidates a centre on average, or more: the grid is no use (the distance
 * is large next to the objects' spacing, or one object is wide) and the call asks the world's
 * structures instead (neighbourhoods_from_batch). */
enum { NEIGHBOURHOODS_MOST_CANDIDATES = 512, NEIGHBOURHOODS_MOST_RUNS = 1024 };

/* Rows for ids [0, s->id_end): for every live object, the at most k other live objects nearest
 * its centre (a sphere's centre; a box's midpoint, computed in double and rounded to float) whose
 * distance from it (query_math.h: qm_box_dist2, qm_sphere_dist2) is at most max_distance, ranked
 * by (that squared distance rounded to float, id); empty rows for free ids. max_distance is
 * >= 0 (infinite: the k nearest), k >= 1. Identical for every worker count; allocates only to
 * grow. False on out of memory, or with n->unfit set when the grid is no use: then the sorted
 * centres stand in the centre columns (live of them) and the caller finishes with
 * neighbourhoods_from_batch. */
bool neighbourhoods_make(neighbourhoods_state *n, const store *s, int dims, size_t k,
                         float max_distance, heap *h, int workers);
/* For `count` points (at[a][i], a < dims, finite): each one's at most k >= 1 live objects nearest
 * it within max_distance, ranked as above (broadphase_nearest_within's rows), into ids_out[i * k
 * ..], d2_out (may be NULL) and counts_out[i], on the same grid. Identical for every worker
 * count; allocates only to grow. False on out of memory, or with n->unfit set when the grid is no
 * use (nothing written either way). */
bool neighbourhoods_points(neighbourhoods_state *n, const store *s, int dims, size_t count,
                           const float *const at[3], size_t k, float max_distance,
                           uint32_t *ids_out, float *d2_out, size_t *counts_out, heap *h,
                           int workers);
/* For the fallback: room for a nearest batch of k + 1 over the live centres. False on out of
 * memory. */
bool neighbourhoods_batch_reserve(neighbourhoods_state *n, heap *h);
/* The rows from that batch's results (k + 1 a centre, by position), each object's own id
 * dropped. */
void neighbourhoods_from_batch(neighbourhoods_state *n, int workers);
void neighbourhoods_release(neighbourhoods_state *n, heap *h);
