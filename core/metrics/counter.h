#pragma once
/// A monotonically increasing value (requests served, tokens generated).

#include <atomic>
#include <string>
#include <string_view>

namespace orca::metrics {

/// One child of a counter family. Obtain it once from
/// `Family<Counter>::WithLabels()` and keep the reference: Increment() is a
/// single lock-free atomic add and is safe from any thread.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  /// Adds `amount`. Negative and NaN amounts are ignored: a counter never
  /// goes down (Prometheus treats a decrease as a process restart).
  void Increment(double amount = 1.0) {
    if (!(amount >= 0.0)) return;
    value_.fetch_add(amount, std::memory_order_relaxed);
  }

  /// The current total.
  double Value() const { return value_.load(std::memory_order_relaxed); }

  /// Appends this child's sample line (`labels` rendered by the family).
  void AppendSamples(std::string_view name, std::string_view labels, std::string* out) const;

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace orca::metrics
