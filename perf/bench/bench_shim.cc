// Registers one Google Benchmark per case of bench.c's table and runs them: real time, one
// iteration per frame, objects per second, and the engine's own phase times as counters. The
// scene's motion is excluded from the timing; pushing positions into the world (or into a peer
// library's structure) is included.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "broadphase.h"
#include "peers.h"

#include "bench.h"
#include "load.h"
#include "machine.h"
#include "series.h"

namespace {

// Google Benchmark calls a benchmark several times while it sizes the iteration count; keeping
// the last case's world avoids building a million-object scene again for each of those calls.
struct cached_run {
    size_t index = 0;
    bench_run *run = nullptr;
    ~cached_run() {
        bench_teardown(run);
    }
} cache;

bench_run *acquire(size_t index, std::string &error) {
    if (cache.run && cache.index == index) return cache.run;
    bench_teardown(cache.run);
    cache.run = nullptr;
    char message[256] = "";
    cache.run = bench_setup(index, message, sizeof message);
    cache.index = index;
    if (!cache.run) error = message;
    return cache.run;
}

// BROADPHASE_BENCH_GAUGE=1: the host gauge (machine.h) after every frame, outside the timing.
bool gauge_wanted() {
    const char *g = std::getenv("BROADPHASE_BENCH_GAUGE");
    return g && *g && *g != '0';
}

void run_case(benchmark::State &state, size_t index) {
    std::string error;
    bench_run *run = acquire(index, error);
    if (!run) {
        state.SkipWithError(error.c_str());
        for (auto _ : state) {
        }
        return;
    }
    // The machine's cross-core round trip as this case starts (machine.h): on a virtual machine
    // it says which of its moods a figure was taken in.
    double round_trip = machine_round_trip_ns(MACHINE_ROUND_TRIPS);
    bench_reset_totals(run);
    bool moving = bench_is_moving(run) != 0;
    int threads = bench_case_threads(index);
    machine_gauge *gauge =
        gauge_wanted() ? machine_gauge_start(threads > 0 ? threads : bench_hardware_threads())
                       : nullptr;
    std::vector<double> gauged;
    for (auto _ : state) {
        if (moving) {
            state.PauseTiming();
            bench_advance(run);
            state.ResumeTiming();
        }
        int status = bench_frame(run);
        if (status != 0) {
            state.SkipWithError(bench_status_string(status));
            break;
        }
        if (gauge) {
            state.PauseTiming();
            gauged.push_back(machine_gauge_run(gauge));
            state.ResumeTiming();
        }
    }
    machine_gauge_stop(gauge);
    size_t items = bench_case_items(index);
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(items));
    state.counters["pairs"] = bench_last_pairs(run);
    state.counters["update_ms"] = bench_mean_update_ms(run);
    state.counters["search_ms"] = bench_mean_search_ms(run);
    state.counters["output_ms"] = bench_mean_output_ms(run);
    state.counters["rebuilds_per_frame"] = bench_rebuilds_per_frame(run);
    state.counters["threads"] = bench_case_threads(index);
    state.counters["round_trip_ns"] = round_trip;
    // What a user feels: the frames of this run (push, churn and step; the scene's motion is
    // not timed), their median, 99th percentile and worst, and how many there were.
    double median = 0, p99 = 0, worst = 0;
    bench_frame_stats(run, &median, &p99, &worst);
    state.counters["frame_median_ms"] = median;
    state.counters["frame_p99_ms"] = p99;
    state.counters["frame_worst_ms"] = worst;
    state.counters["frames"] = static_cast<double>(state.iterations());
    // The host gauge's times (BROADPHASE_BENCH_GAUGE): a frame figure cannot be steadier than
    // the same fixed work was in the same run.
    if (!gauged.empty()) {
        series g = series_sorted(gauged.data(), gauged.size());
        state.counters["gauge_median_ms"] = g.median;
        state.counters["gauge_p99_ratio"] = g.median > 0 ? g.p99 / g.median : 0;
        state.counters["gauge_worst_ratio"] = g.median > 0 ? g.worst / g.median : 0;
    }
}

// The peer libraries compiled in, comma-separated, for the JSON context.
std::string peers_built() {
    std::string names;
    for (int e = 0; e < PEER_ENGINE_COUNT; e++) {
        if (!peer_available(static_cast<peer_engine>(e))) continue;
        if (!names.empty()) names += ",";
        names += peer_engine_name(static_cast<peer_engine>(e));
    }
    return names.empty() ? "none" : names;
}

} // namespace

int main(int argc, char **argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::AddCustomContext("broadphase_simd", broadphase_simd_level());
#ifdef BROADPHASE_BUILD_INFO
    benchmark::AddCustomContext("broadphase_build", BROADPHASE_BUILD_INFO);
#endif
    benchmark::AddCustomContext("broadphase_hardware_threads",
                                std::to_string(bench_hardware_threads()));
    benchmark::AddCustomContext("broadphase_peers", peers_built());
    // BROADPHASE_BENCH_LOAD=K: K processes spinning beside every case (perf/common/load.h), for the
    // steps' behaviour when other work takes cores.
    const char *load = std::getenv("BROADPHASE_BENCH_LOAD");
    int spinners = load ? std::atoi(load) : 0;
    if (spinners > 0 && !load_start(spinners)) {
        std::fprintf(stderr, "broadphase-bench: could not start %d spinning processes\n", spinners);
        return 1;
    }
    benchmark::AddCustomContext("broadphase_load_spinners", std::to_string(spinners));
    benchmark::AddCustomContext(
        "broadphase_round_trip_ns_at_start",
        std::to_string(static_cast<long>(machine_round_trip_ns(MACHINE_ROUND_TRIPS))));
    for (size_t i = 0; i < bench_case_count(); i++) {
        benchmark::RegisterBenchmark(bench_case_name(i),
                                     [i](benchmark::State &state) { run_case(state, i); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
    }
    benchmark::RunSpecifiedBenchmarks();
    bench_teardown(cache.run);
    cache.run = nullptr;
    benchmark::Shutdown();
    load_stop();
    return 0;
}
