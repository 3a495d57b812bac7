#include "core/loadgen/sweep_curve.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace orca::loadgen {

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

std::optional<double> BestThroughputAtLatency(const std::vector<SweepCurve>& curves, sched::PolicyKind policy,
                                              double target) {
  std::optional<double> best;
  for (const SweepCurve& curve : curves) {
    if (curve.config.scheduler.policy != policy) continue;
    std::optional<double> throughput = ThroughputAtLatency(curve, target);
    if (throughput.has_value()) best = std::max(best.value_or(0.0), *throughput);
  }
  return best;
}

std::optional<double> MinMedianLatency(const std::vector<SweepCurve>& curves, sched::PolicyKind policy) {
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
    const std::optional<double> orca = BestThroughputAtLatency(curves, sched::PolicyKind::kOrca, target);
    const std::optional<double> base = BestThroughputAtLatency(curves, sched::PolicyKind::kRequestLevel, target);
    const std::string orca_text = orca.has_value() ? absl::StrFormat("%.3f", *orca) : "-";
    const std::string base_text = base.has_value() ? absl::StrFormat("%.3f", *base) : "-";
    const std::string ratio =
        orca.has_value() && base.has_value() && *base > 0 ? absl::StrFormat("%.1fx", *orca / *base) : "-";
    absl::StrAppend(&out, absl::StrFormat("%-22s %18s %18s %8s\n", absl::StrFormat("%.1f ms/token", target * 1e3),
                                          orca_text, base_text, ratio));
  }
  return out;
}

}  // namespace orca::loadgen
