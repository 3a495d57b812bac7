#include "core/common/utf8.h"

namespace orca {

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(char32_t cp) {
  std::string out;
  AppendUtf8(cp, &out);
  return out;
}

namespace {

// The WHATWG "UTF-8 decoder" state machine, driven one byte at a time.
// `emit(cp)` receives code points; `consumed` says whether `b` was used or
// must be processed again (after an ill-formed sequence ended at it).
struct Utf8State {
  char32_t cp = 0;
  int needed = 0;
  int seen = 0;
  uint8_t lower = 0x80;
  uint8_t upper = 0xBF;
  bool error = false;  // the last Step produced U+FFFD for ill-formed input

  // Returns true when `b` was consumed. Sets *out to a completed code point or
  // to U+FFFD; *has_out says whether one was produced.
  bool Step(uint8_t b, char32_t* out, bool* has_out) {
    *has_out = false;
    error = false;
    if (needed == 0) {
      if (b < 0x80) {
        *out = b;
        *has_out = true;
      } else if (b >= 0xC2 && b <= 0xDF) {
        needed = 1;
        cp = b & 0x1F;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower = 0xA0;
        if (b == 0xED) upper = 0x9F;
        needed = 2;
        cp = b & 0x0F;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower = 0x90;
        if (b == 0xF4) upper = 0x8F;
        needed = 3;
        cp = b & 0x07;
      } else {
        *out = kReplacementChar;
        *has_out = true;
        error = true;
      }
      return true;
    }
    if (b < lower || b > upper) {
      Reset();
      *out = kReplacementChar;
      *has_out = true;
      error = true;
      return false;  // reprocess b
    }
    lower = 0x80;
    upper = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
    if (++seen == needed) {
      *out = cp;
      *has_out = true;
      Reset();
    }
    return true;
  }
  void Reset() {
    cp = 0;
    needed = 0;
    seen = 0;
    lower = 0x80;
    upper = 0xBF;
  }
};

}  // namespace

std::vector<char32_t> DecodeUtf8(std::string_view text, std::vector<size_t>* byte_offsets) {
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  if (byte_offsets != nullptr) {
    byte_offsets->clear();
    byte_offsets->reserve(text.size() + 1);
  }
  Utf8State state;
  size_t start = 0;  // byte offset where the current sequence began
  size_t i = 0;
  while (i < text.size()) {
    if (state.needed == 0) start = i;
    char32_t cp;
    bool has;
    bool consumed = state.Step(static_cast<uint8_t>(text[i]), &cp, &has);
    if (has) {
      cps.push_back(cp);
      if (byte_offsets != nullptr) byte_offsets->push_back(start);
      start = consumed ? i + 1 : i;
    }
    if (consumed) ++i;
  }
  if (state.needed != 0) {
    cps.push_back(kReplacementChar);
    if (byte_offsets != nullptr) byte_offsets->push_back(start);
  }
  if (byte_offsets != nullptr) byte_offsets->push_back(text.size());
  return cps;
}

bool IsValidUtf8(std::string_view text) {
  Utf8State state;
  for (char c : text) {
    char32_t cp;
    bool has;
    state.Step(static_cast<uint8_t>(c), &cp, &has);
    if (state.error) return false;
  }
  return state.needed == 0;
}

std::string SanitizeUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  Utf8StreamDecoder decoder;
  std::string out = decoder.Feed(text);
  out += decoder.Finish();
  return out;
}

void Utf8StreamDecoder::Byte(uint8_t b, std::string* out) {
  Utf8State state{code_point_, needed_, seen_, lower_, upper_, false};
  bool consumed;
  do {
    char32_t cp;
    bool has;
    consumed = state.Step(b, &cp, &has);
    if (has) AppendUtf8(cp, out);
  } while (!consumed);
  code_point_ = state.cp;
  needed_ = state.needed;
  seen_ = state.seen;
  lower_ = state.lower;
  upper_ = state.upper;
}

std::string Utf8StreamDecoder::Feed(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (char c : bytes) Byte(static_cast<uint8_t>(c), &out);
  return out;
}

std::string Utf8StreamDecoder::Finish() {
  std::string out;
  if (needed_ != 0) AppendUtf8(kReplacementChar, &out);
  code_point_ = 0;
  needed_ = 0;
  seen_ = 0;
  lower_ = 0x80;
  upper_ = 0xBF;
  return out;
}

}  // namespace orca
