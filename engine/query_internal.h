/* The queries' private vocabulary, shared by query.c (catching up with changes, checking input,
 * the single queries), query_walk.c (results, the objects' own tests, walking a structure) and
 * query_batch.c (the batched calls). */
#pragma once

#include "broadphase.h"
#include "query.h"
#include "query_math.h"
#include "heap.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    PIECE = 256,            /* own objects per call of the box kernel */
    STACK_MAX = 1024,       /* walk stack: deeper than any structure's depth x 7 siblings */
    PENDING_FIELD_MIN = 64, /* changed objects from which they get a field of their own */
    STACK_RESULTS = 256,    /* results a single query keeps on the stack before the heap */
    BATCH_CHUNK = 64,       /* queries per chunk of a batch */
    SORTED_K_MAX = 32,      /* nearest: up to this k the best are kept sorted */
    ORDER_MIN = 256,        /* queries from which a batch runs them in Morton order */
    GROUP = 32,             /* consecutive queries of such a batch that share a walk */
    GROUP_MOST = 64,        /* objects a query of a group may share, at most, on average */
    GROUP_BAND_MAX = 4096,  /* a group's nearest search picks its k from up to this many */
};

typedef enum query_kind {
    QUERY_BOX,
    QUERY_SPHERE,
    QUERY_PLANES,
    QUERY_RAY,
    QUERY_NEAREST
} query_kind;

typedef struct query {
    query_kind kind;
    int dims;
    bool candidates;    /* box: every object of the nodes it reaches, untested */
    bool closest;       /* ray: the first hit only */
    bool far;           /* rays and planes: a sphere's box may stop at the float range's end
                         * while its ball goes on (unclamp) */
    float lo[3], hi[3]; /* box; for a ball, its bounding box (for the kernel) */
    float c[3], r;      /* ball */
    const float (*planes)[4];
    size_t plane_count;
    qm_ray ray;
    simd_ray kray; /* the float filter's copy of the ray (simd_ray_vs_boxes) */
    bool kray_ok;  /* its reciprocals are in the filter's range */
    float p[3];    /* nearest */
    size_t k;
    double max_d2; /* nearest: the greatest squared distance taken (INFINITY: any) */
} query;

/* Results of one query (or of a batch's worker): elements of `elem` bytes, grown on demand. */
typedef struct query_buf {
    void *data;
    size_t capacity; /* elements */
    size_t elem;
    bool owned;   /* data is ours, from heap (else it is the caller's stack) */
    heap *heap;   /* the world's (world_heap) */
    size_t floor; /* elements a growth reaches at least (0: none) */
} query_buf;

typedef struct query_out {
    query_buf *buf;
    size_t base, count;      /* this query's results: buf elements [base, base + count) */
    bool failed;             /* out of memory */
    broadphase_ray_hit best; /* closest ray */
    bool found;
    uint32_t *heap_id; /* nearest: the k best by (dist2, id), sorted or a max-heap (put_near) */
    float *heap_d2;
    size_t heap_n;
    double bound; /* closest ray: best t; nearest (when k are kept): the worst; else +inf */
} query_out;

/* ---- query_walk.c ---- */

/* A query's results start empty, in buffer b. */
void query_out_init(query_out *o, query_buf *b);
/* Every place an object may be, each object found once (after query_sync). */
void query_run(const broadphase_world *w, const query *q, query_out *o);
/* Ids ascending; hits by (t, id). */
void query_sort_ids(uint32_t *ids, size_t n);
void query_sort_hits(broadphase_ray_hit *hits, size_t n);
/* Nearest: the k best, sorted by (dist2, id), from where put_near kept them. */
void query_finish_nearest(const query *q, query_out *o);
/* Room for `need` more results in b; false on out of memory. */
bool query_buf_room(query_buf *b, size_t need);
/* Gives back b's memory if it is the heap's. */
void query_buf_release(query_buf *b);

/* Object id offered to the query: its exact test, and its result kept (query_walk.c). */
void query_offer(const broadphase_world *w, const query *q, query_out *o, uint32_t id);
/* Object id kept as a result of a box, ball or nearest query that tested it (value: its squared
 * distance for a nearest search). */
void query_take(const query *q, query_out *o, uint32_t id, double value);

/* ---- query_group.c: queries that share one walk ---- */

/* A group's objects: ids and their bounds as columns (6 of cap + SIMD_PAD floats). The heap is
 * the world's; everything else starts zeroed. */
typedef struct query_group {
    query_buf ids;
    float *cols;
    uint32_t *hits;
    uint32_t *spheres; /* by object: 1 for a sphere (in hits' block) */
    size_t cap, count;
    heap *heap;
    bool failed; /* out of memory */
} query_group;
/* Whether a query can run from a group: boxes, balls, and nearest searches with a greatest
 * distance (whose regions are bounded). */
bool query_groupable(const query *q);
/* Gathers the objects that may meet any of qs[0, n) (groupable, n > 0). False when more than
 * `most` (the queries are then better run alone) or out of memory (g->failed). */
bool query_group_gather(const broadphase_world *w, query_group *g, const query *qs, size_t n,
                        size_t most);
/* One query of the group, as query_run would leave o. */
void query_group_one(const broadphase_world *w, const query_group *g, const query *q, query_out *o);
void query_group_release(query_group *g);

/* ---- query_batch.c ---- */

/* Gives back a batch's working memory (the world's, at its end). */
void query_batch_memory_release(query_batch_memory *m, heap *h);

/* ---- query.c ---- */

/* Brings the queries' view of the changed objects up to date; false on out of memory. */
bool query_sync(const broadphase_world *w);
broadphase_status query_check_world(const broadphase_world *w);
broadphase_status query_make_box(query *q, int dims, const float lo[3], const float hi[3],
                                 bool candidates);
broadphase_status query_make_sphere(query *q, int dims, const float c[3], float r);
broadphase_status query_make_ray(query *q, const broadphase_world *w, const float o[3],
                                 const float d[3], float max_t, bool closest);
broadphase_status query_make_planes(query *q, const broadphase_world *w, const float (*planes)[4],
                                    size_t count);
broadphase_status query_make_nearest(query *q, int dims, const float p[3], size_t k,
                                     float max_distance);
