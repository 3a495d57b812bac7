#include "tests/unit/metrics/exposition_parser.h"

#include <cstdlib>
#include <limits>
#include <sstream>

#include "core/metrics/text_format.h"

namespace orca::metrics::testing {
namespace {

absl::Status LineError(int line_number, const std::string& line, const std::string& what) {
  return absl::InvalidArgumentError("line " + std::to_string(line_number) + " '" + line + "': " + what);
}

// Parses `{a="x",b="y"}` starting at line[pos] == '{'; returns the index just
// past the closing brace, or npos on a syntax error.
size_t SkipLabels(const std::string& line, size_t pos) {
  ++pos;  // '{'
  while (pos < line.size() && line[pos] != '}') {
    const size_t eq = line.find('=', pos);
    if (eq == std::string::npos || !IsValidLabelName(line.substr(pos, eq - pos)) || eq + 1 >= line.size() ||
        line[eq + 1] != '"') {
      return std::string::npos;
    }
    size_t i = eq + 2;
    while (i < line.size() && line[i] != '"') {
      if (line[i] == '\\') {
        if (i + 1 >= line.size()) return std::string::npos;
        const char next = line[i + 1];
        if (next != '\\' && next != '"' && next != 'n') return std::string::npos;
        ++i;
      }
      ++i;
    }
    if (i >= line.size()) return std::string::npos;
    pos = i + 1;  // past the closing quote
    if (pos < line.size() && line[pos] == ',') ++pos;
  }
  return pos < line.size() ? pos + 1 : std::string::npos;
}

}  // namespace

std::string UnescapeLabelValue(const std::string& escaped) {
  std::string out;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '\\' && i + 1 < escaped.size()) {
      ++i;
      out += escaped[i] == 'n' ? '\n' : escaped[i];
    } else {
      out += escaped[i];
    }
  }
  return out;
}

absl::StatusOr<ParsedPage> ParsePage(const std::string& page) {
  ParsedPage parsed;
  if (!page.empty() && page.back() != '\n') {
    return absl::InvalidArgumentError("page does not end with a line feed");
  }
  std::istringstream in(page);
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const size_t space = rest.find(' ');
      if (space == std::string::npos) return LineError(line_number, line, "no text");
      const std::string name = rest.substr(0, space);
      if (!IsValidMetricName(name)) return LineError(line_number, line, "bad metric name");
      if (line[2] == 'H') {
        parsed.helps[name] = UnescapeLabelValue(rest.substr(space + 1));
      } else {
        parsed.types[name] = rest.substr(space + 1);
      }
      continue;
    }
    if (line.empty() || line[0] == '#') return LineError(line_number, line, "unexpected line");
    size_t pos = 0;
    while (pos < line.size() && line[pos] != '{' && line[pos] != ' ') ++pos;
    if (!IsValidMetricName(line.substr(0, pos))) {
      return LineError(line_number, line, "bad metric name");
    }
    if (pos < line.size() && line[pos] == '{') {
      pos = SkipLabels(line, pos);
      if (pos == std::string::npos) return LineError(line_number, line, "bad labels");
    }
    if (pos >= line.size() || line[pos] != ' ') return LineError(line_number, line, "no value");
    const std::string value_text = line.substr(pos + 1);
    double value = 0;
    if (value_text == "+Inf") {
      value = std::numeric_limits<double>::infinity();
    } else if (value_text == "-Inf") {
      value = -std::numeric_limits<double>::infinity();
    } else if (value_text == "NaN") {
      value = std::numeric_limits<double>::quiet_NaN();
    } else {
      char* end = nullptr;
      value = std::strtod(value_text.c_str(), &end);
      if (value_text.empty() || *end != '\0') {
        return LineError(line_number, line, "bad value");
      }
    }
    const std::string series = line.substr(0, pos);
    if (!parsed.samples.emplace(series, value).second) {
      return LineError(line_number, line, "duplicate series");
    }
  }
  return parsed;
}

}  // namespace orca::metrics::testing
