#include "core/structured/token_vocabulary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace orca::structured {

absl::StatusOr<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::FromTokenizer(const text::Tokenizer& tokenizer,
                                                                                      int32_t vocab_size) {
  const int32_t n = tokenizer.vocab_size();
  if (vocab_size == 0) vocab_size = n;
  if (vocab_size < n)
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", vocab_size, " logits but its tokenizer ", n, " tokens"));
  std::vector<std::string> bytes(vocab_size);
  for (int32_t id = 0; id < n; ++id)
    if (!tokenizer.IsSpecial(id)) bytes[id] = tokenizer.TokenBytes(id);
  std::vector<int32_t> eos;
  for (int32_t id : tokenizer.eos_ids())
    if (id >= 0 && id < vocab_size) eos.push_back(id);
  for (int32_t id : eos) bytes[id].clear();
  return FromBytes(std::move(bytes), std::move(eos));
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::FromBytes(std::vector<std::string> token_bytes,
                                                                  std::vector<int32_t> eos_ids) {
  auto v = std::shared_ptr<TokenVocabulary>(new TokenVocabulary());
  v->vocab_size_ = static_cast<int32_t>(token_bytes.size());
  v->bytes_ = std::move(token_bytes);
  v->eos_ids_ = std::move(eos_ids);
  for (int32_t id : v->eos_ids_)
    if (id >= 0 && id < v->vocab_size_) v->bytes_[id].clear();
  v->BuildTrie();
  return v;
}

const std::string& TokenVocabulary::bytes(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || id >= vocab_size_) return kEmpty;
  return bytes_[id];
}

void TokenVocabulary::BuildTrie() {
  // Insert tokens in byte order so every node's children come out sorted.
  std::vector<int32_t> order;
  for (int32_t id = 0; id < vocab_size_; ++id)
    if (!bytes_[id].empty()) order.push_back(id);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  num_trie_tokens_ = static_cast<int32_t>(order.size());
  trie_.assign(1, TrieNode{});
  for (int32_t id : order) {
    int32_t cur = 0;
    for (char c : bytes_[id]) {
      const auto b = static_cast<uint8_t>(c);
      auto& kids = trie_[cur].children;
      if (!kids.empty() && kids.back().first == b) {
        cur = kids.back().second;
      } else {
        const auto next = static_cast<int32_t>(trie_.size());
        trie_[cur].children.emplace_back(b, next);
        trie_.emplace_back();
        cur = next;
      }
    }
    trie_[cur].tokens.push_back(id);
  }
}

}  // namespace orca::structured
