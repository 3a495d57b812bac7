#include "core/structured/compile.h"

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/structured/json_schema_compiler.h"
#include "core/structured/limits.h"
#include "core/structured/regex_compiler.h"

namespace orca::structured {
namespace {

constexpr size_t kMaxRuntimes = 64;

absl::StatusOr<std::shared_ptr<const Grammar>> CompileChoice(const std::vector<std::string>& choices) {
  if (choices.empty()) return absl::InvalidArgumentError("guided_choice must hold at least one choice");
  size_t bytes = 0;
  for (const std::string& c : choices) bytes += c.size();
  if (bytes > kMaxChoiceBytes) {
    return absl::InvalidArgumentError(absl::StrCat("guided_choice holds ", bytes, " bytes of choices; at most ",
                                                   kMaxChoiceBytes, " are accepted (the limit)"));
  }
  GrammarBuilder b;
  std::vector<Fragment> alternatives;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i].empty()) return absl::InvalidArgumentError(absl::StrCat("guided_choice[", i, "] is empty"));
    alternatives.push_back(b.Literal(choices[i]));
  }
  const Rule root = b.NewRule();
  b.DefineRule(root, b.Alt(alternatives));
  return b.Finish(root);
}

absl::StatusOr<std::shared_ptr<const Grammar>> CompileRegexGrammar(const std::string& regex) {
  if (regex.empty()) return absl::InvalidArgumentError("guided_regex must not be empty");
  GrammarBuilder b;
  ORCA_ASSIGN_OR_RETURN(Fragment body, CompileRegex(regex, RegexOptions{}, &b));
  const Rule root = b.NewRule();
  b.DefineRule(root, body);
  return b.Finish(root);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileSpec(const StructuredOutputSpec& spec) {
  switch (spec.kind) {
    case StructuredOutputSpec::Kind::kJsonObject:
      return CompileJsonObject();
    case StructuredOutputSpec::Kind::kJsonSchema:
      return CompileJsonSchema(spec.schema);
    case StructuredOutputSpec::Kind::kRegex:
      return CompileRegexGrammar(spec.regex);
    case StructuredOutputSpec::Kind::kChoice:
      return CompileChoice(spec.choices);
    case StructuredOutputSpec::Kind::kToolCalls:
      return CompileJsonSequence(spec.schema, spec.calls_begin, spec.calls_separator, spec.calls_end, spec.max_calls);
    case StructuredOutputSpec::Kind::kNone:
      break;
  }
  return absl::InvalidArgumentError("no structured-output constraint to compile");
}

absl::StatusOr<std::shared_ptr<const Grammar>> GrammarCache::Get(const StructuredOutputSpec& spec) {
  std::string key = spec.GrammarKey();
  {
    absl::MutexLock lock(&mu_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.grammar;
    }
    ++misses_;
  }
  // Compile outside the lock: two threads may compile the same spec once each; the second insert is dropped.
  absl::StatusOr<std::shared_ptr<const Grammar>> grammar = CompileSpec(spec);
  auto states = [](const absl::StatusOr<std::shared_ptr<const Grammar>>& g) {
    return g.ok() ? static_cast<int64_t>((*g)->states().size()) : int64_t{0};
  };
  const int64_t size = states(grammar);
  absl::MutexLock lock(&mu_);
  if (entries_.contains(key) || size > max_states_) return grammar;
  lru_.push_front(key);
  entries_.emplace(std::move(key), Entry{grammar, lru_.begin()});
  num_states_ += size;
  while (entries_.size() > capacity_ || num_states_ > max_states_) {
    auto victim = entries_.find(lru_.back());
    num_states_ -= states(victim->second.grammar);
    entries_.erase(victim);
    lru_.pop_back();
  }
  return grammar;
}

int64_t GrammarCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

int64_t GrammarCache::misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}

absl::StatusOr<std::unique_ptr<GrammarMatcher>> MatcherFactory::NewMatcher(const StructuredOutputSpec& spec) {
  const std::string key = spec.GrammarKey();
  auto it = runtimes_.find(key);
  if (it == runtimes_.end()) {
    ORCA_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> grammar, grammars_.Get(spec));
    // Live matchers keep their runtime alive through their shared_ptr.
    if (runtimes_.size() >= kMaxRuntimes) runtimes_.clear();
    it = runtimes_.emplace(key, std::make_shared<GrammarRuntime>(std::move(grammar), vocab_)).first;
  }
  return std::make_unique<GrammarMatcher>(it->second, spec.end_token_ids);
}

GrammarRuntime::Stats MatcherFactory::stats() const {
  GrammarRuntime::Stats total;
  for (const auto& [key, runtime] : runtimes_) {
    const GrammarRuntime::Stats s = runtime->stats();
    total.mask_hits += s.mask_hits;
    total.mask_misses += s.mask_misses;
    total.trie_nodes_visited += s.trie_nodes_visited;
    total.stack_nodes += s.stack_nodes;
    total.dfa_states += s.dfa_states;
    total.dfa_transitions += s.dfa_transitions;
    total.closure_cuts += s.closure_cuts;
    total.closure_nodes += s.closure_nodes;
    total.mask_cuts += s.mask_cuts;
  }
  return total;
}

}  // namespace orca::structured
