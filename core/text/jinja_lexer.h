#pragma once
/// Tokenizer of Jinja templates (internal to core/text).

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/text/jinja_ast.h"

namespace orca::text::jinja {

struct Token {
  enum class Kind { kText, kExprOpen, kExprClose, kStmtOpen, kStmtClose, kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;  // text, name, string value, number literal, operator
  Position pos;
};

/// Splits a template into tokens, applying `{%- -%}` whitespace control,
/// trim_blocks and lstrip_blocks, and dropping comments and one trailing newline.
absl::StatusOr<std::vector<Token>> Lex(std::string_view source);

}  // namespace orca::text::jinja
