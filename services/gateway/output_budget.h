#pragma once
/// The gateway-wide budget for buffered response output (--max-buffered-output-bytes):
/// the bytes that streamed responses have been handed (HttpExchange::Write) and
/// their clients' sockets have not taken yet, summed over every connection.
///
/// Without it each connection could buffer its own cap (16 MiB) and thousands of
/// requests run at once: tens of GiB with no overall bound. With it:
///
///  - Backpressure: a stream holding more than its share (half the budget split
///    evenly over the streams open now) pauses its producer: the gateway stops
///    reading that request from the scheduler, so the scheduler coalesces its
///    tokens instead of the gateway buffering them. It resumes once the client
///    has taken the stream down to half its share.
///  - A bound on pausing: a stream paused for longer than max_pause is cancelled
///    (the scheduler request ends and frees its KV; the response ends with an
///    error event naming the reason, if the client ever reads it).
///  - A hard cap: a write that would take the sum above max_bytes is refused and
///    its connection closed. The half of the budget left outside the shares keeps
///    streams that are read promptly clear of it; it is reached only when paused
///    streams overshoot their shares by whole scheduler messages.
///
/// Thread-safe (atomics): sessions on every I/O thread draw on one budget.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"

namespace orca::gateway {

class OutputBudget {
 public:
  struct Options {
    /// The most output buffered at once over all connections.
    size_t max_bytes = size_t{256} << 20;
    /// How long a stream may stay paused (its client reading nothing) before it is cancelled.
    absl::Duration max_pause = absl::Seconds(30);
  };

  explicit OutputBudget(Options options) : options_(options) {}

  const Options& options() const { return options_; }

  /// Charges `bytes`; false, charging nothing, when the total would exceed max_bytes.
  [[nodiscard]] bool TryCharge(size_t bytes);
  /// Returns bytes charged before (written to a socket, or dropped).
  void Release(size_t bytes);

  /// A streamed response starts / ends: the shares are recomputed from the count.
  void AddStream() { num_streams_.fetch_add(1); }
  void RemoveStream() { num_streams_.fetch_sub(1); }

  /// The most one stream may hold before its producer pauses:
  /// max_bytes / (2 × streams open), at least 1.
  size_t StreamShare() const;

  /// Bytes charged now.
  size_t buffered_bytes() const { return buffered_.load(); }
  /// The most ever charged at once.
  size_t peak_bytes() const { return peak_.load(); }
  /// Streams open now.
  int64_t num_streams() const { return num_streams_.load(); }
  /// Writes refused because the budget was full.
  int64_t num_refused() const { return num_refused_.load(); }
  /// Times a stream's producer was paused.
  int64_t num_pauses() const { return num_pauses_.load(); }
  void CountPause() { num_pauses_.fetch_add(1); }
  /// Streams cancelled for staying paused beyond max_pause.
  int64_t num_pause_cancels() const { return num_pause_cancels_.load(); }
  void CountPauseCancel() { num_pause_cancels_.fetch_add(1); }

 private:
  const Options options_;
  std::atomic<size_t> buffered_{0};
  std::atomic<size_t> peak_{0};
  std::atomic<int64_t> num_streams_{0};
  std::atomic<int64_t> num_refused_{0};
  std::atomic<int64_t> num_pauses_{0};
  std::atomic<int64_t> num_pause_cancels_{0};
};

}  // namespace orca::gateway
