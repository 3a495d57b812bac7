#include "services/operator/quantity.h"

#include <cmath>
#include <regex>

#include "absl/strings/str_cat.h"

namespace orca::k8s {
namespace {

double SuffixMultiplier(const std::string& suffix) {
  static const std::pair<const char*, double> kSuffixes[] = {
      {"", 1.0},
      {"m", 1e-3},
      {"k", 1e3},
      {"M", 1e6},
      {"G", 1e9},
      {"T", 1e12},
      {"P", 1e15},
      {"E", 1e18},
      {"Ki", 1024.0},
      {"Mi", 1048576.0},
      {"Gi", 1073741824.0},
      {"Ti", 1099511627776.0},
      {"Pi", 1125899906842624.0},
      {"Ei", 1152921504606846976.0},
  };
  for (const auto& [name, mult] : kSuffixes) {
    if (suffix == name) return mult;
  }
  return -1.0;
}

}  // namespace

absl::StatusOr<int64_t> ParseQuantity(const nlohmann::json& value, const std::string& field) {
  if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v < 0) return absl::InvalidArgumentError(absl::StrCat(field, ": must not be negative, got ", v));
    return v;
  }
  if (!value.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": expected a quantity such as 4Gi or 512Mi, got ", value.dump()));
  }
  const std::string text = value.get<std::string>();
  static const std::regex kQuantity(R"(^([0-9]+(\.[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$)");
  std::smatch m;
  if (!std::regex_match(text, m, kQuantity)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", text, "' is not a quantity (expected e.g. 4Gi, 512Mi, 1.5G, 1000)"));
  }
  const double number = std::stod(m[1].str());
  const double result = std::ceil(number * SuffixMultiplier(m[3].str()));
  if (!(result < 9.2e18)) return absl::InvalidArgumentError(absl::StrCat(field, ": '", text, "' is too large"));
  return static_cast<int64_t>(result);
}

std::string QuantityText(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

}  // namespace orca::k8s
