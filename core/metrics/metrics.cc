// Exposition of the three metric kinds.
#include <algorithm>
#include <cmath>

#include "core/metrics/counter.h"
#include "core/metrics/gauge.h"
#include "core/metrics/histogram.h"
#include "core/metrics/text_format.h"

namespace orca::metrics {

void Counter::AppendSamples(std::string_view name, std::string_view labels, std::string* out) const {
  AppendSampleLine(name, labels, FormatValue(Value()), out);
}

void Gauge::AppendSamples(std::string_view name, std::string_view labels, std::string* out) const {
  AppendSampleLine(name, labels, FormatValue(Value()), out);
}

Histogram::Histogram(std::shared_ptr<const std::vector<double>> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), bucket_counts_(new std::atomic<uint64_t>[upper_bounds_->size() + 1]) {
  for (size_t i = 0; i <= upper_bounds_->size(); ++i) {
    bucket_counts_[i].store(0, std::memory_order_relaxed);
  }
}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  const std::vector<double>& bounds = *upper_bounds_;
  // First bound >= value: `le` buckets include their upper bound.
  const size_t index = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  bucket_counts_[index].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Collect() const {
  Snapshot snapshot;
  const size_t num_buckets = upper_bounds_->size() + 1;
  snapshot.cumulative_counts.resize(num_buckets);
  uint64_t running = 0;
  for (size_t i = 0; i < num_buckets; ++i) {
    running += bucket_counts_[i].load(std::memory_order_relaxed);
    snapshot.cumulative_counts[i] = running;
  }
  snapshot.count = running;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

void Histogram::AppendSamples(std::string_view name, std::string_view labels, std::string* out) const {
  const Snapshot snapshot = Collect();
  const std::string bucket_name = std::string(name) + "_bucket";
  const std::string label_prefix = labels.empty() ? std::string() : std::string(labels) + ",";
  const std::vector<double>& bounds = *upper_bounds_;
  for (size_t i = 0; i <= bounds.size(); ++i) {
    const std::string le = i < bounds.size() ? FormatValue(bounds[i]) : "+Inf";
    AppendSampleLine(bucket_name, label_prefix + "le=\"" + le + "\"", std::to_string(snapshot.cumulative_counts[i]),
                     out);
  }
  AppendSampleLine(std::string(name) + "_sum", labels, FormatValue(snapshot.sum), out);
  AppendSampleLine(std::string(name) + "_count", labels, std::to_string(snapshot.count), out);
}

}  // namespace orca::metrics
