#include "sim/sweep.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"

namespace orca::sim {

absl::StatusOr<std::vector<loadgen::SweepCurve>> RunSweep(const SweepOptions& options,
                                                          const std::vector<loadgen::SweepConfig>& configs,
                                                          const RunnerFactory& make_runner) {
  if (options.arrival_rates.empty()) {
    return absl::InvalidArgumentError("arrival_rates must not be empty");
  }
  if (!std::is_sorted(options.arrival_rates.begin(), options.arrival_rates.end())) {
    return absl::InvalidArgumentError("arrival_rates must be increasing");
  }
  // The lengths do not depend on the rate; generate each rate's trace once for all configs.
  std::vector<std::vector<loadgen::TraceRequest>> traces;
  for (double rate : options.arrival_rates) {
    loadgen::TraceOptions trace_options = options.trace;
    trace_options.arrival_rate = rate;
    ORCA_ASSIGN_OR_RETURN(std::vector<loadgen::TraceRequest> trace, loadgen::GeneratePoissonTrace(trace_options));
    traces.push_back(std::move(trace));
  }

  std::vector<loadgen::SweepCurve> curves;
  for (const loadgen::SweepConfig& config : configs) {
    loadgen::SweepCurve& curve = curves.emplace_back();
    curve.config = config;
    for (size_t i = 0; i < options.arrival_rates.size(); ++i) {
      ORCA_ASSIGN_OR_RETURN(std::unique_ptr<sched::Scheduler> scheduler, sched::Scheduler::Create(config.scheduler));
      ORCA_ASSIGN_OR_RETURN(std::unique_ptr<StepRunner> runner, make_runner(config.scheduler));
      absl::StatusOr<SimulationResult> run = RunSimulation(traces[i], *scheduler, *runner, options.simulation);
      if (!run.ok()) {
        return Annotate(run.status(), absl::StrCat(config.label, " at ", options.arrival_rates[i], " req/s"));
      }
      loadgen::SweepPoint& point = curve.points.emplace_back();
      point.arrival_rate = options.arrival_rates[i];
      point.throughput_rps = run->ThroughputRps();
      point.median_normalized_latency = run->NormalizedLatencyQuantile(0.5);
      point.p99_normalized_latency = run->NormalizedLatencyQuantile(0.99);
      point.mean_batch_size = run->MeanBatchSize();
      point.num_iterations = run->num_iterations;
      if (options.saturation_latency > 0 && point.median_normalized_latency > options.saturation_latency) {
        break;
      }
    }
  }
  return curves;
}

}  // namespace orca::sim
