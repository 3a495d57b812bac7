#include "core/loadgen/bench_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace orca::loadgen {

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double position = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const size_t lower = static_cast<size_t>(std::floor(position));
  const size_t upper = std::min(lower + 1, values.size() - 1);
  const double fraction = position - static_cast<double>(lower);
  return values[lower] + fraction * (values[upper] - values[lower]);
}

Distribution Summarize(const std::vector<double>& values) {
  Distribution d;
  d.count = static_cast<int64_t>(values.size());
  if (values.empty()) return d;
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.p50 = Percentile(values, 0.50);
  d.p90 = Percentile(values, 0.90);
  d.p99 = Percentile(values, 0.99);
  d.max = *std::max_element(values.begin(), values.end());
  return d;
}

BenchSummary SummarizeRun(absl::Span<const RequestRecord> records, double run_end_s) {
  BenchSummary s;
  s.num_requests = static_cast<int64_t>(records.size());
  std::vector<double> ttft, itl, e2e, normalized;
  double first_sent = std::numeric_limits<double>::infinity();
  double last_done = 0;
  for (const RequestRecord& r : records) {
    switch (r.outcome) {
      case RequestOutcome::kOk:
        ++s.num_completed;
        break;
      case RequestOutcome::kFailed:
        ++s.num_failed;
        break;
      case RequestOutcome::kUnfinished:
        ++s.num_unfinished;
        break;
      case RequestOutcome::kNotSent:
        ++s.num_not_sent;
        break;
    }
    if (r.outcome == RequestOutcome::kNotSent) continue;
    first_sent = std::min(first_sent, r.sent_s);
    s.max_send_lag_s = std::max(s.max_send_lag_s, r.sent_s - r.scheduled_s);
    if (r.outcome != RequestOutcome::kOk) continue;
    last_done = std::max(last_done, r.sent_s + r.e2e_s);
    s.total_prompt_tokens += r.prompt_tokens;
    s.total_output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    e2e.push_back(r.e2e_s);
    normalized.push_back(r.NormalizedLatencySeconds());
  }
  if (s.num_unfinished + s.num_not_sent > 0) last_done = std::max(last_done, run_end_s);
  if (std::isfinite(first_sent) && last_done > first_sent) {
    s.makespan_s = last_done - first_sent;
    s.throughput_rps = static_cast<double>(s.num_completed) / s.makespan_s;
    s.output_tokens_per_s = static_cast<double>(s.total_output_tokens) / s.makespan_s;
    s.total_tokens_per_s = static_cast<double>(s.total_prompt_tokens + s.total_output_tokens) / s.makespan_s;
  }
  s.ttft_s = Summarize(ttft);
  s.itl_s = Summarize(itl);
  s.e2e_s = Summarize(e2e);
  s.normalized_latency_s = Summarize(normalized);
  return s;
}

}  // namespace orca::loadgen
