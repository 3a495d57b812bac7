#include "core/structured/grammar_analysis.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/structured/limits.h"

namespace orca::structured {
namespace {

// The rules of a grammar, found from its start symbol and its call states; a rule is named by its start state.
struct RuleTable {
  std::vector<int32_t> starts;         // rule index -> start state, in state order (= creation order)
  std::vector<int32_t> rule_of_start;  // state -> rule index, -1 when no rule starts there
  int32_t root = -1;                   // the start symbol's rule index
};

RuleTable FindRules(const Grammar& g) {
  const std::vector<GrammarState>& states = g.states();
  RuleTable t;
  t.rule_of_start.assign(states.size(), -1);
  std::vector<int32_t> starts;
  if (g.root_start() >= 0) starts.push_back(g.root_start());
  for (const GrammarState& st : states)
    if (st.call_start >= 0) starts.push_back(st.call_start);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  for (int32_t s : starts) {
    t.rule_of_start[s] = static_cast<int32_t>(t.starts.size());
    t.starts.push_back(s);
  }
  if (g.root_start() >= 0) t.root = t.rule_of_start[g.root_start()];
  return t;
}

// Which rules can reach their end: reading bytes (productive) or not (nullable). A least fixed point by
// worklist: a rule's walk stops at a call of a rule not yet known to end and resumes, at the call's
// return state, once that rule is found to end. Each state is walked once per rule that owns it.
std::vector<char> RulesThatCanEnd(const Grammar& g, const RuleTable& t, bool read_bytes) {
  const std::vector<GrammarState>& states = g.states();
  const size_t num_rules = t.starts.size();
  std::vector<char> ends(num_rules, 0);
  std::vector<std::vector<std::pair<int32_t, int32_t>>> waiting(num_rules);  // callee -> (caller, return state)
  std::vector<int32_t> walked_by(states.size(), -1);
  std::vector<std::pair<int32_t, int32_t>> work;  // (rule, state)
  for (size_t r = num_rules; r-- > 0;) work.emplace_back(static_cast<int32_t>(r), t.starts[r]);
  while (!work.empty()) {
    const auto [r, s] = work.back();
    work.pop_back();
    if (ends[r] || walked_by[s] == r) continue;
    walked_by[s] = r;
    const GrammarState& st = states[s];
    if (st.rule_end) {
      ends[r] = 1;
      for (const auto& w : waiting[r]) work.push_back(w);
      waiting[r].clear();
      continue;
    }
    if (st.call_start >= 0) {
      const int32_t callee = t.rule_of_start[st.call_start];
      if (ends[callee]) {
        work.emplace_back(r, st.call_return);
      } else {
        waiting[callee].emplace_back(r, st.call_return);
      }
      continue;
    }
    for (int32_t e : st.eps) work.emplace_back(r, e);
    if (read_bytes)
      for (const ByteEdge& e : st.edges) work.emplace_back(r, e.target);
  }
  return ends;
}

// What entering a rule reaches before its first byte: its own states, and the rules it calls there (once
// per call state: each call pushes its own frame).
struct Prefix {
  int64_t states = 0;
  std::vector<int32_t> callees;
};

std::vector<Prefix> BytelessPrefixes(const Grammar& g, const RuleTable& t, const std::vector<char>& nullable) {
  const std::vector<GrammarState>& states = g.states();
  std::vector<Prefix> out(t.starts.size());
  std::vector<int32_t> walked_by(states.size(), -1);
  std::vector<int32_t> work;
  for (size_t r = 0; r < t.starts.size(); ++r) {
    work.assign(1, t.starts[r]);
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      if (walked_by[s] == static_cast<int32_t>(r)) continue;
      walked_by[s] = static_cast<int32_t>(r);
      const GrammarState& st = states[s];
      if (st.rule_end) continue;  // returns to the caller: counted in the caller's own prefix
      ++out[r].states;
      if (st.call_start >= 0) {
        const int32_t callee = t.rule_of_start[st.call_start];
        out[r].callees.push_back(callee);
        if (nullable[callee]) work.push_back(st.call_return);
        continue;
      }
      for (int32_t e : st.eps) work.push_back(e);
    }
  }
  return out;
}

std::string Name(const RuleTable& t, int32_t rule, const absl::flat_hash_map<int32_t, std::string>& labels) {
  if (auto it = labels.find(t.starts[rule]); it != labels.end()) return it->second;
  return rule == t.root ? "the grammar" : "a rule of the grammar";
}

// The labelled rule nearest the top of `path` (the rules being entered, outermost first), else path.back().
int32_t Nearest(const std::vector<int32_t>& path, const RuleTable& t,
                const absl::flat_hash_map<int32_t, std::string>& labels) {
  for (size_t i = path.size(); i-- > 0;)
    if (labels.contains(t.starts[path[i]])) return path[i];
  return path.back();
}

// Checks 2 and 3 by a depth-first walk of the "calls before a byte" graph: a cycle is left recursion;
// the stacks a rule pushes (its states plus, per call, a frame and the callee's own) and the nesting
// depth are summed bottom-up, saturating past the limits.
absl::Status CheckPrefixes(const RuleTable& t, const std::vector<Prefix>& prefixes,
                           const absl::flat_hash_map<int32_t, std::string>& labels) {
  const size_t n = t.starts.size();
  enum : char { kNew, kOpen, kDone };
  std::vector<char> color(n, kNew);
  std::vector<int64_t> nodes(n, 0);
  std::vector<int32_t> depth(n, 0);
  std::vector<std::pair<int32_t, size_t>> stack;  // (rule, next callee to visit)
  std::vector<int32_t> path;
  for (size_t root = 0; root < n; ++root) {
    if (color[root] != kNew) continue;
    stack.emplace_back(static_cast<int32_t>(root), 0);
    path.assign(1, static_cast<int32_t>(root));
    color[root] = kOpen;
    while (!stack.empty()) {
      auto& [r, next] = stack.back();
      const std::vector<int32_t>& callees = prefixes[r].callees;
      if (next < callees.size()) {
        const int32_t c = callees[next++];
        if (color[c] == kOpen) {
          std::vector<int32_t> cycle(std::find(path.begin(), path.end(), c), path.end());
          return absl::InvalidArgumentError(absl::StrCat(
              Name(t, Nearest(cycle, t, labels), labels),
              " recurses into itself before producing any output (left recursion); no output could ever start"));
        }
        if (color[c] == kNew) {
          color[c] = kOpen;
          stack.emplace_back(c, 0);
          path.push_back(c);
        }
        continue;
      }
      int64_t total = prefixes[r].states;
      int32_t deepest = 0;
      for (int32_t c : callees) {
        total = std::min(total + 1 + nodes[c], kMaxClosureNodes + 1);
        deepest = std::max(deepest, depth[c]);
      }
      nodes[r] = total;
      depth[r] = deepest + 1;
      color[r] = kDone;
      if (total > kMaxClosureNodes) {
        return absl::InvalidArgumentError(absl::StrCat(
            Name(t, Nearest(path, t, labels), labels), " branches into more than ", kMaxClosureNodes,
            " parser stacks before its first byte (the limit; alternatives over rule calls such as $refs multiply)"));
      }
      if (depth[r] > kMaxStackDepth) {
        return absl::InvalidArgumentError(
            absl::StrCat(Name(t, Nearest(path, t, labels), labels), " nests more than ", kMaxStackDepth,
                         " rule calls (such as $refs) before its first byte (the limit)"));
      }
      stack.pop_back();
      path.pop_back();
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckGrammarRules(const Grammar& grammar, const absl::flat_hash_map<int32_t, std::string>& labels) {
  if (grammar.root_start() < 0) return absl::InvalidArgumentError("the grammar has no start rule");
  const RuleTable t = FindRules(grammar);
  const std::vector<char> productive = RulesThatCanEnd(grammar, t, /*read_bytes=*/true);
  int32_t unproductive = -1;
  for (size_t r = 0; r < t.starts.size(); ++r) {
    if (productive[r]) continue;
    if (labels.contains(t.starts[r])) {
      unproductive = static_cast<int32_t>(r);
      break;
    }
    if (unproductive < 0) unproductive = static_cast<int32_t>(r);
  }
  if (unproductive >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(Name(t, unproductive, labels),
                                                   " can never end: every way through it recurses into it again, so "
                                                   "no finite output satisfies it"));
  }
  const std::vector<char> nullable = RulesThatCanEnd(grammar, t, /*read_bytes=*/false);
  return CheckPrefixes(t, BytelessPrefixes(grammar, t, nullable), labels);
}

}  // namespace orca::structured
