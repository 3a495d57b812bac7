#pragma once
/// The structured-output fields of an OpenAI request (chat and completions):
/// `response_format` ({"type": "text" | "json_object" | "json_schema",
/// "json_schema": {"name", "description", "schema", "strict"}}) and vLLM's
/// extras `guided_json` (a schema object or its text), `guided_regex` and
/// `guided_choice`. At most one of them may constrain a request. The spec is
/// compiled once here (cached by its text) so that a schema the engine cannot
/// enforce is a 400 naming the keyword and its JSON pointer, never a silently
/// unconstrained output.

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "absl/status/status.h"
#include "core/common/structured_output.h"
#include "services/gateway/json_fields.h"

namespace orca::gateway {

/// Reads the fields from `body` into `spec` (left kNone when none is given).
/// InvalidArgument (with the field as the error's param) on a malformed field,
/// two constraints at once, or a constraint that does not compile.
absl::Status ParseStructuredOutput(const RequestJson& body, StructuredOutputSpec* spec);
/// Compiles an already parsed spec (the gRPC API's): InvalidArgument with
/// `param` when it cannot be enforced. OK for kNone.
absl::Status ValidateStructuredOutput(const StructuredOutputSpec& spec, const std::string& param);

}  // namespace orca::gateway
