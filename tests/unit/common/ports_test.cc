#include "core/common/ports.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <set>

namespace orca {
namespace {

TEST(PickLoopbackPortTest, PortsPickedBackToBackAreDistinctBindableAndOutsideTheEphemeralRange) {
  int eph_lo = 32768, eph_hi = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> eph_lo >> eph_hi;
  std::set<int> seen;
  for (int i = 0; i < 300; ++i) {
    auto port = PickLoopbackPort();
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_TRUE(seen.insert(*port).second) << "port " << *port << " handed out twice";
    EXPECT_TRUE(*port < eph_lo || *port > eph_hi) << *port << " is in the ephemeral range";
  }
  // The last one can really be listened on.
  const int port = *seen.rbegin();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(listen(fd, 1), 0);
  close(fd);
}

TEST(PickLoopbackPortTest, NeverReturnsAPortSomeoneListensOn) {
  // Occupy many ports of the range, then pick: none of the occupied ones may come back.
  std::set<int> occupied;
  std::vector<int> fds;
  for (int i = 0; i < 50; ++i) {
    auto port = PickLoopbackPort();
    ASSERT_TRUE(port.ok());
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(*port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd, 1) == 0) occupied.insert(*port);
    fds.push_back(fd);
  }
  for (int i = 0; i < 200; ++i) {
    auto port = PickLoopbackPort();
    ASSERT_TRUE(port.ok());
    EXPECT_EQ(occupied.count(*port), 0u);
  }
  for (int fd : fds) close(fd);
}

}  // namespace
}  // namespace orca
