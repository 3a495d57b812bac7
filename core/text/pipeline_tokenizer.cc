#include "core/text/pipeline_tokenizer.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/text/unicode.h"

namespace orca::text {
namespace {

// JS `trim` semantics (White_Space plus U+FEFF), as tokenizers apply to the
// neighbours of lstrip/rstrip added tokens.
bool IsTrimSpace(char32_t c) { return IsWhiteSpace(c) || c == 0xFEFF; }

std::string TrimEnd(std::string_view s) {
  std::vector<size_t> offsets;
  std::vector<char32_t> cps = DecodeUtf8(s, &offsets);
  size_t e = cps.size();
  while (e > 0 && IsTrimSpace(cps[e - 1])) --e;
  return std::string(s.substr(0, offsets[e]));
}

std::string TrimStart(std::string_view s) {
  std::vector<size_t> offsets;
  std::vector<char32_t> cps = DecodeUtf8(s, &offsets);
  size_t b = 0;
  while (b < cps.size() && IsTrimSpace(cps[b])) ++b;
  return std::string(s.substr(offsets[b]));
}

// Rust's `char::is_alphanumeric() || c == '_'`, used by single_word tokens.
bool IsWordCharacter(char32_t c) { return c == '_' || IsAlphabetic(c) || IsNumber(c); }

char32_t CharBefore(std::string_view text, size_t i) {
  size_t b = i;
  while (b > 0 && (static_cast<uint8_t>(text[b - 1]) & 0xC0) == 0x80 && i - b < 3) --b;
  if (b > 0) --b;
  std::vector<char32_t> cps = DecodeUtf8(text.substr(b, i - b));
  return cps.empty() ? 0 : cps.back();
}

char32_t CharAt(std::string_view text, size_t i) {
  std::vector<char32_t> cps = DecodeUtf8(text.substr(i, std::min<size_t>(4, text.size() - i)));
  return cps.empty() ? 0 : cps.front();
}

}  // namespace

std::string Tokenizer::CleanUpTokenizationSpaces(std::string_view text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
  };
  std::string s(text);
  for (const auto& [from, to] : kRules) s = absl::StrReplaceAll(s, {{from, to}});
  return s;
}

absl::StatusOr<std::unique_ptr<PipelineTokenizer>> PipelineTokenizer::Create(TokenizerSpec spec) {
  const size_t n = spec.id_to_token.size();
  if (spec.model == nullptr) return absl::InvalidArgumentError("tokenizer has no model");
  if (spec.present.size() != n || spec.pieces.size() != n || spec.special.size() != n) {
    return absl::InternalError("tokenizer spec tables disagree in size");
  }
  std::unique_ptr<PipelineTokenizer> t(new PipelineTokenizer(std::move(spec)));
  const TokenizerSpec& s = t->spec_;
  t->token_to_id_.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    if (s.present[id]) t->token_to_id_.try_emplace(s.id_to_token[id], static_cast<int32_t>(id));
  }
  for (int m = 0; m < 2; ++m) t->by_first_byte_[m].assign(256, {});
  t->match_text_.resize(s.added_tokens.size());
  for (size_t i = 0; i < s.added_tokens.size(); ++i) {
    const AddedToken& a = s.added_tokens[i];
    if (a.id < 0 || static_cast<size_t>(a.id) >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("added token '", a.content, "' has id ", a.id, " outside the vocabulary (size ", n, ")"));
    }
    const bool normalized = a.normalized && s.normalizer != nullptr;
    t->match_text_[i] = normalized ? s.normalizer->Normalize(a.content) : a.content;
    if (t->match_text_[i].empty()) continue;
    t->by_first_byte_[normalized ? 1 : 0][static_cast<uint8_t>(t->match_text_[i][0])].push_back(static_cast<int>(i));
  }
  for (int m = 0; m < 2; ++m) {
    for (auto& list : t->by_first_byte_[m]) {
      std::stable_sort(list.begin(), list.end(),
                       [&](int a, int b) { return t->match_text_[a].size() > t->match_text_[b].size(); });
    }
  }
  return t;
}

std::vector<PipelineTokenizer::Section> PipelineTokenizer::SplitAdded(std::string_view text, int m) const {
  std::vector<Section> sections;
  size_t start = 0;
  size_t i = 0;
  while (i < text.size()) {
    int found = -1;
    for (int idx : by_first_byte_[m][static_cast<uint8_t>(text[i])]) {
      const std::string& mt = match_text_[idx];
      if (text.compare(i, mt.size(), mt) != 0) continue;
      if (spec_.added_tokens[idx].single_word) {
        if (i > 0 && IsWordCharacter(CharBefore(text, i))) continue;
        size_t end = i + mt.size();
        if (end < text.size() && IsWordCharacter(CharAt(text, end))) continue;
      }
      found = idx;
      break;
    }
    if (found < 0) {
      ++i;
      continue;
    }
    if (i > start) sections.push_back({std::string(text.substr(start, i - start)), -1});
    sections.push_back({match_text_[found], found});
    i += match_text_[found].size();
    start = i;
  }
  if (start < text.size()) sections.push_back({std::string(text.substr(start)), -1});
  for (size_t k = 0; k < sections.size(); ++k) {
    if (sections[k].added < 0) continue;
    const AddedToken& a = spec_.added_tokens[sections[k].added];
    if (a.lstrip && k > 0 && sections[k - 1].added < 0) sections[k - 1].text = TrimEnd(sections[k - 1].text);
    if (a.rstrip && k + 1 < sections.size() && sections[k + 1].added < 0) {
      sections[k + 1].text = TrimStart(sections[k + 1].text);
    }
  }
  return sections;
}

void PipelineTokenizer::EncodePlain(std::string_view text, int section_index, std::vector<int32_t>* ids) const {
  std::string normalized = spec_.normalizer != nullptr ? spec_.normalizer->Normalize(text) : std::string(text);
  if (normalized.empty()) return;
  std::vector<std::string> words;
  for (const Section& s : SplitAdded(normalized, 1)) {
    if (s.text.empty()) continue;
    if (s.added >= 0) {
      ids->push_back(spec_.added_tokens[s.added].id);
      continue;
    }
    words.clear();
    if (spec_.pre_tokenizer != nullptr) {
      spec_.pre_tokenizer->PreTokenize(s.text, section_index, &words);
    } else {
      words.push_back(s.text);
    }
    for (const std::string& w : words) spec_.model->Encode(w, ids);
  }
}

std::vector<int32_t> PipelineTokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = spec_.prefix_ids;
  const std::string clean = SanitizeUtf8(text);
  std::vector<Section> sections = SplitAdded(clean, 0);
  for (size_t i = 0; i < sections.size(); ++i) {
    const Section& s = sections[i];
    if (s.text.empty()) continue;
    if (s.added >= 0) {
      ids.push_back(spec_.added_tokens[s.added].id);
    } else {
      EncodePlain(s.text, static_cast<int>(i), &ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), spec_.suffix_ids.begin(), spec_.suffix_ids.end());
  return ids;
}

absl::StatusOr<std::string> PipelineTokenizer::Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const {
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size() || !spec_.present[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " at position ", i, " is outside the vocabulary (size ", vocab_size(), ")"));
    }
    if (skip_special_tokens && spec_.special[id]) continue;
    joined += spec_.pieces[id];
  }
  std::string text = SanitizeUtf8(joined);
  const DecodeRules& rules = spec_.decode_rules;
  size_t cut = 0;
  for (int k = 0; k < rules.strip_leading && !rules.strip_char.empty(); ++k) {
    if (text.compare(cut, rules.strip_char.size(), rules.strip_char) != 0) break;
    cut += rules.strip_char.size();
  }
  text.erase(0, cut);
  if (rules.clean_up_tokenization_spaces) text = CleanUpTokenizationSpaces(text);
  return text;
}

std::string PipelineTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return spec_.pieces[id];
}

std::string PipelineTokenizer::IdToToken(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return spec_.id_to_token[id];
}

std::optional<int32_t> PipelineTokenizer::TokenToId(std::string_view token) const {
  auto it = token_to_id_.find(AsAbsl(token));
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

bool PipelineTokenizer::IsSpecial(int32_t id) const { return id >= 0 && id < vocab_size() && spec_.special[id]; }

}  // namespace orca::text
