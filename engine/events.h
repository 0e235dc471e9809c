/* Pair events: the pairs that began and ended between two successful steps, found by merging the
 * two sorted pair lists in parallel chunks. */
#pragma once

#include "broadphase.h"
#include "heap.h"
#include "pairs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct events_state {
    HEAP_ARRAY(broadphase_pair) begun;
    HEAP_ARRAY(broadphase_pair) ended;
    size_t begun_count, ended_count;
    HEAP_ARRAY(uint8_t) fresh;      /* by id: 1 for ids added since the last successful step */
    HEAP_ARRAY(size_t) chunk_count; /* by chunk: begun, ended (counts, then offsets) */
} events_state;

/* After a successful step: the events between ps' previous list and its current one, treating
 * an id added since the previous step (added[0 .. added_count), or any id when fresh_before: an
 * update took added ids in before them) as a new object (its old pairs ended, its new ones
 * began). False on out of memory (the events are then empty). */
bool events_update(events_state *e, const pairs_state *ps, heap *h, int workers,
                   const uint32_t *added, size_t added_count, bool fresh_before);
/* After a step that found nothing changed: no pair began or ended. */
void events_none(events_state *e);
/* The fresh marks for ids below `need`. False on out of memory. */
bool events_fresh_reserve(events_state *e, heap *h, size_t need);
void events_release(events_state *e, heap *h);
