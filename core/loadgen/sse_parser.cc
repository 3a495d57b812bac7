#include "core/loadgen/sse_parser.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace orca::loadgen {

absl::Status SseParser::Feed(absl::string_view bytes, std::vector<SseEvent>* events) {
  if (!status_.ok()) return status_;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (skip_lf_) {
      skip_lf_ = false;
      if (c == '\n') continue;  // the "\n" of a "\r\n" split across chunks
    }
    if (c == '\r' || c == '\n') {
      skip_lf_ = c == '\r';
      if (absl::Status s = ProcessLine(events); !s.ok()) return status_ = s;
      continue;
    }
    // Copy the run up to the next line ending at once.
    size_t end = i;
    while (end < bytes.size() && bytes[end] != '\r' && bytes[end] != '\n') ++end;
    line_.append(bytes.data() + i, end - i);
    i = end - 1;
    if (line_.size() + event_.data.size() > max_event_bytes_) {
      return status_ = absl::ResourceExhaustedError(
                 absl::StrCat("server-sent event larger than ", max_event_bytes_, " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::Status SseParser::ProcessLine(std::vector<SseEvent>* events) {
  const std::string line = std::move(line_);
  line_.clear();
  if (line.empty()) {  // blank line: dispatch
    if (has_data_) {
      SseEvent event = std::move(event_);
      if (!event.data.empty() && event.data.back() == '\n') event.data.pop_back();
      events->push_back(std::move(event));
    }
    event_ = SseEvent();
    has_data_ = false;
    return absl::OkStatus();
  }
  if (line.front() == ':') return absl::OkStatus();  // comment (keep-alive)
  const size_t colon = line.find(':');
  const absl::string_view field = absl::string_view(line).substr(0, colon);
  absl::string_view value;
  if (colon != std::string::npos) {
    value = absl::string_view(line).substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    absl::StrAppend(&event_.data, value, "\n");
    has_data_ = true;
  } else if (field == "event") {
    event_.event = std::string(value);
  } else if (field == "id") {
    event_.id = std::string(value);
  }  // "retry" and unknown fields are ignored.
  return absl::OkStatus();
}

}  // namespace orca::loadgen
