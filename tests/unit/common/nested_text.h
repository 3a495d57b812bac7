#pragma once
// Deeply nested text for the tests of depth limits (JSON schemas, regexes).

#include <string>

namespace orca::testing {

/// `open` `depth` times, then `middle`, then `close` `depth` times: e.g.
/// Nested("(", "a", ")", 3) is "(((a)))".
inline std::string Nested(const std::string& open, const std::string& middle, const std::string& close, int depth) {
  std::string out;
  for (int i = 0; i < depth; ++i) out += open;
  out += middle;
  for (int i = 0; i < depth; ++i) out += close;
  return out;
}

}  // namespace orca::testing
