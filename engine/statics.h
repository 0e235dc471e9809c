/* Static objects: the world's static ones live in a structure of their own (the "static field"),
 * built when statics change and otherwise left alone, and the trees hold only the others. Each
 * step the objects in the tree query the field, so a step costs what its moving objects cost
 * plus their pairs with the statics; static-static pairs are never tested.
 *
 * The field is the statics sorted along a Morton curve (of their box centres, on a grid over the
 * statics' extent), and above them a pyramid of bounds: entry i of level l + 1 bounds entries
 * 8i .. 8i + 7 of level l, up to a level of at most 8 entries. Every level is stored in blocks of
 * 8 entries, each block its six columns of 8 floats in 192 contiguous bytes (three cache lines;
 * as six separate columns a block would touch six). A query tests the top block with the 8-wide
 * box kernel and descends into the blocks whose bounds it overlaps, fetching them ahead as it
 * finds them, down to the objects; the searches' queries go 16 at a time, level by level, each
 * level's blocks tested in one kernel call (simd_blocks_vs_boxes). Building it is a sort and a pass
 * per level; it needs no pointers, and a query's path is as short as the pyramid is high (7 levels
 * for 1M objects). */
#pragma once

#include "overlap.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct broadphase_world broadphase_world;
struct tree_slots;
struct tree_workers;

enum { STATICS_LEVELS_MAX = 12 }; /* 8^11 entries are more than 2^32 ids */

enum { STATICS_BLOCK_FLOATS = 48 }; /* min x, y, z then max x, y, z, 8 entries each */

typedef struct statics_level {
    float *blocks; /* count entries in blocks of 8, sentinels after the last; one block more */
    size_t count, capacity; /* capacity in blocks */
} statics_level;

/* What a tree object found in the field, kept for the steps after: every entry whose box
 * overlaps a "fat" box around the object's (its box grown by a margin). While the object's box
 * stays inside the fat box and the field is not rebuilt, its pairs with the field are among
 * those entries, so a step tests it against them alone, copied beside each other, instead of
 * walking the pyramid. Exact: the entries are the field's boxes, tested as the walk tests them.
 * An entry is 512 bytes; the first 32768 tree objects (in tree order) keep one, the others walk
 * every step, and the entries of objects gone from the tree are dropped when they would
 * outnumber those in use (all start again then): at most about 34 MB per field. */
enum { STATICS_CACHE_ENTRIES = 16 };

typedef struct statics_cache_entry {
    float fat[6];        /* min x, y, z then max x, y, z */
    uint64_t owner;      /* the object it was made for (written only when the entry is made) */
    uint64_t generation; /* the field's rebuild count when it was filled */
    uint32_t count;      /* entries kept; UINT32_MAX: too many, the object walks the field */
    uint32_t pad[3];
    uint32_t id[STATICS_CACHE_ENTRIES];         /* their ids */
    float block[STATICS_CACHE_ENTRIES / 8][48]; /* their boxes, as the field's blocks hold them */
} statics_cache_entry;

typedef struct statics_cache {
    statics_cache_entry *entry;
    size_t count, capacity;
    uint32_t *of; /* by object id: its entry, if entry[of[id]].owner == id and of[id] < count */
    size_t of_capacity;
    size_t *job_new; /* per query job: the entries it makes this step, then where they start */
    size_t job_capacity;
    uint32_t *slot_entry; /* per tree slot this step: its entry, UINT32_MAX: one to make */
    size_t slot_capacity;
} statics_cache;

typedef struct statics_field {
    statics_level level[STATICS_LEVELS_MAX];
    int levels;    /* level[0] holds the objects, level[levels - 1] at most 8 entries */
    uint32_t *ids; /* by position in level 0 */
    size_t ids_capacity;
    size_t *chunk_count; /* the build's per-chunk counts */
    float *chunk_bounds;
    size_t chunk_capacity, chunk_bounds_capacity;
    void *sort; /* the build's keys and ids and the radix sort's room */
    size_t sort_bytes;
    uint64_t rebuilds;
    statics_cache cache;
} statics_field;

/* Builds field f over the `count` live objects whose flags[id] is set. False on out of memory
 * (the field is then empty). */
bool statics_field_build(broadphase_world *w, statics_field *f, const uint8_t *flags, size_t count);
void statics_field_release(broadphase_world *w, statics_field *f);

/* Brings the static field up to date when statics changed since it was built
 * (w->statics_dirty). False on out of memory (the field is then empty and still dirty). */
bool statics_update(broadphase_world *w);
/* True when the world has statics for the objects in the trees to query. */
bool statics_active(const broadphase_world *w);
/* Inside a tree's search: the pairs between the objects in `slots` (the tree's, in tree order,
 * so that neighbouring queries walk the same blocks) and those in the fields beside the tree:
 * the statics, and the objects at rest (w->rest; its entries that left the rest since it was
 * built are skipped), found by the tree's workers into the step's pair writers. */
void statics_search(broadphase_world *w, struct tree_workers *ws, const struct tree_slots *slots);
/* Both fields' memory (the static field and the rest field). */
void statics_release(broadphase_world *w);
