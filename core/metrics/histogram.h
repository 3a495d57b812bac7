#pragma once
/// A distribution of observed values in cumulative buckets (latencies, sizes).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace orca::metrics {

/// One child of a histogram family. Obtain it once from
/// `Family<Histogram>::WithLabels()` and keep the reference: Observe() does a
/// binary search over the bounds and two lock-free atomic adds, safe from
/// any thread.
///
/// Bucket semantics are Prometheus' `le` (less than or equal): a value equal
/// to a bound is counted in that bound's bucket.
class Histogram {
 public:
  /// What Collect() returns: counts per bucket, cumulative, one entry per
  /// upper bound plus a final "+Inf" entry, which equals `count`.
  struct Snapshot {
    std::vector<uint64_t> cumulative_counts;
    double sum = 0.0;
    uint64_t count = 0;
  };

  /// `upper_bounds` must be finite and strictly increasing (the family
  /// validates them); the "+Inf" bucket is implicit.
  explicit Histogram(std::shared_ptr<const std::vector<double>> upper_bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  /// Records one value. NaN is ignored (it has no bucket and would poison
  /// the sum); +Inf lands in the "+Inf" bucket only.
  void Observe(double value);

  /// A consistent-enough view for exposition: buckets are read once each and
  /// `count` is derived from them, so `_count` always equals the "+Inf"
  /// bucket; `sum` may include an observation whose bucket is not yet counted.
  Snapshot Collect() const;

  const std::vector<double>& upper_bounds() const { return *upper_bounds_; }

  /// Appends `_bucket` lines (with `le`), `_sum` and `_count`.
  void AppendSamples(std::string_view name, std::string_view labels, std::string* out) const;

 private:
  std::shared_ptr<const std::vector<double>> upper_bounds_;
  // Non-cumulative counts; index i counts values in (bound[i-1], bound[i]],
  // the last index counts values above every bound.
  std::unique_ptr<std::atomic<uint64_t>[]> bucket_counts_;
  std::atomic<double> sum_{0.0};
};

}  // namespace orca::metrics
