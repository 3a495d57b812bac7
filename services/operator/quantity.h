#pragma once
/// Kubernetes resource quantities ("4Gi", "500m", "1.5G", "2").

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace orca::k8s {

/// Parses a quantity given as a JSON integer or string into a whole number of
/// base units, rounding up fractions ("1.5Ki" -> 1536, "500m" -> 1). Errors
/// name `field` and the expected form; negative values and values beyond
/// int64 are refused.
absl::StatusOr<int64_t> ParseQuantity(const nlohmann::json& value, const std::string& field);

/// The canonical text form the API expects for a quantity value taken from a
/// spec (integers become their decimal text, strings are kept).
std::string QuantityText(const nlohmann::json& value);

}  // namespace orca::k8s
