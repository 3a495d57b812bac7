#pragma once
/// A byte-level grammar as a recursive transition network: rules are small
/// NFAs over bytes whose states may call other rules (a call pushes its
/// return state, a rule's end state pops it). Recursion is allowed, so the
/// language is context-free and matching needs a stack (see GrammarRuntime).
/// Built with GrammarBuilder's Thompson-style fragments; immutable afterwards
/// and shared by every request using the same structured-output spec.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/structured/limits.h"

namespace orca::structured {

/// Bytes lo..hi (inclusive) lead to `target`.
struct ByteEdge {
  uint8_t lo = 0;
  uint8_t hi = 0;
  int32_t target = 0;
};

/// One NFA state. Exactly one kind: consuming (edges and/or eps), a call, or a rule end.
struct GrammarState {
  std::vector<ByteEdge> edges;
  std::vector<int32_t> eps;  ///< epsilon moves within the rule
  int32_t call_start = -1;   ///< >= 0: a call of the rule starting there
  int32_t call_return = -1;  ///< where the caller continues after the callee ends
  bool rule_end = false;     ///< reaching it returns to the caller (or accepts, at the root)
};

class Grammar {
 public:
  const std::vector<GrammarState>& states() const { return states_; }
  int32_t root_start() const { return root_start_; }
  int32_t num_rules() const { return num_rules_; }

 private:
  friend class GrammarBuilder;
  std::vector<GrammarState> states_;
  int32_t root_start_ = -1;
  int32_t num_rules_ = 0;
};

/// A piece of NFA with one entry and one exit state (Thompson construction).
struct Fragment {
  int32_t start = -1;
  int32_t end = -1;
};

/// A rule: its entry and its end state (GrammarState::rule_end).
struct Rule {
  int32_t start = -1;
  int32_t end = -1;
};

/// Inclusive code point ranges [first, second].
using CodepointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

class GrammarBuilder {
 public:
  /// Refuses (Finish: InvalidArgument) a grammar that would exceed `max_states`; past it every
  /// operation is a cheap no-op on a sink state, so callers need not check `exhausted()` at each step.
  explicit GrammarBuilder(int64_t max_states = kMaxGrammarStates) : max_states_(max_states) {}

  Fragment Empty();
  Fragment Literal(std::string_view bytes);
  Fragment Bytes(uint8_t lo, uint8_t hi);
  /// One UTF-8 encoded character from `ranges` (surrogates excluded).
  Fragment Codepoints(const CodepointRanges& ranges);
  Fragment Seq(Fragment a, Fragment b);
  Fragment Seq(const std::vector<Fragment>& parts);
  Fragment Alt(const std::vector<Fragment>& alternatives);
  Fragment Optional(Fragment f);
  Fragment Star(Fragment f);
  /// `make()` min times, then up to max - min optional copies (max < 0: unbounded).
  Fragment Repeat(const std::function<Fragment()>& make, int64_t min, int64_t max);
  Rule NewRule();
  void DefineRule(Rule rule, Fragment body);
  Fragment Call(Rule rule);
  /// How errors about `rule` name it (e.g. "JSON Schema $ref '#' at /properties/next").
  void LabelRule(Rule rule, std::string label) { labels_[rule.start] = std::move(label); }
  /// Raw edges between fragment states (for automata built by hand).
  void AddEdge(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
    if (!exhausted_) g_->states_[from].edges.push_back({lo, hi, to});
  }
  void AddEps(int32_t from, int32_t to) {
    if (!exhausted_) g_->states_[from].eps.push_back(to);
  }

  /// Makes `root` the start symbol and returns the grammar. InvalidArgument when it grew past
  /// max_states, or when a rule fails CheckGrammarRules (core/structured/grammar_analysis.h: a rule
  /// that can never end, left recursion, too many parser stacks before a byte), naming the rule by
  /// its label.
  absl::StatusOr<std::shared_ptr<const Grammar>> Finish(Rule root);
  int64_t num_states() const { return static_cast<int64_t>(g_->states_.size()); }
  int64_t max_states() const { return max_states_; }
  bool exhausted() const { return exhausted_; }

 private:
  int32_t NewState();
  // Adds paths from `from` to `to` for every UTF-8 sequence of code points lo..hi, all of one encoded length.
  void AddUtf8Range(int32_t from, int32_t to, uint32_t lo, uint32_t hi);

  std::shared_ptr<Grammar> g_ = std::make_shared<Grammar>();
  int64_t max_states_;
  bool exhausted_ = false;
  absl::flat_hash_map<int32_t, std::string> labels_;  // by rule start state
};

/// Encodes one code point as UTF-8 (no validation).
std::string EncodeUtf8(uint32_t cp);

/// `text` for an error message: whole when short, else its two ends around
/// "...(N bytes)...", cut between UTF-8 sequences (a megabyte key or pattern
/// must not make a megabyte message).
std::string ShortenForMessage(std::string_view text, size_t max_bytes = 256);

}  // namespace orca::structured
