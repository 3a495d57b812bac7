#include "core/common/json_parse.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace orca {
namespace {

// Path components shown in a depth error: the first and the last few, the middle summarized.
constexpr size_t kPathHead = 6;
constexpr size_t kPathTail = 3;
constexpr size_t kMaxKeyChars = 32;

// One open array or object: which child is being read (the last key, or the element count), where it is
// built, and (large ordered objects) its members by key.
template <typename BasicJson>
struct Frame {
  bool array = false;
  size_t count = 0;
  std::string key;
  BasicJson* value = nullptr;
  absl::flat_hash_map<std::string, size_t> index;
};

bool PlainKey(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyChars) return false;
  for (size_t i = 0; i < key.size(); ++i) {
    const char c = key[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
    if (!letter && !(i > 0 && ((c >= '0' && c <= '9') || c == '-'))) return false;
  }
  return true;
}

template <typename BasicJson>
std::string Component(const Frame<BasicJson>& f, bool first) {
  if (f.array) return absl::StrCat("[", f.count == 0 ? 0 : f.count - 1, "]");
  if (PlainKey(f.key)) return first ? f.key : absl::StrCat(".", f.key);
  std::string shown = f.key.size() > kMaxKeyChars ? f.key.substr(0, kMaxKeyChars) : f.key;
  // Never cut a UTF-8 sequence in two: drop continuation bytes left at the cut.
  while (shown.size() < f.key.size() && !shown.empty() && (static_cast<unsigned char>(shown.back()) & 0xC0) == 0x80)
    shown.pop_back();
  if (shown.size() < f.key.size() && !shown.empty() && static_cast<unsigned char>(shown.back()) >= 0xC0)
    shown.pop_back();
  std::string quoted = nlohmann::json(shown).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (shown.size() < f.key.size()) quoted.insert(quoted.size() - 1, "...");
  return absl::StrCat("[", quoted, "]");
}

// "tools[0].function.parameters.properties.a.<119 more>.a.properties.a"
template <typename BasicJson>
std::string FormatPath(const std::vector<Frame<BasicJson>>& frames, size_t depth) {
  if (depth == 0) return "the top level";
  std::string out;
  for (size_t i = 0; i < depth; ++i) {
    if (depth > kPathHead + kPathTail + 1 && i == kPathHead) {
      absl::StrAppend(&out, ".<", depth - kPathHead - kPathTail, " more>");
      i = depth - kPathTail - 1;
      continue;
    }
    absl::StrAppend(&out, Component(frames[i], i == 0));
  }
  return out;
}

// Builds the DOM from nlohmann's SAX events (as its json_sax_dom_parser does), with two differences: the
// parse stops (sax_parse returns false) at the first container past the depth limit, with nothing deeper
// built; and an ordered_json object finds a duplicate key through a hash index once it has more than a
// few members, where ordered_map would scan every member on every insert (50,000 keys took 8.6 s).
template <typename BasicJson>
class DepthLimitedSax {
 public:
  using number_integer_t = typename BasicJson::number_integer_t;
  using number_unsigned_t = typename BasicJson::number_unsigned_t;
  using number_float_t = typename BasicJson::number_float_t;
  using string_t = typename BasicJson::string_t;
  using binary_t = typename BasicJson::binary_t;
  using object_t = typename BasicJson::object_t;
  using array_t = typename BasicJson::array_t;

  DepthLimitedSax(BasicJson* root, int max_depth)
      : root_(root), max_depth_(static_cast<size_t>(std::max(max_depth, 0))) {}

  bool null() { return Value(nullptr); }
  bool boolean(bool v) { return Value(v); }
  bool number_integer(number_integer_t v) { return Value(v); }
  bool number_unsigned(number_unsigned_t v) { return Value(v); }
  bool number_float(number_float_t v, const string_t& /*text*/) { return Value(v); }
  bool string(string_t& v) { return Value(std::move(v)); }
  bool binary(binary_t& v) { return Value(std::move(v)); }
  bool start_object(std::size_t /*size*/) { return Open(false); }
  bool key(string_t& k) {
    Frame<BasicJson>& f = frames_[depth_ - 1];
    f.key.assign(k);
    element_ = &Member(f, k);
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(std::size_t /*size*/) { return Open(true); }
  bool end_array() { return Close(); }
  template <class Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const Exception& ex) {
    std::string what = ex.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix; keep the position.
    if (size_t pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    error_ = std::move(what);
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  static constexpr bool kOrdered = !std::is_same_v<object_t, typename nlohmann::json::object_t>;
  static constexpr size_t kLinearMembers = 16;

  // Where the next value goes: the root, the end of the open array, or the member of the last key.
  template <typename V>
  BasicJson* Put(V&& v) {
    if (depth_ == 0) {
      *root_ = BasicJson(std::forward<V>(v));
      return root_;
    }
    Frame<BasicJson>& f = frames_[depth_ - 1];
    if (f.array) {
      ++f.count;
      array_t& a = f.value->template get_ref<array_t&>();
      a.emplace_back(std::forward<V>(v));
      return &a.back();
    }
    *element_ = BasicJson(std::forward<V>(v));
    return element_;
  }
  template <typename V>
  bool Value(V&& v) {
    Put(std::forward<V>(v));
    return true;
  }
  bool Open(bool array) {
    if (depth_ >= max_depth_) {
      if (depth_ > 0 && frames_[depth_ - 1].array) ++frames_[depth_ - 1].count;  // name the offending element
      error_ = absl::StrCat("nesting deeper than ", max_depth_, " levels at ", FormatPath(frames_, depth_),
                            " (arrays and objects may nest at most ", max_depth_, " deep)");
      return false;
    }
    BasicJson* value = Put(array ? BasicJson::value_t::array : BasicJson::value_t::object);
    // Frames are reused, so a key's string keeps its capacity from one object to the next.
    if (depth_ == frames_.size()) frames_.emplace_back();
    Frame<BasicJson>& f = frames_[depth_++];
    f.array = array;
    f.count = 0;
    f.key.clear();
    f.value = value;
    f.index.clear();
    return true;
  }
  bool Close() {
    frames_[--depth_].index.clear();
    return true;
  }
  BasicJson& Member(Frame<BasicJson>& f, const string_t& k) {
    object_t& object = f.value->template get_ref<object_t&>();
    if constexpr (!kOrdered) {
      return object[k];
    } else {
      // A duplicate key keeps its first position and takes the last value, as ordered_map's operator[].
      using Container = typename object_t::Container;  // ordered_map is a vector of members
      Container& members = object;
      if (members.size() < kLinearMembers) {
        for (auto& member : members)
          if (member.first == k) return member.second;
      } else {
        if (f.index.empty())
          for (size_t i = 0; i < members.size(); ++i) f.index.emplace(members[i].first, i);
        if (auto it = f.index.find(k); it != f.index.end()) return members[it->second].second;
        f.index.emplace(k, members.size());
      }
      members.emplace_back(k, BasicJson());
      return members.back().second;
    }
  }

  BasicJson* root_;
  size_t max_depth_;
  std::vector<Frame<BasicJson>> frames_;
  size_t depth_ = 0;
  BasicJson* element_ = nullptr;  // the member the last key named
  std::string error_;
};

template <typename BasicJson>
absl::StatusOr<BasicJson> Parse(std::string_view text, int max_depth) {
  BasicJson result;
  DepthLimitedSax<BasicJson> sax(&result, max_depth);
  bool ok = false;
  try {
    ok = BasicJson::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json,
                              /*strict=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
  if (!ok) return absl::InvalidArgumentError(sax.error().empty() ? "invalid JSON" : sax.error());
  return result;
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, int max_depth) {
  return Parse<nlohmann::json>(text, max_depth);
}

absl::StatusOr<nlohmann::ordered_json> ParseOrderedJson(std::string_view text, int max_depth) {
  return Parse<nlohmann::ordered_json>(text, max_depth);
}

}  // namespace orca
