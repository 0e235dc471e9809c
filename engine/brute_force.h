/* Brute force: every pair of live objects tested with the SIMD kernels, rows spread over the
 * workers. The oracle the other methods are checked against. */
#pragma once

#include "method.h"

extern const method_table brute_force_method;
