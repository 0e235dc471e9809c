/* Other work on the machine: spinning processes started beside a run, to see how a step behaves
 * when it does not have the cores to itself (the runner's and the benchmarks' --load). */
#ifndef BROADPHASE_PERF_LOAD_H
#define BROADPHASE_PERF_LOAD_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Starts `count` processes that spin (a plain busy loop, no system calls) until load_stop() or
 * until this process ends. False if one could not be started (those started are stopped). */
bool load_start(int count);
/* Stops and reaps the spinning processes; harmless when none run. */
void load_stop(void);

#ifdef __cplusplus
}
#endif

#endif
