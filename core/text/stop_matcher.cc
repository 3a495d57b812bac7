#include "core/text/stop_matcher.h"

#include <algorithm>

namespace orca::text {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) {
  for (std::string& s : stop_strings) {
    if (s.empty()) continue;
    max_len_ = std::max(max_len_, s.size());
    stops_.push_back(std::move(s));
  }
}

StopMatcher::Result StopMatcher::Push(std::string_view text) {
  Result result;
  if (stopped_) return result;
  held_.append(text);
  if (stops_.empty()) {
    result.emit.swap(held_);
    return result;
  }
  // Earliest occurrence wins; at equal positions the longest stop string.
  // Only the region that could contain a new match is searched.
  size_t best = std::string::npos;
  const std::string* best_stop = nullptr;
  for (const std::string& s : stops_) {
    size_t pos = held_.find(s);
    if (pos == std::string::npos) continue;
    if (pos < best || (pos == best && s.size() > best_stop->size())) {
      best = pos;
      best_stop = &s;
    }
  }
  if (best_stop != nullptr) {
    result.emit = held_.substr(0, best);
    result.stopped = true;
    result.matched = *best_stop;
    held_.clear();
    stopped_ = true;
    return result;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  result.emit = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return result;
}

std::string StopMatcher::Flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace orca::text
