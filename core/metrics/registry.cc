#include "core/metrics/registry.h"

#include <cmath>
#include <set>

#include "core/common/status_macros.h"
#include "core/metrics/text_format.h"

namespace orca::metrics {
namespace {

// Checks everything about `spec` that does not depend on the registry, and
// returns the histogram bounds to use (trailing +Inf dropped).
absl::StatusOr<std::vector<double>> ValidateSpec(const MetricSpec& spec, MetricType expected) {
  const std::string name = spec.name == nullptr ? "" : spec.name;
  const std::string where = "metric '" + name + "'";
  if (spec.type != expected) {
    return absl::InvalidArgumentError(where + ": spec type is " + MetricTypeName(spec.type) + ", expected " +
                                      MetricTypeName(expected));
  }
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(where + ": name must match [a-zA-Z_:][a-zA-Z0-9_:]*");
  }
  if (spec.help == nullptr) return absl::InvalidArgumentError(where + ": help is null");
  const bool ends_in_total = name.size() > 6 && name.ends_with("_total");
  if (expected == MetricType::kCounter && !ends_in_total) {
    return absl::InvalidArgumentError(where + ": counter names must end in '_total'");
  }
  if (expected != MetricType::kCounter && name.ends_with("_total")) {
    return absl::InvalidArgumentError(where + ": only counter names may end in '_total'");
  }
  std::set<std::string> seen;
  for (const char* label : spec.label_names) {
    const std::string label_name = label == nullptr ? "" : label;
    if (!IsValidLabelName(label_name)) {
      return absl::InvalidArgumentError(where + ": invalid label name '" + label_name +
                                        "' (must match [a-zA-Z_][a-zA-Z0-9_]*, no leading '__')");
    }
    if (!seen.insert(label_name).second) {
      return absl::InvalidArgumentError(where + ": duplicate label '" + label_name + "'");
    }
    if (expected == MetricType::kHistogram && label_name == "le") {
      return absl::InvalidArgumentError(where + ": label 'le' is reserved for histogram buckets");
    }
  }
  std::vector<double> bounds(spec.buckets.begin(), spec.buckets.end());
  if (expected != MetricType::kHistogram) {
    if (!bounds.empty()) {
      return absl::InvalidArgumentError(where + ": buckets are only allowed on histograms");
    }
    return bounds;
  }
  if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) bounds.pop_back();
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return absl::InvalidArgumentError(where + ": bucket " + std::to_string(i) + " is " + FormatValue(bounds[i]) +
                                        ", bounds must be finite");
    }
    if (i > 0 && !(bounds[i] > bounds[i - 1])) {
      return absl::InvalidArgumentError(where + ": bucket " + std::to_string(i) + " (" + FormatValue(bounds[i]) +
                                        ") is not greater than the previous bound (" + FormatValue(bounds[i - 1]) +
                                        ")");
    }
  }
  return bounds;
}

std::vector<std::string> SampleNames(const std::string& name, MetricType type) {
  if (type != MetricType::kHistogram) return {name};
  return {name, name + "_bucket", name + "_sum", name + "_count"};
}

}  // namespace

template <typename T>
absl::StatusOr<Family<T>*> Registry::Add(const MetricSpec& spec, MetricType expected) {
  ORCA_ASSIGN_OR_RETURN(std::vector<double> bounds, ValidateSpec(spec, expected));
  const std::string name = spec.name;
  absl::MutexLock lock(&mu_);
  for (const std::string& sample_name : SampleNames(name, expected)) {
    auto it = sample_names_.find(sample_name);
    if (it == sample_names_.end()) continue;
    const FamilyBase* owner = it->second;
    if (owner->name() == name && owner->Matches(spec)) {
      // Identical re-registration: share the family. The type matches, so
      // the downcast is safe.
      return static_cast<Family<T>*>(const_cast<FamilyBase*>(owner));
    }
    return absl::AlreadyExistsError("metric '" + name + "': sample name '" + sample_name + "' is already used by " +
                                    MetricTypeName(owner->type()) + " '" + owner->name() +
                                    "' (a family may only be re-registered with an identical "
                                    "spec)");
  }
  auto* family = new Family<T>(spec, std::move(bounds));
  families_.emplace_back(family);
  for (const std::string& sample_name : SampleNames(name, expected)) {
    sample_names_[sample_name] = family;
  }
  return family;
}

absl::StatusOr<Family<Counter>*> Registry::AddCounter(const MetricSpec& spec) {
  return Add<Counter>(spec, MetricType::kCounter);
}

absl::StatusOr<Family<Gauge>*> Registry::AddGauge(const MetricSpec& spec) {
  return Add<Gauge>(spec, MetricType::kGauge);
}

absl::StatusOr<Family<Histogram>*> Registry::AddHistogram(const MetricSpec& spec) {
  return Add<Histogram>(spec, MetricType::kHistogram);
}

const FamilyBase* Registry::Find(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& family : families_) {
    if (family->name() == name) return family.get();
  }
  return nullptr;
}

std::string Registry::Serialize() const {
  std::vector<const FamilyBase*> families;
  {
    absl::ReaderMutexLock lock(&mu_);
    families.reserve(families_.size());
    for (const auto& family : families_) families.push_back(family.get());
  }
  // Families are never removed, so they outlive this call without the lock;
  // not holding it lets callbacks register families without deadlocking.
  std::string page;
  for (const FamilyBase* family : families) family->AppendText(&page);
  return page;
}

}  // namespace orca::metrics
