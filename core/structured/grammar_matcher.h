#pragma once
/// Matching a Grammar against generated tokens: GrammarRuntime (one per
/// grammar and vocabulary, shared by the requests using it) holds the
/// interned parser stacks and the token-mask cache; GrammarMatcher (one per
/// request) holds that request's parser state and applies it to logits.
///
/// Parser state: the set of live stacks of a nondeterministic pushdown
/// automaton (the grammar's rule NFAs; a call pushes the return state).
/// Stacks are interned as (state, parent) nodes so a set is a sorted vector of
/// ids, cheap to copy and to hash. State sets are interned too, and their
/// byte transitions memoized: a lazily built DFA over stack sets, so walking
/// the same bytes from the same set twice is a hash lookup (inside a JSON
/// string almost every byte leads back to the same set). A token mask is
/// computed by walking the vocabulary's byte trie from the state set through
/// that DFA, pruning a subtree as soon as no stack survives; it is cached per
/// state set (the full stacks, so a cached mask is exact). Stacks deeper than
/// kMaxStackDepth are dropped (deeply recursive schemas stop nesting there).
/// Memory is bounded: past kMaxDfaTransitions the DFA and mask caches restart.
///
/// Work and stack use are bounded on any grammar (core/structured/limits.h):
/// closures are walked with an explicit worklist, at most kMaxStepNodes stacks
/// per byte (past it the rest are dropped and stats().closure_cuts counts it;
/// GrammarBuilder::Finish already refuses grammars whose rules fan out past
/// kMaxClosureNodes before a byte); one mask explores at most kMaxMaskNodes
/// stacks (stats().mask_cuts); and the vocabulary trie is walked iteratively,
/// so a token of any length recurses nowhere.
///
/// Thread-compatible: the runtime and its matchers are used by one thread at
/// a time (the engine's), or guarded by the caller.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/structured/grammar.h"
#include "core/structured/limits.h"
#include "core/structured/token_vocabulary.h"

namespace orca::structured {

/// Allowed token ids as a bitset over the vocabulary.
struct TokenMask {
  std::vector<uint64_t> words;
  int32_t allowed = 0;  ///< number of set bits
  bool Test(int32_t id) const { return (words[id >> 6] >> (id & 63)) & 1; }
};

class GrammarRuntime {
 public:
  static constexpr int32_t kMaxStackDepth = structured::kMaxStackDepth;
  static constexpr size_t kMaxDfaTransitions = size_t{1} << 22;
  static constexpr size_t kMaxCachedMasks = 8192;
  /// Node 0 is the accepting (empty) stack.
  static constexpr int32_t kAccept = 0;
  using StateSet = std::vector<int32_t>;

  GrammarRuntime(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab);

  StateSet Initial();
  /// The states after `byte`; empty when no stack accepts it.
  StateSet Advance(const StateSet& states, uint8_t byte);
  /// Advances over all of `bytes`; empty when rejected.
  StateSet AdvanceBytes(StateSet states, std::string_view bytes);
  static bool CanEnd(const StateSet& s) { return !s.empty() && s[0] == kAccept; }
  /// Non-EOS tokens allowed in `states` (cached).
  std::shared_ptr<const TokenMask> Mask(const StateSet& states);

  const TokenVocabulary& vocab() const { return *vocab_; }
  struct Stats {
    int64_t mask_hits = 0;
    int64_t mask_misses = 0;
    int64_t trie_nodes_visited = 0;
    int64_t stack_nodes = 0;
    int64_t dfa_states = 0;
    int64_t dfa_transitions = 0;
    int64_t closure_cuts = 0;   ///< bytes whose closure stopped at kMaxStepNodes stacks
    int64_t closure_nodes = 0;  ///< parser stacks explored, in all (the matcher's work)
    int64_t mask_cuts = 0;      ///< masks whose vocabulary walk stopped at kMaxMaskNodes
  };
  Stats stats() const;

 private:
  struct Node {
    int32_t state;
    int32_t parent;
    int32_t depth;
  };
  int32_t Intern(int32_t state, int32_t parent);
  // Adds to `out` every stack reachable from those in closure_work_ (emptied) without consuming a byte
  // whose top can consume one (or kAccept). Stops (dropping the rest) once the current step has explored
  // kMaxStepNodes stacks.
  void Closure(StateSet* out);
  // Whether `node` is new to the current closure (a linear scan while it is small, then a hash set).
  bool FirstVisit(int32_t node);
  void AdvanceInto(const StateSet& states, uint8_t byte, StateSet* out);
  // The DFA over interned state sets: a set's id, and the id after one byte (-1: no stack survives).
  int32_t InternSet(const StateSet& states);
  int32_t Step(int32_t set_id, uint8_t byte);
  // Sets the tokens readable from `set_id` in `mask`: a depth-first walk of the trie with an explicit stack.
  void Walk(int32_t set_id, TokenMask* mask);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<Node> nodes_;
  absl::flat_hash_map<uint64_t, int32_t> intern_;
  absl::flat_hash_map<std::string, int32_t> set_ids_;
  std::vector<StateSet> sets_;
  absl::flat_hash_map<uint64_t, int32_t> transitions_;                    // (set id << 8 | byte) -> set id or -1
  absl::flat_hash_map<int32_t, std::shared_ptr<const TokenMask>> masks_;  // by set id
  StateSet scratch_;
  std::vector<int32_t> closure_work_;
  std::vector<int32_t> closure_seen_;
  absl::flat_hash_set<int32_t> closure_seen_set_;  // used once closure_seen_ outgrows a linear scan
  int64_t step_nodes_ = 0;                         // stacks explored in the current step
  struct WalkFrame {
    int32_t trie_node;
    int32_t set_id;
    size_t next_child;
  };
  std::vector<WalkFrame> walk_stack_;
  Stats stats_;
};

/// One request's position in its grammar.
class GrammarMatcher {
 public:
  /// `end_token_ids`: allowed (with the vocabulary's EOS ids) where the grammar may end.
  GrammarMatcher(std::shared_ptr<GrammarRuntime> runtime, std::vector<int32_t> end_token_ids);

  /// Sets every disallowed logit in [0, n) to -inf. Where the grammar may end
  /// the end tokens are allowed; once it has ended only they are. If no token
  /// can continue (a dead end: the vocabulary cannot spell what the grammar
  /// needs, or recursion passed kMaxStackDepth) the end tokens are allowed so
  /// the request finishes.
  void ApplyToLogits(float* logits, int32_t n);
  /// Whether `token` is allowed now (what ApplyToLogits leaves finite).
  bool IsAllowed(int32_t token);
  /// Advances over a sampled token. InvalidArgument if the grammar rejects
  /// it (the state is then unchanged).
  absl::Status Accept(int32_t token);
  bool CanEnd() const { return GrammarRuntime::CanEnd(states_); }
  /// The non-end tokens allowed now (null once terminated).
  std::shared_ptr<const TokenMask> CurrentMask();
  /// Whether `token` is one of the end tokens (EOS or the request's).
  bool IsEndToken(int32_t token) const;
  /// An end token was accepted.
  bool terminated() const { return terminated_; }

 private:
  std::shared_ptr<GrammarRuntime> runtime_;
  std::vector<int32_t> end_tokens_;
  GrammarRuntime::StateSet states_;
  std::vector<std::pair<int32_t, float>> saved_;  // ApplyToLogits scratch
  bool terminated_ = false;
};

}  // namespace orca::structured
