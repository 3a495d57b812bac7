#include "core/common/sampling_limits.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace orca {
namespace {

// Shortest "%.{p}g" text that reads back (as a T) equal to `v`.
template <typename T>
std::string Shortest(T v, int max_digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[64];
  if (std::fabs(v) < T(1e15) && v == std::floor(v)) {  // whole numbers as such: "100", not "1e+02"
    std::snprintf(buffer, sizeof(buffer), "%.0f", static_cast<double>(v));
    return buffer;
  }
  for (int digits = 1; digits <= max_digits; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, static_cast<double>(v));
    if (static_cast<T>(std::strtod(buffer, nullptr)) == v) break;
  }
  return buffer;
}

std::string Range(const RealLimit& limit) {
  return absl::StrCat(limit.min_exclusive ? "(" : "[", ShortestDecimal(limit.min), ", ", ShortestDecimal(limit.max),
                      "]");
}

}  // namespace

std::string ShortestDecimal(double v) { return Shortest(v, 17); }
std::string ShortestDecimal(float v) { return Shortest(v, 9); }

std::string RealLimit::Error(double v) const {
  return absl::StrCat("'", field, "' must be in ", Range(*this), ", got ", ShortestDecimal(v));
}

std::string RealLimit::Error(float v) const {
  return absl::StrCat("'", field, "' must be in ", Range(*this), ", got ", ShortestDecimal(v));
}

std::string IntLimit::Error(int64_t v) const {
  if (v < min) return absl::StrCat("'", field, "' must be at least ", min, ", got ", v);
  return absl::StrCat("'", field, "' must be at most ", max, ", got ", v);
}

std::string CountLimit::Check(int64_t count) const {
  if (count <= max) return "";
  return absl::StrCat("'", field, "' may hold at most ", max, " ", unit, ", got ", count);
}

std::string LengthLimit::Check(absl::string_view name, int64_t bytes) const {
  if (bytes <= max) return "";
  return absl::StrCat("'", name, "' must be at most ", max, " bytes long, got ", bytes);
}

std::string MinTokensError(int64_t min_tokens, int64_t max_new_tokens) {
  return absl::StrCat("'", limits::kMinTokens.field, "' (", min_tokens, ") must not exceed '",
                      limits::kMaxNewTokens.field, "' (", max_new_tokens, ")");
}

std::string LogitBiasValueError(int64_t token_id, double bias) {
  return absl::StrCat("'logit_bias[\"", token_id, "\"]' must be in ", Range(limits::kLogitBias), ", got ",
                      ShortestDecimal(bias));
}

std::string LogitBiasValueError(int64_t token_id, float bias) {
  return absl::StrCat("'logit_bias[\"", token_id, "\"]' must be in ", Range(limits::kLogitBias), ", got ",
                      ShortestDecimal(bias));
}

std::string TokenIdError(absl::string_view field, size_t index, int64_t id, int64_t vocab_size) {
  if (id < 0) return absl::StrCat("'", field, "[", index, "]' must be at least 0, got ", id);
  if (vocab_size <= 0 || id < vocab_size) return "";
  return absl::StrCat("Token id ", id, " at '", field, "[", index, "]' is outside the vocabulary [0, ", vocab_size,
                      ")");
}

std::string LogitBiasTokenError(int64_t id, int64_t vocab_size) {
  if (vocab_size <= 0 || (id >= 0 && id < vocab_size)) return "";
  return absl::StrCat("'logit_bias' key '", id, "' is not a token id of this model: the vocabulary is [0, ", vocab_size,
                      ")");
}

absl::string_view StructuredOutputField(StructuredOutputSpec::Kind kind) {
  using Kind = StructuredOutputSpec::Kind;
  switch (kind) {
    case Kind::kJsonSchema:
      return "json_schema";
    case Kind::kRegex:
      return "guided_regex";
    case Kind::kChoice:
      return limits::kGuidedChoices.field;
    case Kind::kToolCalls:
      return "tools";
    case Kind::kJsonObject:
    case Kind::kNone:
      break;
  }
  return "response_format";
}

std::string CheckStructuredOutputLimits(const StructuredOutputSpec& spec, int64_t vocab_size) {
  if (!spec.enabled()) return "";
  if (spec.kind == StructuredOutputSpec::Kind::kChoice) {
    if (std::string error = limits::kGuidedChoices.Check(static_cast<int64_t>(spec.choices.size())); !error.empty())
      return error;
  }
  if (spec.kind == StructuredOutputSpec::Kind::kToolCalls) {
    if (std::string error = limits::kMaxToolCalls.Check(spec.max_calls); !error.empty()) return error;
  }
  const absl::string_view ids_field = limits::kStopTokenIds.field;
  if (std::string error = limits::kStopTokenIds.Check(static_cast<int64_t>(spec.end_token_ids.size())); !error.empty())
    return error;
  for (size_t i = 0; i < spec.end_token_ids.size(); ++i) {
    if (std::string error = TokenIdError(ids_field, i, spec.end_token_ids[i], vocab_size); !error.empty()) return error;
  }
  return "";
}

}  // namespace orca
