#pragma once
/// Evaluates a parsed Jinja program (internal to core/text). Filters, tests
/// and methods live in jinja_builtins.cc.

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/text/jinja_ast.h"
#include "core/text/jinja_value.h"

namespace orca::text::jinja {

/// Renders `program` with `globals` as the outermost scope (plus the built-in
/// functions range, namespace, dict, raise_exception, strftime_now).
/// Runtime errors: InvalidArgument "line L, column C: ...".
absl::StatusOr<std::string> Render(const Program& program, const Value::Dict& globals);

// ---- Built-ins (jinja_builtins.cc) ------------------------------------------

/// Applies filter `name` to `target`; NotFound for unknown filters.
absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& target, const CallArgs& args);
/// Evaluates test `name`; NotFound for unknown tests.
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& target, const CallArgs& args);
/// Calls method `name` of a string, list or dict; NotFound when there is none.
absl::StatusOr<Value> CallMethod(const Value& target, std::string_view name, const CallArgs& args);
/// Python's strip family: `mode` 0 both ends, 1 left, 2 right; `chars` null = whitespace.
std::string PyStrip(const std::string& s, const Value* chars, int mode);
/// Items of an iterable (list elements, dict keys, string characters).
absl::StatusOr<std::vector<Value>> Iterate(const Value& v);
/// Python comparison for <, <=, >, >= (numbers or strings).
absl::StatusOr<int> Compare(const Value& a, const Value& b);

}  // namespace orca::text::jinja
