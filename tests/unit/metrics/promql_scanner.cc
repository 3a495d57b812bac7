#include "tests/unit/metrics/promql_scanner.h"

#include <cctype>
#include <set>

namespace orca::metrics::testing {
namespace {

// Functions and aggregation operators: identifiers that are never metrics.
const std::set<std::string>& FunctionNames() {
  static const std::set<std::string> names = {"abs",
                                              "absent",
                                              "absent_over_time",
                                              "acos",
                                              "acosh",
                                              "asin",
                                              "asinh",
                                              "atan",
                                              "atanh",
                                              "avg",
                                              "avg_over_time",
                                              "bottomk",
                                              "ceil",
                                              "changes",
                                              "clamp",
                                              "clamp_max",
                                              "clamp_min",
                                              "cos",
                                              "cosh",
                                              "count",
                                              "count_over_time",
                                              "count_values",
                                              "day_of_month",
                                              "day_of_week",
                                              "day_of_year",
                                              "days_in_month",
                                              "deg",
                                              "delta",
                                              "deriv",
                                              "exp",
                                              "floor",
                                              "group",
                                              "histogram_quantile",
                                              "holt_winters",
                                              "hour",
                                              "idelta",
                                              "increase",
                                              "irate",
                                              "label_join",
                                              "label_replace",
                                              "last_over_time",
                                              "ln",
                                              "log10",
                                              "log2",
                                              "max",
                                              "max_over_time",
                                              "min",
                                              "min_over_time",
                                              "minute",
                                              "month",
                                              "predict_linear",
                                              "present_over_time",
                                              "quantile",
                                              "quantile_over_time",
                                              "rad",
                                              "rate",
                                              "resets",
                                              "round",
                                              "scalar",
                                              "sgn",
                                              "sin",
                                              "sinh",
                                              "sort",
                                              "sort_desc",
                                              "sqrt",
                                              "stddev",
                                              "stddev_over_time",
                                              "stdvar",
                                              "stdvar_over_time",
                                              "sum",
                                              "sum_over_time",
                                              "tan",
                                              "tanh",
                                              "time",
                                              "timestamp",
                                              "topk",
                                              "vector",
                                              "year"};
  return names;
}

const std::set<std::string>& GroupingKeywords() {
  static const std::set<std::string> words = {"by", "without", "on", "ignoring", "group_left", "group_right"};
  return words;
}

const std::set<std::string>& OtherKeywords() {
  static const std::set<std::string> words = {"and",   "or",  "unless", "bool", "offset",
                                              "atan2", "inf", "nan",    "Inf",  "NaN"};
  return words;
}

bool IsIdentifierStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool IsIdentifierChar(char c) { return IsIdentifierStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

class Scanner {
 public:
  explicit Scanner(const std::string& expr) : s_(expr) {}

  absl::StatusOr<PromqlReferences> Run() {
    while (true) {
      SkipSpace();
      if (i_ >= s_.size()) break;
      const char c = s_[i_];
      if (c == '"' || c == '\'' || c == '`') {
        if (!SkipString()) return Error("unterminated string");
      } else if (c == '$') {
        SkipVariable();
      } else if (c == '[') {
        const size_t close = s_.find(']', i_);
        if (close == std::string::npos) return Error("unbalanced '['");
        i_ = close + 1;
      } else if (c == '{') {
        return Error("selector without a metric name");
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
        SkipNumber();
      } else if (IsIdentifierStart(c)) {
        absl::Status status = Identifier();
        if (!status.ok()) return status;
      } else {
        ++i_;  // operators, parentheses, commas
      }
    }
    return std::move(refs_);
  }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(what + " at offset " + std::to_string(i_) + " in: " + s_);
  }

  void SkipSpace() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }

  char Peek() {
    SkipSpace();
    return i_ < s_.size() ? s_[i_] : '\0';
  }

  bool SkipString() {
    const char quote = s_[i_++];
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '\\' && quote != '`') ++i_;
      ++i_;
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    return true;
  }

  void SkipVariable() {
    ++i_;  // '$'
    if (i_ < s_.size() && s_[i_] == '{') {
      const size_t close = s_.find('}', i_);
      i_ = close == std::string::npos ? s_.size() : close + 1;
      return;
    }
    while (i_ < s_.size() && IsIdentifierChar(s_[i_]) && s_[i_] != ':') ++i_;
  }

  void SkipNumber() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      const bool exponent_sign = (c == '+' || c == '-') && i_ > 0 && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E');
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && !exponent_sign) break;
      ++i_;
    }
  }

  std::string ReadIdentifier() {
    const size_t start = i_;
    while (i_ < s_.size() && IsIdentifierChar(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }

  // Reads "(a, b, c)" after a grouping keyword.
  absl::Status LabelList(std::vector<std::string>* out) {
    if (Peek() != '(') return absl::OkStatus();  // e.g. "on" without a list is not valid, ignore
    ++i_;
    while (Peek() != ')') {
      if (i_ >= s_.size()) return Error("unbalanced '(' in label list");
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (!IsIdentifierStart(s_[i_])) return Error("bad label list");
      out->push_back(ReadIdentifier());
    }
    ++i_;
    return absl::OkStatus();
  }

  // Reads `{a="x", b=~"y"}` after a metric name.
  absl::Status Matchers(std::vector<std::string>* labels) {
    ++i_;  // '{'
    while (Peek() != '}') {
      if (i_ >= s_.size()) return Error("unbalanced '{'");
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (!IsIdentifierStart(s_[i_])) return Error("bad matcher");
      labels->push_back(ReadIdentifier());
      SkipSpace();
      while (i_ < s_.size() && (s_[i_] == '=' || s_[i_] == '!' || s_[i_] == '~')) ++i_;
      SkipSpace();
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'' && s_[i_] != '`') || !SkipString()) {
        return Error("matcher value must be a string");
      }
    }
    ++i_;
    return absl::OkStatus();
  }

  absl::Status Identifier() {
    const std::string word = ReadIdentifier();
    if (GroupingKeywords().contains(word)) return LabelList(&refs_.grouping_labels);
    if (word == "offset") {
      SkipSpace();
      SkipNumber();  // the duration, e.g. 5m
      return absl::OkStatus();
    }
    if (OtherKeywords().contains(word)) return absl::OkStatus();
    const char next = Peek();
    if (FunctionNames().contains(word) || next == '(') return absl::OkStatus();
    MetricReference ref{word, {}};
    if (next == '{') {
      absl::Status status = Matchers(&ref.matcher_labels);
      if (!status.ok()) return status;
    }
    refs_.metrics.push_back(std::move(ref));
    return absl::OkStatus();
  }

  const std::string& s_;
  size_t i_ = 0;
  PromqlReferences refs_;
};

}  // namespace

absl::StatusOr<PromqlReferences> ScanPromql(const std::string& expr) { return Scanner(expr).Run(); }

}  // namespace orca::metrics::testing
