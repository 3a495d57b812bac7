#pragma once
/// Helpers for the Prometheus text exposition format, version 0.0.4:
/// name validation, escaping and number formatting. Label values are sanitized to valid UTF-8
/// with core/common/utf8.h (SanitizeUtf8) so that untrusted values never make the page unparseable.
/// https://prometheus.io/docs/instrumenting/exposition_formats/

#include <string>
#include <string_view>

namespace orca::metrics {

/// The Content-Type of a page produced by Registry::Serialize().
inline constexpr char kTextFormatContentType[] = "text/plain; version=0.0.4; charset=utf-8";

/// True for `[a-zA-Z_:][a-zA-Z0-9_:]*` (colons are allowed: "orca:foo").
bool IsValidMetricName(std::string_view name);

/// True for `[a-zA-Z_][a-zA-Z0-9_]*` not starting with "__" (reserved).
bool IsValidLabelName(std::string_view name);

/// Escapes a label value: backslash, double quote and line feed.
std::string EscapeLabelValue(std::string_view value);

/// Escapes `# HELP` text: backslash and line feed.
std::string EscapeHelp(std::string_view help);

/// Formats a sample value (or a bucket bound) with the shortest text that
/// reads back to the same double: "1", "0.25", "1e-06", "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);

/// Appends one sample line, `name{labels} value\n`, or `name value\n` when
/// `labels` is empty. `labels` is already rendered and escaped: `a="x",b="y"`.
void AppendSampleLine(std::string_view name, std::string_view labels, std::string_view value, std::string* out);

}  // namespace orca::metrics
