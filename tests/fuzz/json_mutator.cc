// A structure-aware mutator for the fuzz targets that read JSON (libFuzzer's LLVMFuzzerCustomMutator,
// linked into each of them): an input that parses as JSON is mutated as a tree — a value is nested
// inside arrays or objects (depth bombs), duplicated or repeated (budget bombs), replaced by a value of
// another type or by an extreme one, swapped with another subtree, deleted, or given a member the
// request parsers look for — and serialized again. One mutation in four, and every input that is not
// JSON, goes to libFuzzer's own byte-level mutations instead, so malformed text is still explored.
//
// The mutator parses with orca::ParseOrderedJson under a generous depth limit and walks the tree
// iteratively: it never recurses deeper than its own output's serializer does (max_len bounds that).

#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/common/json_parse.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using Json = nlohmann::ordered_json;

// Field names the request parsers and the schema compiler read: adding one reaches code that random
// keys would not.
const char* const kKeys[] = {
    "model",
    "prompt",
    "messages",
    "content",
    "role",
    "max_tokens",
    "n",
    "temperature",
    "top_p",
    "stop",
    "logprobs",
    "top_logprobs",
    "stream",
    "tools",
    "tool_choice",
    "function",
    "parameters",
    "arguments",
    "tool_calls",
    "response_format",
    "json_schema",
    "schema",
    "guided_json",
    "guided_regex",
    "guided_choice",
    "chat_template_kwargs",
    "type",
    "properties",
    "required",
    "items",
    "prefixItems",
    "additionalProperties",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "$defs",
    "enum",
    "const",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "regex",
    "choice",
    "walk",
};

// Values past a limit, at a type boundary, or built to multiply work.
Json ExtremeValue(std::mt19937& rng) {
  switch (rng() % 16) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return INT64_MIN;
    case 3:
      return UINT64_MAX;
    case 4:
      return -1;
    case 5:
      return 1e308;
    case 6:
      return 0.5;
    case 7:
      return std::string(rng() % 2000, 'x');
    case 8:
      return "#";
    case 9:
      return "((a{1000}){1000}){1000}";
    case 10:
      return std::string(300, '(') + "a" + std::string(300, ')');
    case 11:
      return "(.{1,100}){1,100}";
    case 12:
      return Json::array();
    case 13:
      return Json::object();
    case 14:
      return "object";
    default:
      return static_cast<int64_t>(rng() % 300);
  }
}

// Every value of the document (the root first), found without recursion.
std::vector<Json*> Nodes(Json* root) {
  std::vector<Json*> out, work = {root};
  while (!work.empty()) {
    Json* v = work.back();
    work.pop_back();
    out.push_back(v);
    if (v->is_structured())
      for (auto& child : *v) work.push_back(&child);
  }
  return out;
}

void Mutate(Json* root, std::mt19937& rng) {
  std::vector<Json*> nodes = Nodes(root);
  Json* target = nodes[rng() % nodes.size()];
  switch (rng() % 8) {
    case 0: {  // nest: the value inside `depth` arrays or objects
      const int depth = 1 + static_cast<int>(rng() % (rng() % 4 == 0 ? 400 : 8));
      Json v = std::move(*target);
      for (int i = 0; i < depth; ++i) {
        if (rng() % 2 == 0) {
          v = Json::array({std::move(v)});
        } else {
          Json o = Json::object();
          o[rng() % 2 == 0 ? "a" : kKeys[rng() % std::size(kKeys)]] = std::move(v);
          v = std::move(o);
        }
      }
      *target = std::move(v);
      break;
    }
    case 1: {  // duplicate: repeat an array's element or a container's copy
      if (target->is_array() && !target->empty()) {
        const Json element = (*target)[rng() % target->size()];
        for (int i = 1 + static_cast<int>(rng() % 16); i > 0; --i) target->push_back(element);
      } else {
        const Json copy = *target;
        *target = Json::array({copy, copy});
      }
      break;
    }
    case 2:  // change type / extreme value
      *target = ExtremeValue(rng);
      break;
    case 3: {  // splice: another subtree of the document takes this one's place
      Json* other = nodes[rng() % nodes.size()];
      if (other != target) *target = Json(*other);
      break;
    }
    case 4:  // delete a member or an element
      if (target->is_object() && !target->empty()) {
        const std::string key = std::next(target->begin(), static_cast<std::ptrdiff_t>(rng() % target->size())).key();
        target->erase(key);
      } else if (target->is_array() && !target->empty()) {
        target->erase(rng() % target->size());
      }
      break;
    case 5:  // a member a parser looks for
      if (target->is_object()) (*target)[kKeys[rng() % std::size(kKeys)]] = ExtremeValue(rng);
      break;
    case 6:  // a string becomes the text of a JSON value (fields that hold JSON as a string)
      if (target->is_structured()) *target = target->dump();
      break;
    default:  // a number nudged across a boundary
      if (target->is_number_integer()) {
        int64_t nudged = 0;
        if (!__builtin_add_overflow(target->get<int64_t>(), static_cast<int64_t>(rng() % 5) - 2, &nudged))
          *target = nudged;
      }
      break;
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937 rng(seed);
  if (rng() % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  absl::StatusOr<Json> doc = orca::ParseOrderedJson(std::string_view(reinterpret_cast<char*>(data), size), 4096);
  if (!doc.ok()) return LLVMFuzzerMutate(data, size, max_size);
  for (int i = 1 + static_cast<int>(rng() % 3); i > 0; --i) Mutate(&*doc, rng);
  const std::string out = doc->dump(-1, ' ', false, Json::error_handler_t::replace);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
