#include "core/text/regex.h"

#include <unicode/uchar.h>

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/text/unicode.h"

namespace orca::text {
namespace regex_internal {

enum class Kind {
  kEmpty,
  kChar,
  kClass,
  kAny,
  kSeq,
  kAlt,
  kRepeat,
  kLookahead,
  kAtomic,
  kLineStart,
  kLineEnd,
  kTextStart,
  kTextEnd
};
enum class RepeatMode { kGreedy, kLazy, kPossessive };

struct ClassItem {
  enum class Type { kRange, kCategory, kWhiteSpace, kWord, kAlphabetic, kAny };
  Type type = Type::kRange;
  char32_t lo = 0;
  char32_t hi = 0;
  uint32_t mask = 0;
  bool negate = false;
};

struct Node {
  Kind kind = Kind::kEmpty;
  char32_t ch = 0;
  bool icase = false;
  std::vector<ClassItem> items;  // kClass
  bool negated = false;          // kClass: [^...]; kLookahead: (?!...)
  std::vector<const Node*> children;
  const Node* child = nullptr;
  int min = 0;
  int max = -1;  // -1: unbounded
  RepeatMode mode = RepeatMode::kGreedy;
};

namespace {

bool IsWordChar(char32_t c) {
  uint32_t m = GeneralCategoryMask(c);
  return IsAlphabetic(c) || (m & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

bool ItemMatches(const ClassItem& item, char32_t c) {
  bool r = false;
  switch (item.type) {
    case ClassItem::Type::kRange:
      r = c >= item.lo && c <= item.hi;
      break;
    case ClassItem::Type::kCategory:
      r = (GeneralCategoryMask(c) & item.mask) != 0;
      break;
    case ClassItem::Type::kWhiteSpace:
      r = IsWhiteSpace(c);
      break;
    case ClassItem::Type::kWord:
      r = IsWordChar(c);
      break;
    case ClassItem::Type::kAlphabetic:
      r = IsAlphabetic(c);
      break;
    case ClassItem::Type::kAny:
      r = true;
      break;
  }
  return r != item.negate;
}

bool ClassMatchesRaw(const Node& n, char32_t c) {
  for (const ClassItem& item : n.items) {
    if (ItemMatches(item, c)) return true;
  }
  return false;
}

bool MatchOne(const Node& n, char32_t c) {
  switch (n.kind) {
    case Kind::kChar:
      if (c == n.ch) return true;
      return n.icase && SimpleCaseFold(c) == SimpleCaseFold(n.ch);
    case Kind::kAny:
      return c != '\n';
    case Kind::kClass: {
      bool m = ClassMatchesRaw(n, c);
      if (!m && n.icase) {
        char32_t variants[3] = {SimpleCaseFold(c), static_cast<char32_t>(u_toupper(static_cast<UChar32>(c))),
                                static_cast<char32_t>(u_tolower(static_cast<UChar32>(c)))};
        for (char32_t v : variants) {
          if (v != c && ClassMatchesRaw(n, v)) {
            m = true;
            break;
          }
        }
      }
      return m != n.negated;
    }
    default:
      return false;
  }
}

bool IsSingleChar(const Node* n) { return n->kind == Kind::kChar || n->kind == Kind::kClass || n->kind == Kind::kAny; }

// A non-owning reference to a continuation `bool(size_t end)`.
class Cont {
 public:
  template <typename F>
  Cont(const F& f)  // NOLINT: implicit by design
      : obj_(&f), call_([](const void* o, size_t i) { return (*static_cast<const F*>(o))(i); }) {}
  Cont(const Cont&) = default;
  bool operator()(size_t i) const { return call_(obj_, i); }

 private:
  const void* obj_;
  bool (*call_)(const void*, size_t);
};

// Recursion is bounded so that hostile input (a long run matched by a
// repeated group) cannot exhaust the stack: past the bound the attempt fails
// and the search moves on, which only changes where text is split.
inline constexpr int kMaxMatchDepth = 2000;

class Matcher {
 public:
  explicit Matcher(const std::vector<char32_t>& text) : t_(text) {}

  bool Match(const Node* n, size_t i, Cont k) const {
    if (depth_ >= kMaxMatchDepth) return false;
    ++depth_;
    bool r = MatchNode(n, i, k);
    --depth_;
    return r;
  }

 private:
  bool MatchNode(const Node* n, size_t i, Cont k) const {
    switch (n->kind) {
      case Kind::kEmpty:
        return k(i);
      case Kind::kChar:
      case Kind::kClass:
      case Kind::kAny:
        return i < t_.size() && MatchOne(*n, t_[i]) && k(i + 1);
      case Kind::kSeq:
        return MatchSeq(n, 0, i, k);
      case Kind::kAlt:
        for (const Node* alt : n->children) {
          if (Match(alt, i, k)) return true;
        }
        return false;
      case Kind::kRepeat:
        return IsSingleChar(n->child) ? MatchSimpleRepeat(n, i, k) : MatchRepeat(n, 0, i, k);
      case Kind::kLookahead: {
        bool found = Match(n->child, i, [](size_t) { return true; });
        return found != n->negated && k(i);
      }
      case Kind::kAtomic: {
        size_t end = 0;
        if (!Match(n->child, i, [&end](size_t e) {
              end = e;
              return true;
            }))
          return false;
        return k(end);
      }
      case Kind::kLineStart:
        return (i == 0 || t_[i - 1] == '\n') && k(i);
      case Kind::kLineEnd:
        return (i == t_.size() || t_[i] == '\n') && k(i);
      case Kind::kTextStart:
        return i == 0 && k(i);
      case Kind::kTextEnd:
        return i == t_.size() && k(i);
    }
    return false;
  }

  bool MatchSeq(const Node* n, size_t idx, size_t i, Cont k) const {
    if (idx == n->children.size()) return k(i);
    // Runs of single-character nodes are matched without recursion.
    while (idx + 1 < n->children.size() && IsSingleChar(n->children[idx])) {
      if (i >= t_.size() || !MatchOne(*n->children[idx], t_[i])) return false;
      ++i;
      ++idx;
    }
    return Match(n->children[idx], i, [&](size_t e) { return MatchSeq(n, idx + 1, e, k); });
  }

  bool MatchSimpleRepeat(const Node* n, size_t i, Cont k) const {
    const size_t max = n->max < 0 ? std::numeric_limits<size_t>::max() : static_cast<size_t>(n->max);
    const size_t min = static_cast<size_t>(n->min);
    if (n->mode == RepeatMode::kLazy) {
      size_t count = 0;
      while (true) {
        if (count >= min && k(i + count)) return true;
        if (count >= max || i + count >= t_.size() || !MatchOne(*n->child, t_[i + count])) return false;
        ++count;
      }
    }
    size_t count = 0;
    while (count < max && i + count < t_.size() && MatchOne(*n->child, t_[i + count])) ++count;
    if (count < min) return false;
    if (n->mode == RepeatMode::kPossessive) return k(i + count);
    for (size_t c = count + 1; c-- > min;) {
      if (k(i + c)) return true;
    }
    return false;
  }

  bool MatchRepeat(const Node* n, int count, size_t i, Cont k) const {
    const bool can_more = n->max < 0 || count < n->max;
    auto more = [&](size_t e) {
      if (e == i && count >= n->min) return false;  // an empty iteration cannot progress
      return MatchRepeat(n, count + 1, e, k);
    };
    if (n->mode == RepeatMode::kLazy) {
      if (count >= n->min && k(i)) return true;
      return can_more && Match(n->child, i, more);
    }
    if (n->mode == RepeatMode::kPossessive) {
      // Consume as many iterations as possible, then never give any back.
      size_t pos = i;
      int c = count;
      while (n->max < 0 || c < n->max) {
        size_t end = pos;
        if (!Match(n->child, pos,
                   [&end](size_t e) {
                     end = e;
                     return true;
                   }) ||
            end == pos)
          break;
        pos = end;
        ++c;
      }
      return c >= n->min && k(pos);
    }
    if (can_more && Match(n->child, i, more)) return true;
    return count >= n->min && k(i);
  }

  const std::vector<char32_t>& t_;
  mutable int depth_ = 0;
};

}  // namespace
}  // namespace regex_internal

using regex_internal::ClassItem;
using regex_internal::Kind;
using regex_internal::Node;
using regex_internal::RepeatMode;

class RegexCompiler {
 public:
  RegexCompiler(Regex* re, std::string_view pattern) : re_(re), p_(DecodeUtf8(pattern)) {}

  absl::Status Compile() {
    absl::StatusOr<const Node*> root = ParseAlt(false);
    if (!root.ok()) return root.status();
    if (pos_ != p_.size()) return Error("unbalanced ')'");
    re_->root_ = *root;
    return absl::OkStatus();
  }

 private:
  Node* New(Kind kind) {
    re_->nodes_.push_back(std::make_unique<Node>());
    Node* n = re_->nodes_.back().get();
    n->kind = kind;
    n->icase = icase_;
    return n;
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("regex error at character ", pos_, ": ", std::string(what), " in pattern '", re_->pattern_, "'"));
  }
  bool AtEnd() const { return pos_ >= p_.size(); }
  char32_t Peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : 0; }

  absl::StatusOr<const Node*> ParseAlt(bool in_group) {
    std::vector<const Node*> alts;
    const bool saved_icase = icase_;
    while (true) {
      absl::StatusOr<const Node*> seq = ParseSeq();
      if (!seq.ok()) return seq.status();
      alts.push_back(*seq);
      if (!AtEnd() && Peek() == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    if (!in_group) icase_ = saved_icase;
    if (alts.size() == 1) return alts[0];
    Node* n = New(Kind::kAlt);
    n->children = std::move(alts);
    return n;
  }

  absl::StatusOr<const Node*> ParseSeq() {
    std::vector<const Node*> items;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      absl::StatusOr<const Node*> atom = ParseQuantified();
      if (!atom.ok()) return atom.status();
      if (*atom != nullptr) items.push_back(*atom);
    }
    if (items.size() == 1) return items[0];
    Node* n = New(items.empty() ? Kind::kEmpty : Kind::kSeq);
    n->children = std::move(items);
    return n;
  }

  // Parses `{m}`, `{m,}`, `{m,n}`, `{,n}` at pos_; false (pos_ unchanged) if not a quantifier.
  bool ParseBraces(int* min, int* max) {
    size_t p = pos_ + 1;
    auto number = [&](int* out) {
      size_t start = p;
      long v = 0;
      while (p < p_.size() && p_[p] >= '0' && p_[p] <= '9' && v < 100000) v = v * 10 + (p_[p++] - '0');
      *out = static_cast<int>(v);
      return p > start;
    };
    int lo = 0, hi = -1;
    bool has_lo = number(&lo);
    if (p < p_.size() && p_[p] == ',') {
      ++p;
      bool has_hi = number(&hi);
      if (!has_lo && !has_hi) return false;
      if (!has_hi) hi = -1;
    } else {
      if (!has_lo) return false;
      hi = lo;
    }
    if (p >= p_.size() || p_[p] != '}') return false;
    pos_ = p + 1;
    *min = lo;
    *max = hi;
    return true;
  }

  absl::StatusOr<const Node*> ParseQuantified() {
    absl::StatusOr<const Node*> atom = ParseAtom();
    if (!atom.ok() || *atom == nullptr) return atom;
    const Node* current = *atom;
    while (!AtEnd()) {
      int min = 0, max = -1;
      char32_t c = Peek();
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        min = 1;
        ++pos_;
      } else if (c == '?') {
        max = 1;
        ++pos_;
      } else if (c == '{' && ParseBraces(&min, &max)) {
        if (max >= 0 && max < min) return Error("quantifier {m,n} with n < m");
      } else {
        break;
      }
      Node* rep = New(Kind::kRepeat);
      rep->child = current;
      rep->min = min;
      rep->max = max;
      if (Peek() == '?') {
        rep->mode = RepeatMode::kLazy;
        ++pos_;
      } else if (Peek() == '+') {
        rep->mode = RepeatMode::kPossessive;
        ++pos_;
      }
      current = rep;
    }
    return current;
  }

  absl::StatusOr<const Node*> ParseGroup() {
    if (++group_depth_ > 200) return Error("groups nested more than 200 deep");
    struct Exit {
      int& d;
      ~Exit() { --d; }
    } exit{group_depth_};
    ++pos_;  // '('
    Kind kind = Kind::kSeq;
    bool negated = false;
    const bool saved_icase = icase_;
    if (Peek() == '?') {
      ++pos_;
      char32_t c = Peek();
      if (c == ':') {
        ++pos_;
      } else if (c == '=' || c == '!') {
        kind = Kind::kLookahead;
        negated = c == '!';
        ++pos_;
      } else if (c == '>') {
        kind = Kind::kAtomic;
        ++pos_;
      } else if (c == '<' && (Peek(1) == '=' || Peek(1) == '!')) {
        return Error("look-behind is not supported");
      } else if (c == '<' || c == 'P') {
        // Named group: (?<name>...) or (?P<name>...).
        while (!AtEnd() && Peek() != '>') ++pos_;
        if (AtEnd()) return Error("unterminated group name");
        ++pos_;
      } else {
        // Inline flags: (?i) (?-i) (?i:...) (?i-m:...).
        bool on = true;
        bool flag_icase = icase_;
        while (!AtEnd() && Peek() != ':' && Peek() != ')') {
          char32_t f = Peek();
          if (f == '-') {
            on = false;
          } else if (f == 'i') {
            flag_icase = on;
          } else if (f != 'm' && f != 's' && f != 'x') {
            return Error("unknown group flag");
          } else if (f == 'x' && on) {
            return Error("extended mode (?x) is not supported");
          }
          ++pos_;
        }
        if (AtEnd()) return Error("unterminated group");
        if (Peek() == ')') {  // flags apply to the rest of the enclosing group
          ++pos_;
          icase_ = flag_icase;
          return static_cast<const Node*>(nullptr);
        }
        ++pos_;  // ':'
        icase_ = flag_icase;
      }
    }
    absl::StatusOr<const Node*> body = ParseAlt(true);
    icase_ = saved_icase;
    if (!body.ok()) return body.status();
    if (AtEnd() || Peek() != ')') return Error("missing ')'");
    ++pos_;
    if (kind == Kind::kSeq) return *body;
    Node* n = New(kind);
    n->child = *body;
    n->negated = negated;
    return n;
  }

  absl::StatusOr<char32_t> ParseHex(size_t digits, bool braced) {
    char32_t v = 0;
    size_t count = 0;
    while (!AtEnd() && (braced ? Peek() != '}' : count < digits)) {
      char32_t c = Peek();
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) return Error("bad hex escape");
      v = v * 16 + static_cast<char32_t>(d);
      ++pos_;
      if (++count > 8) return Error("hex escape too long");
    }
    if (braced) {
      if (AtEnd()) return Error("unterminated \\x{...}");
      ++pos_;
    } else if (count != digits) {
      return Error("bad hex escape");
    }
    return v;
  }

  // Parses a `\p{...}` body into a class item.
  absl::StatusOr<ClassItem> ParseProperty(bool negate) {
    if (Peek() != '{') return Error("expected '{' after \\p");
    ++pos_;
    std::string name;
    while (!AtEnd() && Peek() != '}') name.push_back(static_cast<char>(p_[pos_++]));
    if (AtEnd()) return Error("unterminated \\p{...}");
    ++pos_;
    ClassItem item;
    item.negate = negate;
    if (!name.empty() && name[0] == '^') {
      item.negate = !item.negate;
      name.erase(0, 1);
    }
    struct Cat {
      const char* name;
      uint32_t mask;
    };
    static const Cat kCats[] = {
        {"L", U_GC_L_MASK},    {"Letter", U_GC_L_MASK}, {"Lu", U_GC_LU_MASK},         {"Ll", U_GC_LL_MASK},
        {"Lt", U_GC_LT_MASK},  {"Lm", U_GC_LM_MASK},    {"Lo", U_GC_LO_MASK},         {"M", U_GC_M_MASK},
        {"Mark", U_GC_M_MASK}, {"Mn", U_GC_MN_MASK},    {"Mc", U_GC_MC_MASK},         {"Me", U_GC_ME_MASK},
        {"N", U_GC_N_MASK},    {"Number", U_GC_N_MASK}, {"Nd", U_GC_ND_MASK},         {"Nl", U_GC_NL_MASK},
        {"No", U_GC_NO_MASK},  {"P", U_GC_P_MASK},      {"Punctuation", U_GC_P_MASK}, {"Pc", U_GC_PC_MASK},
        {"Pd", U_GC_PD_MASK},  {"Ps", U_GC_PS_MASK},    {"Pe", U_GC_PE_MASK},         {"Pi", U_GC_PI_MASK},
        {"Pf", U_GC_PF_MASK},  {"Po", U_GC_PO_MASK},    {"S", U_GC_S_MASK},           {"Symbol", U_GC_S_MASK},
        {"Sm", U_GC_SM_MASK},  {"Sc", U_GC_SC_MASK},    {"Sk", U_GC_SK_MASK},         {"So", U_GC_SO_MASK},
        {"Z", U_GC_Z_MASK},    {"Zs", U_GC_ZS_MASK},    {"Zl", U_GC_ZL_MASK},         {"Zp", U_GC_ZP_MASK},
        {"C", U_GC_C_MASK},    {"Cc", U_GC_CC_MASK},    {"Cf", U_GC_CF_MASK},         {"Co", U_GC_CO_MASK},
        {"Cs", U_GC_CS_MASK},  {"Cn", U_GC_CN_MASK},
    };
    for (const Cat& cat : kCats) {
      if (name == cat.name) {
        item.type = ClassItem::Type::kCategory;
        item.mask = cat.mask;
        return item;
      }
    }
    if (name == "Alphabetic" || name == "Alpha") {
      item.type = ClassItem::Type::kAlphabetic;
      return item;
    }
    if (name == "White_Space" || name == "Space") {
      item.type = ClassItem::Type::kWhiteSpace;
      return item;
    }
    if (name == "Word") {
      item.type = ClassItem::Type::kWord;
      return item;
    }
    if (name == "Any") {
      item.type = ClassItem::Type::kAny;
      return item;
    }
    return Error("unsupported Unicode property \\p{" + name + "}");
  }

  // After a backslash: a shorthand class (returned in *item) or a literal char.
  absl::Status ParseEscape(bool* is_item, ClassItem* item, char32_t* literal) {
    if (AtEnd()) return Error("trailing backslash");
    char32_t c = p_[pos_++];
    *is_item = true;
    switch (c) {
      case 's':
      case 'S':
        item->type = ClassItem::Type::kWhiteSpace;
        item->negate = c == 'S';
        return absl::OkStatus();
      case 'd':
      case 'D':
        item->type = ClassItem::Type::kCategory;
        item->mask = U_GC_ND_MASK;
        item->negate = c == 'D';
        return absl::OkStatus();
      case 'w':
      case 'W':
        item->type = ClassItem::Type::kWord;
        item->negate = c == 'W';
        return absl::OkStatus();
      case 'p':
      case 'P': {
        absl::StatusOr<ClassItem> prop = ParseProperty(c == 'P');
        if (!prop.ok()) return prop.status();
        *item = *prop;
        return absl::OkStatus();
      }
      default:
        break;
    }
    *is_item = false;
    switch (c) {
      case 'n':
        *literal = '\n';
        break;
      case 'r':
        *literal = '\r';
        break;
      case 't':
        *literal = '\t';
        break;
      case 'f':
        *literal = '\f';
        break;
      case 'v':
        *literal = '\v';
        break;
      case 'a':
        *literal = 0x07;
        break;
      case 'e':
        *literal = 0x1B;
        break;
      case '0':
        *literal = 0;
        break;
      case 'x': {
        bool braced = Peek() == '{';
        if (braced) ++pos_;
        absl::StatusOr<char32_t> v = ParseHex(2, braced);
        if (!v.ok()) return v.status();
        *literal = *v;
        break;
      }
      case 'u': {
        absl::StatusOr<char32_t> v = ParseHex(4, false);
        if (!v.ok()) return v.status();
        *literal = *v;
        break;
      }
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9')) {
          --pos_;
          return Error(absl::StrCat("unsupported escape \\", EncodeUtf8(c)));
        }
        *literal = c;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<const Node*> ParseClass() {
    ++pos_;  // '['
    Node* n = New(Kind::kClass);
    if (Peek() == '^') {
      n->negated = true;
      ++pos_;
    }
    bool first = true;
    while (true) {
      if (AtEnd()) return Error("unterminated character class");
      char32_t c = Peek();
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (c == '[') return Error("nested character classes and POSIX brackets are not supported");
      if (c == '&' && Peek(1) == '&') return Error("character class intersection is not supported");
      char32_t lo;
      ++pos_;
      if (c == '\\') {
        bool is_item = false;
        ClassItem item;
        ORCA_RETURN_IF_ERROR(ParseEscape(&is_item, &item, &lo));
        if (is_item) {
          n->items.push_back(item);
          continue;
        }
      } else {
        lo = c;
      }
      char32_t hi = lo;
      if (Peek() == '-' && pos_ + 1 < p_.size() && Peek(1) != ']') {
        ++pos_;
        char32_t h = p_[pos_++];
        if (h == '\\') {
          bool is_item = false;
          ClassItem item;
          ORCA_RETURN_IF_ERROR(ParseEscape(&is_item, &item, &h));
          if (is_item) return Error("character class range ends in a set");
        }
        if (h < lo) return Error("character class range out of order");
        hi = h;
      }
      ClassItem item;
      item.type = ClassItem::Type::kRange;
      item.lo = lo;
      item.hi = hi;
      n->items.push_back(item);
    }
    return n;
  }

  absl::StatusOr<const Node*> ParseAtom() {
    char32_t c = Peek();
    switch (c) {
      case '(':
        return ParseGroup();
      case '[':
        return ParseClass();
      case '.':
        ++pos_;
        return New(Kind::kAny);
      case '^':
        ++pos_;
        return New(Kind::kLineStart);
      case '$':
        ++pos_;
        return New(Kind::kLineEnd);
      case '*':
      case '+':
      case '?':
        return Error("quantifier without a target");
      case '\\': {
        ++pos_;
        if (Peek() == 'A' || Peek() == 'z' || Peek() == 'Z') {
          char32_t a = p_[pos_++];
          return New(a == 'A' ? Kind::kTextStart : Kind::kTextEnd);
        }
        if (Peek() == 'b' || Peek() == 'B' || Peek() == 'G') return Error("\\b, \\B and \\G are not supported");
        bool is_item = false;
        ClassItem item;
        char32_t literal = 0;
        absl::Status s = ParseEscape(&is_item, &item, &literal);
        if (!s.ok()) return s;
        if (is_item) {
          Node* n = New(Kind::kClass);
          n->items.push_back(item);
          return n;
        }
        Node* n = New(Kind::kChar);
        n->ch = literal;
        return n;
      }
      default: {
        ++pos_;
        Node* n = New(Kind::kChar);
        n->ch = c;
        return n;
      }
    }
  }

  Regex* re_;
  std::vector<char32_t> p_;
  size_t pos_ = 0;
  bool icase_ = false;
  int group_depth_ = 0;
};

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern) {
  std::unique_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(pattern);
  RegexCompiler compiler(re.get(), pattern);
  absl::Status status = compiler.Compile();
  if (!status.ok()) return status;
  return re;
}

std::unique_ptr<Regex> Regex::Literal(std::string_view literal) {
  std::unique_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(literal);
  std::vector<const Node*> chars;
  for (char32_t c : DecodeUtf8(literal)) {
    re->nodes_.push_back(std::make_unique<Node>());
    re->nodes_.back()->kind = Kind::kChar;
    re->nodes_.back()->ch = c;
    chars.push_back(re->nodes_.back().get());
  }
  re->nodes_.push_back(std::make_unique<Node>());
  re->nodes_.back()->kind = chars.empty() ? Kind::kEmpty : Kind::kSeq;
  re->nodes_.back()->children = std::move(chars);
  re->root_ = re->nodes_.back().get();
  return re;
}

Regex::~Regex() = default;

bool Regex::Search(const std::vector<char32_t>& text, size_t from, Match* match) const {
  regex_internal::Matcher matcher(text);
  for (size_t start = from; start <= text.size(); ++start) {
    size_t end = 0;
    if (matcher.Match(root_, start, [&end](size_t e) {
          end = e;
          return true;
        })) {
      match->begin = start;
      match->end = end;
      return true;
    }
  }
  return false;
}

std::vector<Regex::Match> Regex::FindAll(const std::vector<char32_t>& text) const {
  std::vector<Match> out;
  size_t pos = 0;
  Match m;
  while (pos <= text.size() && Search(text, pos, &m)) {
    if (m.end == m.begin) {
      pos = m.begin + 1;
      continue;
    }
    out.push_back(m);
    pos = m.end;
  }
  return out;
}

}  // namespace orca::text
