#pragma once
/// Conversions between YAML documents and nlohmann::json values, and
/// non-throwing JSON helpers. The operator works on JSON objects
/// (Kubernetes' wire format); users write YAML. Both wrap the throwing
/// third-party parsers at this edge.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace orca::k8s {

/// Parses one JSON value. Errors carry the parser's position.
absl::StatusOr<nlohmann::json> ParseJson(const std::string& text);

/// Parses a stream of YAML documents ("---" separated; JSON is valid YAML).
/// Empty documents are skipped. Plain scalars become numbers/booleans/null
/// when they look like them (YAML 1.2 core schema); quoted scalars stay strings.
absl::StatusOr<std::vector<nlohmann::json>> ParseYamlDocuments(const std::string& text);

/// Serializes `value` as YAML with block style and deterministic key order.
/// Strings are always quoted, so the output re-parses to the same value.
std::string ToYaml(const nlohmann::json& value);

}  // namespace orca::k8s
