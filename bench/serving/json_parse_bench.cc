// What the gateway's depth limit costs (issue 45): parsing realistic chat-completion bodies of about
// 2 KB, 100 KB and 4 MB with nlohmann's own parser, with the depth-checked parser every request goes
// through now (core/common/json_parse.h: nlohmann's SAX events under a depth and path check), both for
// nlohmann::json (std::map objects: the gateway's request DOM) and ordered_json (schemas, tool calls),
// and — when libsimdjson-dev is installed — simdjson, whose parser has the depth limit built in, alone
// and followed by the conversion to the nlohmann DOM the gateway's parsers read.
//
//   build/bin/json_parse_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Results: bench/results/2026-12-07_json_parse_<cpu>.txt, summarized in bench/README.md.

#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/common/json_parse.h"

#ifdef ORCA_HAVE_SIMDJSON
#include <simdjson.h>
#endif

namespace {

// A chat request as clients send them: a system prompt, a tool list with parameter schemas, sampling
// options, and user/assistant turns (ASCII, escapes and some non-ASCII text) until `bytes` is reached.
std::string ChatBody(size_t bytes) {
  nlohmann::json tools = nlohmann::json::array();
  for (int t = 0; t < 3; ++t) {
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", absl::StrCat("tool_", t)},
                       {"description", "Looks something up and returns it as JSON."},
                       {"parameters",
                        {{"type", "object"},
                         {"properties",
                          {{"query", {{"type", "string"}, {"maxLength", 200}}},
                           {"limit", {{"type", "integer"}, {"minimum", 1}, {"maximum", 50}}},
                           {"filters", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                         {"required", {"query"}}}}}}});
  }
  nlohmann::json body = {{"model", "llama-3-8b-instruct"},
                         {"temperature", 0.7},
                         {"top_p", 0.95},
                         {"max_tokens", 512},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}},
                         {"tools", tools},
                         {"messages", nlohmann::json::array()}};
  nlohmann::json& messages = body["messages"];
  messages.push_back(
      {{"role", "system"}, {"content", "You are a helpful assistant. Answer briefly and cite sources."}});
  std::string text;
  for (int turn = 0; text.size() < bytes; ++turn) {
    const std::string content =
        turn % 2 == 0 ? absl::StrCat("Question ", turn,
                                     ": how do I read a file line by line in C++? Show \"std::getline\" "
                                     "and explain the\nloop; café, naïve, 東京, 🙂.")
                      : absl::StrCat("Answer ", turn,
                                     ": open an std::ifstream, then `while (std::getline(in, line))` reads one "
                                     "line per iteration\n\t(the newline is dropped); check `in.bad()` after.");
    messages.push_back({{"role", turn % 2 == 0 ? "user" : "assistant"}, {"content", content}});
    text = body.dump();
  }
  return text;
}

const std::string& Body(int64_t kind) {
  static const std::string* bodies[3] = {new std::string(ChatBody(2 << 10)), new std::string(ChatBody(100 << 10)),
                                         new std::string(ChatBody(4 << 20))};
  return *bodies[kind];
}

void SetCounters(benchmark::State& state, const std::string& body) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
  state.counters["body_bytes"] = static_cast<double>(body.size());
}

void NlohmannParse(benchmark::State& state) {
  const std::string& body = Body(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(body));
  SetCounters(state, body);
}

void DepthCheckedParse(benchmark::State& state) {
  const std::string& body = Body(state.range(0));
  for (auto _ : state) {
    absl::StatusOr<nlohmann::json> j = orca::ParseJson(body);
    if (!j.ok()) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(j);
  }
  SetCounters(state, body);
}

void NlohmannOrderedParse(benchmark::State& state) {
  const std::string& body = Body(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann::ordered_json::parse(body));
  SetCounters(state, body);
}

void DepthCheckedOrderedParse(benchmark::State& state) {
  const std::string& body = Body(state.range(0));
  for (auto _ : state) {
    absl::StatusOr<nlohmann::ordered_json> j = orca::ParseOrderedJson(body);
    if (!j.ok()) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(j);
  }
  SetCounters(state, body);
}

#ifdef ORCA_HAVE_SIMDJSON
// simdjson's DOM -> nlohmann::json (recursion is bounded: the parser refused anything deeper than 128).
nlohmann::json ToNlohmann(simdjson::dom::element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: {
      nlohmann::json a = nlohmann::json::array();
      for (simdjson::dom::element child : e.get_array()) a.push_back(ToNlohmann(child));
      return a;
    }
    case simdjson::dom::element_type::OBJECT: {
      nlohmann::json o = nlohmann::json::object();
      for (simdjson::dom::key_value_pair field : e.get_object()) o[std::string(field.key)] = ToNlohmann(field.value);
      return o;
    }
    case simdjson::dom::element_type::INT64:
      return int64_t(e);
    case simdjson::dom::element_type::UINT64:
      return uint64_t(e);
    case simdjson::dom::element_type::DOUBLE:
      return double(e);
    case simdjson::dom::element_type::STRING:
      return std::string(std::string_view(e));
    case simdjson::dom::element_type::BOOL:
      return bool(e);
    case simdjson::dom::element_type::NULL_VALUE:
      return nullptr;
  }
  return nullptr;
}

void SimdjsonParse(benchmark::State& state) {
  const std::string& body = Body(state.range(0));
  simdjson::dom::parser parser;
  if (parser.allocate(body.size(), orca::kMaxJsonDepth) != simdjson::SUCCESS) state.SkipWithError("allocate");
  for (auto _ : state) {
    simdjson::dom::element doc;
    if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(doc);
  }
  SetCounters(state, body);
}

void SimdjsonParseToNlohmann(benchmark::State& state) {
  const std::string& body = Body(state.range(0));
  simdjson::dom::parser parser;
  if (parser.allocate(body.size(), orca::kMaxJsonDepth) != simdjson::SUCCESS) state.SkipWithError("allocate");
  for (auto _ : state) {
    simdjson::dom::element doc;
    if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(ToNlohmann(doc));
  }
  SetCounters(state, body);
}
#endif

// Argument: 0 = ~2 KB, 1 = ~100 KB, 2 = ~4 MB.
BENCHMARK(NlohmannParse)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
BENCHMARK(DepthCheckedParse)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
BENCHMARK(NlohmannOrderedParse)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
BENCHMARK(DepthCheckedOrderedParse)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
#ifdef ORCA_HAVE_SIMDJSON
BENCHMARK(SimdjsonParse)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
BENCHMARK(SimdjsonParseToNlohmann)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
#endif

}  // namespace

BENCHMARK_MAIN();
