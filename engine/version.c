/* The library's version, for a program to compare with the BROADPHASE_VERSION it was built
 * against. */
#include "broadphase.h"

uint32_t broadphase_version(void) {
    return BROADPHASE_VERSION;
}
