#pragma once
/// Arrival-rate sweeps on the simulated (or a real, reset) engine: one latency-throughput
/// curve (core/loadgen/sweep_curve.h) per scheduler configuration.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/loadgen/poisson_trace.h"
#include "core/loadgen/sweep_curve.h"
#include "core/sched/scheduler.h"
#include "sim/simulation.h"
#include "sim/step_runner.h"

namespace orca::sim {

struct SweepOptions {
  /// The trace of every point; arrival_rate is replaced by each rate below, the seed is
  /// kept, so every configuration sees the same requests.
  loadgen::TraceOptions trace;
  /// Offered loads (req/s), increasing.
  std::vector<double> arrival_rates;
  SimulationOptions simulation;
  /// A configuration stops at its first point whose median normalized latency (s/token)
  /// exceeds this: it is saturated and higher rates only lengthen its queue. 0 = never.
  double saturation_latency = 0;
};

/// A fresh engine for one run of `scheduler` (a simulated engine, or the real one reset).
using RunnerFactory =
    std::function<absl::StatusOr<std::unique_ptr<StepRunner>>(const sched::SchedulerOptions& scheduler)>;

/// Runs every configuration over the arrival rates.
absl::StatusOr<std::vector<loadgen::SweepCurve>> RunSweep(const SweepOptions& options,
                                                          const std::vector<loadgen::SweepConfig>& configs,
                                                          const RunnerFactory& make_runner);

}  // namespace orca::sim
