#include "core/text/unicode.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "absl/status/status.h"

namespace orca::text {

uint32_t GeneralCategoryMask(char32_t cp) { return U_GET_GC_MASK(static_cast<UChar32>(cp)); }
bool IsLetter(char32_t cp) { return (GeneralCategoryMask(cp) & U_GC_L_MASK) != 0; }
bool IsNumber(char32_t cp) { return (GeneralCategoryMask(cp) & U_GC_N_MASK) != 0; }
bool IsWhiteSpace(char32_t cp) { return u_isUWhiteSpace(static_cast<UChar32>(cp)) != 0; }
bool IsAlphabetic(char32_t cp) { return u_isUAlphabetic(static_cast<UChar32>(cp)) != 0; }
char32_t SimpleCaseFold(char32_t cp) {
  return static_cast<char32_t>(u_foldCase(static_cast<UChar32>(cp), U_FOLD_CASE_DEFAULT));
}

absl::StatusOr<std::string> Normalize(std::string_view text, NormalizationForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case NormalizationForm::kNfc:
      normalizer = icu::Normalizer2::getNFCInstance(status);
      break;
    case NormalizationForm::kNfd:
      normalizer = icu::Normalizer2::getNFDInstance(status);
      break;
    case NormalizationForm::kNfkc:
      normalizer = icu::Normalizer2::getNFKCInstance(status);
      break;
    case NormalizationForm::kNfkd:
      normalizer = icu::Normalizer2::getNFKDInstance(status);
      break;
  }
  if (U_FAILURE(status) || normalizer == nullptr) {
    return absl::InternalError(std::string("ICU normalizer unavailable: ") + u_errorName(status));
  }
  icu::UnicodeString source =
      icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  if (normalizer->isNormalized(source, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  icu::UnicodeString result = normalizer->normalize(source, status);
  if (U_FAILURE(status)) {
    return absl::InvalidArgumentError(std::string("Unicode normalization failed: ") + u_errorName(status));
  }
  std::string out;
  result.toUTF8String(out);
  return out;
}

std::string ToLower(std::string_view text) {
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  s.toLower();
  std::string out;
  s.toUTF8String(out);
  return out;
}

}  // namespace orca::text
