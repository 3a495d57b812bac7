#include "core/common/process_memory.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace orca {
namespace {

/// "  123456 kB" → bytes; "42" (a count) → 42.
bool ParseValue(absl::string_view text, bool in_kb, int64_t* out) {
  text = absl::StripAsciiWhitespace(text);
  if (in_kb && !absl::ConsumeSuffix(&text, "kB")) return false;
  int64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &v) || v < 0) return false;
  *out = in_kb ? v * 1024 : v;
  return true;
}

}  // namespace

std::string ProcessMemory::ToJson() const {
  return absl::StrCat("{\"rss_bytes\":", rss_bytes, ",\"peak_rss_bytes\":", peak_rss_bytes,
                      ",\"rss_anon_bytes\":", rss_anon_bytes, ",\"rss_file_bytes\":", rss_file_bytes,
                      ",\"rss_shmem_bytes\":", rss_shmem_bytes, ",\"threads\":", num_threads, "}");
}

absl::StatusOr<ProcessMemory> ParseProcStatus(absl::string_view status_text) {
  ProcessMemory m;
  const std::pair<absl::string_view, int64_t*> fields[] = {
      {"VmRSS", &m.rss_bytes},        {"VmHWM", &m.peak_rss_bytes},     {"RssAnon", &m.rss_anon_bytes},
      {"RssFile", &m.rss_file_bytes}, {"RssShmem", &m.rss_shmem_bytes}, {"Threads", &m.num_threads},
  };
  bool has_rss = false;
  for (absl::string_view line : absl::StrSplit(status_text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view key = line.substr(0, colon);
    for (const auto& [name, dst] : fields) {
      if (key != name) continue;
      if (!ParseValue(line.substr(colon + 1), name != "Threads", dst)) {
        return absl::InvalidArgumentError(absl::StrCat("/proc status field ", name, " is not a count",
                                                       name != "Threads" ? " in kB" : "", ": '", line.substr(colon + 1),
                                                       "'"));
      }
      if (name == "VmRSS") has_rss = true;
    }
  }
  if (!has_rss) return absl::InvalidArgumentError("/proc status has no VmRSS line");
  return m;
}

absl::StatusOr<ProcessMemory> ReadProcessMemory() {
  std::ifstream in("/proc/self/status");
  if (!in) return absl::UnavailableError("cannot read /proc/self/status");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseProcStatus(text.str());
}

}  // namespace orca
