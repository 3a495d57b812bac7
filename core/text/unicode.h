#pragma once
/// Unicode helpers for the tokenizers: general categories and normalization forms (backed by
/// ICU), and the UTF-8 coding of core/common/utf8.h under orca::text names.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/utf8.h"

namespace orca::text {

// UTF-8 coding lives in core/common (the metrics exposition sanitizes label values with it
// too); the tokenizers use it under these names.
using ::orca::AppendUtf8;
using ::orca::DecodeUtf8;
using ::orca::EncodeUtf8;
using ::orca::IsValidUtf8;
using ::orca::kReplacementChar;
using ::orca::SanitizeUtf8;
using ::orca::Utf8StreamDecoder;

/// ICU general-category mask of `cp` (U_GC_*_MASK bits).
uint32_t GeneralCategoryMask(char32_t cp);
bool IsLetter(char32_t cp);      // \p{L}
bool IsNumber(char32_t cp);      // \p{N}
bool IsWhiteSpace(char32_t cp);  // \p{White_Space}
bool IsAlphabetic(char32_t cp);  // \p{Alphabetic}
/// Simple case folding (as used for case-insensitive regex matching).
char32_t SimpleCaseFold(char32_t cp);

enum class NormalizationForm { kNfc, kNfd, kNfkc, kNfkd };
/// Unicode normalization of valid UTF-8 text.
absl::StatusOr<std::string> Normalize(std::string_view text, NormalizationForm form);
std::string ToLower(std::string_view text);

}  // namespace orca::text
