#pragma once
// A small strict reader of the text exposition format for tests: checks the
// line grammar (HELP/TYPE comments, `name{labels} value` samples with quoted,
// escaped label values) and returns the samples by series.

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace orca::metrics::testing {

struct ParsedPage {
  // "name{a=\"x\",b=\"y\"}" (as written on the page) -> value.
  std::map<std::string, double> samples;
  // family name -> TYPE keyword, and -> unescaped HELP text.
  std::map<std::string, std::string> types;
  std::map<std::string, std::string> helps;
};

absl::StatusOr<ParsedPage> ParsePage(const std::string& page);

// Unescapes a label value as written between quotes.
std::string UnescapeLabelValue(const std::string& escaped);

}  // namespace orca::metrics::testing
