#include "core/structured/grammar.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/structured/grammar_analysis.h"

namespace orca::structured {
namespace {

// Adds edges for the code points lo..hi (values below 2^(6(k-1)+leading bits)), k bytes remaining,
// the next byte carrying `prefix` bits.
void AddRange(const std::function<int32_t()>& new_state,
              const std::function<void(int32_t, uint8_t, uint8_t, int32_t)>& add_edge, int32_t from, int32_t to,
              uint32_t lo, uint32_t hi, int k, uint8_t prefix) {
  if (k == 1) {
    add_edge(from, static_cast<uint8_t>(prefix | lo), static_cast<uint8_t>(prefix | hi), to);
    return;
  }
  const int shift = 6 * (k - 1);
  const uint32_t m = (1u << shift) - 1;
  if ((lo >> shift) == (hi >> shift)) {
    const int32_t mid = new_state();
    const auto b = static_cast<uint8_t>(prefix | (lo >> shift));
    add_edge(from, b, b, mid);
    AddRange(new_state, add_edge, mid, to, lo & m, hi & m, k - 1, 0x80);
    return;
  }
  if ((lo & m) != 0) {
    AddRange(new_state, add_edge, from, to, lo, lo | m, k, prefix);
    AddRange(new_state, add_edge, from, to, (lo | m) + 1, hi, k, prefix);
    return;
  }
  if ((hi & m) != m) {
    AddRange(new_state, add_edge, from, to, lo, (hi & ~m) - 1, k, prefix);
    AddRange(new_state, add_edge, from, to, hi & ~m, hi, k, prefix);
    return;
  }
  const int32_t mid = new_state();
  add_edge(from, static_cast<uint8_t>(prefix | (lo >> shift)), static_cast<uint8_t>(prefix | (hi >> shift)), mid);
  AddRange(new_state, add_edge, mid, to, 0, m, k - 1, 0x80);
}

}  // namespace

std::string EncodeUtf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

std::string ShortenForMessage(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  auto continuation = [&](size_t i) { return i < text.size() && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80; };
  size_t head = max_bytes / 2, tail = text.size() - max_bytes / 2;
  while (head > 0 && continuation(head)) --head;
  while (tail < text.size() && continuation(tail)) ++tail;
  return absl::StrCat(std::string(text.substr(0, head)), "...(", tail - head, " bytes)...",
                      std::string(text.substr(tail)));
}

int32_t GrammarBuilder::NewState() {
  if (static_cast<int64_t>(g_->states_.size()) >= max_states_) {
    exhausted_ = true;
    // Keep building on a sink state so callers need no error checks; Finish() reports it.
    if (g_->states_.empty()) g_->states_.emplace_back();
    return 0;
  }
  g_->states_.emplace_back();
  return static_cast<int32_t>(g_->states_.size() - 1);
}

Fragment GrammarBuilder::Empty() {
  const int32_t s = NewState();
  return {s, s};
}

Fragment GrammarBuilder::Literal(std::string_view bytes) {
  const int32_t start = NewState();
  int32_t cur = start;
  for (char c : bytes) {
    const int32_t next = NewState();
    const auto b = static_cast<uint8_t>(c);
    AddEdge(cur, b, b, next);
    cur = next;
  }
  return {start, cur};
}

Fragment GrammarBuilder::Bytes(uint8_t lo, uint8_t hi) {
  const int32_t s = NewState(), e = NewState();
  AddEdge(s, lo, hi, e);
  return {s, e};
}

void GrammarBuilder::AddUtf8Range(int32_t from, int32_t to, uint32_t lo, uint32_t hi) {
  auto new_state = [this] { return NewState(); };
  auto add_edge = [this](int32_t f, uint8_t l, uint8_t h, int32_t t) { AddEdge(f, l, h, t); };
  int k = 1;
  uint8_t prefix = 0;
  if (lo >= 0x10000) {
    k = 4;
    prefix = 0xF0;
  } else if (lo >= 0x800) {
    k = 3;
    prefix = 0xE0;
  } else if (lo >= 0x80) {
    k = 2;
    prefix = 0xC0;
  }
  AddRange(new_state, add_edge, from, to, lo, hi, k, prefix);
}

Fragment GrammarBuilder::Codepoints(const CodepointRanges& ranges) {
  const int32_t s = NewState(), e = NewState();
  static constexpr std::pair<uint32_t, uint32_t> kPieces[] = {
      {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
  for (const auto& [lo, hi] : ranges) {
    for (const auto& [plo, phi] : kPieces) {
      const uint32_t a = std::max(lo, plo), b = std::min(hi, phi);
      if (a <= b) AddUtf8Range(s, e, a, b);
    }
  }
  return {s, e};
}

Fragment GrammarBuilder::Seq(Fragment a, Fragment b) {
  AddEps(a.end, b.start);
  return {a.start, b.end};
}

Fragment GrammarBuilder::Seq(const std::vector<Fragment>& parts) {
  if (parts.empty()) return Empty();
  Fragment f = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) f = Seq(f, parts[i]);
  return f;
}

Fragment GrammarBuilder::Alt(const std::vector<Fragment>& alternatives) {
  if (alternatives.size() == 1) return alternatives[0];
  const int32_t s = NewState(), e = NewState();
  for (const Fragment& f : alternatives) {
    AddEps(s, f.start);
    AddEps(f.end, e);
  }
  return {s, e};
}

Fragment GrammarBuilder::Optional(Fragment f) {
  const int32_t s = NewState(), e = NewState();
  AddEps(s, f.start);
  AddEps(f.end, e);
  AddEps(s, e);
  return {s, e};
}

Fragment GrammarBuilder::Star(Fragment f) {
  const int32_t s = NewState(), e = NewState();
  AddEps(s, f.start);
  AddEps(s, e);
  AddEps(f.end, s);
  return {s, e};
}

Fragment GrammarBuilder::Repeat(const std::function<Fragment()>& make, int64_t min, int64_t max) {
  std::vector<Fragment> parts;
  for (int64_t i = 0; i < min && !exhausted_; ++i) parts.push_back(make());
  if (max < 0) {
    parts.push_back(Star(make()));
  } else if (max > min) {
    // x{0,k} = (x (x (...)?)?)?: nested, so each count has exactly one path.
    Fragment tail = Optional(make());
    for (int64_t i = min + 1; i < max && !exhausted_; ++i) tail = Optional(Seq(make(), tail));
    parts.push_back(tail);
  }
  return Seq(parts);
}

Rule GrammarBuilder::NewRule() {
  const int32_t s = NewState(), e = NewState();
  g_->states_[e].rule_end = true;
  ++g_->num_rules_;
  return {s, e};
}

void GrammarBuilder::DefineRule(Rule rule, Fragment body) {
  AddEps(rule.start, body.start);
  AddEps(body.end, rule.end);
}

Fragment GrammarBuilder::Call(Rule rule) {
  const int32_t c = NewState(), r = NewState();
  g_->states_[c].call_start = rule.start;
  g_->states_[c].call_return = r;
  return {c, r};
}

absl::StatusOr<std::shared_ptr<const Grammar>> GrammarBuilder::Finish(Rule root) {
  if (exhausted_) {
    return absl::InvalidArgumentError(absl::StrCat("the grammar needs more than ", max_states_,
                                                   " automaton states (the limit); simplify the constraint"));
  }
  g_->root_start_ = root.start;
  for (GrammarState& st : g_->states_)
    std::sort(st.edges.begin(), st.edges.end(), [](const ByteEdge& a, const ByteEdge& b) { return a.lo < b.lo; });
  std::shared_ptr<const Grammar> out = std::move(g_);
  g_ = std::make_shared<Grammar>();
  absl::flat_hash_map<int32_t, std::string> labels = std::move(labels_);
  labels_.clear();
  if (absl::Status status = CheckGrammarRules(*out, labels); !status.ok()) return status;
  return out;
}

}  // namespace orca::structured
