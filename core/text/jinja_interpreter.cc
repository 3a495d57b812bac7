#include "core/text/jinja_interpreter.h"

#include <cmath>
#include <ctime>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/text/unicode.h"

namespace orca::text::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };
using Scope = absl::flat_hash_map<std::string, Value>;

absl::Status ErrorAt(const Position& pos, std::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("line ", pos.line, ", column ", pos.column, ": ", std::string(msg)));
}

// Keeps a status that already carries a position; adds `pos` otherwise.
absl::Status WithPosition(const absl::Status& s, const Position& pos) {
  if (s.ok() || absl::StartsWith(std::string(s.message()), "line ")) return s;
  return ErrorAt(pos, std::string(s.message()));
}

Value Builtin(Function f) { return Value::MakeFunction(std::move(f)); }

class Interpreter {
 public:
  explicit Interpreter(const Value::Dict& globals) {
    scopes_.emplace_back();
    for (const auto& [k, v] : globals.items) scopes_.back()[k] = v;
    Scope& g = scopes_.back();
    g.try_emplace("range", Builtin(Range));
    g.try_emplace("namespace", Builtin([](const CallArgs& a) -> absl::StatusOr<Value> {
                    Value::Dict d;
                    d.is_namespace = true;
                    for (const auto& [k, v] : a.keyword) d.Set(k, v);
                    return Value::MakeDict(std::move(d));
                  }));
    g.try_emplace("dict", Builtin([](const CallArgs& a) -> absl::StatusOr<Value> {
                    Value::Dict d;
                    for (const auto& [k, v] : a.keyword) d.Set(k, v);
                    return Value::MakeDict(std::move(d));
                  }));
    g.try_emplace("raise_exception", Builtin([](const CallArgs& a) -> absl::StatusOr<Value> {
                    std::string msg =
                        a.positional.empty() ? "template raised an exception" : a.positional[0].ToString();
                    return absl::InvalidArgumentError("template error: " + msg);
                  }));
    g.try_emplace("strftime_now", Builtin([](const CallArgs& a) -> absl::StatusOr<Value> {
                    const Value* fmt = a.Get(0, "format");
                    if (fmt == nullptr || !fmt->IsString())
                      return absl::InvalidArgumentError("strftime_now needs a format string");
                    std::time_t now = std::time(nullptr);
                    std::tm tm{};
                    localtime_r(&now, &tm);
                    char buf[256];
                    size_t n = std::strftime(buf, sizeof(buf), fmt->str().c_str(), &tm);
                    return Value::String(std::string(buf, n));
                  }));
  }

  absl::StatusOr<Flow> ExecBody(const std::vector<std::unique_ptr<Stmt>>& body, std::string* out) {
    for (const auto& stmt : body) {
      ORCA_ASSIGN_OR_RETURN(Flow flow, Exec(*stmt, out));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

 private:
  static absl::StatusOr<Value> Range(const CallArgs& a) {
    int64_t start = 0, stop = 0, step = 1;
    for (const Value& v : a.positional) {
      if (v.type() != Value::Type::kInt) return absl::InvalidArgumentError("range() arguments must be integers");
    }
    if (a.positional.size() == 1) {
      stop = a.positional[0].AsInt();
    } else if (a.positional.size() >= 2) {
      start = a.positional[0].AsInt();
      stop = a.positional[1].AsInt();
      if (a.positional.size() == 3) step = a.positional[2].AsInt();
    } else {
      return absl::InvalidArgumentError("range() takes 1 to 3 arguments");
    }
    if (step == 0) return absl::InvalidArgumentError("range() step must not be zero");
    Value::List items;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (items.size() >= 1000000) return absl::InvalidArgumentError("range() larger than 1000000 items");
      items.push_back(Value::Int(i));
    }
    return Value::MakeList(std::move(items));
  }

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return Value();
  }

  absl::Status Assign(const Stmt& s, const Value& value) {
    if (!s.attr.empty()) {
      Value target = Lookup(s.targets[0]);
      if (!target.IsDict() || !target.dict().is_namespace) {
        return ErrorAt(s.pos,
                       "cannot set attribute '" + s.attr + "' of '" + s.targets[0] + "', which is not a namespace()");
      }
      target.dict().Set(s.attr, value);
      return absl::OkStatus();
    }
    if (s.targets.size() == 1) {
      scopes_.back()[s.targets[0]] = value;
      return absl::OkStatus();
    }
    ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
    if (items.size() != s.targets.size()) {
      return ErrorAt(s.pos, absl::StrCat("cannot unpack ", items.size(), " values into ", s.targets.size(), " names"));
    }
    for (size_t i = 0; i < items.size(); ++i) scopes_.back()[s.targets[i]] = items[i];
    return absl::OkStatus();
  }

  absl::StatusOr<Flow> Exec(const Stmt& s, std::string* out) {
    switch (s.kind) {
      case Stmt::Kind::kText:
        *out += s.text;
        return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        ORCA_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
        *out += v.ToString();
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches) {
          ORCA_ASSIGN_OR_RETURN(Value c, Eval(*cond));
          if (c.Truthy()) return ExecBody(body, out);
        }
        return ExecBody(s.else_body, out);
      case Stmt::Kind::kFor:
        return ExecFor(s, out);
      case Stmt::Kind::kSet: {
        ORCA_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
        ORCA_RETURN_IF_ERROR(Assign(s, v));
        return Flow::kNormal;
      }
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        ORCA_RETURN_IF_ERROR(ExecBody(s.body, &captured).status());
        ORCA_RETURN_IF_ERROR(Assign(s, Value::String(std::move(captured))));
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        scopes_.back()[s.targets[0]] = MakeMacro(s);
        return Flow::kNormal;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Value MakeMacro(const Stmt& s) {
    const Stmt* macro = &s;
    return Value::MakeFunction([this, macro](const CallArgs& args) -> absl::StatusOr<Value> {
      if (scopes_.size() > kMaxCallDepth) return ErrorAt(macro->pos, "macro calls nested too deeply");
      Scope locals;
      for (size_t i = 0; i < macro->params.size(); ++i) {
        const auto& [name, def] = macro->params[i];
        const Value* v = args.Get(i, name);
        if (v != nullptr) {
          locals[name] = *v;
        } else if (def != nullptr) {
          ORCA_ASSIGN_OR_RETURN(locals[name], Eval(*def));
        } else {
          locals[name] = Value();
        }
      }
      scopes_.push_back(std::move(locals));
      std::string out;
      absl::StatusOr<Flow> flow = ExecBody(macro->body, &out);
      scopes_.pop_back();
      ORCA_RETURN_IF_ERROR(flow.status());
      return Value::String(std::move(out));
    });
  }

  absl::StatusOr<Flow> ExecFor(const Stmt& s, std::string* out) {
    ORCA_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr));
    absl::StatusOr<std::vector<Value>> all = Iterate(iterable);
    if (!all.ok()) return WithPosition(all.status(), s.expr->pos);
    std::vector<Value> items;
    scopes_.emplace_back();
    for (Value& item : *all) {
      if (s.filter != nullptr) {
        ORCA_RETURN_IF_ERROR(BindTargets(s, item));
        ORCA_ASSIGN_OR_RETURN(Value keep, Eval(*s.filter));
        if (!keep.Truthy()) continue;
      }
      items.push_back(std::move(item));
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      ORCA_RETURN_IF_ERROR(BindTargets(s, items[i]));
      Value::Dict loop;
      loop.Set("index", Value::Int(i + 1));
      loop.Set("index0", Value::Int(i));
      loop.Set("revindex", Value::Int(n - i));
      loop.Set("revindex0", Value::Int(n - i - 1));
      loop.Set("first", Value::Bool(i == 0));
      loop.Set("last", Value::Bool(i == n - 1));
      loop.Set("length", Value::Int(n));
      loop.Set("previtem", i > 0 ? items[i - 1] : Value());
      loop.Set("nextitem", i + 1 < n ? items[i + 1] : Value());
      loop.Set("cycle", Builtin([i](const CallArgs& a) -> absl::StatusOr<Value> {
                 if (a.positional.empty()) return absl::InvalidArgumentError("loop.cycle needs arguments");
                 return a.positional[static_cast<size_t>(i) % a.positional.size()];
               }));
      scopes_.back()["loop"] = Value::MakeDict(std::move(loop));
      absl::StatusOr<Flow> flow = ExecBody(s.body, out);
      if (!flow.ok()) {
        scopes_.pop_back();
        return flow.status();
      }
      if (*flow == Flow::kBreak) break;
    }
    scopes_.pop_back();
    if (n == 0) return ExecBody(s.else_body, out);
    return Flow::kNormal;
  }

  absl::Status BindTargets(const Stmt& s, const Value& item) {
    if (s.targets.size() == 1) {
      scopes_.back()[s.targets[0]] = item;
      return absl::OkStatus();
    }
    absl::StatusOr<std::vector<Value>> parts = Iterate(item);
    if (!parts.ok() || parts->size() != s.targets.size()) {
      return ErrorAt(s.pos,
                     absl::StrCat("cannot unpack a ", item.TypeName(), " into ", s.targets.size(), " loop variables"));
    }
    for (size_t i = 0; i < parts->size(); ++i) scopes_.back()[s.targets[i]] = (*parts)[i];
    return absl::OkStatus();
  }

  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t skip) {
    CallArgs args;
    for (size_t i = skip; i < e.args.size(); ++i) {
      ORCA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i]));
      args.positional.push_back(std::move(v));
    }
    for (const auto& [k, ex] : e.kwargs) {
      ORCA_ASSIGN_OR_RETURN(Value v, Eval(*ex));
      args.keyword.emplace_back(k, std::move(v));
    }
    return args;
  }

  absl::StatusOr<Value> Eval(const Expr& e) {
    absl::StatusOr<Value> v = EvalInner(e);
    if (!v.ok()) return WithPosition(v.status(), e.pos);
    return v;
  }

  absl::StatusOr<Value> EvalInner(const Expr& e);
  absl::StatusOr<Value> EvalBinary(const Expr& e);
  absl::StatusOr<Value> EvalItem(const Value& obj, const Value& key);
  absl::StatusOr<Value> EvalSlice(const Expr& e);
  absl::StatusOr<Value> EvalCall(const Expr& e);
  absl::StatusOr<Value> EvalCollection(const Expr& e);

  static constexpr size_t kMaxCallDepth = 100;
  std::vector<Scope> scopes_;
};

absl::StatusOr<Value> Interpreter::EvalItem(const Value& obj, const Value& key) {
  if (obj.IsDict()) {
    const Value* v = obj.dict().Find(key.ToString());
    return v != nullptr ? *v : Value();
  }
  if ((obj.IsList() || obj.IsString()) && (key.type() == Value::Type::kInt || key.type() == Value::Type::kBool)) {
    std::vector<Value> items;
    if (obj.IsString()) {
      ORCA_ASSIGN_OR_RETURN(items, Iterate(obj));
    }
    const std::vector<Value>& seq = obj.IsList() ? obj.list() : items;
    int64_t i = key.AsInt();
    if (i < 0) i += static_cast<int64_t>(seq.size());
    if (i < 0 || i >= static_cast<int64_t>(seq.size())) return Value();
    return seq[static_cast<size_t>(i)];
  }
  if (obj.IsUndefined() || obj.IsNone()) return Value();
  return absl::InvalidArgumentError(absl::StrCat("cannot index a ", obj.TypeName(), " with a ", key.TypeName()));
}

absl::StatusOr<Value> Interpreter::EvalSlice(const Expr& e) {
  ORCA_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
  std::optional<int64_t> bound[3];
  for (int k = 0; k < 3; ++k) {
    if (e.args[k + 1] == nullptr) continue;
    ORCA_ASSIGN_OR_RETURN(Value b, Eval(*e.args[k + 1]));
    if (b.IsNone()) continue;
    if (b.type() != Value::Type::kInt) return absl::InvalidArgumentError("slice indices must be integers");
    bound[k] = b.AsInt();
  }
  if (!obj.IsList() && !obj.IsString()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot slice a ", obj.TypeName()));
  }
  ORCA_ASSIGN_OR_RETURN(std::vector<Value> seq, Iterate(obj));
  const int64_t n = static_cast<int64_t>(seq.size());
  const int64_t step = bound[2].value_or(1);
  if (step == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> b, int64_t def) {
    if (!b) return def;
    int64_t v = *b < 0 ? *b + n : *b;
    return step > 0 ? std::clamp<int64_t>(v, 0, n) : std::clamp<int64_t>(v, -1, n - 1);
  };
  int64_t start = clamp(bound[0], step > 0 ? 0 : n - 1);
  int64_t stop = clamp(bound[1], step > 0 ? n : -1);
  Value::List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(seq[static_cast<size_t>(i)]);
  if (obj.IsString()) {
    std::string s;
    for (const Value& c : out) s += c.str();
    return Value::String(std::move(s));
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Interpreter::EvalCollection(const Expr& e) {
  if (e.kind == Expr::Kind::kDict) {
    Value::Dict d;
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      ORCA_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i]));
      ORCA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
      d.Set(k.ToString(), std::move(v));
    }
    return Value::MakeDict(std::move(d));
  }
  Value::List items;
  for (const auto& a : e.args) {
    ORCA_ASSIGN_OR_RETURN(Value v, Eval(*a));
    items.push_back(std::move(v));
  }
  return Value::MakeList(std::move(items));
}

// `obj.method(...)` calls a str/list/dict method (or a function stored in a
// dict); anything else must evaluate to a function.
absl::StatusOr<Value> Interpreter::EvalCall(const Expr& e) {
  const Expr& callee = *e.args[0];
  ORCA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
  if (callee.kind == Expr::Kind::kAttr) {
    ORCA_ASSIGN_OR_RETURN(Value obj, Eval(*callee.args[0]));
    absl::StatusOr<Value> r = CallMethod(obj, callee.name, args);
    if (r.ok() || !absl::IsNotFound(r.status())) return r;
    const Value* member = obj.IsDict() ? obj.dict().Find(callee.name) : nullptr;
    if (member == nullptr || member->type() != Value::Type::kFunction) {
      return absl::InvalidArgumentError(absl::StrCat(obj.TypeName(), " has no method '", callee.name, "'"));
    }
    return member->function()(args);
  }
  ORCA_ASSIGN_OR_RETURN(Value fn, Eval(callee));
  if (fn.type() != Value::Type::kFunction) {
    return absl::InvalidArgumentError(callee.kind == Expr::Kind::kName ? "'" + callee.name + "' is not callable"
                                                                       : "value is not callable");
  }
  return fn.function()(args);
}

absl::StatusOr<Value> Interpreter::EvalInner(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName:
      return Lookup(e.name);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple:
    case Expr::Kind::kDict:
      return EvalCollection(e);
    case Expr::Kind::kAttr: {
      ORCA_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
      if (obj.IsDict()) {
        const Value* v = obj.dict().Find(e.name);
        return v != nullptr ? *v : Value();
      }
      return Value();
    }
    case Expr::Kind::kItem: {
      ORCA_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
      ORCA_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1]));
      return EvalItem(obj, key);
    }
    case Expr::Kind::kSlice:
      return EvalSlice(e);
    case Expr::Kind::kCall:
      return EvalCall(e);
    case Expr::Kind::kFilter: {
      ORCA_ASSIGN_OR_RETURN(Value target, Eval(*e.args[0]));
      ORCA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      absl::StatusOr<Value> r = ApplyFilter(e.name, target, args);
      if (absl::IsNotFound(r.status())) return ErrorAt(e.pos, "unknown filter '" + e.name + "'");
      return r;
    }
    case Expr::Kind::kTest: {
      ORCA_ASSIGN_OR_RETURN(Value target, Eval(*e.args[0]));
      ORCA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      absl::StatusOr<bool> r = ApplyTest(e.name, target, args);
      if (absl::IsNotFound(r.status())) return ErrorAt(e.pos, "unknown test '" + e.name + "'");
      ORCA_RETURN_IF_ERROR(r.status());
      return Value::Bool(*r != e.negated);
    }
    case Expr::Kind::kUnary: {
      ORCA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
      if (!v.IsNumber())
        return absl::InvalidArgumentError(absl::StrCat("bad operand type for unary ", e.name, ": ", v.TypeName()));
      if (e.name == "+") return v;
      return v.type() == Value::Type::kFloat ? Value::Float(-v.AsFloat()) : Value::Int(-v.AsInt());
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e);
    case Expr::Kind::kAnd: {
      ORCA_ASSIGN_OR_RETURN(Value l, Eval(*e.args[0]));
      if (!l.Truthy()) return l;
      return Eval(*e.args[1]);
    }
    case Expr::Kind::kOr: {
      ORCA_ASSIGN_OR_RETURN(Value l, Eval(*e.args[0]));
      if (l.Truthy()) return l;
      return Eval(*e.args[1]);
    }
    case Expr::Kind::kNot: {
      ORCA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
      return Value::Bool(!v.Truthy());
    }
    case Expr::Kind::kTernary: {
      ORCA_ASSIGN_OR_RETURN(Value c, Eval(*e.args[0]));
      return Eval(*e.args[c.Truthy() ? 1 : 2]);
    }
  }
  return Value();
}

namespace {

// `needle in haystack`: a substring, a list element or a dict key; undefined and none contain nothing.
absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle) {
  const Value& r = haystack;
  const Value& l = needle;
  bool found = false;
  if (r.IsString()) {
    if (!l.IsString()) return absl::InvalidArgumentError("'in <string>' requires a string on the left");
    found = r.str().find(l.str()) != std::string::npos;
  } else if (r.IsList()) {
    for (const Value& x : r.list()) found = found || x.Equals(l);
  } else if (r.IsDict()) {
    found = r.dict().Find(l.ToString()) != nullptr;
  } else if (!r.IsUndefined() && !r.IsNone()) {
    return absl::InvalidArgumentError(absl::StrCat("argument of type ", r.TypeName(), " is not iterable"));
  }
  return found;
}

// + - * / // % ** on two numbers, with Python's floored division and modulo; anything else names the operand types.
absl::StatusOr<Value> NumericBinary(const std::string& op, const Value& l, const Value& r) {
  if (!l.IsNumber() || !r.IsNumber()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported operand types for ", op, ": '", l.TypeName(), "' and '", r.TypeName(), "'"));
  }
  const bool is_float = l.type() == Value::Type::kFloat || r.type() == Value::Type::kFloat;
  const double a = l.AsFloat(), b = r.AsFloat();
  const int64_t x = l.AsInt(), y = r.AsInt();
  if ((op == "/" || op == "//" || op == "%") && b == 0) return absl::InvalidArgumentError("division by zero");
  if (op == "+") return is_float ? Value::Float(a + b) : Value::Int(x + y);
  if (op == "-") return is_float ? Value::Float(a - b) : Value::Int(x - y);
  if (op == "*") return is_float ? Value::Float(a * b) : Value::Int(x * y);
  if (op == "/") return Value::Float(a / b);
  if (op == "//") {
    if (is_float) return Value::Float(std::floor(a / b));
    int64_t q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return Value::Int(q);
  }
  if (op == "%") {
    if (is_float) return Value::Float(a - b * std::floor(a / b));
    int64_t m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::Int(m);
  }
  if (op == "**") {
    if (!is_float && y >= 0) {
      int64_t result = 1;
      for (int64_t i = 0; i < y && i < 64; ++i) result *= x;
      return Value::Int(result);
    }
    return Value::Float(std::pow(a, b));
  }
  return absl::InvalidArgumentError("unknown operator " + op);
}

}  // namespace

absl::StatusOr<Value> Interpreter::EvalBinary(const Expr& e) {
  ORCA_ASSIGN_OR_RETURN(Value l, Eval(*e.args[0]));
  ORCA_ASSIGN_OR_RETURN(Value r, Eval(*e.args[1]));
  const std::string& op = e.name;
  if (op == "==") return Value::Bool(l.Equals(r));
  if (op == "!=") return Value::Bool(!l.Equals(r));
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    ORCA_ASSIGN_OR_RETURN(int c, Compare(l, r));
    if (op == "<") return Value::Bool(c < 0);
    if (op == "<=") return Value::Bool(c <= 0);
    if (op == ">") return Value::Bool(c > 0);
    return Value::Bool(c >= 0);
  }
  if (op == "in" || op == "not in") {
    ORCA_ASSIGN_OR_RETURN(const bool found, Contains(r, l));
    return Value::Bool(found == (op == "in"));
  }
  if (op == "~") return Value::String(l.ToString() + r.ToString());
  if (op == "+") {
    if (l.IsString() && r.IsString()) return Value::String(l.str() + r.str());
    if (l.IsList() && r.IsList()) {
      Value::List items = l.list();
      items.insert(items.end(), r.list().begin(), r.list().end());
      return Value::MakeList(std::move(items));
    }
  }
  if (op == "*" && (l.IsString() || l.IsList()) && r.type() == Value::Type::kInt) {
    if (l.IsString()) {
      std::string s;
      for (int64_t i = 0; i < r.AsInt() && s.size() < (1u << 24); ++i) s += l.str();
      return Value::String(std::move(s));
    }
    Value::List items;
    for (int64_t i = 0; i < r.AsInt() && items.size() < (1u << 20); ++i)
      items.insert(items.end(), l.list().begin(), l.list().end());
    return Value::MakeList(std::move(items));
  }
  return NumericBinary(op, l, r);
}

}  // namespace

absl::StatusOr<std::string> Render(const Program& program, const Value::Dict& globals) {
  Interpreter interpreter(globals);
  std::string out;
  ORCA_RETURN_IF_ERROR(interpreter.ExecBody(program, &out).status());
  return out;
}

}  // namespace orca::text::jinja
