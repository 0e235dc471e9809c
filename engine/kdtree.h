/* The kd-tree method: objects that straddle a node's split plane stay in that node; pairs come
 * from each node's own objects against each other and against the list of ancestors' objects
 * that reach the node, carried down from parent to child. Rebuilt in parallel or refitted. */
#pragma once

#include "method.h"

extern const method_table kdtree_method;
