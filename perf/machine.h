/* What the machine is doing while it is measured. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* Nanoseconds for a cache line to go from one core to another and back: two threads pass a
 * counter through one line about `rounds` times, and the median of nine blocks of that is the
 * figure. On a virtual machine this moves by several times from one minute to the next, with
 * where the host runs the virtual CPUs, and whatever shares data between threads moves with it
 * (perf/NOTES.md, "Sixth round"); the runner and the suite print it beside their figures. 0 when
 * the second thread cannot be started. Takes 5 ms plus the exchanges. */
double machine_round_trip_ns(int rounds);
/* The exchanges of the runner's and the benchmarks' probes: 1-3 ms. */
enum { MACHINE_ROUND_TRIPS = 4000 };

#ifdef __cplusplus
}
#endif
