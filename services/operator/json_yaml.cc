#include "services/operator/json_yaml.h"

#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace orca::k8s {
namespace {

using nlohmann::json;

// YAML 1.2 core-schema resolution of plain scalars.
json ResolvePlainScalar(const std::string& s) {
  static const std::regex kNull("^(~|null|Null|NULL|)$");
  static const std::regex kTrue("^(true|True|TRUE)$");
  static const std::regex kFalse("^(false|False|FALSE)$");
  static const std::regex kInt("^[-+]?[0-9]+$");
  static const std::regex kFloat(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  if (std::regex_match(s, kNull)) return nullptr;
  if (std::regex_match(s, kTrue)) return true;
  if (std::regex_match(s, kFalse)) return false;
  if (std::regex_match(s, kInt)) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == 0 && end && *end == '\0') return static_cast<int64_t>(v);
    return s;  // out of int64 range: keep the text
  }
  if (std::regex_match(s, kFloat)) return std::strtod(s.c_str(), nullptr);
  return s;
}

json NodeToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      // yaml-cpp tags quoted (non-plain) scalars with "!".
      if (node.Tag() == "!") return node.Scalar();
      return ResolvePlainScalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(NodeToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = NodeToJson(kv.second);
      return out;
    }
  }
  return nullptr;
}

void EmitYaml(const json& v, int indent, std::ostringstream& os);

std::string ScalarText(const json& v) {
  if (v.is_string()) return v.dump();  // JSON strings are valid double-quoted YAML scalars
  if (v.is_null()) return "null";
  return v.dump();
}

bool IsEmptyCollection(const json& v) { return (v.is_object() || v.is_array()) && v.empty(); }

// Keys print plain when YAML would read them back as the same string.
std::string KeyText(const std::string& key) {
  static const std::regex kPlain("^[A-Za-z_][A-Za-z0-9_./-]*$");
  static const std::regex kReserved(
      "^(y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|null|Null|NULL)$");
  if (std::regex_match(key, kPlain) && !std::regex_match(key, kReserved)) return key;
  return json(key).dump();
}

void EmitYaml(const json& v, int indent, std::ostringstream& os) {
  const std::string pad(indent, ' ');
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      os << pad << KeyText(it.key()) << ":";
      const json& child = it.value();
      if (IsEmptyCollection(child)) {
        os << (child.is_object() ? " {}\n" : " []\n");
      } else if (child.is_object()) {
        os << "\n";
        EmitYaml(child, indent + 2, os);
      } else if (child.is_array()) {
        os << "\n";
        EmitYaml(child, indent + 2, os);
      } else {
        os << " " << ScalarText(child) << "\n";
      }
    }
  } else if (v.is_array()) {
    for (const json& item : v) {
      os << pad << "-";
      if (IsEmptyCollection(item)) {
        os << (item.is_object() ? " {}\n" : " []\n");
      } else if (item.is_object()) {
        // Compact form: the first key shares the dash line.
        std::ostringstream nested;
        EmitYaml(item, indent + 2, nested);
        os << " " << nested.str().substr(indent + 2);
      } else if (item.is_array()) {
        os << "\n";
        EmitYaml(item, indent + 2, os);
      } else {
        os << " " << ScalarText(item) << "\n";
      }
    }
  } else {
    os << pad << ScalarText(v) << "\n";
  }
}

}  // namespace

absl::StatusOr<json> ParseJson(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON: ", e.what()));
  }
}

absl::StatusOr<std::vector<json>> ParseYamlDocuments(const std::string& text) {
  std::vector<json> docs;
  try {
    for (const YAML::Node& node : YAML::LoadAll(text)) {
      if (node.IsNull()) continue;
      docs.push_back(NodeToJson(node));
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid YAML: ", e.what()));
  }
  return docs;
}

std::string ToYaml(const json& value) {
  std::ostringstream os;
  if (IsEmptyCollection(value)) return value.is_object() ? "{}\n" : "[]\n";
  EmitYaml(value, 0, os);
  return os.str();
}

}  // namespace orca::k8s
