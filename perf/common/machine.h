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

/* The host gauge: the same fixed piece of work, on `threads` threads that start together and
 * are waited for together, as a step's parallel passes are (private arrays of 64 KiB a thread,
 * summed over and over: no memory is shared, nothing depends on the engine). Run between a
 * run's frames, its times show what the host does to a piece of work that never changes: a
 * frame figure cannot be steadier than the gauge of the same run (NOTES row 303).
 * machine_gauge_start returns NULL when a thread or the arrays cannot be made. */
typedef struct machine_gauge machine_gauge;
machine_gauge *machine_gauge_start(int threads);
/* One round of the fixed work; its wall time in milliseconds. */
double machine_gauge_run(machine_gauge *g);
void machine_gauge_stop(machine_gauge *g);

#ifdef __cplusplus
}
#endif
