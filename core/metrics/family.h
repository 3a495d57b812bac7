#pragma once
/// A metric family: one name, help text and label schema, with one child
/// metric per distinct combination of label values.
///
///   Family<Counter>* success = ...;  // from Registry::AddCounter(spec)
///   Counter& stop = success->WithLabels({{"model_name", "m"}, {"finished_reason", "stop"}});
///   stop.Increment();  // hot path: lock-free; cache `stop`, do not look it up per event
///
/// Children live as long as the family (that is, the Registry), so the
/// references WithLabels() returns are stable and may be cached.

#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/common/logging.h"
#include "core/metrics/counter.h"
#include "core/metrics/gauge.h"
#include "core/metrics/histogram.h"
#include "core/metrics/metric_spec.h"
#include "core/metrics/text_format.h"

namespace orca::metrics {

/// Label name -> value for one child. Must name exactly the family's labels.
/// Values may be any text (invalid UTF-8 is replaced by U+FFFD); keep the set
/// of distinct values bounded (route templates, not raw paths).
using Labels = std::map<std::string, std::string>;

template <typename T>
class Family;

/// Unregisters a collect-time gauge callback when destroyed or Reset().
/// Once that returns, the callback is not running and will not run again, so
/// it may capture objects that die right after the registration. Must not
/// outlive the Registry that owns the family.
class CallbackRegistration {
 public:
  CallbackRegistration() = default;
  CallbackRegistration(CallbackRegistration&& other) noexcept;
  CallbackRegistration& operator=(CallbackRegistration&& other) noexcept;
  CallbackRegistration(const CallbackRegistration&) = delete;
  CallbackRegistration& operator=(const CallbackRegistration&) = delete;
  ~CallbackRegistration() { Reset(); }

  /// Removes the callback (and its series) now; no-op if already removed.
  void Reset();
  bool active() const { return family_ != nullptr; }

 private:
  friend class Family<Gauge>;
  CallbackRegistration(Family<Gauge>* family, uint64_t id) : family_(family), id_(id) {}

  Family<Gauge>* family_ = nullptr;
  uint64_t id_ = 0;
};

/// What every family shares regardless of its metric type.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  /// Histogram upper bounds (without +Inf); empty for other types.
  const std::vector<double>& buckets() const { return *buckets_; }

  /// True when `spec` describes exactly this family (same type, name, help,
  /// labels and buckets).
  bool Matches(const MetricSpec& spec) const;

  /// Appends `# HELP`, `# TYPE` and every child's samples in text format 0.0.4.
  void AppendText(std::string* out) const;

 protected:
  FamilyBase(const MetricSpec& spec, std::vector<double> buckets);

  /// Orders `labels` by label_names(), sanitizing values; the error names the
  /// missing or unexpected label.
  absl::StatusOr<std::vector<std::string>> ResolveLabelValues(const Labels& labels) const;
  /// Renders `a="x",b="y"` with escaped values (empty for no labels).
  std::string RenderLabels(const std::vector<std::string>& values) const;
  virtual void AppendSamples(std::string* out) const = 0;

  const std::shared_ptr<const std::vector<double>>& shared_buckets() const { return buckets_; }

 private:
  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
  const std::shared_ptr<const std::vector<double>> buckets_;
};

/// The family of children of type T (Counter, Gauge or Histogram).
/// Created only by Registry; thread-safe.
template <typename T>
class Family final : public FamilyBase {
 public:
  /// Returns the child for `labels`, creating it on first use. The reference
  /// stays valid for the family's lifetime.
  ///
  /// Precondition: `labels` names exactly label_names() and, for gauges, no
  /// callback series has the same values. Label *names* are fixed in code, so
  /// a violation is a programming error and aborts with a message naming the
  /// label; use TryWithLabels() when the names come from configuration.
  T& WithLabels(const Labels& labels) {
    absl::StatusOr<T*> child = TryWithLabels(labels);
    ORCA_CHECK(child.ok()) << std::string(child.status().message());
    return **child;
  }

  /// Like WithLabels(), but returns InvalidArgument for a wrong set of label
  /// names and AlreadyExists when a gauge callback already owns the series.
  absl::StatusOr<T*> TryWithLabels(const Labels& labels) {
    absl::StatusOr<std::vector<std::string>> values = ResolveLabelValues(labels);
    if (!values.ok()) return values.status();
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = children_.find(*values);
      if (it != children_.end()) return it->second.metric.get();
    }
    absl::MutexLock lock(&mu_);
    auto it = children_.find(*values);
    if (it != children_.end()) return it->second.metric.get();
    if (callbacks_.contains(*values)) {
      return absl::AlreadyExistsError("metric '" + name() + "' series {" + RenderLabels(*values) +
                                      "} is owned by a callback");
    }
    Child child{RenderLabels(*values), NewChild()};
    T* metric = child.metric.get();
    children_.emplace(std::move(*values), std::move(child));
    return metric;
  }

  /// Registers `read_value`, called at every scrape to produce the series for
  /// `labels` (gauges only). It runs on the scraping thread while this family
  /// is locked: it must be quick and must not call into this family.
  /// Errors: InvalidArgument for wrong label names, AlreadyExists when the
  /// series already exists (as a callback or as a WithLabels() child).
  absl::StatusOr<CallbackRegistration> AddCallback(const Labels& labels,
                                                   std::function<double()> read_value) requires std::same_as<T, Gauge> {
    if (!read_value) return absl::InvalidArgumentError("metric '" + name() + "': empty callback");
    absl::StatusOr<std::vector<std::string>> values = ResolveLabelValues(labels);
    if (!values.ok()) return values.status();
    absl::MutexLock lock(&mu_);
    if (children_.contains(*values) || callbacks_.contains(*values)) {
      return absl::AlreadyExistsError("metric '" + name() + "' series {" + RenderLabels(*values) + "} already exists");
    }
    const uint64_t id = ++last_callback_id_;
    callbacks_.emplace(std::move(*values), CallbackChild{RenderLabels(*values), id, std::move(read_value)});
    return CallbackRegistration(this, id);
  }

 private:
  friend class Registry;
  friend class CallbackRegistration;

  struct Child {
    std::string rendered_labels;
    std::unique_ptr<T> metric;
  };
  struct CallbackChild {
    std::string rendered_labels;
    uint64_t id;
    std::function<double()> read_value;
  };

  Family(const MetricSpec& spec, std::vector<double> buckets) : FamilyBase(spec, std::move(buckets)) {}

  std::unique_ptr<T> NewChild() const {
    if constexpr (std::same_as<T, Histogram>) {
      return std::make_unique<Histogram>(shared_buckets());
    } else {
      return std::make_unique<T>();
    }
  }

  void RemoveCallback(uint64_t id) {
    absl::MutexLock lock(&mu_);
    std::erase_if(callbacks_, [id](const auto& entry) { return entry.second.id == id; });
  }

  void AppendSamples(std::string* out) const override {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [values, child] : children_) {
      child.metric->AppendSamples(name(), child.rendered_labels, out);
    }
    for (const auto& [values, callback] : callbacks_) {
      AppendSampleLine(name(), callback.rendered_labels, FormatValue(callback.read_value()), out);
    }
  }

  mutable absl::Mutex mu_;
  // std::map keeps exposition order stable (sorted by label values).
  std::map<std::vector<std::string>, Child> children_ ABSL_GUARDED_BY(mu_);
  std::map<std::vector<std::string>, CallbackChild> callbacks_ ABSL_GUARDED_BY(mu_);
  uint64_t last_callback_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace orca::metrics
