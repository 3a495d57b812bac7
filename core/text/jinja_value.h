#pragma once
/// Runtime values of the Jinja interpreter (internal to core/text). Lists,
/// dicts and namespaces are shared by reference, as in Python, so that
/// `namespace()` objects can be updated from inside loops; strings are shared
/// too (immutable), so copying a value never copies its text. Whatever walks a
/// value recursively (str, repr, JSON, equality) lives in jinja_sandbox.h,
/// bounded by the render budget: a list can be made to contain itself.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace orca::text::jinja {

class Value;

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  /// The keyword argument `name`, or positional argument `index`, or nullptr.
  const Value* Get(size_t index, std::string_view name) const;
};
using Function = std::function<absl::StatusOr<Value>(const CallArgs&)>;

class Value {
 public:
  enum class Type : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };
  using List = std::vector<Value>;
  /// Insertion-ordered string-keyed map.
  struct Dict {
    std::vector<std::pair<std::string, Value>> items;
    bool is_namespace = false;
    const Value* Find(std::string_view key) const;
    void Set(const std::string& key, Value v);
  };

  Value() = default;  // undefined
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  static Value MakeList();
  static Value MakeList(List items);
  static Value MakeDict();
  static Value MakeDict(Dict d);
  static Value MakeFunction(Function f);

  Type type() const { return type_; }
  bool IsUndefined() const { return type_ == Type::kUndefined; }
  bool IsNone() const { return type_ == Type::kNone; }
  bool IsString() const { return type_ == Type::kString; }
  bool IsNumber() const { return type_ == Type::kInt || type_ == Type::kFloat || type_ == Type::kBool; }
  bool IsList() const { return type_ == Type::kList; }
  bool IsDict() const { return type_ == Type::kDict; }
  bool IsContainer() const { return type_ == Type::kList || type_ == Type::kDict; }

  bool AsBool() const { return type_ == Type::kBool && b_; }
  /// Integer value of a number; a float saturates at the int64 range (NaN: 0).
  /// Use CheckedToInt (jinja_sandbox.h) where Python would raise instead.
  int64_t AsInt() const;
  double AsFloat() const;
  /// The text of a string; "" for any other type.
  const std::string& str() const;
  /// The elements of a list, entries of a dict, or the function (type must match).
  List& list() const { return *static_cast<List*>(const_cast<void*>(ptr_.get())); }
  Dict& dict() const { return *static_cast<Dict*>(const_cast<void*>(ptr_.get())); }
  const Function& function() const { return *static_cast<const Function*>(ptr_.get()); }
  /// Nesting of a list or dict when it was built (1 + its deepest element);
  /// 0 for scalars. Appending to a shared list later does not update the
  /// copies' depth, so walks check depth again as they go.
  int depth() const { return depth_; }

  /// Python truthiness.
  bool Truthy() const;
  /// Python `str()` of a scalar (None -> "None", True -> "True", 1.0 -> "1.0");
  /// undefined -> "". Lists and dicts: see Sandbox::Str.
  std::string ScalarString() const;
  const char* TypeName() const;

 private:
  // 32 bytes: lists of a million values are common enough in hostile templates
  // that the size matters (RenderBudget::max_alloc_bytes counts it).
  Type type_ = Type::kUndefined;
  int32_t depth_ = 0;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  // The shared payload by type_: const std::string, List, Dict or Function
  // (lists and dicts are mutable through list() / dict()).
  std::shared_ptr<const void> ptr_;
};

/// Python's repr() of a float ("1.0", "1e+20", "nan", "inf").
std::string FloatRepr(double f);
/// Appends `s` quoted as Python's repr() quotes a str.
void AppendPyQuoted(const std::string& s, std::string* out);
/// Appends `s` as a JSON string (json.dumps with ensure_ascii=False).
void AppendJsonString(const std::string& s, std::string* out);

/// Builds a Value from a JSON text (objects keep their key order). nullopt when
/// the text is not JSON; InvalidArgument when it nests deeper than `max_depth`
/// (a value 20,000 levels deep must not reach the recursive walks).
absl::StatusOr<std::optional<Value>> ValueFromJsonText(std::string_view text, int max_depth);

}  // namespace orca::text::jinja
