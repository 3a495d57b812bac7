#pragma once
/// The set of metric families one process exposes on /metrics.
///
///   Registry registry;
///   ORCA_ASSIGN_OR_RETURN(Family<Counter>* tokens, registry.AddCounter(kPromptTokensTotal));
///   Counter& prompt_tokens = tokens->WithLabels({{"model_name", "m"}});
///   prompt_tokens.Increment(128);
///   std::string page = registry.Serialize();  // text format 0.0.4
///
/// Families are never removed, so the pointers Add*() return stay valid for
/// the registry's lifetime. Thread-safe.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/metrics/family.h"
#include "core/metrics/metric_spec.h"

namespace orca::metrics {

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  /// Registers a family, or returns the existing one when an identical spec
  /// was registered before (so several components may share a registry).
  ///
  /// Errors (InvalidArgument) name the offending field: a spec of another
  /// type; an invalid metric or label name; a duplicate label; `le` on a
  /// histogram; a counter not ending in "_total" or another type ending in
  /// it; buckets on a non-histogram; histogram bounds that are NaN, infinite
  /// (except a trailing +Inf, which is dropped) or not strictly increasing.
  /// AlreadyExists when the name, or a sample name it produces (a histogram's
  /// `_bucket`, `_sum`, `_count`), is taken by a different family.
  absl::StatusOr<Family<Counter>*> AddCounter(const MetricSpec& spec);
  absl::StatusOr<Family<Gauge>*> AddGauge(const MetricSpec& spec);
  absl::StatusOr<Family<Histogram>*> AddHistogram(const MetricSpec& spec);

  /// The family named `name`, or nullptr.
  const FamilyBase* Find(const std::string& name) const;

  /// The whole page in text format 0.0.4, families in registration order.
  /// Runs gauge callbacks on the calling thread.
  std::string Serialize() const;

 private:
  template <typename T>
  absl::StatusOr<Family<T>*> Add(const MetricSpec& spec, MetricType expected);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
  // Every sample name in use (histograms claim x, x_bucket, x_sum, x_count)
  // -> the family that owns it.
  std::map<std::string, const FamilyBase*> sample_names_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orca::metrics
