#pragma once
/// Latency-throughput curves, measured (`orca bench sweep`) or simulated (sim/sweep.h), and
/// the paper's comparison: throughput at equal median normalized latency (§6.2; Fig. 10-12
/// of the paper plot median normalized latency over throughput).

#include <optional>
#include <string>
#include <vector>

#include "core/sched/scheduler.h"

namespace orca::loadgen {

/// One curve of a sweep: a label and the scheduler configuration it runs.
struct SweepConfig {
  std::string label;  ///< e.g. "orca(max_bs=16)".
  sched::SchedulerOptions scheduler;
};

/// One run of one configuration at one arrival rate.
struct SweepPoint {
  double arrival_rate = 0;               ///< Offered load (req/s).
  double throughput_rps = 0;             ///< Completed requests / makespan.
  double median_normalized_latency = 0;  ///< Seconds per generated token.
  double p99_normalized_latency = 0;
  double mean_batch_size = 0;
  int64_t num_iterations = 0;
};

struct SweepCurve {
  SweepConfig config;
  std::vector<SweepPoint> points;  ///< In increasing arrival rate.
};

/// Highest throughput the curve reaches at median normalized latency <= `target` (s/token):
/// the best point under the target or the linear interpolation (in latency) on a segment
/// that crosses it. nullopt when even its lightest load is above the target.
std::optional<double> ThroughputAtLatency(const SweepCurve& curve, double target);

/// ThroughputAtLatency maximized over the curves of one policy (each max_bs is one curve; the
/// paper compares the best configuration of each system). nullopt if no curve reaches it.
std::optional<double> BestThroughputAtLatency(const std::vector<SweepCurve>& curves, sched::PolicyKind policy,
                                              double target);

/// Lowest median normalized latency any curve of `policy` reaches (its lightest load).
std::optional<double> MinMedianLatency(const std::vector<SweepCurve>& curves, sched::PolicyKind policy);

/// A fixed-width table: config, rate, throughput, median/p99 normalized latency, batch.
std::string FormatSweepTable(const std::vector<SweepCurve>& curves);

/// For each latency target: best orca throughput, best baseline throughput and their ratio.
std::string FormatRatioTable(const std::vector<SweepCurve>& curves, const std::vector<double>& targets);

}  // namespace orca::loadgen
