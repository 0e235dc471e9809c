/* Status codes as sentences, generated from the same list as the enum. */
#include "broadphase.h"

const char *broadphase_status_string(broadphase_status status) {
    switch (status) {
#define BROADPHASE_STATUS_CASE_(name, text)                                                        \
    case name:                                                                                     \
        return text;
        BROADPHASE_STATUS_LIST(BROADPHASE_STATUS_CASE_)
#undef BROADPHASE_STATUS_CASE_
    }
    return "unknown status";
}
