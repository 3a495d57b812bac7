// A server's event stream as `orca bench` reads it. Bytes may arrive split anywhere,
// so the events must not depend on where: the input is fed whole and again in chunks
// whose sizes come from the input's first byte, and both runs must agree.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/loadgen/sse_parser.h"

namespace {
bool Same(const std::vector<orca::loadgen::SseEvent>& a, const std::vector<orca::loadgen::SseEvent>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].event != b[i].event || a[i].data != b[i].data || a[i].id != b[i].id) return false;
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 7;
  const absl::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  constexpr size_t kMaxEvent = 1 << 12;
  orca::loadgen::SseParser whole(kMaxEvent), chunked(kMaxEvent);
  std::vector<orca::loadgen::SseEvent> a, b;
  const bool whole_ok = whole.Feed(bytes, &a).ok();
  bool chunked_ok = true;
  for (size_t at = 0; at < bytes.size() && chunked_ok; at += step) {
    chunked_ok = chunked.Feed(bytes.substr(at, step), &b).ok();
  }
  // An over-long event fails both ways; before that, and otherwise, they must agree.
  if (whole_ok != chunked_ok) std::abort();
  if (whole_ok && (!Same(a, b) || whole.has_pending() != chunked.has_pending())) std::abort();
  return 0;
}
