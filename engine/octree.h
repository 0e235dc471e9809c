/* The octree method (a quadtree in 2D): a cubic root grown on demand, regular subdivision, each
 * object in the deepest (loose) cell that holds it; built in parallel from sorted Morton keys,
 * updated frame to frame by re-homing the objects that left their cell, with emptied branches
 * kept for reuse and sparse siblings merged. Pairs as in the kd-tree: each node's objects
 * against each other and against the ancestors' objects that reach its subtree. */
#pragma once

#include "broadphase.h"

#include <stddef.h>

/* Brings the tree up to date (per the update policy) and finds the pairs into w->pairs. */
broadphase_status octree_step(broadphase_world *w);
/* Node, leaf, depth, spare-node and growth figures for the statistics. */
void octree_fill_stats(const broadphase_world *w, broadphase_stats *stats);
/* Nodes, leaves and objects per level into levels[0 .. capacity); returns the level count. */
size_t octree_fill_levels(const broadphase_world *w, broadphase_level *levels, size_t capacity);
void octree_destroy(broadphase_world *w);
