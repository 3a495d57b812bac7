#pragma once
/// Runtime values of the Jinja interpreter (internal to core/text). Lists,
/// dicts and namespaces are shared by reference, as in Python, so that
/// `namespace()` objects can be updated from inside loops.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
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
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };
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

  bool AsBool() const { return b_; }
  int64_t AsInt() const;
  double AsFloat() const;
  const std::string& str() const { return s_; }
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }
  const Function& function() const { return *fn_; }

  /// Python truthiness.
  bool Truthy() const;
  /// Python `str()` (None -> "None", True -> "True", lists as repr); undefined -> "".
  std::string ToString() const;
  /// Python `repr()`.
  std::string Repr() const;
  /// JSON as transformers' `tojson` (json.dumps, ensure_ascii=False); indent < 0: one line.
  std::string ToJson(int indent = -1, int depth = 0) const;
  /// Python `==`.
  bool Equals(const Value& other) const;
  const char* TypeName() const;

 private:
  Type type_ = Type::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

/// Builds a Value from a JSON text literal (objects, arrays, numbers, ...);
/// nullopt-like undefined on a parse error.
Value ValueFromJsonText(std::string_view text, bool* ok);

}  // namespace orca::text::jinja
