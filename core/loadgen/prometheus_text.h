#pragma once
/// Just enough of the Prometheus text exposition format for a benchmark to read histogram
/// sums and counts off a /metrics page before and after a run.

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace orca::loadgen {

/// Samples of one page, keyed by the series as written ("name{label="v",...}" or "name").
using MetricSamples = std::map<std::string, double>;

/// Parses sample lines `series value [timestamp]`; '#' lines and blank lines are skipped.
/// Label values may contain spaces, '}' and escaped quotes. INVALID_ARGUMENT names the line.
absl::StatusOr<MetricSamples> ParsePrometheusText(const std::string& text);

/// Sum of every series of metric `name` (exactly that name, any labels).
double SumSeries(const MetricSamples& samples, const std::string& name);

/// A histogram's totals over all its series (e.g. all stages).
struct HistogramTotals {
  double sum = 0;
  double count = 0;
  double mean() const { return count > 0 ? sum / count : 0.0; }
};

/// `name`_sum and `name`_count, summed over series whose labels contain `label_filter`
/// (e.g. "stage=\"1\""; empty = all).
HistogramTotals ReadHistogram(const MetricSamples& samples, const std::string& name,
                              const std::string& label_filter = "");

/// after − before, field by field (a run's share of cumulative counters).
HistogramTotals Delta(const HistogramTotals& after, const HistogramTotals& before);

/// GET `url` and parse it.
absl::StatusOr<MetricSamples> ScrapeMetrics(const std::string& url);

}  // namespace orca::loadgen
