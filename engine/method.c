/* The methods' registry: the one place that maps config.method to a method's table, made from
 * the one list of methods (BROADPHASE_METHOD_LIST, broadphase.h): each line's `name` names the
 * table `name`_method that the method's own files define. */
#include "method.h"

#define METHOD_DECLARE_(id, name) extern const method_table name##_method;
BROADPHASE_METHOD_LIST(METHOD_DECLARE_)
#undef METHOD_DECLARE_
extern const method_table auto_method; /* BROADPHASE_METHOD_AUTO, the chooser: method_auto.c */

/* In the list's order, which is the enum's: methods[id] is the method with that id. */
static const method_table *const methods[] = {
#define METHOD_ENTRY_(id, name) &name##_method,
    BROADPHASE_METHOD_LIST(METHOD_ENTRY_)
#undef METHOD_ENTRY_
};

_Static_assert(sizeof methods / sizeof methods[0] == BROADPHASE_METHOD_COUNT,
               "one table per method of the list");

const method_table *method_for(broadphase_method id) {
    if (id == BROADPHASE_METHOD_AUTO) return &auto_method;
    /* An enum's value may lie outside its enumerators: compare as an unsigned index. */
    if ((unsigned)id >= (unsigned)BROADPHASE_METHOD_COUNT) return NULL;
    return methods[id];
}

const char *broadphase_method_name(broadphase_method method) {
    const method_table *m = method_for(method);
    return m ? m->name : NULL;
}
