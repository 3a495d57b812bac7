// Recursive-descent parser for the Jinja subset (see jinja_ast.h). Operator
// precedence follows Jinja: ternary < or < and < not < comparisons/in <
// + - < ~ < * / // % < ** < unary < filters/tests < postfix.

#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/text/jinja_ast.h"
#include "core/text/jinja_lexer.h"

namespace orca::text::jinja {
namespace {

using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Kind = Token::Kind;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  absl::StatusOr<Program> ParseProgram() {
    Program program;
    std::string end;
    ORCA_RETURN_IF_ERROR(ParseBody({}, &program, &end));
    return program;
  }

 private:
  const Token& Peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& Next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool IsOp(std::string_view op, size_t ahead = 0) const {
    return Peek(ahead).kind == Kind::kOp && Peek(ahead).text == op;
  }
  bool IsName(std::string_view name, size_t ahead = 0) const {
    return Peek(ahead).kind == Kind::kName && Peek(ahead).text == name;
  }
  absl::Status ErrorAt(const Token& tok, std::string_view msg) const {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", tok.pos.line, ", column ", tok.pos.column, ": ", std::string(msg)));
  }
  static std::string Describe(const Token& tok) {
    switch (tok.kind) {
      case Kind::kEnd:
        return "end of template";
      case Kind::kText:
        return "text";
      case Kind::kExprClose:
        return "'}}'";
      case Kind::kStmtClose:
        return "'%}'";
      case Kind::kExprOpen:
        return "'{{'";
      case Kind::kStmtOpen:
        return "'{%'";
      case Kind::kString:
        return "string literal";
      default:
        return "'" + tok.text + "'";
    }
  }
  absl::Status ExpectOp(std::string_view op) {
    if (!IsOp(op)) return ErrorAt(Peek(), absl::StrCat("expected '", std::string(op), "', found ", Describe(Peek())));
    ++i_;
    return absl::OkStatus();
  }
  absl::Status ExpectKind(Kind kind, std::string_view what) {
    if (Peek().kind != kind) {
      return ErrorAt(Peek(), absl::StrCat("expected ", std::string(what), ", found ", Describe(Peek())));
    }
    ++i_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Peek().kind != Kind::kName) return ErrorAt(Peek(), "expected a name, found " + Describe(Peek()));
    return Next().text;
  }

  // Each link of a chain (`a + b + c`, `x.y.z`, `v | f | g`) adds a level to
  // the tree that evaluation recurses through (and that is destroyed
  // recursively), so links count as nesting; the level is restored when the
  // chain's parse function returns.
  class ChainDepth {
   public:
    explicit ChainDepth(Parser* p) : p_(p), saved_(p->depth_) {}
    ~ChainDepth() { p_->depth_ = saved_; }
    absl::Status Link(const Token& at) {
      if (++p_->depth_ > kMaxNesting) return p_->ErrorAt(at, "expression nested too deeply");
      return absl::OkStatus();
    }

   private:
    Parser* p_;
    int saved_;
  };

  ExprPtr New(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = at.pos;
    return e;
  }

  // Parses statements until `{% <one of ends> ...`; stores the keyword met in
  // *end (leaving the rest of that tag unconsumed). With no ends: until EOF.
  absl::Status ParseBody(std::initializer_list<std::string_view> ends, std::vector<StmtPtr>* body, std::string* end) {
    while (true) {
      const Token& tok = Peek();
      if (tok.kind == Kind::kEnd) {
        if (ends.size() == 0) return absl::OkStatus();
        std::string list;
        for (std::string_view e : ends) list += (list.empty() ? "" : " or ") + std::string(e);
        return ErrorAt(tok, "unexpected end of template; expected {% " + list + " %}");
      }
      if (tok.kind == Kind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->pos = tok.pos;
        s->text = tok.text;
        body->push_back(std::move(s));
        ++i_;
        continue;
      }
      if (tok.kind == Kind::kExprOpen) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->pos = tok.pos;
        ORCA_ASSIGN_OR_RETURN(s->expr, ParseExpr());
        ORCA_RETURN_IF_ERROR(ExpectKind(Kind::kExprClose, "'}}'"));
        body->push_back(std::move(s));
        continue;
      }
      if (tok.kind != Kind::kStmtOpen) return ErrorAt(tok, "unexpected " + Describe(tok));
      const Token& keyword = Peek(1);
      if (keyword.kind != Kind::kName) return ErrorAt(keyword, "expected a statement name after '{%'");
      for (std::string_view e : ends) {
        if (keyword.text == e) {
          i_ += 2;
          *end = keyword.text;
          return absl::OkStatus();
        }
      }
      i_ += 2;
      ORCA_ASSIGN_OR_RETURN(StmtPtr stmt, ParseStatement(keyword));
      if (stmt != nullptr) body->push_back(std::move(stmt));
    }
  }

  absl::StatusOr<StmtPtr> ParseStatement(const Token& keyword) {
    if (++depth_ > kMaxNesting) return ErrorAt(keyword, "blocks nested too deeply");
    struct Exit {
      int& d;
      ~Exit() { --d; }
    } exit{depth_};
    auto s = std::make_unique<Stmt>();
    s->pos = keyword.pos;
    const std::string& k = keyword.text;
    if (k == "if") {
      s->kind = Stmt::Kind::kIf;
      std::string end = "elif";
      while (end == "elif") {
        ORCA_ASSIGN_OR_RETURN(ExprPtr cond, ParseExpr());
        ORCA_RETURN_IF_ERROR(ExpectKind(Kind::kStmtClose, "'%}'"));
        std::vector<StmtPtr> body;
        ORCA_RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &body, &end));
        s->branches.emplace_back(std::move(cond), std::move(body));
      }
      if (end == "else") {
        ORCA_RETURN_IF_ERROR(ExpectKind(Kind::kStmtClose, "'%}'"));
        ORCA_RETURN_IF_ERROR(ParseBody({"endif"}, &s->else_body, &end));
      }
    } else if (k == "for") {
      s->kind = Stmt::Kind::kFor;
      do {
        ORCA_ASSIGN_OR_RETURN(std::string name, ExpectName());
        s->targets.push_back(name);
      } while (IsOp(",") && (++i_, true));
      if (!IsName("in")) return ErrorAt(Peek(), "expected 'in' in for loop, found " + Describe(Peek()));
      ++i_;
      ORCA_ASSIGN_OR_RETURN(s->expr, ParseOr());
      if (IsName("if")) {
        ++i_;
        ORCA_ASSIGN_OR_RETURN(s->filter, ParseOr());
      }
      if (IsName("recursive")) return ErrorAt(Peek(), "recursive for loops are not supported");
      ORCA_RETURN_IF_ERROR(ExpectKind(Kind::kStmtClose, "'%}'"));
      std::string end;
      ORCA_RETURN_IF_ERROR(ParseBody({"else", "endfor"}, &s->body, &end));
      if (end == "else") {
        ORCA_RETURN_IF_ERROR(ExpectKind(Kind::kStmtClose, "'%}'"));
        ORCA_RETURN_IF_ERROR(ParseBody({"endfor"}, &s->else_body, &end));
      }
    } else if (k == "set") {
      ORCA_ASSIGN_OR_RETURN(std::string name, ExpectName());
      s->targets.push_back(name);
      if (IsOp(".")) {
        ++i_;
        ORCA_ASSIGN_OR_RETURN(s->attr, ExpectName());
      } else {
        while (IsOp(",")) {
          ++i_;
          ORCA_ASSIGN_OR_RETURN(std::string more, ExpectName());
          s->targets.push_back(more);
        }
      }
      if (IsOp("=")) {
        ++i_;
        s->kind = Stmt::Kind::kSet;
        ORCA_ASSIGN_OR_RETURN(s->expr, ParseTupleOrExpr());
      } else {
        if (!s->attr.empty() || s->targets.size() != 1) return ErrorAt(Peek(), "expected '=' in set");
        s->kind = Stmt::Kind::kSetBlock;
        ORCA_RETURN_IF_ERROR(ExpectKind(Kind::kStmtClose, "'%}'"));
        std::string end;
        ORCA_RETURN_IF_ERROR(ParseBody({"endset"}, &s->body, &end));
      }
    } else if (k == "macro") {
      s->kind = Stmt::Kind::kMacro;
      ORCA_ASSIGN_OR_RETURN(std::string name, ExpectName());
      s->targets.push_back(name);
      ORCA_RETURN_IF_ERROR(ExpectOp("("));
      while (!IsOp(")")) {
        ORCA_ASSIGN_OR_RETURN(std::string param, ExpectName());
        ExprPtr def;
        if (IsOp("=")) {
          ++i_;
          ORCA_ASSIGN_OR_RETURN(def, ParseExpr());
        }
        s->params.emplace_back(param, std::move(def));
        if (!IsOp(",")) break;
        ++i_;
      }
      ORCA_RETURN_IF_ERROR(ExpectOp(")"));
      ORCA_RETURN_IF_ERROR(ExpectKind(Kind::kStmtClose, "'%}'"));
      std::string end;
      ORCA_RETURN_IF_ERROR(ParseBody({"endmacro"}, &s->body, &end));
    } else if (k == "break" || k == "continue") {
      s->kind = k == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    } else if (k == "generation" || k == "endgeneration") {
      s.reset();  // training-only markers: render nothing
    } else if (k == "elif" || k == "else" || k.rfind("end", 0) == 0) {
      return ErrorAt(keyword, "unexpected '{% " + k + " %}' with no open block");
    } else {
      return ErrorAt(keyword, "unsupported statement '" + k + "'");
    }
    ORCA_RETURN_IF_ERROR(ExpectKind(Kind::kStmtClose, "'%}'"));
    return s;
  }

  // `a, b` (a tuple) or a single expression.
  absl::StatusOr<ExprPtr> ParseTupleOrExpr() {
    const Token& at = Peek();
    ORCA_ASSIGN_OR_RETURN(ExprPtr first, ParseExpr());
    if (!IsOp(",")) return first;
    ExprPtr tuple = New(Expr::Kind::kTuple, at);
    tuple->args.push_back(std::move(first));
    while (IsOp(",")) {
      ++i_;
      ORCA_ASSIGN_OR_RETURN(ExprPtr next, ParseExpr());
      tuple->args.push_back(std::move(next));
    }
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseExpr() {
    const Token& at = Peek();
    ORCA_ASSIGN_OR_RETURN(ExprPtr value, ParseOr());
    if (!IsName("if")) return value;
    ++i_;
    ExprPtr e = New(Expr::Kind::kTernary, at);
    ORCA_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
    ExprPtr other;
    if (IsName("else")) {
      ++i_;
      ORCA_ASSIGN_OR_RETURN(other, ParseExpr());
    } else {
      other = New(Expr::Kind::kLiteral, at);  // undefined
    }
    e->args.push_back(std::move(cond));
    e->args.push_back(std::move(value));
    e->args.push_back(std::move(other));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    ChainDepth chain(this);
    ORCA_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      ORCA_RETURN_IF_ERROR(chain.Link(Peek()));
      ExprPtr e = New(Expr::Kind::kOr, Next());
      ORCA_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      e->args.push_back(std::move(left));
      e->args.push_back(std::move(right));
      left = std::move(e);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    ChainDepth chain(this);
    ORCA_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      ORCA_RETURN_IF_ERROR(chain.Link(Peek()));
      ExprPtr e = New(Expr::Kind::kAnd, Next());
      ORCA_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      e->args.push_back(std::move(left));
      e->args.push_back(std::move(right));
      left = std::move(e);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (++depth_ > kMaxNesting) return ErrorAt(Peek(), "expression nested too deeply");
    struct Exit {
      int& d;
      ~Exit() { --d; }
    } exit{depth_};
    if (IsName("not")) {
      ExprPtr e = New(Expr::Kind::kNot, Next());
      ORCA_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      e->args.push_back(std::move(operand));
      return e;
    }
    return ParseCompare();
  }

  ExprPtr Binary(const Token& at, std::string op, ExprPtr l, ExprPtr r) {
    ExprPtr e = New(Expr::Kind::kBinary, at);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    ChainDepth chain(this);
    ORCA_ASSIGN_OR_RETURN(ExprPtr left, ParseMath1());
    while (true) {
      const Token& at = Peek();
      std::string op;
      if (at.kind == Kind::kOp && (at.text == "==" || at.text == "!=" || at.text == "<" || at.text == "<=" ||
                                   at.text == ">" || at.text == ">=")) {
        op = at.text;
        ++i_;
      } else if (IsName("in")) {
        op = "in";
        ++i_;
      } else if (IsName("not") && IsName("in", 1)) {
        op = "not in";
        i_ += 2;
      } else {
        return left;
      }
      ORCA_RETURN_IF_ERROR(chain.Link(at));
      ORCA_ASSIGN_OR_RETURN(ExprPtr right, ParseMath1());
      left = Binary(at, op, std::move(left), std::move(right));
    }
  }

  template <typename Sub>
  absl::StatusOr<ExprPtr> ParseLeftAssoc(std::initializer_list<std::string_view> ops, Sub sub) {
    ChainDepth chain(this);
    ORCA_ASSIGN_OR_RETURN(ExprPtr left, (this->*sub)());
    while (true) {
      const Token& at = Peek();
      bool match = false;
      for (std::string_view op : ops) match = match || IsOp(op);
      if (!match) return left;
      ORCA_RETURN_IF_ERROR(chain.Link(at));
      ++i_;
      ORCA_ASSIGN_OR_RETURN(ExprPtr right, (this->*sub)());
      left = Binary(at, at.text, std::move(left), std::move(right));
    }
  }
  absl::StatusOr<ExprPtr> ParseMath1() { return ParseLeftAssoc({"+", "-"}, &Parser::ParseConcat); }
  absl::StatusOr<ExprPtr> ParseConcat() { return ParseLeftAssoc({"~"}, &Parser::ParseMath2); }
  absl::StatusOr<ExprPtr> ParseMath2() { return ParseLeftAssoc({"*", "/", "//", "%"}, &Parser::ParsePow); }
  absl::StatusOr<ExprPtr> ParsePow() { return ParseLeftAssoc({"**"}, &Parser::ParseUnary); }

  absl::StatusOr<ExprPtr> ParseUnary() {
    if (++depth_ > kMaxNesting) return ErrorAt(Peek(), "expression nested too deeply");
    struct Exit {
      int& d;
      ~Exit() { --d; }
    } exit{depth_};
    if (IsOp("-") || IsOp("+")) {
      const Token& at = Next();
      ExprPtr e = New(Expr::Kind::kUnary, at);
      e->name = at.text;
      ORCA_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary());
      e->args.push_back(std::move(operand));
      return ParseFiltersAndTests(std::move(e));
    }
    ORCA_ASSIGN_OR_RETURN(ExprPtr primary, ParsePrimary());
    ORCA_ASSIGN_OR_RETURN(primary, ParsePostfix(std::move(primary)));
    return ParseFiltersAndTests(std::move(primary));
  }

  absl::Status ParseCallArgs(Expr* e) {
    ORCA_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (Peek().kind == Kind::kName && IsOp("=", 1)) {
        std::string key = Next().text;
        ++i_;
        ORCA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpr());
        e->kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (!e->kwargs.empty()) return ErrorAt(Peek(), "positional argument after keyword argument");
        ORCA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpr());
        e->args.push_back(std::move(value));
      }
      if (!IsOp(",")) break;
      ++i_;
    }
    return ExpectOp(")");
  }

  absl::StatusOr<ExprPtr> ParseFiltersAndTests(ExprPtr e) {
    ChainDepth chain(this);
    while (true) {
      if (IsOp("|") || IsName("is")) ORCA_RETURN_IF_ERROR(chain.Link(Peek()));
      if (IsOp("|")) {
        const Token& at = Next();
        ExprPtr f = New(Expr::Kind::kFilter, at);
        ORCA_ASSIGN_OR_RETURN(f->name, ExpectName());
        f->args.push_back(std::move(e));
        if (IsOp("(")) ORCA_RETURN_IF_ERROR(ParseCallArgs(f.get()));
        e = std::move(f);
      } else if (IsName("is")) {
        const Token& at = Next();
        ExprPtr t = New(Expr::Kind::kTest, at);
        if (IsName("not")) {
          ++i_;
          t->negated = true;
        }
        ORCA_ASSIGN_OR_RETURN(t->name, ExpectName());
        t->args.push_back(std::move(e));
        if (IsOp("(")) {
          ORCA_RETURN_IF_ERROR(ParseCallArgs(t.get()));
        } else if (Peek().kind == Kind::kInt || Peek().kind == Kind::kFloat || Peek().kind == Kind::kString ||
                   (Peek().kind == Kind::kName && !IsName("and") && !IsName("or") && !IsName("else") && !IsName("if") &&
                    !IsName("not") && !IsName("in") && !IsName("is"))) {
          ORCA_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
          t->args.push_back(std::move(arg));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr e) {
    ChainDepth chain(this);
    while (true) {
      if (IsOp(".") || IsOp("[") || IsOp("(")) ORCA_RETURN_IF_ERROR(chain.Link(Peek()));
      if (IsOp(".")) {
        const Token& at = Next();
        ExprPtr a = New(Expr::Kind::kAttr, at);
        if (Peek().kind == Kind::kInt) {
          a->kind = Expr::Kind::kItem;
          a->args.push_back(std::move(e));
          ExprPtr idx = New(Expr::Kind::kLiteral, Peek());
          int64_t index = 0;
          if (!absl::SimpleAtoi(Peek().text, &index)) return ErrorAt(Peek(), "index out of range");
          Next();
          idx->literal = Value::Int(index);
          a->args.push_back(std::move(idx));
        } else {
          ORCA_ASSIGN_OR_RETURN(a->name, ExpectName());
          a->args.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (IsOp("[")) {
        const Token& at = Next();
        std::vector<ExprPtr> parts(3);
        int colons = 0;
        while (!IsOp("]")) {
          if (IsOp(":")) {
            if (++colons > 2) return ErrorAt(Peek(), "too many ':' in slice");
            ++i_;
            continue;
          }
          if (parts[colons] != nullptr) return ErrorAt(Peek(), "expected ']' or ':' in subscript");
          ORCA_ASSIGN_OR_RETURN(parts[colons], ParseExpr());
        }
        ++i_;
        if (colons == 0) {
          if (parts[0] == nullptr) return ErrorAt(at, "empty subscript");
          ExprPtr item = New(Expr::Kind::kItem, at);
          item->args.push_back(std::move(e));
          item->args.push_back(std::move(parts[0]));
          e = std::move(item);
        } else {
          ExprPtr slice = New(Expr::Kind::kSlice, at);
          slice->args.push_back(std::move(e));
          for (auto& p : parts) slice->args.push_back(std::move(p));
          e = std::move(slice);
        }
      } else if (IsOp("(")) {
        ExprPtr call = New(Expr::Kind::kCall, Peek());
        call->pos = e->pos;  // errors point at the callee
        call->args.push_back(std::move(e));
        ORCA_RETURN_IF_ERROR(ParseCallArgs(call.get()));
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& at = Peek();
    // Bounded nesting keeps hostile templates from exhausting the stack.
    if (++depth_ > kMaxNesting) return ErrorAt(at, "expression nested too deeply");
    struct Exit {
      int& d;
      ~Exit() { --d; }
    } exit{depth_};
    switch (at.kind) {
      case Kind::kString: {
        ExprPtr e = New(Expr::Kind::kLiteral, at);
        std::string s;
        while (Peek().kind == Kind::kString) s += Next().text;  // adjacent literals concatenate
        e->literal = Value::String(std::move(s));
        return e;
      }
      case Kind::kInt: {
        ExprPtr e = New(Expr::Kind::kLiteral, Next());
        errno = 0;
        long long v = std::strtoll(at.text.c_str(), nullptr, 10);
        if (errno == ERANGE) return ErrorAt(at, "integer literal out of range");
        e->literal = Value::Int(v);
        return e;
      }
      case Kind::kFloat: {
        ExprPtr e = New(Expr::Kind::kLiteral, Next());
        e->literal = Value::Float(std::strtod(at.text.c_str(), nullptr));
        return e;
      }
      case Kind::kName: {
        ++i_;
        ExprPtr e = New(Expr::Kind::kLiteral, at);
        if (at.text == "true" || at.text == "True") {
          e->literal = Value::Bool(true);
        } else if (at.text == "false" || at.text == "False") {
          e->literal = Value::Bool(false);
        } else if (at.text == "none" || at.text == "None") {
          e->literal = Value::None();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = at.text;
        }
        return e;
      }
      case Kind::kOp:
        if (at.text == "(") {
          ++i_;
          if (IsOp(")")) {
            ++i_;
            return New(Expr::Kind::kTuple, at);
          }
          ORCA_ASSIGN_OR_RETURN(ExprPtr inner, ParseTupleOrExpr());
          ORCA_RETURN_IF_ERROR(ExpectOp(")"));
          return inner;
        }
        if (at.text == "[") {
          ++i_;
          ExprPtr e = New(Expr::Kind::kList, at);
          while (!IsOp("]")) {
            ORCA_ASSIGN_OR_RETURN(ExprPtr item, ParseExpr());
            e->args.push_back(std::move(item));
            if (!IsOp(",")) break;
            ++i_;
          }
          ORCA_RETURN_IF_ERROR(ExpectOp("]"));
          return e;
        }
        if (at.text == "{") {
          ++i_;
          ExprPtr e = New(Expr::Kind::kDict, at);
          while (!IsOp("}")) {
            ORCA_ASSIGN_OR_RETURN(ExprPtr key, ParseExpr());
            ORCA_RETURN_IF_ERROR(ExpectOp(":"));
            ORCA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpr());
            e->args.push_back(std::move(key));
            e->args.push_back(std::move(value));
            if (!IsOp(",")) break;
            ++i_;
          }
          ORCA_RETURN_IF_ERROR(ExpectOp("}"));
          return e;
        }
        break;
      default:
        break;
    }
    return ErrorAt(at, "expected an expression, found " + Describe(at));
  }

  // Blocks, parentheses and chain links together bound the syntax tree's
  // height, so one template evaluates within RenderBudget::max_eval_depth
  // unless macros recurse (which the budget then stops).
  static constexpr int kMaxNesting = 256;
  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

absl::StatusOr<Program> Parse(std::string_view source) {
  ORCA_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source));
  return Parser(std::move(tokens)).ParseProgram();
}

}  // namespace orca::text::jinja
