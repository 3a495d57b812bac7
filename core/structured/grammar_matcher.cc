#include "core/structured/grammar_matcher.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace orca::structured {
GrammarRuntime::GrammarRuntime(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  nodes_.push_back({-1, -1, 0});  // kAccept
}

int32_t GrammarRuntime::Intern(int32_t state, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) | static_cast<uint32_t>(parent);
  auto [it, inserted] = intern_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({state, parent, nodes_[parent].depth + 1});
  return it->second;
}

bool GrammarRuntime::FirstVisit(int32_t n) {
  constexpr size_t kLinearScan = 64;  // closures are usually small: a linear scan beats hashing
  if (closure_seen_set_.empty()) {
    if (std::find(closure_seen_.begin(), closure_seen_.end(), n) != closure_seen_.end()) return false;
    closure_seen_.push_back(n);
    if (closure_seen_.size() > kLinearScan) closure_seen_set_.insert(closure_seen_.begin(), closure_seen_.end());
    return true;
  }
  return closure_seen_set_.insert(n).second;
}

void GrammarRuntime::Closure(StateSet* out) {
  const std::vector<GrammarState>& states = grammar_->states();
  std::vector<int32_t>& work = closure_work_;
  closure_seen_.clear();
  closure_seen_set_.clear();
  while (!work.empty()) {
    if (step_nodes_ >= kMaxStepNodes) {
      ++stats_.closure_cuts;
      work.clear();
      break;
    }
    const int32_t n = work.back();
    work.pop_back();
    if (!FirstVisit(n)) continue;
    ++step_nodes_;
    if (n == kAccept) {
      out->push_back(kAccept);
      continue;
    }
    const Node node = nodes_[n];
    const GrammarState& st = states[node.state];
    if (st.rule_end) {
      work.push_back(node.parent);  // the parent frame already holds the return state
      continue;
    }
    if (st.call_start >= 0) {
      if (node.depth >= kMaxStackDepth) continue;
      const int32_t ret = Intern(st.call_return, node.parent);
      work.push_back(Intern(st.call_start, ret));
      continue;
    }
    for (int32_t e : st.eps) work.push_back(Intern(e, node.parent));
    if (!st.edges.empty()) out->push_back(n);
  }
}

GrammarRuntime::StateSet GrammarRuntime::Initial() {
  step_nodes_ = 0;
  StateSet out;
  closure_work_.assign(1, Intern(grammar_->root_start(), kAccept));
  Closure(&out);
  stats_.closure_nodes += step_nodes_;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void GrammarRuntime::AdvanceInto(const StateSet& in, uint8_t byte, StateSet* out) {
  out->clear();
  step_nodes_ = 0;
  const std::vector<GrammarState>& states = grammar_->states();
  // One closure from every stack the byte leads to: a stack reached from two of them is walked once.
  closure_work_.clear();
  for (int32_t n : in) {
    if (n == kAccept) continue;
    const Node node = nodes_[n];
    for (const ByteEdge& e : states[node.state].edges) {
      if (e.lo > byte) break;
      if (byte <= e.hi) closure_work_.push_back(Intern(e.target, node.parent));
    }
  }
  Closure(out);
  stats_.closure_nodes += step_nodes_;
  if (out->size() > 1) {
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
  }
}

GrammarRuntime::StateSet GrammarRuntime::Advance(const StateSet& states, uint8_t byte) {
  StateSet out;
  AdvanceInto(states, byte, &out);
  return out;
}

int32_t GrammarRuntime::InternSet(const StateSet& states) {
  if (states.empty()) return -1;
  std::string key(reinterpret_cast<const char*>(states.data()), states.size() * sizeof(int32_t));
  auto [it, inserted] = set_ids_.try_emplace(std::move(key), static_cast<int32_t>(sets_.size()));
  if (inserted) sets_.push_back(states);
  return it->second;
}

int32_t GrammarRuntime::Step(int32_t set_id, uint8_t byte) {
  const uint64_t key = (static_cast<uint64_t>(set_id) << 8) | byte;
  if (auto it = transitions_.find(key); it != transitions_.end()) return it->second;
  AdvanceInto(sets_[set_id], byte, &scratch_);
  const int32_t next = InternSet(scratch_);
  transitions_.emplace(key, next);
  return next;
}

GrammarRuntime::StateSet GrammarRuntime::AdvanceBytes(StateSet states, std::string_view bytes) {
  int32_t id = InternSet(states);
  for (char c : bytes) {
    if (id < 0) return {};
    id = Step(id, static_cast<uint8_t>(c));
  }
  return id < 0 ? StateSet{} : sets_[id];
}

void GrammarRuntime::Walk(int32_t set_id, TokenMask* mask) {
  const auto& trie = vocab_->trie();
  std::vector<WalkFrame>& stack = walk_stack_;
  stack.assign(1, WalkFrame{0, set_id, 0});
  const int64_t budget_end = stats_.closure_nodes + kMaxMaskNodes;
  while (!stack.empty()) {
    if (stats_.closure_nodes > budget_end) {
      ++stats_.mask_cuts;
      break;
    }
    WalkFrame& f = stack.back();
    const auto& children = trie[f.trie_node].children;
    if (f.next_child == children.size()) {
      stack.pop_back();
      continue;
    }
    const auto [byte, child] = children[f.next_child++];
    ++stats_.trie_nodes_visited;
    const int32_t next = Step(f.set_id, byte);
    if (next < 0) continue;
    for (int32_t t : trie[child].tokens) {
      mask->words[t >> 6] |= uint64_t{1} << (t & 63);
      ++mask->allowed;
    }
    if (!trie[child].children.empty()) stack.push_back(WalkFrame{child, next, 0});  // `f` is not used after this
  }
}

std::shared_ptr<const TokenMask> GrammarRuntime::Mask(const StateSet& states) {
  if (transitions_.size() > kMaxDfaTransitions || masks_.size() >= kMaxCachedMasks) {
    // Restart the caches (matchers hold stack sets, not set ids, so nothing dangles).
    set_ids_.clear();
    sets_.clear();
    transitions_.clear();
    masks_.clear();
  }
  const int32_t id = InternSet(states);
  if (auto it = masks_.find(id); it != masks_.end()) {
    ++stats_.mask_hits;
    return it->second;
  }
  ++stats_.mask_misses;
  auto mask = std::make_shared<TokenMask>();
  mask->words.assign((static_cast<size_t>(vocab_->vocab_size()) + 63) / 64, 0);
  if (id >= 0) Walk(id, mask.get());
  masks_.emplace(id, mask);
  return mask;
}

GrammarRuntime::Stats GrammarRuntime::stats() const {
  Stats s = stats_;
  s.stack_nodes = static_cast<int64_t>(nodes_.size());
  s.dfa_states = static_cast<int64_t>(sets_.size());
  s.dfa_transitions = static_cast<int64_t>(transitions_.size());
  return s;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<GrammarRuntime> runtime, std::vector<int32_t> end_token_ids)
    : runtime_(std::move(runtime)), end_tokens_(std::move(end_token_ids)) {
  for (int32_t id : runtime_->vocab().eos_ids()) end_tokens_.push_back(id);
  std::sort(end_tokens_.begin(), end_tokens_.end());
  end_tokens_.erase(std::unique(end_tokens_.begin(), end_tokens_.end()), end_tokens_.end());
  states_ = runtime_->Initial();
}

bool GrammarMatcher::IsEndToken(int32_t token) const {
  return std::binary_search(end_tokens_.begin(), end_tokens_.end(), token);
}

void GrammarMatcher::ApplyToLogits(float* logits, int32_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  bool allow_end = terminated_ || CanEnd();
  std::shared_ptr<const TokenMask> mask;
  if (!terminated_) {
    mask = runtime_->Mask(states_);
    if (mask->allowed == 0 && !allow_end) allow_end = true;
  }
  std::vector<std::pair<int32_t, float>>& saved = saved_;
  saved.clear();
  if (allow_end)
    for (int32_t t : end_tokens_)
      if (t >= 0 && t < n) saved.emplace_back(t, logits[t]);
  const int32_t vocab = std::min(n, runtime_->vocab().vocab_size());
  if (mask == nullptr || mask->allowed < vocab / 2) {
    // Few allowed: keep them, fill the rest.
    if (mask != nullptr)
      for (int32_t w = 0; w * 64 < vocab; ++w)
        for (uint64_t bits = mask->words[w]; bits != 0; bits &= bits - 1)
          saved.emplace_back(w * 64 + __builtin_ctzll(bits), logits[w * 64 + __builtin_ctzll(bits)]);
    std::fill(logits, logits + n, kNegInf);
  } else {
    // Most allowed (e.g. inside a string): clear only the disallowed ones.
    for (int32_t w = 0; w * 64 < vocab; ++w) {
      uint64_t bits = ~mask->words[w];
      if ((w + 1) * 64 > vocab) bits &= (vocab - w * 64 == 64) ? ~uint64_t{0} : ((uint64_t{1} << (vocab - w * 64)) - 1);
      for (; bits != 0; bits &= bits - 1) logits[w * 64 + __builtin_ctzll(bits)] = kNegInf;
    }
    std::fill(logits + vocab, logits + n, kNegInf);
  }
  for (const auto& [t, v] : saved) logits[t] = v;
}

std::shared_ptr<const TokenMask> GrammarMatcher::CurrentMask() {
  return terminated_ ? nullptr : runtime_->Mask(states_);
}

bool GrammarMatcher::IsAllowed(int32_t token) {
  if (terminated_) return IsEndToken(token);
  std::shared_ptr<const TokenMask> mask = runtime_->Mask(states_);
  if (IsEndToken(token)) return CanEnd() || mask->allowed == 0;
  return token >= 0 && token < runtime_->vocab().vocab_size() && mask->Test(token);
}

absl::Status GrammarMatcher::Accept(int32_t token) {
  if (IsEndToken(token)) {
    if (!terminated_ && !CanEnd() && runtime_->Mask(states_)->allowed != 0)
      return absl::InvalidArgumentError(
          absl::StrCat("token ", token, " ends the output before the grammar is complete"));
    terminated_ = true;
    return absl::OkStatus();
  }
  if (terminated_) return absl::InvalidArgumentError(absl::StrCat("token ", token, " follows the end of the grammar"));
  const std::string& bytes = runtime_->vocab().bytes(token);
  if (bytes.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("token ", token, " (special or unknown) is not allowed by the grammar"));
  GrammarRuntime::StateSet next = runtime_->AdvanceBytes(states_, bytes);
  if (next.empty()) return absl::InvalidArgumentError(absl::StrCat("token ", token, " is not allowed by the grammar"));
  states_ = std::move(next);
  return absl::OkStatus();
}

}  // namespace orca::structured
