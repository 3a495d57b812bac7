#pragma once
/// Stop strings matched on detokenized text as it streams. A tail that could
/// still become a stop string is held back until it is decided, so a stop
/// string never reaches the client.

#include <string>
#include <string_view>
#include <vector>

namespace orca::text {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stop_strings);

  struct Result {
    /// Text safe to send now.
    std::string emit;
    /// True once a stop string was found; `emit` then ends right before it and
    /// nothing more should be sent.
    bool stopped = false;
    std::string matched;
  };
  /// Feeds newly decoded text.
  Result Push(std::string_view text);
  /// Generation ended without a stop string: returns the held-back tail.
  std::string Flush();
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  size_t max_len_ = 0;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace orca::text
