// Structured outputs benchmark and sampler.
//
// --mode=overhead: Sampler::Sample per token with and without a grammar
// matcher (random logits, temperature 1) at each --batches size, interleaved
// step by step in one run; prints the per-step and per-token cost, the mask
// cache hit rate and the one-time costs (tokenizer -> vocabulary, compile).
//
// --mode=sample: random generations (uniform over the allowed tokens at each
// step, EOS included where the grammar may end) for each spec of --specs (a
// JSON array of {"schema": ...} | {"json_object": true} | {"regex": "..."} |
// {"choice": [...]}); one JSON line per generation on stdout:
// {"spec": i, "finished": bool, "text": "..."}.
//
//   build/bin/structured_bench --mode=overhead --model=../shared/models/tiny-gpt2 --batches=1,32

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "core/engine/sampler.h"
#include "core/structured/compile.h"
#include "core/text/tokenizer.h"

namespace orca::bench {
namespace {

using Clock = std::chrono::steady_clock;
using structured::GrammarMatcher;
using structured::MatcherFactory;
using structured::TokenVocabulary;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

const char* kPersonSchema = R"({"type":"object","properties":{"name":{"type":"string","maxLength":20},
  "age":{"type":"integer"},"email":{"type":"string","format":"email"},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":4},
  "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"[0-9]{5}"}},
             "required":["city","zip"],"additionalProperties":false}},
  "required":["name","age","address"],"additionalProperties":false})";

StructuredOutputSpec SpecFromJson(const nlohmann::json& j) {
  StructuredOutputSpec s;
  if (j.contains("schema")) {
    s.kind = StructuredOutputSpec::Kind::kJsonSchema;
    s.schema = j["schema"].dump();
  } else if (j.contains("regex")) {
    s.kind = StructuredOutputSpec::Kind::kRegex;
    s.regex = j["regex"].get<std::string>();
  } else if (j.contains("choice")) {
    s.kind = StructuredOutputSpec::Kind::kChoice;
    s.choices = j["choice"].get<std::vector<std::string>>();
  } else {
    s.kind = StructuredOutputSpec::Kind::kJsonObject;
  }
  return s;
}

int Sample(const std::shared_ptr<const TokenVocabulary>& vocab, const std::string& specs_path, int64_t per_spec,
           int64_t max_new_tokens, uint64_t seed) {
  std::ifstream in(specs_path);
  const nlohmann::json specs = nlohmann::json::parse(in);
  MatcherFactory factory(vocab);
  std::mt19937_64 rng(seed);
  const int32_t eos = vocab->eos_ids().empty() ? -1 : vocab->eos_ids()[0];
  std::vector<int32_t> candidates, closing;
  for (int32_t id = 0; id < vocab->vocab_size(); ++id)
    if (vocab->bytes(id).find_first_of("\"]}") != std::string::npos) closing.push_back(id);
  for (size_t i = 0; i < specs.size(); ++i) {
    const StructuredOutputSpec spec = SpecFromJson(specs[i]);
    for (int64_t r = 0; r < per_spec; ++r) {
      absl::StatusOr<std::unique_ptr<GrammarMatcher>> m = factory.NewMatcher(spec);
      if (!m.ok()) {
        std::cerr << "spec " << i << ": " << m.status() << "\n";
        return 1;
      }
      std::string text;
      bool finished = false;
      for (int64_t t = 0; t < max_new_tokens && !finished; ++t) {
        std::shared_ptr<const structured::TokenMask> mask = (*m)->CurrentMask();
        const bool may_end = (*m)->CanEnd() || mask->allowed == 0;
        const int32_t n = mask->allowed + (may_end ? 1 : 0);
        if (n == 0) break;
        const int32_t pick = static_cast<int32_t>(rng() % n);
        int32_t tok = -1;
        candidates.clear();
        if (rng() % 4 == 0)
          for (int32_t id : closing)
            if (mask->Test(id)) candidates.push_back(id);
        if (!candidates.empty()) {
          tok = candidates[rng() % candidates.size()];
        } else if (pick == mask->allowed) {
          tok = eos;
        } else if (mask->allowed > vocab->vocab_size() / 16) {
          // Rejection sampling: uniform over the allowed set without enumerating it.
          do tok = static_cast<int32_t>(rng() % vocab->vocab_size());
          while (!mask->Test(tok));
        } else {
          candidates.clear();
          for (int32_t id = 0; id < vocab->vocab_size(); ++id)
            if (mask->Test(id)) candidates.push_back(id);
          tok = candidates[pick];
        }
        if (absl::Status s = (*m)->Accept(tok); !s.ok()) {
          std::cerr << "spec " << i << ": " << s << "\n";
          return 1;
        }
        if (tok == eos) {
          finished = true;
        } else {
          text += vocab->bytes(tok);
        }
      }
      nlohmann::json line = {{"spec", i}, {"finished", finished}, {"text", text}};
      std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
  }
  const structured::GrammarRuntime::Stats st = factory.stats();
  std::cerr << "mask cache: " << st.mask_hits << " hits, " << st.mask_misses << " misses\n";
  return 0;
}

int Overhead(const std::shared_ptr<const TokenVocabulary>& vocab, const std::vector<int64_t>& batches, int64_t steps,
             const StructuredOutputSpec& spec) {
  const int32_t v = vocab->vocab_size();
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  constexpr int kRows = 64;
  std::vector<std::vector<float>> pool(kRows, std::vector<float>(v));
  for (auto& row : pool)
    for (float& x : row) x = normal(rng);
  MatcherFactory factory(vocab);
  const auto compile_start = Clock::now();
  if (absl::Status s = factory.NewMatcher(spec).status(); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  std::printf("first matcher (compile + initial state): %.2f ms\n", Ms(Clock::now() - compile_start));
  SamplingParams free_params;
  free_params.temperature = 1.0f;
  SamplingParams guided_params = free_params;
  guided_params.structured = spec;
  std::printf(
      "| batch | steps | free sample ms/step | guided sample ms/step | overhead ms/step | overhead µs/token |"
      " mask hit rate | misses | restarts |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t batch : batches) {
    std::vector<std::unique_ptr<engine::Sampler>> free, guided;
    uint64_t next_id = 1;
    auto new_guided = [&] {
      return std::make_unique<engine::Sampler>(guided_params, next_id++, absl::Span<const int32_t>{},
                                               absl::Span<const int32_t>{}, *factory.NewMatcher(spec));
    };
    for (int64_t b = 0; b < batch; ++b) {
      free.push_back(std::make_unique<engine::Sampler>(free_params, next_id++, absl::Span<const int32_t>{}));
      guided.push_back(new_guided());
    }
    const auto before = factory.stats();
    Clock::duration free_time{}, guided_time{};
    std::vector<float> row(v);
    int64_t restarts = 0;
    for (int64_t s = 0; s < steps; ++s) {
      for (int pass = 0; pass < 2; ++pass) {  // interleaved: free then guided, same logits
        auto& samplers = pass == 0 ? free : guided;
        Clock::duration spent{};
        for (int64_t b = 0; b < batch; ++b) {
          row = pool[(s * batch + b) % kRows];
          const auto t0 = Clock::now();
          const int32_t tok = samplers[b]->Sample(row.data(), v).token_id;
          spent += Clock::now() - t0;
          if (pass == 1 && samplers[b]->matcher()->terminated()) {
            samplers[b] = new_guided();  // a finished request is replaced (setup not timed)
            ++restarts;
          }
          (void)tok;
        }
        (pass == 0 ? free_time : guided_time) += spent;
      }
    }
    const auto after = factory.stats();
    const int64_t hits = after.mask_hits - before.mask_hits, misses = after.mask_misses - before.mask_misses;
    const double free_ms = Ms(free_time) / steps, guided_ms = Ms(guided_time) / steps;
    std::printf("| %lld | %lld | %.3f | %.3f | %.3f | %.1f | %.4f | %lld | %lld |\n", static_cast<long long>(batch),
                static_cast<long long>(steps), free_ms, guided_ms, guided_ms - free_ms,
                (guided_ms - free_ms) * 1000.0 / batch, hits + misses > 0 ? double(hits) / (hits + misses) : 0.0,
                static_cast<long long>(misses), static_cast<long long>(restarts));
  }
  return 0;
}

}  // namespace
}  // namespace orca::bench

int main(int argc, char** argv) {
  std::string mode = "overhead", model = "../shared/models/tiny-gpt2", specs, schema = orca::bench::kPersonSchema;
  std::vector<std::string> batch_list = {"1", "32"};
  int64_t steps = 300, per_spec = 100, max_new_tokens = 400, seed = 1;
  bool json_object = false;
  orca::FlagSet flags("structured_bench", "Structured outputs: masking overhead, or random constrained generations.");
  flags.AddString("mode", &mode, "overhead or sample");
  flags.AddString("model", &model, "Model directory or .gguf whose tokenizer defines the vocabulary");
  flags.AddStringList("batches", &batch_list, "overhead: batch sizes");
  flags.AddInt("steps", &steps, "overhead: decode steps per batch size");
  flags.AddString("schema", &schema, "overhead: the JSON Schema (default: a person record)");
  flags.AddBool("json-object", &json_object, "overhead: JSON mode instead of --schema");
  flags.AddString("specs", &specs, "sample: JSON file with an array of specs");
  flags.AddInt("per-spec", &per_spec, "sample: generations per spec");
  flags.AddInt("max-tokens", &max_new_tokens, "sample: token limit per generation (unfinished ones are reported)");
  flags.AddInt("seed", &seed, "sample: random seed");
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv)) return *exit_code;
  orca::SetLogLevel(orca::LogLevel::kWarning);
  const auto t0 = orca::bench::Clock::now();
  auto tokenizer = orca::text::Tokenizer::Load(model);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status() << "\n";
    return 1;
  }
  const auto t1 = orca::bench::Clock::now();
  auto vocab = orca::structured::TokenVocabulary::FromTokenizer(**tokenizer);
  if (!vocab.ok()) {
    std::cerr << vocab.status() << "\n";
    return 1;
  }
  const auto t2 = orca::bench::Clock::now();
  if (mode == "sample") {
    if (specs.empty()) {
      std::cerr << "--specs is required with --mode=sample\n";
      return 2;
    }
    return orca::bench::Sample(*vocab, specs, per_spec, max_new_tokens, static_cast<uint64_t>(seed));
  }
  std::printf("tokenizer load %.1f ms, vocabulary + trie %.1f ms (%d tokens, %d in the trie, %zu trie nodes)\n",
              orca::bench::Ms(t1 - t0), orca::bench::Ms(t2 - t1), (*vocab)->vocab_size(), (*vocab)->num_trie_tokens(),
              (*vocab)->trie().size());
  std::vector<int64_t> batches;
  for (const std::string& b : batch_list) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(b, &n) || n < 1) {
      std::cerr << "--batches: '" << b << "' is not a positive integer\n";
      return 2;
    }
    batches.push_back(n);
  }
  orca::StructuredOutputSpec spec;
  if (json_object) {
    spec.kind = orca::StructuredOutputSpec::Kind::kJsonObject;
  } else {
    spec.kind = orca::StructuredOutputSpec::Kind::kJsonSchema;
    spec.schema = schema;
  }
  return orca::bench::Overhead(*vocab, batches, steps, spec);
}
