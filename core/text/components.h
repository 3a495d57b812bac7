#pragma once
/// Internal building blocks of the tokenizer pipeline, mirroring the
/// components of Hugging Face `tokenizer.json`: normalizers and
/// pre-tokenizers, parsed from their JSON descriptions. Unsupported component
/// types are rejected with an error naming them.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/text/regex.h"

namespace orca::text {

/// The GPT-2 byte-to-unicode table: every byte maps to a printable code point.
char32_t ByteToUnicode(uint8_t byte);
/// Inverse of ByteToUnicode; -1 for code points outside the table.
int UnicodeToByte(char32_t cp);
/// Maps each byte of `text` through ByteToUnicode.
std::string BytesToUnicodeString(std::string_view text);

/// The pre-tokenizer regexes of the well-known byte-level BPE families.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
/// tiktoken's o200k split, as the tokenizer.json of gpt-oss and Phi-4-mini writes it (llama.cpp's "gpt-4o").
inline constexpr std::string_view kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
/// Mistral's Tekken split (Mistral Nemo, Ministral 3, Mistral Small 3.x; llama.cpp's "tekken"): o200k's without
/// the contractions, digits one by one.
inline constexpr std::string_view kTekkenPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string Normalize(std::string_view text) const = 0;
};

/// How a Split pre-tokenizer treats the pieces its pattern matches.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

/// Splits `text` around the matches of `re` (code point offsets), as HF's
/// `NormalizedString::split` does. Empty pieces are dropped.
std::vector<std::string> SplitWithPattern(std::string_view text, const Regex& re, SplitBehavior behavior, bool invert);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  /// Splits one piece; `section_index` is the index of the text section
  /// between added tokens (Metaspace's prepend_scheme "first" uses it).
  virtual void PreTokenize(std::string_view piece, int section_index, std::vector<std::string>* out) const = 0;
};

/// Parses a `normalizer` / `pre_tokenizer` object (null gives nullptr).
absl::StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const nlohmann::json& j);
absl::StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const nlohmann::json& j);

/// Builders used for GGUF vocabularies.
std::unique_ptr<Normalizer> MakeSentencePieceNormalizer(bool add_space_prefix);
absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeByteLevelPreTokenizer(std::string_view split_pattern);

/// Runs a JSON-reading function, turning nlohmann exceptions into
/// InvalidArgument (nlohmann reports type errors by throwing).
template <typename F>
auto GuardJson(std::string_view what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(std::string(what) + ": " + e.what());
  }
}

}  // namespace orca::text
