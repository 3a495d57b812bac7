#include "core/text/token_model.h"

#include <queue>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace orca::text {
namespace {

// Byte length of the UTF-8 sequence starting with `lead` (1 for stray bytes).
size_t Utf8Len(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

std::vector<std::string_view> SplitChars(std::string_view word) {
  std::vector<std::string_view> chars;
  chars.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    size_t n = std::min(Utf8Len(static_cast<uint8_t>(word[i])), word.size() - i);
    chars.push_back(word.substr(i, n));
    i += n;
  }
  return chars;
}

}  // namespace

std::optional<std::array<int32_t, 256>> FindByteTokens(const Vocab& vocab) {
  std::array<int32_t, 256> ids{};
  for (int b = 0; b < 256; ++b) {
    auto it = vocab.find(absl::StrFormat("<0x%02X>", b));
    if (it == vocab.end()) return std::nullopt;
    ids[b] = it->second;
  }
  return ids;
}

// ---- BPE ----------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(
    Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options) {
  std::unique_ptr<BpeModel> model(new BpeModel());
  model->merges_.reserve(merges.size());
  const size_t prefix_len = options.continuing_subword_prefix.size();
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = vocab.find(a);
    auto ib = vocab.find(b);
    if (ia == vocab.end() || ib == vocab.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.merges[", rank, "] ('", a, "', '", b, "') uses a token missing from model.vocab"));
    }
    std::string merged = a;
    merged +=
        (prefix_len > 0 && b.compare(0, prefix_len, options.continuing_subword_prefix) == 0) ? b.substr(prefix_len) : b;
    auto im = vocab.find(merged);
    if (im == vocab.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.merges[", rank, "] produces '", merged, "', which is missing from model.vocab"));
    }
    // The first (lowest-rank) occurrence of a pair wins, as in HF tokenizers.
    model->merges_.try_emplace(Key(ia->second, ib->second), Merge{static_cast<int32_t>(rank), im->second});
  }
  if (options.byte_fallback) model->byte_tokens_ = FindByteTokens(vocab);
  model->vocab_ = std::move(vocab);
  model->options_ = std::move(options);
  return model;
}

void BpeModel::Encode(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    auto it = vocab_.find(AsAbsl(word));
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int prev;
    int next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  std::vector<std::string_view> chars = SplitChars(word);
  symbols.reserve(chars.size());
  std::string scratch;
  for (size_t i = 0; i < chars.size(); ++i) {
    scratch.clear();
    if (i > 0) scratch += options_.continuing_subword_prefix;
    scratch.append(chars[i]);
    if (i + 1 == chars.size()) scratch += options_.end_of_word_suffix;
    auto it = vocab_.find(scratch);
    if (it != vocab_.end()) {
      symbols.push_back({it->second, 0, 0, true});
    } else if (byte_tokens_.has_value()) {
      for (char c : chars[i]) symbols.push_back({(*byte_tokens_)[static_cast<uint8_t>(c)], 0, 0, true});
    } else if (options_.unk_id.has_value()) {
      bool fuse = options_.fuse_unk && !symbols.empty() && symbols.back().id == *options_.unk_id;
      if (!fuse) symbols.push_back({*options_.unk_id, 0, 0, true});
    }
  }
  const int n = static_cast<int>(symbols.size());
  for (int i = 0; i < n; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int left;
    int32_t left_id;
    int32_t right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int left) {
    if (left < 0) return;
    int right = symbols[left].next;
    if (right < 0) return;
    auto it = merges_.find(Key(symbols[left].id, symbols[right].id));
    if (it != merges_.end()) queue.push({it->second.rank, left, symbols[left].id, symbols[right].id});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    if (!left.alive || left.id != c.left_id || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.id != c.right_id) continue;
    left.id = merges_.at(Key(c.left_id, c.right_id)).new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev);
    consider(c.left);
  }
  for (int i = n > 0 ? 0 : -1; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
}

// ---- SentencePiece (score-based) ------------------------------------------------

absl::StatusOr<std::unique_ptr<SentencePieceModel>> SentencePieceModel::Create(const std::vector<std::string>& tokens,
                                                                               std::vector<float> scores,
                                                                               std::optional<int32_t> unk_id) {
  if (scores.size() != tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary has ", tokens.size(), " tokens but ", scores.size(), " scores"));
  }
  std::unique_ptr<SentencePieceModel> model(new SentencePieceModel());
  model->vocab_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) model->vocab_.try_emplace(tokens[i], static_cast<int32_t>(i));
  model->scores_ = std::move(scores);
  model->unk_id_ = unk_id;
  model->byte_tokens_ = FindByteTokens(model->vocab_);
  return model;
}

void SentencePieceModel::Encode(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  struct Symbol {
    size_t offset;
    size_t len;  // 0 once merged into its left neighbour
    int prev;
    int next;
  };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < word.size();) {
    size_t len = std::min(Utf8Len(static_cast<uint8_t>(word[i])), word.size() - i);
    symbols.push_back({i, len, static_cast<int>(symbols.size()) - 1, static_cast<int>(symbols.size()) + 1});
    i += len;
  }
  symbols.back().next = -1;
  struct Bigram {
    float score;
    int left;
    size_t size;
    // Highest score first; the leftmost pair breaks ties.
    bool operator<(const Bigram& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  std::priority_queue<Bigram> queue;
  auto consider = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[l.next];
    std::string_view text = word.substr(l.offset, l.len + r.len);
    auto it = vocab_.find(AsAbsl(text));
    if (it == vocab_.end()) return;
    queue.push({scores_[it->second], left, text.size()});
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) consider(static_cast<int>(i));
  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    if (l.len == 0 || l.next < 0) continue;
    Symbol& r = symbols[l.next];
    if (r.len == 0 || l.len + r.len != b.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    consider(l.prev);
    consider(b.left);
  }
  for (int i = 0; i >= 0; i = symbols[i].next) {
    std::string_view text = word.substr(symbols[i].offset, symbols[i].len);
    auto it = vocab_.find(AsAbsl(text));
    if (it != vocab_.end()) {
      ids->push_back(it->second);
    } else if (byte_tokens_.has_value()) {
      for (char c : text) ids->push_back((*byte_tokens_)[static_cast<uint8_t>(c)]);
    } else if (unk_id_.has_value()) {
      ids->push_back(*unk_id_);
    }
  }
}

}  // namespace orca::text
