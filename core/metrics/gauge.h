#pragma once
/// A value that goes up and down (queue length, KV slots in use).

#include <atomic>
#include <string>
#include <string_view>

namespace orca::metrics {

/// One child of a gauge family. Obtain it once from
/// `Family<Gauge>::WithLabels()` and keep the reference: every mutator is a
/// single lock-free atomic operation and is safe from any thread.
///
/// For values owned elsewhere and read only when scraped, register a callback
/// instead (`Family<Gauge>::AddCallback()`).
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Increment(double amount = 1.0) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void Decrement(double amount = 1.0) { value_.fetch_sub(amount, std::memory_order_relaxed); }

  /// The current value.
  double Value() const { return value_.load(std::memory_order_relaxed); }

  /// Appends this child's sample line (`labels` rendered by the family).
  void AppendSamples(std::string_view name, std::string_view labels, std::string* out) const;

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace orca::metrics
