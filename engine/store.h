/* The object store's shared vocabulary: what an object's bounding box looks like by id, the
 * kinds an id can hold, and the id that names none. Every structure that reads the boxes
 * includes this; none of them needs the world. */
#pragma once

#include <stdint.h>

enum { OBJECT_BOX = 0, OBJECT_SPHERE = 1, OBJECT_FREE = 2 };

#define WORLD_NONE UINT32_MAX

/* One object's bounding box in one 32-byte record (the fourth lanes are zero), so that a whole
 * box is one cache line: the trees read every box by id, in their own order, every step, and
 * from six separate columns that costs six cache misses per object instead of one (gathering
 * 1M boxes in random order, one thread: 28.7 ms from columns, 9.3 ms from records)
 * (perf/NOTES.md row 1). */
typedef struct world_box {
    _Alignas(32) float lo[4];
    float hi[4];
} world_box;
