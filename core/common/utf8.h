#pragma once
/// UTF-8 coding for every library: encoding code points, decoding with the WHATWG / Unicode
/// "maximal subpart" replacement rule that Python, Rust and JS decoders share, validation and
/// sanitizing (the tokenizers' text, the metrics exposition's label values), and a streaming
/// decoder for text that arrives in pieces.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace orca {

inline constexpr char32_t kReplacementChar = 0xFFFD;

/// Appends the UTF-8 encoding of `cp` (surrogates and values past U+10FFFF
/// are written as U+FFFD).
void AppendUtf8(char32_t cp, std::string* out);
std::string EncodeUtf8(char32_t cp);

/// Decodes UTF-8 into code points; ill-formed sequences become U+FFFD, one per
/// maximal subpart, exactly as `TextDecoder` / `bytes.decode(errors="replace")`.
/// When `byte_offsets` is given it receives the byte offset of each code point
/// plus a final entry equal to `text.size()`.
std::vector<char32_t> DecodeUtf8(std::string_view text, std::vector<size_t>* byte_offsets = nullptr);

/// `text` with ill-formed sequences replaced by U+FFFD (identity on valid UTF-8).
std::string SanitizeUtf8(std::string_view text);
bool IsValidUtf8(std::string_view text);

/// Streaming form of SanitizeUtf8: Feed() returns the characters completed so
/// far; Finish() renders an incomplete tail as U+FFFD. Concatenating every
/// output equals SanitizeUtf8 of the concatenated input, however it is split.
class Utf8StreamDecoder {
 public:
  std::string Feed(std::string_view bytes);
  std::string Finish();
  /// True while a multi-byte sequence is incomplete.
  bool pending() const { return needed_ != 0; }

 private:
  void Byte(uint8_t b, std::string* out);
  char32_t code_point_ = 0;
  int needed_ = 0;
  int seen_ = 0;
  uint8_t lower_ = 0x80;
  uint8_t upper_ = 0xBF;
};

}  // namespace orca
