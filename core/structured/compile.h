#pragma once
/// From a request's StructuredOutputSpec to a Grammar, and the caches that
/// make this once per distinct spec: GrammarCache (the gateway validates
/// every spec by compiling it; thread-safe) and MatcherFactory (the last
/// pipeline stage: grammar + vocabulary -> shared GrammarRuntime -> one
/// GrammarMatcher per request).

#include <cstddef>
#include <list>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/common/structured_output.h"
#include "core/structured/grammar.h"
#include "core/structured/grammar_matcher.h"
#include "core/structured/limits.h"
#include "core/structured/token_vocabulary.h"

namespace orca::structured {

/// Compiles `spec` (kind must not be kNone). InvalidArgument names what is
/// refused (a JSON Schema keyword and its JSON pointer, a regex construct and
/// its offset, an empty choice, a `$ref` cycle that can never end) and every
/// limit of core/structured/limits.h that the spec crosses: bounded in depth
/// and work whatever the spec, so any entry point may call it on client input.
absl::StatusOr<std::shared_ptr<const Grammar>> CompileSpec(const StructuredOutputSpec& spec);

/// Compiled grammars (and compile errors) by StructuredOutputSpec::GrammarKey,
/// at most `capacity` of them and `max_states` automaton states in all (least
/// recently used evicted; a grammar larger than `max_states` is compiled and
/// returned but not kept). Thread-safe.
class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity = 256, int64_t max_states = kMaxCachedGrammarStates)
      : capacity_(capacity), max_states_(max_states) {}
  absl::StatusOr<std::shared_ptr<const Grammar>> Get(const StructuredOutputSpec& spec);
  int64_t hits() const;
  int64_t misses() const;

 private:
  struct Entry {
    absl::StatusOr<std::shared_ptr<const Grammar>> grammar;
    std::list<std::string>::iterator lru;
  };
  size_t capacity_;
  int64_t max_states_;
  mutable absl::Mutex mu_;
  int64_t num_states_ ABSL_GUARDED_BY(mu_) = 0;  // of the cached grammars
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);  // front = most recent
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

/// Makes matchers over one vocabulary, sharing a GrammarRuntime (and so its
/// mask cache) between requests with the same grammar. Thread-compatible.
class MatcherFactory {
 public:
  explicit MatcherFactory(std::shared_ptr<const TokenVocabulary> vocab) : vocab_(std::move(vocab)) {}
  absl::StatusOr<std::unique_ptr<GrammarMatcher>> NewMatcher(const StructuredOutputSpec& spec);
  const TokenVocabulary& vocab() const { return *vocab_; }
  /// Sums of the runtimes' statistics (mask cache hits and misses).
  GrammarRuntime::Stats stats() const;

 private:
  std::shared_ptr<const TokenVocabulary> vocab_;
  GrammarCache grammars_{64};
  absl::flat_hash_map<std::string, std::shared_ptr<GrammarRuntime>> runtimes_;
};

}  // namespace orca::structured
