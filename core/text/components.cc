#include "core/text/components.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <array>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/common/status_macros.h"
#include "core/text/unicode.h"

namespace orca::text {
namespace {

using nlohmann::json;

struct ByteTables {
  std::array<char32_t, 256> to_unicode{};
  std::array<std::string, 256> to_utf8{};
  std::array<int16_t, 324> to_byte{};  // code points < 324 -> byte, or -1
};

const ByteTables& Tables() {
  static const ByteTables* tables = [] {
    auto* t = new ByteTables();
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t->to_unicode[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      t->to_utf8[b] = EncodeUtf8(t->to_unicode[b]);
    }
    t->to_byte.fill(-1);
    for (int b = 0; b < 256; ++b) t->to_byte[t->to_unicode[b]] = static_cast<int16_t>(b);
    return t;
  }();
  return *tables;
}

std::string GetString(const json& j, const char* key, std::string fallback = "") {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<std::string>();
}
bool GetBool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<bool>();
}

// `{"String": "x"}` or `{"Regex": "..."}`.
absl::StatusOr<std::unique_ptr<Regex>> ParsePattern(const json& j, std::string_view where) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(std::string(where), ".pattern must be an object"));
  if (j.contains("String")) return Regex::Literal(j.at("String").get<std::string>());
  if (j.contains("Regex")) {
    absl::StatusOr<std::unique_ptr<Regex>> re = Regex::Compile(j.at("Regex").get<std::string>());
    if (!re.ok()) return Annotate(re.status(), std::string(where));
    return re;
  }
  return absl::InvalidArgumentError(absl::StrCat(std::string(where), ".pattern needs a String or Regex"));
}

std::string ReplaceAll(std::string_view text, const Regex& re, std::string_view content) {
  std::vector<size_t> offsets;
  std::vector<char32_t> cps = DecodeUtf8(text, &offsets);
  std::string out;
  size_t last = 0;
  for (const Regex::Match& m : re.FindAll(cps)) {
    out.append(text.substr(offsets[last], offsets[m.begin] - offsets[last]));
    out.append(content);
    last = m.end;
  }
  out.append(text.substr(offsets[last]));
  return out;
}

// ---- Normalizers ------------------------------------------------------------

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string Normalize(std::string_view text) const override {
    std::string s(text);
    for (const auto& step : steps_) s = step->Normalize(s);
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string Normalize(std::string_view text) const override {
    return text.empty() ? std::string() : prefix_ + std::string(text);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Regex> re, std::string content)
      : re_(std::move(re)), content_(std::move(content)) {}
  std::string Normalize(std::string_view text) const override { return ReplaceAll(text, *re_, content_); }

 private:
  std::unique_ptr<Regex> re_;
  std::string content_;
};

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalizationForm form) : form_(form) {}
  std::string Normalize(std::string_view text) const override {
    absl::StatusOr<std::string> s = orca::text::Normalize(text, form_);
    return s.ok() ? *s : std::string(text);
  }

 private:
  NormalizationForm form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string_view text) const override { return ToLower(text); }
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string Normalize(std::string_view text) const override {
    std::vector<size_t> offsets;
    std::vector<char32_t> cps = DecodeUtf8(text, &offsets);
    size_t b = 0, e = cps.size();
    if (left_)
      while (b < e && IsWhiteSpace(cps[b])) ++b;
    if (right_)
      while (e > b && IsWhiteSpace(cps[e - 1])) --e;
    return std::string(text.substr(offsets[b], offsets[e] - offsets[b]));
  }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string_view text) const override {
    std::string out;
    for (char32_t c : DecodeUtf8(text)) {
      if ((GeneralCategoryMask(c) & U_GC_MN_MASK) == 0) AppendUtf8(c, &out);
    }
    return out;
  }
};

absl::StatusOr<std::unique_ptr<Normalizer>> ParseNormalizerImpl(const json& j) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  const std::string type = GetString(j, "type");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const json& item : j.at("normalizers")) {
      ORCA_ASSIGN_OR_RETURN(std::unique_ptr<Normalizer> step, ParseNormalizerImpl(item));
      if (step != nullptr) steps.push_back(std::move(step));
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(steps)));
  }
  if (type == "Prepend") return std::unique_ptr<Normalizer>(new PrependNormalizer(GetString(j, "prepend")));
  if (type == "Replace") {
    ORCA_ASSIGN_OR_RETURN(std::unique_ptr<Regex> re, ParsePattern(j.at("pattern"), "normalizer Replace"));
    return std::unique_ptr<Normalizer>(new ReplaceNormalizer(std::move(re), GetString(j, "content")));
  }
  if (type == "NFC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalizationForm::kNfc));
  if (type == "NFD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalizationForm::kNfd));
  if (type == "NFKC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalizationForm::kNfkc));
  if (type == "NFKD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalizationForm::kNfkd));
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (type == "Strip") {
    return std::unique_ptr<Normalizer>(
        new StripNormalizer(GetBool(j, "strip_left", true), GetBool(j, "strip_right", true)));
  }
  if (type == "StripAccents") return std::unique_ptr<Normalizer>(new StripAccentsNormalizer());
  return absl::UnimplementedError(absl::StrCat("unsupported normalizer type '", type,
                                               "' (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, "
                                               "Lowercase, Strip, StripAccents)"));
}

// ---- Pre-tokenizers ---------------------------------------------------------

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void PreTokenize(std::string_view piece, int section_index, std::vector<std::string>* out) const override {
    std::vector<std::string> current{std::string(piece)};
    for (const auto& step : steps_) {
      std::vector<std::string> next;
      for (size_t i = 0; i < current.size(); ++i) {
        step->PreTokenize(current[i], i == 0 ? section_index : -1, &next);
      }
      current = std::move(next);
    }
    for (std::string& s : current) out->push_back(std::move(s));
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> re, SplitBehavior behavior, bool invert)
      : re_(std::move(re)), behavior_(behavior), invert_(invert) {}
  void PreTokenize(std::string_view piece, int, std::vector<std::string>* out) const override {
    for (std::string& s : SplitWithPattern(piece, *re_, behavior_, invert_)) out->push_back(std::move(s));
  }

 private:
  std::unique_ptr<Regex> re_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> re)
      : add_prefix_space_(add_prefix_space), re_(std::move(re)) {}
  void PreTokenize(std::string_view piece, int, std::vector<std::string>* out) const override {
    std::string text(piece);
    if (add_prefix_space_ && (text.empty() || text[0] != ' ')) text.insert(text.begin(), ' ');
    if (re_ == nullptr) {
      out->push_back(BytesToUnicodeString(text));
      return;
    }
    for (const std::string& s : SplitWithPattern(text, *re_, SplitBehavior::kIsolated, false)) {
      out->push_back(BytesToUnicodeString(s));
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;  // null: use_regex = false
};

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)),
        prepend_(prepend),
        split_(split),
        splitter_(Regex::Literal(replacement_)) {}
  void PreTokenize(std::string_view piece, int section_index, std::vector<std::string>* out) const override {
    std::string text = absl::StrReplaceAll(std::string(piece), {{" ", replacement_}});
    bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
    if (!starts && (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && section_index == 0))) {
      text = replacement_ + text;
    }
    if (!split_) {
      if (!text.empty()) out->push_back(std::move(text));
      return;
    }
    for (std::string& s : SplitWithPattern(text, *splitter_, SplitBehavior::kMergedWithNext, false)) {
      out->push_back(std::move(s));
    }
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
  std::unique_ptr<Regex> splitter_;
};

absl::StatusOr<SplitBehavior> ParseBehavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return absl::InvalidArgumentError(absl::StrCat("unknown Split behavior '", name, "'"));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeSplit(std::string_view pattern, SplitBehavior behavior, bool invert) {
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<Regex> re, Regex::Compile(pattern));
  return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(std::move(re), behavior, invert));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizerImpl(const json& j) {
  if (j.is_null()) return std::unique_ptr<PreTokenizer>();
  const std::string type = GetString(j, "type");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const json& item : j.at("pretokenizers")) {
      ORCA_ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> step, ParsePreTokenizerImpl(item));
      if (step != nullptr) steps.push_back(std::move(step));
    }
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(steps)));
  }
  if (type == "Split") {
    ORCA_ASSIGN_OR_RETURN(std::unique_ptr<Regex> re, ParsePattern(j.at("pattern"), "pre_tokenizer Split"));
    ORCA_ASSIGN_OR_RETURN(SplitBehavior behavior, ParseBehavior(GetString(j, "behavior", "Isolated")));
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(std::move(re), behavior, GetBool(j, "invert", false)));
  }
  if (type == "ByteLevel") {
    std::unique_ptr<Regex> re;
    if (GetBool(j, "use_regex", true)) {
      ORCA_ASSIGN_OR_RETURN(re, Regex::Compile(kGpt2Pattern));
    }
    return std::unique_ptr<PreTokenizer>(
        new ByteLevelPreTokenizer(GetBool(j, "add_prefix_space", false), std::move(re)));
  }
  if (type == "Metaspace") {
    MetaspacePreTokenizer::Prepend prepend = MetaspacePreTokenizer::Prepend::kAlways;
    if (j.contains("prepend_scheme") && !j.at("prepend_scheme").is_null()) {
      const std::string scheme = j.at("prepend_scheme").get<std::string>();
      if (scheme == "first") {
        prepend = MetaspacePreTokenizer::Prepend::kFirst;
      } else if (scheme == "never") {
        prepend = MetaspacePreTokenizer::Prepend::kNever;
      } else if (scheme != "always") {
        return absl::InvalidArgumentError("Metaspace prepend_scheme must be always, first or never, got '" + scheme +
                                          "'");
      }
    } else if (!GetBool(j, "add_prefix_space", true)) {
      prepend = MetaspacePreTokenizer::Prepend::kNever;
    }
    return std::unique_ptr<PreTokenizer>(
        new MetaspacePreTokenizer(GetString(j, "replacement", "\u2581"), prepend, GetBool(j, "split", true)));
  }
  if (type == "Digits") {
    return MakeSplit(GetBool(j, "individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)", SplitBehavior::kIsolated,
                     false);
  }
  if (type == "Whitespace") return MakeSplit(R"(\w+|[^\w\s]+)", SplitBehavior::kRemoved, true);
  if (type == "WhitespaceSplit") return MakeSplit(R"(\s+)", SplitBehavior::kRemoved, false);
  return absl::UnimplementedError(absl::StrCat("unsupported pre_tokenizer type '", type,
                                               "' (supported: Sequence, Split, ByteLevel, Metaspace, Digits, "
                                               "Whitespace, WhitespaceSplit)"));
}

}  // namespace

char32_t ByteToUnicode(uint8_t byte) { return Tables().to_unicode[byte]; }

int UnicodeToByte(char32_t cp) { return cp < Tables().to_byte.size() ? Tables().to_byte[cp] : -1; }

std::string BytesToUnicodeString(std::string_view text) {
  const ByteTables& t = Tables();
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) out += t.to_utf8[static_cast<uint8_t>(c)];
  return out;
}

std::vector<std::string> SplitWithPattern(std::string_view text, const Regex& re, SplitBehavior behavior, bool invert) {
  std::vector<size_t> offsets;
  std::vector<char32_t> cps = DecodeUtf8(text, &offsets);
  struct Segment {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Segment> segments;
  size_t last = 0;
  for (const Regex::Match& m : re.FindAll(cps)) {
    if (m.begin > last) segments.push_back({last, m.begin, invert});
    segments.push_back({m.begin, m.end, !invert});
    last = m.end;
  }
  if (last < cps.size()) segments.push_back({last, cps.size(), invert});

  std::vector<std::pair<size_t, size_t>> pieces;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Segment& s : segments) {
        if (!s.is_match) pieces.emplace_back(s.begin, s.end);
      }
      break;
    case SplitBehavior::kIsolated:
      for (const Segment& s : segments) pieces.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& s : segments) {
        if (s.is_match && !previous_match && !pieces.empty()) {
          pieces.back().second = s.end;
        } else {
          pieces.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t i = segments.size(); i-- > 0;) {
        const Segment& s = segments[i];
        if (s.is_match && !previous_match && !pieces.empty()) {
          pieces.back().first = s.begin;
        } else {
          pieces.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    case SplitBehavior::kContiguous:
      for (size_t i = 0; i < segments.size(); ++i) {
        const Segment& s = segments[i];
        if (i > 0 && s.is_match == previous_match) {
          pieces.back().second = s.end;
        } else {
          pieces.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
  }
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const auto& [b, e] : pieces) {
    if (e > b) out.emplace_back(text.substr(offsets[b], offsets[e] - offsets[b]));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const json& j) {
  return GuardJson("normalizer", [&] { return ParseNormalizerImpl(j); });
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const json& j) {
  return GuardJson("pre_tokenizer", [&] { return ParsePreTokenizerImpl(j); });
}

std::unique_ptr<Normalizer> MakeSentencePieceNormalizer(bool add_space_prefix) {
  std::vector<std::unique_ptr<Normalizer>> steps;
  if (add_space_prefix) steps.push_back(std::make_unique<PrependNormalizer>("\u2581"));
  steps.push_back(std::make_unique<ReplaceNormalizer>(Regex::Literal(" "), "\u2581"));
  return std::make_unique<SequenceNormalizer>(std::move(steps));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeByteLevelPreTokenizer(std::string_view split_pattern) {
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<Regex> re, Regex::Compile(split_pattern));
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  steps.push_back(std::make_unique<SplitPreTokenizer>(std::move(re), SplitBehavior::kIsolated, false));
  steps.push_back(std::make_unique<ByteLevelPreTokenizer>(false, nullptr));
  return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(steps)));
}

}  // namespace orca::text
