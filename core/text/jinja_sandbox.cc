#include "core/text/jinja_sandbox.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/common/status_macros.h"
#include "core/text/unicode.h"

namespace orca::text::jinja {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

absl::Status OverflowError(std::string_view op, int64_t a, int64_t b) {
  return absl::InvalidArgumentError(absl::StrCat("integer overflow: ", a, " ", std::string(op), " ", b,
                                                 " does not fit in 64 bits"));
}

}  // namespace

Sandbox::Sandbox(const RenderBudget& budget) : budget_(budget) {
  if (budget_.deadline_check_steps < 1) budget_.deadline_check_steps = 1;
  // With a deadline, the first step checks it: a render that starts late
  // (after waiting in a queue) fails at once.
  next_check_ = budget_.deadline == absl::InfiniteFuture() ? budget_.max_steps + 1 : 1;
}

Sandbox::~Sandbox() {
  // Values still referring to these containers see them empty; the render is over.
  for (Value& v : mutated_) {
    if (v.IsList()) {
      Value::List().swap(v.list());
    } else if (v.IsDict()) {
      std::vector<std::pair<std::string, Value>>().swap(v.dict().items);
    }
  }
}

absl::Status Sandbox::SlowStep() {
  if (steps_ > budget_.max_steps) {
    return absl::InvalidArgumentError(absl::StrCat("template exceeded its step budget (max_steps = ",
                                                   budget_.max_steps, ")"));
  }
  if (budget_.deadline != absl::InfiniteFuture()) {
    if (absl::Now() > budget_.deadline) {
      return absl::InvalidArgumentError(
          absl::StrCat("render deadline exceeded after ", steps_, " steps (RenderBudget::deadline)"));
    }
    next_check_ = std::min(budget_.max_steps + 1, steps_ + budget_.deadline_check_steps);
  } else {
    next_check_ = budget_.max_steps + 1;
  }
  return absl::OkStatus();
}

absl::Status Sandbox::ChargeString(size_t bytes) {
  if (bytes > static_cast<uint64_t>(budget_.max_string_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("a string of ", bytes, " bytes exceeds max_string_bytes (",
                                                   budget_.max_string_bytes, ")"));
  }
  alloc_bytes_ += static_cast<int64_t>(bytes);
  if (alloc_bytes_ > budget_.max_alloc_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("template allocated more than max_alloc_bytes (", budget_.max_alloc_bytes, " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status Sandbox::ChargeItems(size_t n) {
  if (n > static_cast<uint64_t>(budget_.max_items)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a sequence of ", n, " items exceeds max_items (", budget_.max_items, ")"));
  }
  alloc_bytes_ += static_cast<int64_t>(n) * kAllocBytesPerItem;
  if (alloc_bytes_ > budget_.max_alloc_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("template allocated more than max_alloc_bytes (", budget_.max_alloc_bytes, " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status Sandbox::CheckOutput(size_t size) const {
  if (size > static_cast<uint64_t>(budget_.max_output_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendered prompt exceeds max_output_bytes (", budget_.max_output_bytes, " bytes)"));
  }
  return absl::OkStatus();
}

void Sandbox::NoteMutated(const Value& container) {
  const void* key = container.IsList() ? static_cast<const void*>(&container.list())
                                       : static_cast<const void*>(&container.dict());
  if (mutated_seen_.insert(key).second) mutated_.push_back(container);
}

absl::Status Sandbox::DepthError() const {
  return absl::InvalidArgumentError(
      absl::StrCat("value nested deeper than max_value_depth (", budget_.max_value_depth, ")"));
}

absl::Status Sandbox::EvalDepthError() const {
  return absl::InvalidArgumentError(
      absl::StrCat("evaluation nested deeper than max_eval_depth (", budget_.max_eval_depth, ")"));
}

absl::Status Sandbox::CheckBuilt(const std::string& out) const {
  if (out.size() > static_cast<uint64_t>(budget_.max_string_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("a string of more than ", budget_.max_string_bytes,
                                                   " bytes exceeds max_string_bytes"));
  }
  return absl::OkStatus();
}

// ---- Walks --------------------------------------------------------------

absl::StatusOr<std::string> Sandbox::Str(const Value& v) {
  if (!v.IsContainer()) return v.ScalarString();
  return Repr(v);
}

absl::StatusOr<std::string> Sandbox::Repr(const Value& v) {
  std::string out;
  ORCA_RETURN_IF_ERROR(AppendRepr(v, 0, &out));
  ORCA_RETURN_IF_ERROR(ChargeString(out.size()));
  return out;
}

// Every node writes at least one byte, so the size check also bounds the
// walk of a list that contains itself many times over.
absl::Status Sandbox::AppendRepr(const Value& v, int depth, std::string* out) {
  ORCA_RETURN_IF_ERROR(CheckBuilt(*out));
  if (v.IsString()) {
    AppendPyQuoted(v.str(), out);
    return absl::OkStatus();
  }
  if (!v.IsContainer()) {
    *out += v.ScalarString();
    return absl::OkStatus();
  }
  if (depth >= budget_.max_value_depth) return DepthError();
  if (v.IsList()) {
    *out += '[';
    const Value::List& items = v.list();
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) *out += ", ";
      ORCA_RETURN_IF_ERROR(AppendRepr(items[i], depth + 1, out));
    }
    *out += ']';
    return absl::OkStatus();
  }
  *out += '{';
  const auto& items = v.dict().items;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) *out += ", ";
    AppendPyQuoted(items[i].first, out);
    *out += ": ";
    ORCA_RETURN_IF_ERROR(AppendRepr(items[i].second, depth + 1, out));
  }
  *out += '}';
  return absl::OkStatus();
}

absl::StatusOr<std::string> Sandbox::ToJson(const Value& v, int64_t indent) {
  std::string out;
  ORCA_RETURN_IF_ERROR(AppendJson(v, indent, 0, &out));
  ORCA_RETURN_IF_ERROR(ChargeString(out.size()));
  return out;
}

absl::Status Sandbox::AppendJson(const Value& v, int64_t indent, int depth, std::string* out) {
  ORCA_RETURN_IF_ERROR(CheckBuilt(*out));
  switch (v.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
    case Value::Type::kFunction:
      *out += "null";
      return absl::OkStatus();
    case Value::Type::kBool:
      *out += v.AsBool() ? "true" : "false";
      return absl::OkStatus();
    case Value::Type::kInt:
      *out += std::to_string(v.AsInt());
      return absl::OkStatus();
    case Value::Type::kFloat:
      *out += FloatRepr(v.AsFloat());
      return absl::OkStatus();
    case Value::Type::kString:
      AppendJsonString(v.str(), out);
      return absl::OkStatus();
    case Value::Type::kList:
    case Value::Type::kDict:
      break;
  }
  if (depth >= budget_.max_value_depth) return DepthError();
  const size_t n = v.IsList() ? v.list().size() : v.dict().items.size();
  if (n == 0) {
    *out += v.IsList() ? "[]" : "{}";
    return absl::OkStatus();
  }
  // indent <= max_string_bytes and depth <= max_value_depth: no overflow.
  if (indent > budget_.max_string_bytes || (indent > 0 && indent * (depth + 1) > budget_.max_string_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("tojson indent ", indent, " exceeds max_string_bytes (",
                                                   budget_.max_string_bytes, ")"));
  }
  const bool pretty = indent >= 0;
  auto newline = [&](int64_t level) {
    *out += '\n';
    out->append(static_cast<size_t>(indent * level), ' ');
  };
  *out += v.IsList() ? '[' : '{';
  for (size_t i = 0; i < n; ++i) {
    if (i) *out += pretty ? "," : ", ";
    if (pretty) newline(depth + 1);
    if (v.IsList()) {
      ORCA_RETURN_IF_ERROR(AppendJson(v.list()[i], indent, depth + 1, out));
    } else {
      const auto& [key, item] = v.dict().items[i];
      AppendJsonString(key, out);
      *out += ": ";
      ORCA_RETURN_IF_ERROR(AppendJson(item, indent, depth + 1, out));
    }
  }
  if (pretty) newline(depth);
  *out += v.IsList() ? ']' : '}';
  return absl::OkStatus();
}

absl::StatusOr<bool> Sandbox::Equal(const Value& a, const Value& b) { return EqualAt(a, b, 0); }

absl::StatusOr<bool> Sandbox::EqualAt(const Value& a, const Value& b, int depth) {
  ORCA_RETURN_IF_ERROR(Step());
  if (a.IsNumber() && b.IsNumber()) {
    if (a.type() == Value::Type::kFloat || b.type() == Value::Type::kFloat) return a.AsFloat() == b.AsFloat();
    return a.AsInt() == b.AsInt();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return true;
    case Value::Type::kString:
      ORCA_RETURN_IF_ERROR(Scan(std::min(a.str().size(), b.str().size())));
      return a.str() == b.str();
    case Value::Type::kFunction:
      return &a.function() == &b.function();
    case Value::Type::kList:
    case Value::Type::kDict:
      break;
    default:
      return false;
  }
  if (depth >= budget_.max_value_depth) return DepthError();
  if (a.IsList()) {
    if (&a.list() == &b.list()) return true;
    if (a.list().size() != b.list().size()) return false;
    for (size_t i = 0; i < a.list().size(); ++i) {
      ORCA_ASSIGN_OR_RETURN(bool same, EqualAt(a.list()[i], b.list()[i], depth + 1));
      if (!same) return false;
    }
    return true;
  }
  if (&a.dict() == &b.dict()) return true;
  if (a.dict().items.size() != b.dict().items.size()) return false;
  for (const auto& [k, v] : a.dict().items) {
    ORCA_RETURN_IF_ERROR(Step(static_cast<int64_t>(b.dict().items.size())));  // Find is a linear scan
    const Value* other = b.dict().Find(k);
    if (other == nullptr) return false;
    ORCA_ASSIGN_OR_RETURN(bool same, EqualAt(v, *other, depth + 1));
    if (!same) return false;
  }
  return true;
}

absl::StatusOr<std::vector<Value>> Sandbox::Iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.type()) {
    case Value::Type::kList:
      ORCA_RETURN_IF_ERROR(ChargeItems(v.list().size()));
      return v.list();
    case Value::Type::kDict:
      ORCA_RETURN_IF_ERROR(ChargeItems(v.dict().items.size()));
      out.reserve(v.dict().items.size());
      for (const auto& [k, val] : v.dict().items) out.push_back(Value::String(k));
      return out;
    case Value::Type::kString: {
      ORCA_RETURN_IF_ERROR(Scan(v.str().size()));
      ORCA_RETURN_IF_ERROR(ChargeItems(CountCodePoints(v.str())));  // before materializing them
      std::vector<char32_t> cps = DecodeUtf8(v.str());
      out.reserve(cps.size());
      for (char32_t c : cps) out.push_back(Value::String(EncodeUtf8(c)));
      return out;
    }
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return out;
    default:
      return absl::InvalidArgumentError(absl::StrCat("value is not iterable (got ", v.TypeName(), ")"));
  }
}

// ---- Checked arithmetic ---------------------------------------------------

absl::StatusOr<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return OverflowError("+", a, b);
  return r;
}

absl::StatusOr<int64_t> CheckedSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return OverflowError("-", a, b);
  return r;
}

absl::StatusOr<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return OverflowError("*", a, b);
  return r;
}

absl::StatusOr<int64_t> CheckedFloorDiv(int64_t a, int64_t b) {
  if (b == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
  if (a == kInt64Min && b == -1) return OverflowError("//", a, b);  // SIGFPE on x86
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

absl::StatusOr<int64_t> CheckedFloorMod(int64_t a, int64_t b) {
  if (b == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
  if (b == -1) return 0;  // exact; and INT64_MIN % -1 traps on x86
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

absl::StatusOr<int64_t> CheckedPow(int64_t a, int64_t b) {
  // Exponentiation by squaring: at most 63 squarings before overflow.
  int64_t result = 1;
  int64_t base = a;
  int64_t e = b;
  while (e > 0) {
    if (e & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return OverflowError("**", a, b);
    }
    e >>= 1;
    if (e > 0 && __builtin_mul_overflow(base, base, &base)) return OverflowError("**", a, b);
  }
  return result;
}

absl::StatusOr<int64_t> CheckedNeg(int64_t a) {
  if (a == kInt64Min) return absl::InvalidArgumentError(absl::StrCat("integer overflow: -(", a, ") does not fit in 64 bits"));
  return -a;
}

absl::StatusOr<int64_t> CheckedToInt(double f) {
  if (std::isnan(f)) return absl::InvalidArgumentError("cannot convert float NaN to integer");
  if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0)) {
    return absl::InvalidArgumentError(absl::StrCat("integer overflow: ", FloatRepr(f), " does not fit in 64 bits"));
  }
  return static_cast<int64_t>(f);
}

size_t CountCodePoints(std::string_view text) {
  if (!IsValidUtf8(text)) return DecodeUtf8(text).size();
  size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

uint64_t RangeLength(int64_t start, int64_t stop, int64_t step) {
  // In 128 bits: stop - start and the rounding cannot overflow; the count fits in 64 unsigned bits.
  __int128 span = static_cast<__int128>(stop) - start;
  __int128 stride = step;
  if (step < 0) {
    span = -span;
    stride = -stride;
  }
  return span <= 0 ? 0 : static_cast<uint64_t>((span + stride - 1) / stride);
}

}  // namespace orca::text::jinja
