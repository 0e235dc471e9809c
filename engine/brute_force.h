/* Brute force: every pair of live objects tested with the SIMD kernels, rows spread over the
 * workers. The oracle the other methods are checked against. */
#pragma once

#include "broadphase.h"

broadphase_status brute_force_step(broadphase_world *w);
