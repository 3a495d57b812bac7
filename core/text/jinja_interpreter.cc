#include "core/text/jinja_interpreter.h"

#include <algorithm>
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
  if (s.ok() || absl::StartsWith(s.message(), "line ")) return s;
  return ErrorAt(pos, std::string(s.message()));
}

Value Builtin(Function f) { return Value::MakeFunction(std::move(f)); }

absl::StatusOr<Value> StrftimeNow(const CallArgs& a) {
  const Value* fmt = a.Get(0, "format");
  if (fmt == nullptr || !fmt->IsString()) return absl::InvalidArgumentError("strftime_now needs a format string");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  size_t n = std::strftime(buf, sizeof(buf), fmt->str().c_str(), &tm);
  return Value::String(std::string(buf, n));
}

class Interpreter {
 public:
  Interpreter(const Value::Dict& globals, Sandbox& sb, const std::string* top_output) : sb_(sb), top_(top_output) {
    scopes_.emplace_back();
    for (const auto& [k, v] : globals.items) scopes_.back()[k] = v;
    Scope& g = scopes_.back();
    g.try_emplace("range", Builtin([this](const CallArgs& a) { return Range(a); }));
    g.try_emplace("namespace", Builtin([this](const CallArgs& a) { return MakeDict(a, /*is_namespace=*/true); }));
    g.try_emplace("dict", Builtin([this](const CallArgs& a) { return MakeDict(a, /*is_namespace=*/false); }));
    g.try_emplace("raise_exception", Builtin([this](const CallArgs& a) -> absl::StatusOr<Value> {
                    if (a.positional.empty()) return absl::InvalidArgumentError("template error: template raised an exception");
                    ORCA_ASSIGN_OR_RETURN(std::string msg, sb_.Str(a.positional[0]));
                    return absl::InvalidArgumentError("template error: " + msg);
                  }));
    g.try_emplace("strftime_now", Builtin(StrftimeNow));
  }

  absl::StatusOr<Flow> ExecBody(const std::vector<std::unique_ptr<Stmt>>& body, std::string* out) {
    for (const auto& stmt : body) {
      absl::StatusOr<Flow> flow = Exec(*stmt, out);
      if (!flow.ok()) return WithPosition(flow.status(), stmt->pos);
      if (*flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

 private:
  absl::StatusOr<Value> Range(const CallArgs& a) {
    int64_t start = 0, stop = 0, step = 1;
    for (const Value& v : a.positional) {
      if (v.type() != Value::Type::kInt) return absl::InvalidArgumentError("range() arguments must be integers");
    }
    if (a.positional.size() == 1) {
      stop = a.positional[0].AsInt();
    } else if (a.positional.size() == 2 || a.positional.size() == 3) {
      start = a.positional[0].AsInt();
      stop = a.positional[1].AsInt();
      if (a.positional.size() == 3) step = a.positional[2].AsInt();
    } else {
      return absl::InvalidArgumentError("range() takes 1 to 3 arguments");
    }
    if (step == 0) return absl::InvalidArgumentError("range() step must not be zero");
    const uint64_t n = RangeLength(start, stop, step);
    if (n > static_cast<uint64_t>(sb_.budget().max_items)) {
      return absl::InvalidArgumentError(
          absl::StrCat("range() of ", n, " items exceeds max_items (", sb_.budget().max_items, ")"));
    }
    ORCA_RETURN_IF_ERROR(sb_.ChargeItems(static_cast<size_t>(n)));
    Value::List items;
    items.reserve(static_cast<size_t>(n));
    // start + k*step lies between start and stop for k < n; k*step alone may not fit in 64 bits.
    for (uint64_t k = 0; k < n; ++k) {
      items.push_back(Value::Int(static_cast<int64_t>(start + static_cast<__int128>(k) * step)));
    }
    return Value::MakeList(std::move(items));
  }

  absl::StatusOr<Value> MakeDict(const CallArgs& a, bool is_namespace) {
    ORCA_RETURN_IF_ERROR(sb_.ChargeItems(a.keyword.size()));
    Value::Dict d;
    d.is_namespace = is_namespace;
    for (const auto& [k, v] : a.keyword) d.Set(k, v);
    Value out = Value::MakeDict(std::move(d));
    ORCA_RETURN_IF_ERROR(sb_.CheckDepth(out));
    return out;
  }

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return Value();
  }

  // Appends to the prompt (bounded by max_output_bytes) or to a captured
  // block's text (a string: max_string_bytes).
  absl::Status Emit(std::string* out, std::string_view text) {
    const size_t size = out->size() + text.size();
    if (out == top_) {
      ORCA_RETURN_IF_ERROR(sb_.CheckOutput(size));
    } else if (size > static_cast<uint64_t>(sb_.budget().max_string_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("a captured block of ", size, " bytes exceeds max_string_bytes (",
                                                     sb_.budget().max_string_bytes, ")"));
    }
    out->append(text);
    return absl::OkStatus();
  }

  absl::Status Assign(const Stmt& s, const Value& value) {
    if (!s.attr.empty()) {
      Value target = Lookup(s.targets[0]);
      if (!target.IsDict() || !target.dict().is_namespace) {
        return ErrorAt(s.pos,
                       "cannot set attribute '" + s.attr + "' of '" + s.targets[0] + "', which is not a namespace()");
      }
      if (value.depth() + 1 > sb_.budget().max_value_depth) return sb_.DepthError();
      sb_.NoteMutated(target);
      target.dict().Set(s.attr, value);
      return absl::OkStatus();
    }
    if (s.targets.size() == 1) {
      scopes_.back()[s.targets[0]] = value;
      return absl::OkStatus();
    }
    ORCA_ASSIGN_OR_RETURN(std::vector<Value> items, sb_.Iterate(value));
    if (items.size() != s.targets.size()) {
      return ErrorAt(s.pos, absl::StrCat("cannot unpack ", items.size(), " values into ", s.targets.size(), " names"));
    }
    for (size_t i = 0; i < items.size(); ++i) scopes_.back()[s.targets[i]] = items[i];
    return absl::OkStatus();
  }

  absl::StatusOr<Flow> Exec(const Stmt& s, std::string* out) {
    ORCA_RETURN_IF_ERROR(sb_.Step());
    switch (s.kind) {
      case Stmt::Kind::kText:
        ORCA_RETURN_IF_ERROR(Emit(out, s.text));
        return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        ORCA_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
        if (v.IsString()) {
          ORCA_RETURN_IF_ERROR(Emit(out, v.str()));
        } else {
          ORCA_ASSIGN_OR_RETURN(std::string text, sb_.Str(v));
          ORCA_RETURN_IF_ERROR(Emit(out, text));
        }
        return Flow::kNormal;
      }
      case Stmt::Kind::kSet: {
        ORCA_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
        ORCA_RETURN_IF_ERROR(Assign(s, v));
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        scopes_.back()[s.targets[0]] = MakeMacro(s);
        return Flow::kNormal;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
      default:
        break;
    }
    // Blocks: one level of nesting each.
    DepthScope depth(sb_);
    ORCA_RETURN_IF_ERROR(depth.status());
    switch (s.kind) {
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches) {
          ORCA_ASSIGN_OR_RETURN(Value c, Eval(*cond));
          if (c.Truthy()) return ExecBody(body, out);
        }
        return ExecBody(s.else_body, out);
      case Stmt::Kind::kFor:
        return ExecFor(s, out);
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        ORCA_RETURN_IF_ERROR(ExecBody(s.body, &captured).status());
        ORCA_RETURN_IF_ERROR(sb_.ChargeString(captured.size()));
        ORCA_RETURN_IF_ERROR(Assign(s, Value::String(std::move(captured))));
        return Flow::kNormal;
      }
      default:
        return Flow::kNormal;
    }
  }

  Value MakeMacro(const Stmt& s) {
    const Stmt* macro = &s;
    return Value::MakeFunction([this, macro](const CallArgs& args) -> absl::StatusOr<Value> {
      if (call_depth_ >= sb_.budget().max_call_depth) {
        return ErrorAt(macro->pos, absl::StrCat("macro '", macro->targets[0],
                                                "' calls nested deeper than max_call_depth (",
                                                sb_.budget().max_call_depth, ")"));
      }
      DepthScope depth(sb_);
      ORCA_RETURN_IF_ERROR(depth.status());
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
      ++call_depth_;
      std::string out;
      absl::StatusOr<Flow> flow = ExecBody(macro->body, &out);
      --call_depth_;
      scopes_.pop_back();
      ORCA_RETURN_IF_ERROR(flow.status());
      ORCA_RETURN_IF_ERROR(sb_.ChargeString(out.size()));
      return Value::String(std::move(out));
    });
  }

  absl::StatusOr<Flow> ExecFor(const Stmt& s, std::string* out) {
    ORCA_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr));
    // A list is walked in place (`iterable` keeps it alive; appends made by the
    // body are not visited); anything else, or a filtered loop, gets its own
    // sequence, counted against the budget.
    std::vector<Value> owned;
    if (!iterable.IsList() || s.filter != nullptr) {
      absl::StatusOr<std::vector<Value>> all = sb_.Iterate(iterable);
      if (!all.ok()) return WithPosition(all.status(), s.expr->pos);
      owned = *std::move(all);
    }
    scopes_.emplace_back();
    absl::StatusOr<Flow> result = RunLoop(s, iterable.IsList() && s.filter == nullptr ? iterable.list() : owned, out);
    scopes_.pop_back();
    return result;
  }

  absl::StatusOr<Flow> RunLoop(const Stmt& s, std::vector<Value>& items, std::string* out) {
    if (s.filter != nullptr) {  // `for x in xs if cond`: loop.* counts the kept items
      size_t kept = 0;
      for (Value& item : items) {
        ORCA_RETURN_IF_ERROR(sb_.Step());
        ORCA_RETURN_IF_ERROR(BindTargets(s, item));
        ORCA_ASSIGN_OR_RETURN(Value keep, Eval(*s.filter));
        if (keep.Truthy()) items[kept++] = std::move(item);
      }
      items.resize(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    // One `loop` object per loop, updated in place each iteration (as Jinja's
    // LoopContext is): no allocation per iteration.
    auto index = std::make_shared<int64_t>(0);
    Value::Dict fields;
    for (const char* key : {"index", "index0", "revindex", "revindex0", "first", "last", "length", "previtem",
                            "nextitem"}) {
      fields.items.emplace_back(key, Value());
    }
    fields.items.emplace_back("cycle", Builtin([index](const CallArgs& a) -> absl::StatusOr<Value> {
                                if (a.positional.empty()) return absl::InvalidArgumentError("loop.cycle needs arguments");
                                return a.positional[static_cast<size_t>(*index) % a.positional.size()];
                              }));
    Value loop = Value::MakeDict(std::move(fields));
    sb_.NoteMutated(loop);  // emptied at the end: previtem may come to hold the loop itself
    scopes_.back()["loop"] = loop;
    auto& f = loop.dict().items;
    for (int64_t i = 0; i < n && i < static_cast<int64_t>(items.size()); ++i) {
      ORCA_RETURN_IF_ERROR(sb_.Step());
      ORCA_RETURN_IF_ERROR(BindTargets(s, items[i]));
      *index = i;
      f[0].second = Value::Int(i + 1);
      f[1].second = Value::Int(i);
      f[2].second = Value::Int(n - i);
      f[3].second = Value::Int(n - i - 1);
      f[4].second = Value::Bool(i == 0);
      f[5].second = Value::Bool(i == n - 1);
      f[6].second = Value::Int(n);
      f[7].second = i > 0 ? items[i - 1] : Value();
      f[8].second = i + 1 < n ? items[i + 1] : Value();
      ORCA_ASSIGN_OR_RETURN(Flow flow, ExecBody(s.body, out));
      if (flow == Flow::kBreak) break;
    }
    if (n == 0) return ExecBody(s.else_body, out);
    return Flow::kNormal;
  }

  absl::Status BindTargets(const Stmt& s, const Value& item) {
    if (s.targets.size() == 1) {
      scopes_.back()[s.targets[0]] = item;
      return absl::OkStatus();
    }
    absl::StatusOr<std::vector<Value>> parts = sb_.Iterate(item);
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

 public:
  absl::StatusOr<Value> Eval(const Expr& e) {
    absl::StatusOr<Value> v = EvalBounded(e);
    if (!v.ok()) return WithPosition(v.status(), e.pos);
    return v;
  }

 private:
  absl::StatusOr<Value> EvalBounded(const Expr& e) {
    ORCA_RETURN_IF_ERROR(sb_.Step());
    DepthScope depth(sb_);
    ORCA_RETURN_IF_ERROR(depth.status());
    ORCA_ASSIGN_OR_RETURN(Value v, EvalInner(e));
    ORCA_RETURN_IF_ERROR(sb_.CheckDepth(v));
    return v;
  }

  absl::StatusOr<Value> EvalInner(const Expr& e);
  absl::StatusOr<Value> EvalBinary(const Expr& e);
  absl::StatusOr<Value> EvalItem(const Value& obj, const Value& key);
  absl::StatusOr<Value> CharAt(const std::string& s, int64_t i);
  absl::StatusOr<Value> EvalSlice(const Expr& e);
  absl::StatusOr<Value> EvalCall(const Expr& e);
  absl::StatusOr<Value> EvalCollection(const Expr& e);
  absl::StatusOr<Value> EvalUnary(const Expr& e);
  absl::StatusOr<Value> EvalConcatOrRepeat(const std::string& op, const Value& l, const Value& r);

  Sandbox& sb_;
  const std::string* top_;  // the prompt being rendered (vs. a captured block)
  std::vector<Scope> scopes_;
  int call_depth_ = 0;
};

// `s[i]`: the i-th code point (undefined when out of range), without decoding
// the whole text when it is valid UTF-8.
absl::StatusOr<Value> Interpreter::CharAt(const std::string& s, int64_t i) {
  ORCA_RETURN_IF_ERROR(sb_.Scan(s.size()));
  auto is_lead = [&](size_t k) { return (static_cast<unsigned char>(s[k]) & 0xC0) != 0x80; };
  if (!IsValidUtf8(s)) {
    std::vector<char32_t> chars = DecodeUtf8(s);
    const int64_t size = static_cast<int64_t>(chars.size());
    if (i < 0) i += size;
    if (i < 0 || i >= size) return Value();
    return Value::String(EncodeUtf8(chars[static_cast<size_t>(i)]));
  }
  size_t begin = std::string::npos;
  if (i >= 0) {
    for (size_t k = 0, n = 0; k < s.size(); ++k) {
      if (is_lead(k) && n++ == static_cast<uint64_t>(i)) {
        begin = k;
        break;
      }
    }
  } else {
    for (size_t k = s.size(), n = 0; k-- > 0;) {
      if (is_lead(k) && ++n == static_cast<uint64_t>(-(i + 1)) + 1) {
        begin = k;
        break;
      }
    }
  }
  if (begin == std::string::npos) return Value();
  size_t end = begin + 1;
  while (end < s.size() && !is_lead(end)) ++end;
  return Value::String(s.substr(begin, end - begin));
}

absl::StatusOr<Value> Interpreter::EvalItem(const Value& obj, const Value& key) {
  if (obj.IsDict()) {
    ORCA_ASSIGN_OR_RETURN(std::string k, sb_.Str(key));
    ORCA_RETURN_IF_ERROR(sb_.Step(static_cast<int64_t>(obj.dict().items.size() / 16)));  // linear lookup
    const Value* v = obj.dict().Find(k);
    return v != nullptr ? *v : Value();
  }
  if ((obj.IsList() || obj.IsString()) && (key.type() == Value::Type::kInt || key.type() == Value::Type::kBool)) {
    if (obj.IsString()) return CharAt(obj.str(), key.AsInt());
    const int64_t size = static_cast<int64_t>(obj.list().size());
    int64_t i = key.AsInt();
    if (i < 0) i += size;
    if (i < 0 || i >= size) return Value();
    return obj.list()[static_cast<size_t>(i)];
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
  std::vector<char32_t> chars;  // a string's code points (not one Value each)
  if (obj.IsString()) {
    ORCA_RETURN_IF_ERROR(sb_.Scan(obj.str().size()));
    chars = DecodeUtf8(obj.str());
  }
  const int64_t n = static_cast<int64_t>(obj.IsList() ? obj.list().size() : chars.size());
  const int64_t step = bound[2].value_or(1);
  if (step == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> b, int64_t def) {
    if (!b) return def;
    int64_t v = *b < 0 ? *b + n : *b;  // *b < 0 and n >= 0: no overflow
    return step > 0 ? std::clamp<int64_t>(v, 0, n) : std::clamp<int64_t>(v, -1, n - 1);
  };
  const int64_t start = clamp(bound[0], step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(bound[1], step > 0 ? n : -1);
  // Counted first: `i += step` with a huge step would overflow.
  const int64_t count = static_cast<int64_t>(RangeLength(start, stop, step));  // <= n + 1
  if (obj.IsString()) {
    std::string s;
    for (int64_t k = 0; k < count; ++k) AppendUtf8(chars[static_cast<size_t>(start + k * step)], &s);
    ORCA_RETURN_IF_ERROR(sb_.ChargeString(s.size()));
    return Value::String(std::move(s));
  }
  ORCA_RETURN_IF_ERROR(sb_.ChargeItems(static_cast<size_t>(count)));
  Value::List out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) out.push_back(obj.list()[static_cast<size_t>(start + k * step)]);
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> Interpreter::EvalCollection(const Expr& e) {
  if (e.kind == Expr::Kind::kDict) {
    ORCA_RETURN_IF_ERROR(sb_.ChargeItems(e.args.size() / 2));
    Value::Dict d;
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      ORCA_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i]));
      ORCA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
      ORCA_ASSIGN_OR_RETURN(std::string key, sb_.Str(k));
      d.Set(key, std::move(v));
    }
    return Value::MakeDict(std::move(d));
  }
  ORCA_RETURN_IF_ERROR(sb_.ChargeItems(e.args.size()));
  Value::List items;
  items.reserve(e.args.size());
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
    absl::StatusOr<Value> r = CallMethod(obj, callee.name, args, sb_);
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

absl::StatusOr<Value> Interpreter::EvalUnary(const Expr& e) {
  ORCA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
  if (!v.IsNumber()) {
    return absl::InvalidArgumentError(absl::StrCat("bad operand type for unary ", e.name, ": ", v.TypeName()));
  }
  if (e.name == "+") return v;
  if (v.type() == Value::Type::kFloat) return Value::Float(-v.AsFloat());
  ORCA_ASSIGN_OR_RETURN(int64_t negated, CheckedNeg(v.AsInt()));
  return Value::Int(negated);
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
      absl::StatusOr<Value> r = ApplyFilter(e.name, target, args, sb_);
      if (absl::IsNotFound(r.status())) return ErrorAt(e.pos, "unknown filter '" + e.name + "'");
      return r;
    }
    case Expr::Kind::kTest: {
      ORCA_ASSIGN_OR_RETURN(Value target, Eval(*e.args[0]));
      ORCA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      absl::StatusOr<bool> r = ApplyTest(e.name, target, args, sb_);
      if (absl::IsNotFound(r.status())) return ErrorAt(e.pos, "unknown test '" + e.name + "'");
      ORCA_RETURN_IF_ERROR(r.status());
      return Value::Bool(*r != e.negated);
    }
    case Expr::Kind::kUnary:
      return EvalUnary(e);
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

// `needle in haystack`: a substring, a list element or a dict key; undefined and none contain nothing.
absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle, Sandbox& sb) {
  if (haystack.IsString()) {
    if (!needle.IsString()) return absl::InvalidArgumentError("'in <string>' requires a string on the left");
    ORCA_RETURN_IF_ERROR(sb.Scan(haystack.str().size()));
    return haystack.str().find(needle.str()) != std::string::npos;
  }
  if (haystack.IsList()) {
    for (const Value& x : haystack.list()) {
      ORCA_ASSIGN_OR_RETURN(bool same, sb.Equal(x, needle));
      if (same) return true;
    }
    return false;
  }
  if (haystack.IsDict()) {
    ORCA_ASSIGN_OR_RETURN(std::string key, sb.Str(needle));
    ORCA_RETURN_IF_ERROR(sb.Step(static_cast<int64_t>(haystack.dict().items.size() / 16)));
    return haystack.dict().Find(key) != nullptr;
  }
  if (!haystack.IsUndefined() && !haystack.IsNone()) {
    return absl::InvalidArgumentError(absl::StrCat("argument of type ", haystack.TypeName(), " is not iterable"));
  }
  return false;
}

// + - * / // % ** on two numbers, with Python's floored division and modulo and
// integer overflow as an error; anything else names the operand types.
absl::StatusOr<Value> NumericBinary(const std::string& op, const Value& l, const Value& r) {
  if (!l.IsNumber() || !r.IsNumber()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported operand types for ", op, ": '", l.TypeName(), "' and '", r.TypeName(), "'"));
  }
  const bool is_float = l.type() == Value::Type::kFloat || r.type() == Value::Type::kFloat;
  if (is_float || op == "/") {
    const double a = l.AsFloat(), b = r.AsFloat();
    if ((op == "/" || op == "//" || op == "%") && b == 0) return absl::InvalidArgumentError("division by zero");
    if (op == "+") return Value::Float(a + b);
    if (op == "-") return Value::Float(a - b);
    if (op == "*") return Value::Float(a * b);
    if (op == "/") return Value::Float(a / b);
    if (op == "//") return Value::Float(std::floor(a / b));
    if (op == "%") return Value::Float(a - b * std::floor(a / b));
    if (op == "**") return Value::Float(std::pow(a, b));
    return absl::InvalidArgumentError("unknown operator " + op);
  }
  const int64_t x = l.AsInt(), y = r.AsInt();
  absl::StatusOr<int64_t> result = absl::InvalidArgumentError("unknown operator " + op);
  if (op == "+") result = CheckedAdd(x, y);
  if (op == "-") result = CheckedSub(x, y);
  if (op == "*") result = CheckedMul(x, y);
  if (op == "//") result = y == 0 ? absl::InvalidArgumentError("division by zero") : CheckedFloorDiv(x, y);
  if (op == "%") result = y == 0 ? absl::InvalidArgumentError("division by zero") : CheckedFloorMod(x, y);
  if (op == "**") {
    if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
    result = CheckedPow(x, y);
  }
  ORCA_RETURN_IF_ERROR(result.status());
  return Value::Int(*result);
}

// `~`, string and list `+`, and `'ab' * n` / `[x] * n`; sizes are checked
// before anything is built.
absl::StatusOr<Value> Interpreter::EvalConcatOrRepeat(const std::string& op, const Value& l, const Value& r) {
  if (op == "~") {
    ORCA_ASSIGN_OR_RETURN(std::string a, sb_.Str(l));
    ORCA_ASSIGN_OR_RETURN(std::string b, sb_.Str(r));
    ORCA_RETURN_IF_ERROR(sb_.ChargeString(a.size() + b.size()));
    return Value::String(std::move(a) + b);
  }
  if (op == "+" && l.IsString()) {
    ORCA_RETURN_IF_ERROR(sb_.ChargeString(l.str().size() + r.str().size()));
    return Value::String(l.str() + r.str());
  }
  if (op == "+") {
    ORCA_RETURN_IF_ERROR(sb_.ChargeItems(l.list().size() + r.list().size()));
    Value::List items = l.list();
    items.insert(items.end(), r.list().begin(), r.list().end());
    return Value::MakeList(std::move(items));
  }
  const int64_t times = std::max<int64_t>(0, r.AsInt());
  const int64_t unit = static_cast<int64_t>(l.IsString() ? l.str().size() : l.list().size());
  absl::StatusOr<int64_t> total = CheckedMul(unit, times);
  const int64_t limit = l.IsString() ? sb_.budget().max_string_bytes : sb_.budget().max_items;
  if (!total.ok() || *total > limit) {
    return absl::InvalidArgumentError(absl::StrCat("repeating a ", l.TypeName(), " of ", unit, " ",
                                                   l.IsString() ? "bytes" : "items", " ", times, " times exceeds ",
                                                   l.IsString() ? "max_string_bytes" : "max_items", " (", limit, ")"));
  }
  if (l.IsString()) {
    ORCA_RETURN_IF_ERROR(sb_.ChargeString(static_cast<size_t>(*total)));
    std::string s;
    s.reserve(static_cast<size_t>(*total));
    for (int64_t i = 0; i < times && unit > 0; ++i) s += l.str();
    return Value::String(std::move(s));
  }
  ORCA_RETURN_IF_ERROR(sb_.ChargeItems(static_cast<size_t>(*total)));
  Value::List items;
  items.reserve(static_cast<size_t>(*total));
  for (int64_t i = 0; i < times && unit > 0; ++i) items.insert(items.end(), l.list().begin(), l.list().end());
  return Value::MakeList(std::move(items));
}

absl::StatusOr<Value> Interpreter::EvalBinary(const Expr& e) {
  ORCA_ASSIGN_OR_RETURN(Value l, Eval(*e.args[0]));
  ORCA_ASSIGN_OR_RETURN(Value r, Eval(*e.args[1]));
  const std::string& op = e.name;
  if (op == "==" || op == "!=") {
    ORCA_ASSIGN_OR_RETURN(bool same, sb_.Equal(l, r));
    return Value::Bool(same == (op == "=="));
  }
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    ORCA_ASSIGN_OR_RETURN(int c, Compare(l, r, sb_));
    if (op == "<") return Value::Bool(c < 0);
    if (op == "<=") return Value::Bool(c <= 0);
    if (op == ">") return Value::Bool(c > 0);
    return Value::Bool(c >= 0);
  }
  if (op == "in" || op == "not in") {
    ORCA_ASSIGN_OR_RETURN(const bool found, Contains(r, l, sb_));
    return Value::Bool(found == (op == "in"));
  }
  const bool concat = op == "~" || (op == "+" && ((l.IsString() && r.IsString()) || (l.IsList() && r.IsList())));
  const bool repeat = op == "*" && (l.IsString() || l.IsList()) && r.type() == Value::Type::kInt;
  if (concat || repeat) return EvalConcatOrRepeat(op, l, r);
  return NumericBinary(op, l, r);
}

}  // namespace

absl::StatusOr<std::string> Render(const Program& program, const Value::Dict& globals, const RenderBudget& budget) {
  Sandbox sandbox(budget);  // outlives the interpreter's scopes: it empties mutated containers last
  std::string out;
  {
    Interpreter interpreter(globals, sandbox, &out);
    ORCA_RETURN_IF_ERROR(interpreter.ExecBody(program, &out).status());
  }
  return out;
}

}  // namespace orca::text::jinja
