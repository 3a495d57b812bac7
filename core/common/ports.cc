#include "core/common/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <unordered_set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace orca {
namespace {

constexpr int kLowestPort = 10000;
constexpr int kAttempts = 512;

/// The kernel's ephemeral range (net.ipv4.ip_local_port_range), Linux's default when unreadable.
std::pair<int, int> EphemeralRange() {
  int lo = 32768, hi = 60999;
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int a = 0, b = 0;
  if (in >> a >> b && a > 0 && b >= a) lo = a, hi = b;
  return {lo, hi};
}

/// Binds 127.0.0.1:`port` (0 = the kernel's choice) and returns the bound port, or -1.
int TryBind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int bound = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    bound = ntohs(addr.sin_port);
  }
  ::close(fd);
  return bound;
}

struct Picker {
  absl::Mutex mu;
  std::mt19937 rng ABSL_GUARDED_BY(mu){std::random_device{}()};
  std::unordered_set<int> handed_out ABSL_GUARDED_BY(mu);
};

}  // namespace

absl::StatusOr<int> PickLoopbackPort() {
  static Picker* picker = new Picker;
  absl::MutexLock lock(&picker->mu);
  const auto [eph_lo, eph_hi] = EphemeralRange();
  // Below the ephemeral range when there is room for it, else above it.
  int lo = kLowestPort, hi = eph_lo - 1;
  if (hi - lo < 1000) lo = eph_hi + 1, hi = 65535;
  if (hi - lo >= 1000) {
    std::uniform_int_distribution<int> dist(lo, hi);
    for (int i = 0; i < kAttempts; ++i) {
      const int port = dist(picker->rng);
      if (picker->handed_out.count(port) || TryBind(port) != port) continue;
      picker->handed_out.insert(port);
      return port;
    }
  }
  for (int i = 0; i < kAttempts; ++i) {  // crowded machine: let the kernel choose
    const int port = TryBind(0);
    if (port <= 0) break;
    if (picker->handed_out.insert(port).second) return port;
  }
  return absl::UnavailableError(absl::StrCat("no free loopback TCP port: ", std::strerror(errno)));
}

}  // namespace orca
