#pragma once
/// The paper's Fig. 10 from measured runs: median normalized latency against throughput, one
/// curve per (policy, max_bs), and the throughput ratio at equal median normalized latency
/// computed exactly as the simulated sweep does (core/loadgen/sweep_curve.h, shared with sim/).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/loadgen/bench_summary.h"
#include "core/loadgen/sweep_curve.h"
#include "core/sched/scheduling_policy.h"

namespace orca::loadgen {

/// One curve of the figure: a serving configuration.
struct SweepCurveSpec {
  std::string label;  ///< e.g. "orca(max_bs=16)", "paged(max_bs=32,chunk=64,prefix)".
  sched::PolicyKind policy = sched::PolicyKind::kOrca;
  int32_t max_bs = 16;
  int32_t max_num_batched_tokens = 0;  ///< Chunked prefill's token budget; 0 = off.
  double max_prefill_slowdown = 0;     ///< Chunked prefill's time budget; 0 = off.
  int32_t long_prefill_token_threshold = 0;  ///< Cap on one request's prompt chunk; 0 = off.
  bool prefix_caching = false;
  /// The request-level baseline as FasterTransformer runs it (--faster-transformer).
  bool faster_transformer = false;
  /// The baseline's microbatches (--microbatches, the paper's mbs); 0 = n_workers.
  int32_t microbatches = 0;
  /// Empty: an `orca serve` stack. "llama-server": llama.cpp's server with `-np max_bs`
  /// (continuous batching), which the ratios count as a baseline (policy kRequestLevel).
  std::string server;
};

/// Parses "orca:8,orca:16,request-level:1,paged:32:chunk=64:prefix,ft:8:mbs=2" (POLICY:MAX_BS,
/// then optional `chunk=N` for --max-num-batched-tokens, `slowdown=R` for
/// --max-prefill-slowdown (R > 1), `cap=T` for --long-prefill-token-threshold (T >= 1), `prefix` for
/// --enable-prefix-caching, `mbs=N` for the baseline's --microbatches; comma-separated).
/// POLICY `ft` is the request-level baseline with --faster-transformer, labelled as the
/// paper does: ft(max_bs, mbs). `llama-server:NP` is llama.cpp's server with NP parallel slots
/// (a peer to compare with; a baseline in the ratios). INVALID_ARGUMENT names the bad entry.
absl::StatusOr<std::vector<SweepCurveSpec>> ParseCurveSpecs(const std::string& text);

/// What the server's scheduler reported during one point (its /metrics, sampled).
struct ServerSample {
  bool valid = false;
  double kv_usage_mean = 0;  ///< orca:kv_cache_usage_perc averaged over the run (0..1).
  double kv_usage_max = 0;
  double preemptions = 0;     ///< orca:num_preemptions_total during the run.
  double prefix_queries = 0;  ///< orca:prefix_cache_queries_total during the run (tokens).
  double prefix_hits = 0;
};

struct MeasuredPoint {
  double arrival_rate = 0;  ///< Offered load (req/s).
  BenchSummary summary;
  ServerSample server;
};

struct MeasuredCurve {
  SweepCurveSpec spec;
  std::vector<MeasuredPoint> points;  ///< In increasing arrival rate.
};

/// The same curve as the simulated sweep's record, so ThroughputAtLatency and
/// FormatRatioTable apply unchanged (the spec in config.scheduler). The ratio tables
/// compare iteration-level scheduling (orca and paged, every option) with the request-level
/// baseline, so a paged curve is recorded as kOrca there.
loadgen::SweepCurve ToSimCurve(const MeasuredCurve& curve);

/// `base` configured as `spec`: policy, max_bs, chunked prefill, prefix caching, the
/// FasterTransformer baseline and its microbatches.
sched::SchedulerOptions ApplyCurveSpec(const SweepCurveSpec& spec, sched::SchedulerOptions base);

/// Simulated or virtual-clock curves (sim::RunSweep; `specs[i]` made `curves[i]`) as
/// measured ones, so the same report, CSV and plot apply (every simulated request
/// completes: `requests_per_point` each). TTFT and ITL stay empty.
std::vector<MeasuredCurve> FromSimCurves(const std::vector<loadgen::SweepCurve>& curves,
                                         const std::vector<SweepCurveSpec>& specs, int64_t requests_per_point);

/// For every curve: its throughput at each latency target (multiples × the baseline's
/// floor) and the ratio to the best baseline curve's there, plus the curve's TTFT and ITL
/// at its point nearest half its saturation rate.
std::string FormatPerCurveLatencyTable(const std::vector<MeasuredCurve>& curves, const std::vector<double>& multiples);

/// Latency targets: `multiples` × the lowest median normalized latency the baseline reached
/// (its lightly loaded floor), as bench/sched does. Empty when no baseline point exists.
std::vector<double> RatioTargets(const std::vector<MeasuredCurve>& curves, const std::vector<double>& multiples);

/// The highest orca/baseline throughput ratio over `targets` (0 when none is defined).
double PeakRatio(const std::vector<MeasuredCurve>& curves, const std::vector<double>& targets);

/// One row per point: label, policy, max_bs, chunk, prefix, rate, throughput,
/// completed/failed, p50/p99 of normalized latency, TTFT and ITL (seconds), and the
/// server's KV usage, preemptions and prefix-cache hit rate.
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
