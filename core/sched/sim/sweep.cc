#include "core/sched/sim/sweep.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"

namespace orca::sched::sim {

absl::StatusOr<std::vector<SweepCurve>> RunSweep(const SweepOptions& options, const std::vector<SweepConfig>& configs,
                                                 const RunnerFactory& make_runner) {
  if (options.arrival_rates.empty()) {
    return absl::InvalidArgumentError("arrival_rates must not be empty");
  }
  if (!std::is_sorted(options.arrival_rates.begin(), options.arrival_rates.end())) {
    return absl::InvalidArgumentError("arrival_rates must be increasing");
  }
  // The lengths do not depend on the rate; generate each rate's trace once for all configs.
  std::vector<std::vector<TraceRequest>> traces;
  for (double rate : options.arrival_rates) {
    TraceOptions trace_options = options.trace;
    trace_options.arrival_rate = rate;
    ORCA_ASSIGN_OR_RETURN(std::vector<TraceRequest> trace, GeneratePoissonTrace(trace_options));
    traces.push_back(std::move(trace));
  }

  std::vector<SweepCurve> curves;
  for (const SweepConfig& config : configs) {
    SweepCurve& curve = curves.emplace_back();
    curve.config = config;
    for (size_t i = 0; i < options.arrival_rates.size(); ++i) {
      ORCA_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> scheduler, Scheduler::Create(config.scheduler));
      ORCA_ASSIGN_OR_RETURN(std::unique_ptr<StepRunner> runner, make_runner(config.scheduler));
      absl::StatusOr<SimulationResult> run = RunSimulation(traces[i], *scheduler, *runner, options.simulation);
      if (!run.ok()) {
        return Annotate(run.status(), absl::StrCat(config.label, " at ", options.arrival_rates[i], " req/s"));
      }
      SweepPoint& point = curve.points.emplace_back();
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

std::optional<double> ThroughputAtLatency(const SweepCurve& curve, double target) {
  std::optional<double> best;
  auto consider = [&best](double throughput) { best = best.has_value() ? std::max(*best, throughput) : throughput; };
  const std::vector<SweepPoint>& points = curve.points;
  for (size_t i = 0; i < points.size(); ++i) {
    const SweepPoint& p = points[i];
    if (p.median_normalized_latency <= target) consider(p.throughput_rps);
    if (i + 1 == points.size()) break;
    const SweepPoint& q = points[i + 1];
    if (p.median_normalized_latency <= target && target < q.median_normalized_latency) {
      const double f =
          (target - p.median_normalized_latency) / (q.median_normalized_latency - p.median_normalized_latency);
      consider(p.throughput_rps + f * (q.throughput_rps - p.throughput_rps));
    }
  }
  return best;
}

std::optional<double> BestThroughputAtLatency(const std::vector<SweepCurve>& curves, PolicyKind policy, double target) {
  std::optional<double> best;
  for (const SweepCurve& curve : curves) {
    if (curve.config.scheduler.policy != policy) continue;
    std::optional<double> throughput = ThroughputAtLatency(curve, target);
    if (throughput.has_value()) best = std::max(best.value_or(0.0), *throughput);
  }
  return best;
}

std::optional<double> MinMedianLatency(const std::vector<SweepCurve>& curves, PolicyKind policy) {
  std::optional<double> lowest;
  for (const SweepCurve& curve : curves) {
    if (curve.config.scheduler.policy != policy) continue;
    for (const SweepPoint& p : curve.points) {
      lowest = std::min(lowest.value_or(p.median_normalized_latency), p.median_normalized_latency);
    }
  }
  return lowest;
}

std::string FormatSweepTable(const std::vector<SweepCurve>& curves) {
  std::string out = absl::StrFormat("%-24s %9s %11s %13s %13s %8s %10s\n", "config", "rate", "throughput",
                                    "p50 norm lat", "p99 norm lat", "batch", "iterations");
  absl::StrAppend(&out, absl::StrFormat("%-24s %9s %11s %13s %13s %8s %10s\n", "", "(req/s)", "(req/s)", "(ms/token)",
                                        "(ms/token)", "(mean)", ""));
  for (const SweepCurve& curve : curves) {
    for (const SweepPoint& p : curve.points) {
      absl::StrAppend(&out, absl::StrFormat("%-24s %9.3f %11.3f %13.1f %13.1f %8.1f %10d\n", curve.config.label,
                                            p.arrival_rate, p.throughput_rps, p.median_normalized_latency * 1e3,
                                            p.p99_normalized_latency * 1e3, p.mean_batch_size, p.num_iterations));
    }
  }
  return out;
}

std::string FormatRatioTable(const std::vector<SweepCurve>& curves, const std::vector<double>& targets) {
  std::string out = absl::StrFormat("%-22s %18s %18s %8s\n", "p50 norm latency target", "orca best (req/s)",
                                    "baseline (req/s)", "ratio");
  for (double target : targets) {
    const std::optional<double> orca = BestThroughputAtLatency(curves, PolicyKind::kOrca, target);
    const std::optional<double> base = BestThroughputAtLatency(curves, PolicyKind::kRequestLevel, target);
    const std::string orca_text = orca.has_value() ? absl::StrFormat("%.3f", *orca) : "-";
    const std::string base_text = base.has_value() ? absl::StrFormat("%.3f", *base) : "-";
    const std::string ratio =
        orca.has_value() && base.has_value() && *base > 0 ? absl::StrFormat("%.1fx", *orca / *base) : "-";
    absl::StrAppend(&out, absl::StrFormat("%-22s %18s %18s %8s\n", absl::StrFormat("%.1f ms/token", target * 1e3),
                                          orca_text, base_text, ratio));
  }
  return out;
}

}  // namespace orca::sched::sim
