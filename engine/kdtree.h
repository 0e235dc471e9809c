/* The kd-tree method: objects that straddle a node's split plane stay in that node; pairs come
 * from each node's own objects against each other and against the list of ancestors' objects
 * that reach the node, carried down from parent to child. Rebuilt in parallel or refitted. */
#pragma once

#include "broadphase.h"

/* Brings the tree up to date (per the update policy) and finds the pairs into w->pairs. */
broadphase_status kdtree_step(broadphase_world *w);
/* Node, leaf, depth and straddler figures for the statistics. */
void kdtree_fill_stats(const broadphase_world *w, broadphase_stats *stats);
/* Nodes, leaves and objects per level into levels[0 .. capacity); returns the level count. */
size_t kdtree_fill_levels(const broadphase_world *w, broadphase_level *levels, size_t capacity);
void kdtree_destroy(broadphase_world *w);
