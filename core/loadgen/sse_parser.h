#pragma once
/// Incremental parser for Server-Sent Events (the WHATWG "text/event-stream" format that
/// OpenAI-compatible servers stream completions in). Bytes may arrive split anywhere, even
/// inside a line ending; events come out whole.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace orca::loadgen {

/// One dispatched event. `data` joins the event's `data:` lines with '\n'.
struct SseEvent {
  std::string event;  ///< The `event:` field; empty means "message".
  std::string data;
  std::string id;
};

class SseParser {
 public:
  /// An event (or a line) longer than `max_event_bytes` is an error: a misbehaving server
  /// must not grow the client's memory without bound.
  explicit SseParser(size_t max_event_bytes = size_t{16} << 20) : max_event_bytes_(max_event_bytes) {}

  /// Consumes `bytes` and appends every event they complete to `events`. Lines end with
  /// "\r\n", "\n" or "\r"; a blank line dispatches the event being built (events without
  /// data are dropped, as the spec says); lines starting with ':' are comments; a field
  /// value loses one leading space. RESOURCE_EXHAUSTED past max_event_bytes (the parser
  /// then stays failed).
  absl::Status Feed(absl::string_view bytes, std::vector<SseEvent>* events);

  /// True if bytes of an undispatched event (or an unterminated line) are pending: at the
  /// end of a stream this is a truncated event, which the spec discards.
  bool has_pending() const { return !line_.empty() || has_data_ || !event_.event.empty(); }

 private:
  absl::Status ProcessLine(std::vector<SseEvent>* events);

  size_t max_event_bytes_;
  std::string line_;       ///< The current line, without its ending.
  bool skip_lf_ = false;   ///< The previous chunk ended in '\r': a leading '\n' belongs to it.
  bool has_data_ = false;  ///< At least one data line (possibly empty) in the pending event.
  SseEvent event_;         ///< The event being built.
  absl::Status status_;
};

}  // namespace orca::loadgen
