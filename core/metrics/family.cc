#include "core/metrics/family.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "absl/strings/str_join.h"
#include "core/common/utf8.h"

namespace orca::metrics {

CallbackRegistration::CallbackRegistration(CallbackRegistration&& other) noexcept
    : family_(std::exchange(other.family_, nullptr)), id_(other.id_) {}

CallbackRegistration& CallbackRegistration::operator=(CallbackRegistration&& other) noexcept {
  if (this != &other) {
    Reset();
    family_ = std::exchange(other.family_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

void CallbackRegistration::Reset() {
  if (family_ == nullptr) return;
  family_->RemoveCallback(id_);
  family_ = nullptr;
}

FamilyBase::FamilyBase(const MetricSpec& spec, std::vector<double> buckets)
    : name_(spec.name),
      help_(spec.help),
      type_(spec.type),
      label_names_(spec.label_names.begin(), spec.label_names.end()),
      buckets_(std::make_shared<const std::vector<double>>(std::move(buckets))) {}

bool FamilyBase::Matches(const MetricSpec& spec) const {
  std::span<const double> bounds = spec.buckets;
  // The registry drops a trailing +Inf bound; compare the same way.
  if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) {
    bounds = bounds.first(bounds.size() - 1);
  }
  return spec.type == type_ && name_ == spec.name && help_ == spec.help &&
         std::equal(label_names_.begin(), label_names_.end(), spec.label_names.begin(), spec.label_names.end()) &&
         std::equal(buckets_->begin(), buckets_->end(), bounds.begin(), bounds.end());
}

void FamilyBase::AppendText(std::string* out) const {
  out->append("# HELP ").append(name_).append(" ").append(EscapeHelp(help_)).append("\n");
  out->append("# TYPE ").append(name_).append(" ").append(MetricTypeName(type_)).append("\n");
  AppendSamples(out);
}

absl::StatusOr<std::vector<std::string>> FamilyBase::ResolveLabelValues(const Labels& labels) const {
  std::vector<std::string> values;
  values.reserve(label_names_.size());
  for (const std::string& label_name : label_names_) {
    auto it = labels.find(label_name);
    if (it == labels.end()) {
      return absl::InvalidArgumentError("metric '" + name_ + "': missing label '" + label_name +
                                        "' (labels: " + absl::StrJoin(label_names_, ", ") + ")");
    }
    values.push_back(SanitizeUtf8(it->second));
  }
  if (labels.size() != label_names_.size()) {
    for (const auto& [label_name, value] : labels) {
      if (std::find(label_names_.begin(), label_names_.end(), label_name) == label_names_.end()) {
        return absl::InvalidArgumentError("metric '" + name_ + "': unexpected label '" + label_name +
                                          "' (labels: " + absl::StrJoin(label_names_, ", ") + ")");
      }
    }
  }
  return values;
}

std::string FamilyBase::RenderLabels(const std::vector<std::string>& values) const {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(label_names_[i]).append("=\"").append(EscapeLabelValue(values[i])).append("\"");
  }
  return out;
}

}  // namespace orca::metrics
