#include "core/structured/regex_compiler.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/structured/limits.h"

namespace orca::structured {
namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;
constexpr int kMaxCount = 1000;

struct RegexNode {
  enum class Kind { kSet, kSeq, kAlt, kRepeat };
  Kind kind = Kind::kSeq;
  CodepointRanges set;
  std::vector<RegexNode> kids;
  int min = 0;
  int max = 0;  // -1: unbounded
  size_t offset = 0;
  int nesting = 0;  // groups and quantifiers around the innermost atom (kMaxRegexDepth)
};

CodepointRanges Normalize(CodepointRanges r) {
  std::sort(r.begin(), r.end());
  CodepointRanges out;
  for (const auto& p : r) {
    if (!out.empty() && p.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, p.second);
    } else {
      out.push_back(p);
    }
  }
  return out;
}

CodepointRanges Complement(const CodepointRanges& r) {
  CodepointRanges n = Normalize(r), out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : n) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.emplace_back(next, kMaxCodepoint);
  return out;
}

CodepointRanges Intersect(const CodepointRanges& a, const CodepointRanges& b) {
  CodepointRanges out;
  for (const auto& [alo, ahi] : Normalize(a))
    for (const auto& [blo, bhi] : Normalize(b)) {
      const uint32_t lo = std::max(alo, blo), hi = std::min(ahi, bhi);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  return Normalize(out);
}

// JavaScript's \s (what ajv's RegExp uses).
CodepointRanges JsSpace() {
  return {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}
CodepointRanges Digits() { return {{'0', '9'}}; }
CodepointRanges Word() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
// '.': anything but JavaScript's line terminators.
CodepointRanges AnyButNewline() { return Complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<RegexNode> Parse() {
    size_t end = text_.size();
    if (!text_.empty() && text_[0] == '^') pos_ = 1;
    // A trailing unescaped '$' is an end anchor.
    if (end > pos_ && text_[end - 1] == '$') {
      size_t backslashes = 0;
      for (size_t i = end - 1; i > pos_ && text_[i - 1] == '\\'; --i) ++backslashes;
      if (backslashes % 2 == 0) --end;
    }
    end_ = end;
    ORCA_ASSIGN_OR_RETURN(RegexNode node, ParseAlt());
    if (pos_ < end_) return Error(pos_, "unmatched ')'");
    return node;
  }

 private:
  absl::Status Error(size_t at, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("regex: ", std::string(what), " at offset ", at, " of \"", ShortenForMessage(text_), "\""));
  }
  absl::Status NestingError(size_t at) const {
    return Error(at, absl::StrCat("groups and quantifiers nest deeper than ", kMaxRegexDepth, " levels (the limit)"));
  }
  bool AtEnd() const { return pos_ >= end_; }
  char Peek() const { return text_[pos_]; }

  absl::StatusOr<RegexNode> ParseAlt() {
    RegexNode alt{RegexNode::Kind::kAlt};
    alt.offset = pos_;
    ORCA_ASSIGN_OR_RETURN(RegexNode first, ParseSeq());
    alt.kids.push_back(std::move(first));
    while (!AtEnd() && Peek() == '|') {
      ++pos_;
      ORCA_ASSIGN_OR_RETURN(RegexNode next, ParseSeq());
      alt.kids.push_back(std::move(next));
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    for (const RegexNode& k : alt.kids) alt.nesting = std::max(alt.nesting, k.nesting);
    return alt;
  }

  absl::StatusOr<RegexNode> ParseSeq() {
    RegexNode seq{RegexNode::Kind::kSeq};
    seq.offset = pos_;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      ORCA_ASSIGN_OR_RETURN(RegexNode atom, ParseAtom());
      ORCA_ASSIGN_OR_RETURN(atom, ParseQuantifiers(std::move(atom)));
      seq.nesting = std::max(seq.nesting, atom.nesting);
      seq.kids.push_back(std::move(atom));
    }
    return seq;
  }

  // Reads {m}, {m,} or {m,n} at pos_ (on '{'); false (pos_ unchanged) when it is not one.
  bool ReadCounts(int* min, int* max) {
    size_t p = pos_ + 1;
    auto number = [&](int* out) {
      const size_t start = p;
      int64_t v = 0;
      while (p < end_ && text_[p] >= '0' && text_[p] <= '9') {
        v = std::min<int64_t>(v * 10 + (text_[p] - '0'), 1'000'000);
        ++p;
      }
      *out = static_cast<int>(v);
      return p > start;
    };
    if (!number(min)) return false;
    *max = *min;
    if (p < end_ && text_[p] == ',') {
      ++p;
      if (!number(max)) *max = -1;
    }
    if (p >= end_ || text_[p] != '}') return false;
    pos_ = p + 1;
    return true;
  }

  absl::StatusOr<RegexNode> ParseQuantifiers(RegexNode atom) {
    while (!AtEnd()) {
      const size_t at = pos_;
      int min = 0, max = 0;
      const char c = Peek();
      if (c == '*') {
        max = -1, ++pos_;
      } else if (c == '+') {
        min = 1, max = -1, ++pos_;
      } else if (c == '?') {
        max = 1, ++pos_;
      } else if (c == '{') {
        if (!ReadCounts(&min, &max)) return atom;  // a literal '{' follows
        if (min > kMaxCount || max > kMaxCount)
          return Error(at, absl::StrCat("repetition counts above ", kMaxCount, " are not supported"));
        if (max >= 0 && max < min) return Error(at, "repetition {m,n} with n < m");
      } else {
        return atom;
      }
      if (!AtEnd() && Peek() == '?') ++pos_;  // lazy: same language
      if (!AtEnd() && Peek() == '+') return Error(pos_, "possessive quantifiers are not supported");
      RegexNode rep{RegexNode::Kind::kRepeat};
      rep.min = min;
      rep.max = max;
      rep.offset = at;
      rep.nesting = atom.nesting + 1;
      if (rep.nesting > kMaxRegexDepth) return NestingError(at);
      rep.kids.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  static RegexNode SetNode(CodepointRanges set, size_t at) {
    RegexNode n{RegexNode::Kind::kSet};
    n.set = Normalize(std::move(set));
    n.offset = at;
    return n;
  }

  // Decodes one UTF-8 character at pos_.
  absl::StatusOr<uint32_t> ReadChar() {
    const auto c = static_cast<unsigned char>(text_[pos_]);
    int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || pos_ + len > end_) return Error(pos_, "invalid UTF-8");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text_[pos_ + k]) & 0x3F);
    pos_ += len;
    return cp;
  }

  // An escape at pos_ (just after the backslash): a class or one character.
  absl::StatusOr<CodepointRanges> ReadEscape(bool in_class) {
    const size_t at = pos_ - 1;
    if (AtEnd()) return Error(at, "trailing backslash");
    const char c = text_[pos_++];
    switch (c) {
      case 'd':
        return Digits();
      case 'D':
        return Complement(Digits());
      case 'w':
        return Word();
      case 'W':
        return Complement(Word());
      case 's':
        return JsSpace();
      case 'S':
        return Complement(JsSpace());
      case 'n':
        return CodepointRanges{{'\n', '\n'}};
      case 'r':
        return CodepointRanges{{'\r', '\r'}};
      case 't':
        return CodepointRanges{{'\t', '\t'}};
      case 'f':
        return CodepointRanges{{'\f', '\f'}};
      case 'v':
        return CodepointRanges{{'\v', '\v'}};
      case '0':
        return CodepointRanges{{0, 0}};
      case 'b':
        if (in_class) return CodepointRanges{{'\b', '\b'}};
        return Error(at, "word boundaries (\\b) are not supported");
      case 'B':
        return Error(at, "word boundaries (\\B) are not supported");
      case 'k':
        return Error(at, "backreferences (\\k<name>) are not supported");
      case 'p':
      case 'P':
        return Error(at, "Unicode property classes (\\p{...}) are not supported");
      case 'x':
      case 'u': {
        const int digits = c == 'x' ? 2 : 4;
        if (pos_ + digits > end_) return Error(at, "incomplete hex escape");
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
          const int h = HexValue(text_[pos_ + i]);
          if (h < 0) return Error(at, "invalid hex escape");
          v = v * 16 + h;
        }
        pos_ += digits;
        if (v >= 0xD800 && v <= 0xDFFF) return Error(at, "surrogate escapes are not supported");
        return CodepointRanges{{v, v}};
      }
      default:
        break;
    }
    if (c >= '1' && c <= '9') return Error(at, "backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      return Error(at, absl::StrCat("unknown escape \\", std::string(1, c)));
    --pos_;
    ORCA_ASSIGN_OR_RETURN(uint32_t cp, ReadChar());
    return CodepointRanges{{cp, cp}};
  }

  absl::StatusOr<RegexNode> ParseClass() {
    const size_t at = pos_;
    ++pos_;  // '['
    bool negate = false;
    if (!AtEnd() && Peek() == '^') negate = true, ++pos_;
    CodepointRanges set;
    bool first = true;
    while (true) {
      if (AtEnd()) return Error(at, "unterminated character class");
      if (Peek() == ']' && !first) break;
      first = false;
      auto read_item = [&]() -> absl::StatusOr<CodepointRanges> {
        if (Peek() == '\\') {
          ++pos_;
          return ReadEscape(/*in_class=*/true);
        }
        if (Peek() == '[' && pos_ + 1 < end_ && text_[pos_ + 1] == ':')
          return Error(pos_, "POSIX classes ([:alpha:]) are not supported");
        ORCA_ASSIGN_OR_RETURN(uint32_t cp, ReadChar());
        return CodepointRanges{{cp, cp}};
      };
      const size_t item_at = pos_;
      ORCA_ASSIGN_OR_RETURN(CodepointRanges lo, read_item());
      if (pos_ + 1 < end_ && Peek() == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        ORCA_ASSIGN_OR_RETURN(CodepointRanges hi, read_item());
        if (lo.size() != 1 || hi.size() != 1 || lo[0].first != lo[0].second || hi[0].first != hi[0].second)
          return Error(item_at, "a class range must be between two single characters");
        if (hi[0].first < lo[0].first) return Error(item_at, "class range out of order");
        set.emplace_back(lo[0].first, hi[0].first);
      } else {
        set.insert(set.end(), lo.begin(), lo.end());
      }
    }
    ++pos_;  // ']'
    return SetNode(negate ? Complement(set) : set, at);
  }

  absl::StatusOr<RegexNode> ParseGroup() {
    const size_t at = pos_;
    // Checked on the way down: the parser recurses once per open group.
    if (group_depth_ >= kMaxRegexDepth) return NestingError(at);
    ++pos_;  // '('
    if (!AtEnd() && Peek() == '?') {
      const std::string_view rest = text_.substr(pos_, end_ - pos_);
      if (rest.starts_with("?:")) {
        pos_ += 2;
      } else if (rest.starts_with("?=") || rest.starts_with("?!") || rest.starts_with("?<=") ||
                 rest.starts_with("?<!")) {
        return Error(at, "lookaround assertions are not supported");
      } else if (rest.starts_with("?<") || rest.starts_with("?P<")) {
        const size_t close = text_.find('>', pos_);
        if (close == std::string_view::npos || close >= end_) return Error(at, "unterminated group name");
        pos_ = close + 1;
      } else {
        return Error(at, "inline flags and other (?...) groups are not supported");
      }
    }
    ++group_depth_;
    absl::StatusOr<RegexNode> inner = ParseAlt();
    --group_depth_;
    if (!inner.ok()) return inner.status();
    if (AtEnd() || Peek() != ')') return Error(at, "unterminated group");
    ++pos_;
    if (++inner->nesting > kMaxRegexDepth) return NestingError(at);
    return inner;
  }

  absl::StatusOr<RegexNode> ParseAtom() {
    const size_t at = pos_;
    const char c = Peek();
    switch (c) {
      case '(':
        return ParseGroup();
      case '[':
        return ParseClass();
      case '.':
        ++pos_;
        return SetNode(AnyButNewline(), at);
      case '\\': {
        ++pos_;
        ORCA_ASSIGN_OR_RETURN(CodepointRanges set, ReadEscape(/*in_class=*/false));
        return SetNode(std::move(set), at);
      }
      case '^':
      case '$':
        return Error(at, "anchors are only supported at the start ('^') and end ('$') of the pattern");
      case '*':
      case '+':
      case '?':
        return Error(at, "nothing to repeat");
      default:
        break;
    }
    ORCA_ASSIGN_OR_RETURN(uint32_t cp, ReadChar());
    return SetNode({{cp, cp}}, at);
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t end_ = 0;
  int group_depth_ = 0;
};

// A lower bound of the automaton states Emitter makes for `n` (saturating at kMaxGrammarStates + 1), and
// the offset of the smallest subexpression past `budget`: repetition counts multiply, so
// "((a{1000}){1000}){1000}" is refused here, before a billion states are built.
int64_t EstimateStates(const RegexNode& n, int64_t budget, std::optional<size_t>* over) {
  constexpr int64_t kCap = kMaxGrammarStates + 1;
  int64_t states = 0;
  switch (n.kind) {
    case RegexNode::Kind::kSet:
      states = 2;
      break;
    case RegexNode::Kind::kSeq:
    case RegexNode::Kind::kAlt:
      states = n.kind == RegexNode::Kind::kAlt ? 2 : 0;
      for (const RegexNode& k : n.kids) states = std::min(kCap, states + EstimateStates(k, budget, over));
      break;
    case RegexNode::Kind::kRepeat: {
      const int64_t copies = n.max < 0 ? int64_t{n.min} + 1 : std::max<int64_t>(n.max, 1);
      const int64_t one = EstimateStates(n.kids[0], budget, over) + 2;
      states = one > kCap / copies ? kCap : std::min(kCap, one * copies);
      break;
    }
  }
  if (states > budget && !over->has_value()) *over = n.offset;
  return states;
}

class Emitter {
 public:
  Emitter(std::string_view text, const RegexOptions& options, GrammarBuilder* b)
      : text_(text), options_(options), b_(b) {}

  absl::StatusOr<Fragment> Emit(const RegexNode& n) {
    switch (n.kind) {
      case RegexNode::Kind::kSet: {
        CodepointRanges set = n.set;
        if (options_.json_string) set = Intersect(set, {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodepoint}});
        if (set.empty())
          return absl::InvalidArgumentError(absl::StrCat(
              "regex: the character class at offset ", n.offset, " of \"", ShortenForMessage(text_),
              "\" matches no character", options_.json_string ? " that can appear unescaped in a JSON string" : ""));
        return b_->Codepoints(set);
      }
      case RegexNode::Kind::kSeq: {
        std::vector<Fragment> parts;
        for (const RegexNode& k : n.kids) {
          ORCA_ASSIGN_OR_RETURN(Fragment f, Emit(k));
          parts.push_back(f);
        }
        return b_->Seq(parts);
      }
      case RegexNode::Kind::kAlt: {
        std::vector<Fragment> parts;
        for (const RegexNode& k : n.kids) {
          ORCA_ASSIGN_OR_RETURN(Fragment f, Emit(k));
          parts.push_back(f);
        }
        return b_->Alt(parts);
      }
      case RegexNode::Kind::kRepeat: {
        absl::Status status;
        Fragment f = b_->Repeat(
            [&] {
              absl::StatusOr<Fragment> one = Emit(n.kids[0]);
              if (!one.ok()) {
                status.Update(one.status());
                return b_->Empty();
              }
              return *one;
            },
            n.min, n.max);
        ORCA_RETURN_IF_ERROR(status);
        return f;
      }
    }
    return absl::InternalError("regex: unknown node");
  }

 private:
  std::string_view text_;
  RegexOptions options_;
  GrammarBuilder* b_;
};

}  // namespace

absl::StatusOr<Fragment> CompileRegex(std::string_view pattern, const RegexOptions& options, GrammarBuilder* builder) {
  if (pattern.size() > kMaxRegexBytes) {
    return absl::InvalidArgumentError(absl::StrCat("regex: the pattern is ", pattern.size(), " bytes; at most ",
                                                   kMaxRegexBytes, " are accepted (the limit)"));
  }
  ORCA_ASSIGN_OR_RETURN(RegexNode root, Parser(pattern).Parse());
  const int64_t budget = builder->max_states() - builder->num_states();
  std::optional<size_t> over;
  EstimateStates(root, budget, &over);
  auto too_big = [&](size_t at) {
    return absl::InvalidArgumentError(absl::StrCat("regex: the pattern needs more than ", builder->max_states(),
                                                   " automaton states (the limit) from offset ", at, " of \"",
                                                   ShortenForMessage(pattern), "\" (repetition counts multiply)"));
  };
  if (over.has_value()) return too_big(*over);
  ORCA_ASSIGN_OR_RETURN(Fragment fragment, Emitter(pattern, options, builder).Emit(root));
  if (builder->exhausted()) return too_big(0);
  return fragment;
}

}  // namespace orca::structured
