#include "core/loadgen/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"

namespace orca::loadgen {
namespace {

constexpr int kBarWidth = 30;
constexpr auto kTtyInterval = std::chrono::milliseconds(200);
constexpr auto kLogInterval = std::chrono::seconds(10);

}  // namespace

ProgressBar::ProgressBar(std::string label, int64_t total, double time_limit_s, bool enabled)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 0)),
      time_limit_s_(time_limit_s),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) == 1),
      last_draw_(std::chrono::steady_clock::now()) {}

std::string ProgressBar::Render() const {
  const int64_t done = num_ok_ + num_failed_;
  const int filled = total_ > 0 ? static_cast<int>(kBarWidth * std::min<int64_t>(done, total_) / total_) : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kBarWidth - filled), '.');
  const double rate = elapsed_s_ > 0 ? static_cast<double>(num_ok_) / elapsed_s_ : 0.0;
  return absl::StrFormat("%s[%s] %d/%d done (%d failed), %d in flight, %.1f/%.0f s, %.2f req/s",
                         label_.empty() ? "" : label_ + " ", bar, done, total_, num_failed_, num_in_flight_, elapsed_s_,
                         time_limit_s_, rate);
}

void ProgressBar::Update(int64_t num_ok, int64_t num_failed, int64_t num_in_flight, double elapsed_s) {
  num_ok_ = num_ok;
  num_failed_ = num_failed;
  num_in_flight_ = num_in_flight;
  elapsed_s_ = elapsed_s;
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  const std::chrono::steady_clock::duration interval =
      tty_ ? std::chrono::steady_clock::duration(kTtyInterval) : std::chrono::steady_clock::duration(kLogInterval);
  if (now - last_draw_ < interval) return;
  last_draw_ = now;
  if (tty_) {
    std::fprintf(stderr, "\r%s\x1b[K", Render().c_str());
  } else {
    std::fprintf(stderr, "%s\n", Render().c_str());
  }
  std::fflush(stderr);
}

void ProgressBar::Finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  std::fprintf(stderr, tty_ ? "\r%s\x1b[K\n" : "%s\n", Render().c_str());
  std::fflush(stderr);
}

}  // namespace orca::loadgen
