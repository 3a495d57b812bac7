#include "core/text/jinja_lexer.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/text/unicode.h"

namespace orca::text::jinja {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(source) {
    // HF (like Jinja's default keep_trailing_newline=False) drops one trailing newline.
    if (!src_.empty() && src_.back() == '\n') src_.remove_suffix(1);
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<std::vector<Token>> Run() {
    size_t i = 0;
    enum class Close { kNone, kExpr, kBlock } prev_close = Close::kNone;
    bool prev_dash = false;
    while (i <= src_.size()) {
      size_t open = FindOpener(i);
      // --- text between tags, with whitespace control ---
      size_t begin = i, end = open;
      const bool has_tag = open < src_.size();
      const char kind = has_tag ? src_[open + 1] : 0;
      const bool open_dash = has_tag && open + 2 < src_.size() && src_[open + 2] == '-';
      const bool open_plus = has_tag && open + 2 < src_.size() && src_[open + 2] == '+';
      if (has_tag && (kind == '%' || kind == '#') && !open_dash && !open_plus) {  // lstrip_blocks
        size_t j = end;
        while (j > begin && (src_[j - 1] == ' ' || src_[j - 1] == '\t')) --j;
        if (j == 0 || src_[j - 1] == '\n') end = j;
      }
      if (prev_close == Close::kBlock && begin < end && src_[begin] == '\n') ++begin;  // trim_blocks
      if (prev_dash) {
        while (begin < end && IsSpace(src_[begin])) ++begin;
      }
      if (open_dash) {
        while (end > begin && IsSpace(src_[end - 1])) --end;
      }
      if (end > begin)
        tokens_.push_back({Token::Kind::kText, std::string(src_.substr(begin, end - begin)), Pos(begin)});
      if (!has_tag) break;
      // --- the tag itself ---
      size_t p = open + 2 + ((open_dash || open_plus) ? 1 : 0);
      if (kind == '#') {
        size_t close = src_.find("#}", p);
        if (close == std::string_view::npos) return Error(open, "unterminated comment");
        prev_dash = close > p && src_[close - 1] == '-';
        prev_close = Close::kBlock;
        i = close + 2;
        continue;
      }
      tokens_.push_back({kind == '{' ? Token::Kind::kExprOpen : Token::Kind::kStmtOpen, "", Pos(open)});
      absl::StatusOr<size_t> after = LexInside(p, kind == '{' ? '}' : '%', &prev_dash);
      if (!after.ok()) return after.status();
      prev_close = kind == '{' ? Close::kExpr : Close::kBlock;
      i = *after;
    }
    tokens_.push_back({Token::Kind::kEnd, "", Pos(src_.size())});
    return std::move(tokens_);
  }

 private:
  size_t FindOpener(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  Position Pos(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    size_t start = line_starts_[line - 1];
    // Columns count characters, not bytes. Tokens come in order, so continue
    // from the previous position on the same line: counting from the line's
    // start each time was quadratic on a long one-line template.
    if (line == pos_line_ && offset >= pos_offset_) start = pos_offset_;
    int col = (start == pos_offset_ && line == pos_line_ ? pos_col_ : 1) +
              static_cast<int>(DecodeUtf8(src_.substr(start, offset - start)).size());
    pos_line_ = line;
    pos_offset_ = offset;
    pos_col_ = col;
    return {static_cast<int>(line), col};
  }

  absl::Status Error(size_t offset, std::string_view msg) const {
    Position p = Pos(offset);
    return absl::InvalidArgumentError(absl::StrCat("line ", p.line, ", column ", p.column, ": ", std::string(msg)));
  }

  // Lexes the inside of `{{ ... }}` (close = '}') or `{% ... %}` (close = '%')
  // starting at `p`; returns the offset after the closing delimiter.
  absl::StatusOr<size_t> LexInside(size_t p, char close, bool* close_dash) {
    int depth = 0;  // open (, [, { inside the tag
    const size_t tag_start = p;
    while (true) {
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      if (p >= src_.size()) return Error(tag_start, close == '}' ? "unterminated '{{'" : "unterminated '{%'");
      char c = src_[p];
      // Closing delimiter, possibly with '-' / '+'.
      if (depth == 0) {
        size_t q = p;
        bool dash = false;
        if ((c == '-' || c == '+') && q + 2 < src_.size() + 1 && q + 1 < src_.size() && src_[q + 1] == close &&
            q + 2 < src_.size() && src_[q + 2] == '}') {
          dash = c == '-';
          ++q;
        }
        if (src_[q] == close && q + 1 < src_.size() && src_[q + 1] == '}') {
          *close_dash = dash;
          tokens_.push_back({close == '}' ? Token::Kind::kExprClose : Token::Kind::kStmtClose, "", Pos(p)});
          return q + 2;
        }
      }
      const size_t start = p;
      if (IsNameStart(c)) {
        while (p < src_.size() && (IsNameStart(src_[p]) || IsDigit(src_[p]))) ++p;
        tokens_.push_back({Token::Kind::kName, std::string(src_.substr(start, p - start)), Pos(start)});
      } else if (IsDigit(c)) {
        while (p < src_.size() && (IsDigit(src_[p]) || src_[p] == '_')) ++p;
        bool is_float = false;
        if (p + 1 < src_.size() && src_[p] == '.' && IsDigit(src_[p + 1])) {
          is_float = true;
          ++p;
          while (p < src_.size() && IsDigit(src_[p])) ++p;
        }
        if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
          size_t q = p + 1;
          if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
          if (q < src_.size() && IsDigit(src_[q])) {
            is_float = true;
            p = q;
            while (p < src_.size() && IsDigit(src_[p])) ++p;
          }
        }
        std::string num(src_.substr(start, p - start));
        num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
        tokens_.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, num, Pos(start)});
      } else if (c == '\'' || c == '"') {
        absl::StatusOr<std::string> s = LexString(&p);
        if (!s.ok()) return s.status();
        tokens_.push_back({Token::Kind::kString, *s, Pos(start)});
      } else {
        static const char* kTwo[] = {"==", "!=", "<=", ">=", "//", "**"};
        std::string op(1, c);
        for (const char* two : kTwo) {
          if (src_.compare(p, 2, two) == 0) op = two;
        }
        if (op.size() == 1 && std::string_view("+-*/%~<>=()[]{},.:|!?").find(c) == std::string_view::npos) {
          return Error(p, absl::StrCat("unexpected character '", std::string(1, c), "'"));
        }
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        p += op.size();
        tokens_.push_back({Token::Kind::kOp, op, Pos(start)});
      }
    }
  }

  absl::StatusOr<std::string> LexString(size_t* p) {
    const size_t start = *p;
    const char quote = src_[(*p)++];
    std::string out;
    while (*p < src_.size() && src_[*p] != quote) {
      char c = src_[(*p)++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (*p >= src_.size()) break;
      char e = src_[(*p)++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '0':
          out += '\0';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'x':
        case 'u': {
          const size_t len = e == 'x' ? 2 : 4;
          if (*p + len > src_.size()) return Error(*p, "bad escape in string");
          char32_t v = 0;
          for (size_t k = 0; k < len; ++k) {
            char h = src_[*p + k];
            int d = IsDigit(h)               ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
            if (d < 0) return Error(*p, "bad hexadecimal escape in string");
            v = v * 16 + static_cast<char32_t>(d);
          }
          *p += len;
          AppendUtf8(v, &out);
          break;
        }
        default:
          out += '\\';
          out += e;
      }
    }
    if (*p >= src_.size()) return Error(start, "unterminated string literal");
    ++*p;
    return out;
  }

  std::string_view src_;
  std::vector<size_t> line_starts_;
  // The last position computed (Pos is called in offset order).
  mutable size_t pos_line_ = 0;
  mutable size_t pos_offset_ = 0;
  mutable int pos_col_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(std::string_view source) { return Lexer(source).Run(); }

}  // namespace orca::text::jinja
