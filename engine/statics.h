/* Static objects: the world's static ones live in a structure of their own (the "static field"),
 * built when statics change and otherwise left alone, and the trees hold only the others. Each
 * step the objects in the tree query the field, so a step costs what its moving objects cost
 * plus their pairs with the statics; static-static pairs are never tested.
 *
 * The field is a Morton pyramid (field.h). Each step the tree objects query it 16 at a time,
 * level by level, and keep what they found (the cache below). */
#pragma once

#include "field.h"
#include "overlap.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct broadphase_world broadphase_world;
struct tree_slots;
struct tree_workers;

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

/* A field the tree objects search (the statics', the resting objects'): the pyramid and the
 * per-object cache of what they found in it. */
typedef struct statics_field {
    field pyramid;
    statics_cache cache;
} statics_field;

/* Builds f's pyramid over the `count` live objects whose flags[id] is set. False on out of
 * memory (the field is then empty). */
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
