/* The C side of the benchmark suite, as the C++ shim that registers it with Google Benchmark
 * sees it: a table of cases (scene, N, method, update policy, threads) and one frame of each. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bench_run bench_run;

size_t bench_case_count(void);
const char *bench_case_name(size_t i);
size_t bench_case_objects(size_t i);
/* Items a frame processes: objects for a step, queries for a query case. */
size_t bench_case_items(size_t i);
int bench_case_threads(size_t i);
int bench_hardware_threads(void);
bench_run *bench_setup(size_t i, char *error, size_t error_size);
int bench_is_moving(const bench_run *r);
void bench_advance(bench_run *r);
int bench_frame(bench_run *r);
const char *bench_status_string(int status);
void bench_reset_totals(bench_run *r);
double bench_last_pairs(const bench_run *r);
double bench_mean_update_ms(const bench_run *r);
double bench_mean_search_ms(const bench_run *r);
double bench_mean_output_ms(const bench_run *r);
double bench_rebuilds_per_frame(const bench_run *r);
/* The median, 99th percentile (nearest rank) and worst of the frames since the last reset (what
 * bench_frame timed: the push, any churn, the step), in ms; starts a new series. */
void bench_frame_stats(bench_run *r, double *median, double *p99, double *worst);
void bench_teardown(bench_run *r);

#ifdef __cplusplus
}
#endif
