/* Sort and sweep in the columns of a grid (sweep_internal.h says how): a method without a tree,
 * for many objects of similar sizes that move. */
#pragma once

#include "method.h"

extern const method_table sweep_method;
