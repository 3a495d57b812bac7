#pragma once
/// Syntax tree and parser of the Jinja subset used by chat templates
/// (internal to core/text). Parsing applies HF's environment settings:
/// trim_blocks, lstrip_blocks, and no trailing newline.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/text/jinja_value.h"

namespace orca::text::jinja {

struct Position {
  int line = 1;
  int column = 1;
};

struct Expr {
  enum class Kind {
    kLiteral,
    kName,
    kList,
    kTuple,
    kDict,
    kAttr,
    kItem,
    kSlice,
    kCall,
    kFilter,
    kTest,
    kUnary,
    kBinary,
    kAnd,
    kOr,
    kNot,
    kTernary
  };
  Kind kind = Kind::kLiteral;
  Position pos;
  Value literal;
  /// Name, attribute, filter/test name, or operator.
  std::string name;
  /// Operands / positional arguments (kDict: key, value, key, value, ...).
  /// kSlice: object, start, stop, step (nullptr for an omitted bound).
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
  bool negated = false;  // `is not`
};

struct Stmt {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue };
  Kind kind = Kind::kText;
  Position pos;
  std::string text;                  // kText
  std::unique_ptr<Expr> expr;        // kOutput, kSet value, kFor iterable
  std::unique_ptr<Expr> filter;      // kFor `if` condition
  std::vector<std::string> targets;  // kFor / kSet / kSetBlock names; kMacro name
  std::string attr;                  // kSet `ns.attr = ...`
  std::vector<std::pair<std::unique_ptr<Expr>, std::vector<std::unique_ptr<Stmt>>>> branches;  // kIf
  std::vector<std::unique_ptr<Stmt>> body;                            // kFor, kSetBlock, kMacro
  std::vector<std::unique_ptr<Stmt>> else_body;                       // kIf, kFor
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> params;  // kMacro (default may be null)
};

using Program = std::vector<std::unique_ptr<Stmt>>;

/// Parses a template. InvalidArgument "line L, column C: ..." on syntax errors.
absl::StatusOr<Program> Parse(std::string_view source);

}  // namespace orca::text::jinja
