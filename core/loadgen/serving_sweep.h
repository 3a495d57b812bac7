#pragma once
/// The paper's Fig. 10 experiment against real serving stacks: for each configuration
/// (policy, max_bs) start a stack, replay the trace at each arrival rate, stop the stack;
/// then tabulate, compare at equal median normalized latency and plot.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/loadgen/bench_run.h"
#include "core/loadgen/fig10_report.h"

namespace orca::loadgen {

/// Starts and stops the serving stack of one curve (e.g. `orca serve --policy P --max-bs B`).
class ServingStack {
 public:
  virtual ~ServingStack() = default;
  /// Starts a stack configured for `spec`, waits until it serves, and returns its base URL.
  virtual absl::StatusOr<std::string> Start(const SweepCurveSpec& spec) = 0;
  /// Stops the running stack; OK when none runs.
  virtual absl::Status Stop() = 0;
  /// The running stack's scheduler /metrics URL, sampled during each point for KV usage,
  /// preemptions and prefix-cache hits; empty = not known (those columns stay empty).
  virtual std::string scheduler_metrics_url() const { return ""; }
};

struct ServingSweepOptions {
  /// The run of every point; trace.arrival_rate and driver.base_url are set per point.
  BenchRunOptions run;
  /// Offered loads (req/s), increasing.
  std::vector<double> arrival_rates;
  std::vector<SweepCurveSpec> curves;
  /// A curve stops after its first point whose median normalized latency (s/token) exceeds
  /// this, or that the time limit cut off: it is saturated. 0 = only the time limit.
  double saturation_latency_s = 0;
  /// Unmeasured requests sent after each start (first-iteration costs, page faults).
  int32_t warmup_requests = 2;
  /// Per point: DIR/<curve>/rate-<λ>/{requests.csv,summary.json}. Empty = not written.
  std::string out_dir;
  /// true: rate by rate, each configuration on a fresh stack (fair under a drifting
  /// background load, one start per point); false: one stack per configuration, all rates.
  bool interleave = true;
};

/// Runs the sweep. A setup error of any point stops the stack and is returned, naming the
/// curve; request failures only show in the points. Curves keep their points in rate order
/// either way.
absl::StatusOr<std::vector<MeasuredCurve>> RunServingSweep(const ServingSweepOptions& options, ServingStack& stack);

/// A file-name-safe form of a curve label ("orca(max_bs=8)" → "orca_max_bs_8").
std::string LabelToFileName(const std::string& label);

struct SweepOutputOptions {
  std::string out_dir;
  /// Latency targets as multiples of the baseline's floor.
  std::vector<double> target_multiples = {1.25, 1.5, 2, 3, 5};
  /// Empty: no PNG (the gnuplot script is written anyway).
  std::string gnuplot = "gnuplot";
  std::string title = "Orca vs request-level batching";
};

/// Writes sweep.csv, fig10.gp and (with gnuplot) fig10.png into out_dir and returns the
/// printed summary: the points table and the equal-latency ratio table. A gnuplot failure
/// is reported in the text, not as an error (the numbers are still good).
absl::StatusOr<std::string> WriteSweepOutputs(const std::vector<MeasuredCurve>& curves,
                                              const SweepOutputOptions& options);

}  // namespace orca::loadgen
