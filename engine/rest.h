/* Only-moved updates (config.rest_share). When few of the non-static objects changed since the
 * last step, the ones that did not leave the tree for a field of their own, built like the
 * static field (statics.h): the "rest". The objects still in the tree query it during the
 * search, as they query the statics, and the pairs in which neither object is in the tree (two
 * at rest, or one at rest and a static) are carried over from the last step's list: neither
 * object changed, so neither did the pair. A step then costs what the tree's objects cost, their
 * queries into the rest, and one merge of the carried pairs with the new ones.
 *
 * An object at rest that changes (moves to a new place, gets a new filter, is removed) leaves the
 * rest at once: it goes back into the tree as if just added, and its entry in the field stays as
 * a stale one that the queries skip. The field is built again when enough of the tree's objects
 * have settled to pay for it, and dropped (everything back into the tree) when the tree holds
 * too many objects for the queries to pay, when a static changed (no pair with a static can be
 * carried over then), or after a failed step (whose list cannot be carried over). */
#pragma once

#include "statics.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct broadphase_world broadphase_world;
typedef struct broadphase_pair broadphase_pair;

typedef struct rest_state {
    uint8_t *at_rest; /* by id, NULL until the first build: in the field and unchanged since */
    size_t capacity;
    size_t count; /* objects at rest */
    bool drop;    /* a static changed: the rest must go at the next update */
    bool dropped; /* it went since the last step: no pair can be carried over until the next */
    statics_field field;
    size_t *chunk_kept; /* the carry-over's per-chunk counts, then offsets */
    size_t chunk_capacity;
    uint64_t *keep; /* the carry-over's bit per pair of the last list: carried */
    size_t keep_capacity;
    broadphase_pair *merged; /* the carry-over's output, swapped with the pair list's */
    size_t merged_capacity;
} rest_state;

/* The rest flags for ids below `need` (new ones not at rest). False on out of memory. */
bool rest_reserve(broadphase_world *w, size_t need);
/* Before a tree method's update: drops the rest or builds it again when it should (see above).
 * False on out of memory (the rest is then empty). */
bool rest_update(broadphase_world *w);
/* After a tree method's search, whose pairs (each with an object in the tree) are in w->pairs:
 * adds the last step's pairs between objects out of the tree, into one sorted list. False on
 * out of memory. */
bool rest_carry_over(broadphase_world *w);
void rest_release(broadphase_world *w);
