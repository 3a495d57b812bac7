// Structured-output constraints as any client can send them (HTTP, the gRPC Generation API, the
// scheduler's Generate): compiled by CompileSpec, the one compiler every entry point and the worker
// use, then — when they compile — matched along a walk the rest of the input steers, over a small
// vocabulary of single bytes and a few multi-byte tokens (a 300-byte one included). Any crash, hang
// (-timeout) or blow-up (-rss_limit_mb) here is one request taking a worker down.
//
// The input is a JSON object (so the structure-aware JSON mutator applies): exactly one of
//   "json_schema": <schema> | "json_schema_text": "<schema as text, however deep or broken>"
//   "regex": "<regex>"     | "choice": ["a", "b", ...]
//   "tools": <schema>      (a tool-call constraint: Hermes framing, one or more calls)
// and optionally "walk": "<text>" whose bytes pick the tokens the matcher accepts.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/json_parse.h"
#include "core/structured/compile.h"
#include "core/structured/grammar_matcher.h"
#include "core/structured/limits.h"

namespace {

using orca::StructuredOutputSpec;
using Json = nlohmann::ordered_json;

std::shared_ptr<const orca::structured::TokenVocabulary> Vocab() {
  static const auto* vocab = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    for (const char* t : {"{\"", "\":", "\",", "\"}", "true", "false", "null", "  ", "\n", "[{", "}]", "ab", "0.5"})
      tokens.emplace_back(t);
    tokens.push_back(std::string(300, 'a'));
    tokens.emplace_back();  // EOS
    const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
    return new std::shared_ptr<const orca::structured::TokenVocabulary>(
        orca::structured::TokenVocabulary::FromBytes(std::move(tokens), {eos}));
  }();
  return *vocab;
}

bool SpecFromJson(const Json& in, StructuredOutputSpec* spec) {
  if (!in.is_object()) return false;
  if (auto it = in.find("json_schema"); it != in.end()) {
    spec->kind = StructuredOutputSpec::Kind::kJsonSchema;
    spec->schema = it->dump();
  } else if (auto text = in.find("json_schema_text"); text != in.end() && text->is_string()) {
    spec->kind = StructuredOutputSpec::Kind::kJsonSchema;
    spec->schema = text->get<std::string>();
  } else if (auto regex = in.find("regex"); regex != in.end() && regex->is_string()) {
    spec->kind = StructuredOutputSpec::Kind::kRegex;
    spec->regex = regex->get<std::string>();
  } else if (auto choice = in.find("choice"); choice != in.end() && choice->is_array()) {
    spec->kind = StructuredOutputSpec::Kind::kChoice;
    for (const Json& c : *choice)
      if (c.is_string()) spec->choices.push_back(c.get<std::string>());
  } else if (auto tools = in.find("tools"); tools != in.end()) {
    spec->kind = StructuredOutputSpec::Kind::kToolCalls;
    spec->schema = tools->is_string() ? tools->get<std::string>() : tools->dump();
    spec->calls_begin = "<tool_call>\n";
    spec->calls_separator = "\n</tool_call>\n<tool_call>\n";
    spec->calls_end = "\n</tool_call>";
    spec->max_calls = 2;
  } else {
    return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<Json> in = orca::ParseOrderedJson(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!in.ok()) return 0;
  StructuredOutputSpec spec;
  if (!SpecFromJson(*in, &spec)) return 0;
  absl::StatusOr<std::shared_ptr<const orca::structured::Grammar>> grammar = orca::structured::CompileSpec(spec);
  if (!grammar.ok()) return 0;
  auto runtime = std::make_shared<orca::structured::GrammarRuntime>(*grammar, Vocab());
  orca::structured::GrammarMatcher matcher(runtime, {});
  std::string walk = "walk";
  if (auto it = in->find("walk"); it != in->end() && it->is_string()) walk = it->get<std::string>();
  std::vector<float> logits(static_cast<size_t>(Vocab()->vocab_size()));
  // About one mask's worth of matcher work per input: that bound (kMaxMaskNodes) is what is under test, and a
  // grammar built to reach it on every step would otherwise trip -timeout under ASan.
  for (size_t step = 0; step < walk.size() && step < 64 && !matcher.terminated() &&
                        runtime->stats().closure_nodes < orca::structured::kMaxMaskNodes;
       ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    matcher.ApplyToLogits(logits.data(), static_cast<int32_t>(logits.size()));
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id)
      if (logits[id] == 0.0f) allowed.push_back(id);
    if (allowed.empty()) break;
    const int32_t token = allowed[static_cast<uint8_t>(walk[step]) % allowed.size()];
    if (!matcher.Accept(token).ok()) __builtin_trap();  // a token the mask allowed must be accepted
  }
  return 0;
}
