#pragma once
/// JSON from untrusted text, parsed with a nesting-depth limit checked while
/// the text is read (nlohmann's SAX interface under its DOM builder), so a
/// 20,000-deep body is refused at its 129th `[` or `{` without building the
/// deep tree, and nothing downstream (dump(), schema compilers, template value
/// converters: all recursive) ever sees more than `max_depth` levels.
///
/// Every parse of text a request can reach (HTTP bodies, JSON held in string
/// fields such as `guided_json` or tool-call `arguments`, schemas arriving over
/// gRPC) goes through here. The limit is the one pydantic and vLLM apply to
/// request bodies.
///
/// Errors are InvalidArgument. A syntax error carries nlohmann's message
/// without its "[json.exception.parse_error.101] " prefix ("parse error at
/// line 1, column 7: syntax error while parsing value - ..."); a depth error
/// names the JSON path of the value that nests too deep and the limit:
///
///   nesting deeper than 128 levels at tools[0].function.parameters.properties
///   .a.properties … .properties.a (arrays and objects may nest at most 128 deep)

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace orca {

/// Arrays and objects may nest at most this deep (the outermost one is level 1).
inline constexpr int kMaxJsonDepth = 128;

/// Parses `text` as one JSON value (the whole text; no comments).
/// InvalidArgument on a syntax error or when containers nest deeper than `max_depth`.
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, int max_depth = kMaxJsonDepth);
/// The same, keeping object keys in document order.
absl::StatusOr<nlohmann::ordered_json> ParseOrderedJson(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace orca
