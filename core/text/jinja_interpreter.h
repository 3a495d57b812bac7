#pragma once
/// Evaluates a parsed Jinja program (internal to core/text). Filters, tests
/// and methods live in jinja_builtins.cc; budgets and bounded value walks in
/// jinja_sandbox.h.

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/text/jinja_ast.h"
#include "core/text/jinja_sandbox.h"
#include "core/text/jinja_value.h"
#include "core/text/render_budget.h"

namespace orca::text::jinja {

/// Renders `program` with `globals` as the outermost scope (plus the built-in
/// functions range, namespace, dict, raise_exception, strftime_now) within
/// `budget`. Runtime errors and exceeded limits: InvalidArgument
/// "line L, column C: ...". Lists and namespaces in `globals` that the template
/// changes in place are emptied when the render ends.
absl::StatusOr<std::string> Render(const Program& program, const Value::Dict& globals,
                                   const RenderBudget& budget = RenderBudget());

// ---- Built-ins (jinja_builtins.cc) ------------------------------------------

/// Applies filter `name` to `target`; NotFound for unknown filters.
absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& target, const CallArgs& args, Sandbox& sb);
/// Evaluates test `name`; NotFound for unknown tests.
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& target, const CallArgs& args, Sandbox& sb);
/// Calls method `name` of a string, list or dict; NotFound when there is none.
absl::StatusOr<Value> CallMethod(const Value& target, std::string_view name, const CallArgs& args, Sandbox& sb);
/// Python's strip family: `mode` 0 both ends, 1 left, 2 right; `chars` null = whitespace.
std::string PyStrip(const std::string& s, const std::string* chars, int mode);
/// Python comparison for <, <=, >, >= (numbers or strings).
absl::StatusOr<int> Compare(const Value& a, const Value& b, Sandbox& sb);

}  // namespace orca::text::jinja
