#pragma once
/// Aggregates of one load run: throughput and latency percentiles over its requests.

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "core/loadgen/request_record.h"

namespace orca::loadgen {

/// Quantile q in [0, 1] of `values` with linear interpolation between closest ranks
/// (NumPy's default "linear" method): q * (n - 1) is the fractional index into the sorted
/// values. 0 for no values. `values` need not be sorted.
double Percentile(std::vector<double> values, double q);

/// Mean and quantiles of one metric over a run.
struct Distribution {
  int64_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

Distribution Summarize(const std::vector<double>& values);

struct BenchSummary {
  int64_t num_requests = 0;   ///< In the trace.
  int64_t num_completed = 0;  ///< RequestOutcome::kOk.
  int64_t num_failed = 0;
  int64_t num_unfinished = 0;  ///< Cut off by the time limit.
  int64_t num_not_sent = 0;
  /// First request sent → last completion (or the end of the run when requests were cut
  /// off): the window throughput is measured over, as in the simulator (sim/).
  double makespan_s = 0;
  double throughput_rps = 0;        ///< Completed requests / makespan.
  double output_tokens_per_s = 0;   ///< Generated tokens of completed requests / makespan.
  double total_tokens_per_s = 0;    ///< (Prompt + generated) tokens / makespan.
  int64_t total_prompt_tokens = 0;  ///< Of completed requests.
  int64_t total_output_tokens = 0;
  /// Worst lag between a request's trace arrival and its dispatch: large values mean the
  /// driver itself could not keep up with the offered load.
  double max_send_lag_s = 0;
  Distribution ttft_s;
  Distribution itl_s;  ///< Over every gap of every completed request.
  Distribution e2e_s;
  Distribution normalized_latency_s;  ///< Seconds per generated token (the paper's metric).
};

/// Latencies come from completed requests only; `run_end_s` (offset of the end of the run)
/// closes the makespan when some requests were cut off.
BenchSummary SummarizeRun(absl::Span<const RequestRecord> records, double run_end_s);

}  // namespace orca::loadgen
