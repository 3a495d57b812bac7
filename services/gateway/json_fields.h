#pragma once
/// Typed, validating access to the fields of a JSON request object.
///
/// OpenAI treats `null` as "not given", so absent and null fields leave the
/// destination untouched. A wrong type or an out-of-range value is an
/// InvalidArgument that names the field (and carries it as the error's `param`):
///
///   'max_tokens' must be an integer, got a string ("ten")
///   'n' must be at least 1, got 0

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace orca::gateway {

/// A request body as the gateway reads it: objects keep their members in the
/// order the client wrote them (nlohmann's ordered_json; a nlohmann::json is a
/// std::map and sorts them). What passes on to a chat template (tools'
/// `parameters`, tool-call `arguments`, `chat_template_kwargs`) and to a
/// structured-output compiler (a schema's `properties` order is the output's)
/// then reaches it as sent, as in vLLM, whose Python dicts keep insertion order.
/// ParseJsonObject (openai_request.h) builds it with a hash index for large
/// objects, so keeping the order costs no quadratic duplicate-key scan.
using RequestJson = nlohmann::ordered_json;

/// Short human description of a JSON value for error messages:
/// `a string ("ten")`, `a boolean (true)`, `an array`, `a number (1.5)`.
std::string DescribeJsonValue(const RequestJson& value);

class JsonFieldReader {
 public:
  /// `object` must be a JSON object and outlive the reader. `prefix` is put in
  /// front of field names in messages (e.g. "stream_options.").
  explicit JsonFieldReader(const RequestJson& object, std::string prefix = "");

  /// The field, or nullptr when absent or null.
  const RequestJson* Find(const char* name) const;
  /// The field's name as messages show it (prefix included).
  std::string FieldName(const char* name) const;

  /// Integers accept integer-valued numbers (10.0) as JSON has one number type.
  absl::Status Int(const char* name, int64_t min, int64_t max, std::optional<int64_t>* out) const;
  absl::Status Int32(const char* name, int32_t min, int32_t max, int32_t* out) const;
  absl::Status OptionalInt32(const char* name, int32_t min, int32_t max, std::optional<int32_t>* out) const;
  /// A number in [min, max].
  absl::Status Float(const char* name, double min, double max, float* out) const;
  absl::Status Bool(const char* name, bool* out) const;
  absl::Status String(const char* name, std::string* out) const;

 private:
  const RequestJson& object_;
  std::string prefix_;
};

/// Validates one JSON value as an integer in [min, max]; `field` names it in messages.
absl::Status ReadInteger(const RequestJson& value, const std::string& field, int64_t min, int64_t max, int64_t* out);

}  // namespace orca::gateway
