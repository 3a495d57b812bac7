#pragma once
/// A one-line progress display on stderr for load runs: redrawn in place on a terminal,
/// printed as a plain line every few seconds when stderr is a file or pipe.

#include <chrono>
#include <cstdint>
#include <string>

namespace orca::loadgen {

class ProgressBar {
 public:
  /// `total` requests; nothing is printed when `enabled` is false.
  ProgressBar(std::string label, int64_t total, double time_limit_s, bool enabled);
  ~ProgressBar() { Finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// Redraws if enough time passed since the last draw (throttled; cheap to call often).
  void Update(int64_t num_ok, int64_t num_failed, int64_t num_in_flight, double elapsed_s);
  /// Draws the final state and ends the line. Idempotent.
  void Finish();

 private:
  std::string Render() const;

  std::string label_;
  int64_t total_;
  double time_limit_s_;
  bool enabled_;
  bool tty_;
  bool finished_ = false;
  int64_t num_ok_ = 0, num_failed_ = 0, num_in_flight_ = 0;
  double elapsed_s_ = 0;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace orca::loadgen
