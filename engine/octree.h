/* The octree method (a quadtree in 2D): a cubic root grown on demand, regular subdivision, each
 * object in the deepest (loose) cell that holds it; built in parallel from sorted Morton keys,
 * updated frame to frame by re-homing the objects that left their cell, with emptied branches
 * kept for reuse and sparse siblings merged. Pairs as in the kd-tree: each node's objects
 * against each other and against the ancestors' objects that reach its subtree. */
#pragma once

#include "method.h"

extern const method_table octree_method;
