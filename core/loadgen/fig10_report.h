#pragma once
/// The paper's Fig. 10 from measured runs: median normalized latency against throughput, one
/// curve per (policy, max_bs), and the throughput ratio at equal median normalized latency
/// computed exactly as the simulated sweep does (sim/sweep.h).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/loadgen/bench_summary.h"
#include "core/sched/scheduling_policy.h"
#include "sim/sweep.h"

namespace orca::loadgen {

/// One curve of the figure: a serving configuration.
struct SweepCurveSpec {
  std::string label;  ///< e.g. "orca(max_bs=16)".
  sched::PolicyKind policy = sched::PolicyKind::kOrca;
  int32_t max_bs = 16;
};

/// Parses "orca:8,orca:16,request-level:1,request-level:8" (policy:max_bs, comma-separated).
/// INVALID_ARGUMENT names the bad entry.
absl::StatusOr<std::vector<SweepCurveSpec>> ParseCurveSpecs(const std::string& text);

struct MeasuredPoint {
  double arrival_rate = 0;  ///< Offered load (req/s).
  BenchSummary summary;
};

struct MeasuredCurve {
  SweepCurveSpec spec;
  std::vector<MeasuredPoint> points;  ///< In increasing arrival rate.
};

/// The same curve as the simulated sweep's record, so ThroughputAtLatency and
/// FormatRatioTable apply unchanged (policy and max_bs in config.scheduler).
loadgen::SweepCurve ToSimCurve(const MeasuredCurve& curve);

/// Latency targets: `multiples` × the lowest median normalized latency the baseline reached
/// (its lightly loaded floor), as bench/sched does. Empty when no baseline point exists.
std::vector<double> RatioTargets(const std::vector<MeasuredCurve>& curves, const std::vector<double>& multiples);

/// The highest orca/baseline throughput ratio over `targets` (0 when none is defined).
double PeakRatio(const std::vector<MeasuredCurve>& curves, const std::vector<double>& targets);

/// One row per point: label, policy, max_bs, rate, throughput, completed/failed, and
/// p50/p99 of normalized latency, TTFT and ITL (seconds).
std::string SweepToCsv(const std::vector<MeasuredCurve>& curves);

/// The same rows as a fixed-width table (ms).
std::string FormatSweepPoints(const std::vector<MeasuredCurve>& curves);

/// FormatRatioTable over RatioTargets(curves, multiples), preceded by the floor.
std::string FormatEqualLatencyTable(const std::vector<MeasuredCurve>& curves, const std::vector<double>& multiples);

/// A gnuplot script (data inline) that draws Fig. 10 into `png_path`: x = throughput
/// (req/s), y = median normalized latency (ms/token), one line per curve, orca solid and the
/// baseline dashed.
std::string Fig10GnuplotScript(const std::vector<MeasuredCurve>& curves, const std::string& png_path,
                               const std::string& title);

/// Runs `gnuplot script_path` and waits. FAILED_PRECONDITION with gnuplot's exit status.
absl::Status RunGnuplot(const std::string& gnuplot, const std::string& script_path);

}  // namespace orca::loadgen
