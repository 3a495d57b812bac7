#include "core/engine/gloo_communicator.h"

#include <arpa/inet.h>
#include <gloo/rendezvous/store.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/ports.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orca::engine {
namespace {

using ::testing::HasSubstr;

// Members of one group as threads; member i on address `hosts[i]`, all with `port`.
std::vector<absl::StatusOr<std::unique_ptr<GlooCommunicator>>> FormGroup(gloo::rendezvous::Store* store,
                                                                         const std::string& prefix,
                                                                         const std::vector<std::string>& hosts,
                                                                         int32_t port,
                                                                         std::chrono::milliseconds timeout) {
  const int n = static_cast<int>(hosts.size());
  std::vector<absl::StatusOr<std::unique_ptr<GlooCommunicator>>> out;
  for (int r = 0; r < n; ++r) out.push_back(absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      GlooCommunicator::Options o;
      o.store = store;
      o.prefix = prefix;
      o.rank = r;
      o.size = n;
      o.hostname = hosts[r];
      o.port = port;
      o.timeout = timeout;
      out[r] = GlooCommunicator::Create(o);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// Every member all-reduces [r, 10r] and passes a token around the ring.
void ExpectGroupWorks(std::vector<absl::StatusOr<std::unique_ptr<GlooCommunicator>>>& group) {
  const int n = static_cast<int>(group.size());
  std::vector<std::vector<float>> data(n);
  std::vector<int32_t> received(n, -1);
  std::vector<absl::Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Communicator& c = **group[r];
      data[r] = {static_cast<float>(r), 10.0f * r};
      status[r] = c.AllReduceSum(data[r].data(), data[r].size());
      if (!status[r].ok()) return;
      const int32_t token = 100 + r;
      // Even ranks send first, odd ranks receive first: no pair waits on itself.
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      if (r % 2 == 0) {
        status[r] = c.Send(next, &token, sizeof(token));
        if (status[r].ok()) status[r] = c.Recv(prev, &received[r], sizeof(received[r]));
      } else {
        status[r] = c.Recv(prev, &received[r], sizeof(received[r]));
        if (status[r].ok()) status[r] = c.Send(next, &token, sizeof(token));
      }
    });
  }
  for (auto& t : threads) t.join();
  const float sum = n * (n - 1) / 2.0f;
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    EXPECT_EQ(data[r], (std::vector<float>{sum, 10 * sum})) << "rank " << r;
    EXPECT_EQ(received[r], 100 + (r + n - 1) % n) << "rank " << r;
  }
}

struct TcpEntry {
  std::string local_ip, remote_ip;
  int local_port = 0, remote_port = 0;
  int state = 0;
};

std::string Ipv4FromProcHex(const std::string& hex) {
  in_addr a{};
  a.s_addr = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));  // /proc/net/tcp prints the raw (network-order) word
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return buf;
}

// This network namespace's IPv4 TCP sockets (/proc/net/tcp).
std::vector<TcpEntry> TcpSockets() {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // header
  std::vector<TcpEntry> out;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    TcpEntry e;
    e.local_ip = Ipv4FromProcHex(local.substr(0, 8));
    e.local_port = std::stoi(local.substr(9), nullptr, 16);
    e.remote_ip = Ipv4FromProcHex(remote.substr(0, 8));
    e.remote_port = std::stoi(remote.substr(9), nullptr, 16);
    e.state = std::stoi(state, nullptr, 16);
    out.push_back(e);
  }
  return out;
}

constexpr int kTcpEstablished = 1;
constexpr int kTcpListen = 10;

TEST(GlooCommunicatorTest, FixedPortGroupAcceptsEveryConnectionOnThatPort) {
  // Three members on three loopback addresses, all on one port: like three pods.
  auto port = PickLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::vector<std::string> hosts = {"127.0.0.21", "127.0.0.22", "127.0.0.23"};
  auto store = GlooCommunicator::MakeLocalStore();
  auto group = FormGroup(store.get(), "fixed", hosts, *port, std::chrono::seconds(20));
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(group[r].ok()) << "rank " << r << ": " << group[r].status();
  ExpectGroupWorks(group);

  // Each of the 3 pairs is one TCP connection (two entries, one per end) of
  // which the accepting end is `port`; nothing of the group listens any more.
  // (The connecting end's source address is the kernel's choice: 127.0.0.1 here.)
  auto ours = [&](const std::string& ip) { return ip == hosts[0] || ip == hosts[1] || ip == hosts[2]; };
  int connection_ends = 0;
  for (const TcpEntry& e : TcpSockets()) {
    if (ours(e.local_ip) && e.state == kTcpListen)
      ADD_FAILURE() << e.local_ip << ":" << e.local_port << " still listens";
    if (e.state != kTcpEstablished || !(ours(e.local_ip) || ours(e.remote_ip))) continue;
    ++connection_ends;
    EXPECT_TRUE(e.local_port == *port || e.remote_port == *port)
        << e.local_ip << ":" << e.local_port << " <-> " << e.remote_ip << ":" << e.remote_port
        << " does not use the data-plane port " << *port;
  }
  EXPECT_EQ(connection_ends, 6);
}

TEST(GlooCommunicatorTest, FixedPortGroupReformsRightAfterTheLastOneCloses) {
  // A new engine session re-forms the data plane on the same port at once.
  auto port = PickLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  auto store = GlooCommunicator::MakeLocalStore();
  for (int session = 1; session <= 3; ++session) {
    auto group = FormGroup(store.get(), absl::StrCat("session-", session), {"127.0.0.31", "127.0.0.32"}, *port,
                           std::chrono::seconds(20));
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(group[r].ok()) << "session " << session << ": " << group[r].status();
    ExpectGroupWorks(group);
  }
}

TEST(GlooCommunicatorTest, EphemeralPortsStillConnect) {
  auto store = GlooCommunicator::MakeLocalStore();
  auto group =
      FormGroup(store.get(), "ephemeral", {"127.0.0.1", "127.0.0.1", "127.0.0.1"}, 0, std::chrono::seconds(20));
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(group[r].ok()) << "rank " << r << ": " << group[r].status();
  ExpectGroupWorks(group);
}

TEST(GlooCommunicatorTest, TakenPortIsAnErrorNamingAddressAndPort) {
  auto port = PickLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  // Something else listens on rank 0's data-plane address.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  inet_pton(AF_INET, "127.0.0.41", &addr.sin_addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  auto store = GlooCommunicator::MakeLocalStore();
  auto group = FormGroup(store.get(), "taken", {"127.0.0.41", "127.0.0.42"}, *port, std::chrono::seconds(2));
  ::close(fd);
  ASSERT_FALSE(group[0].ok());
  EXPECT_EQ(group[0].status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(group[0].status().message(), HasSubstr(absl::StrCat("127.0.0.41:", *port)));
  EXPECT_THAT(group[0].status().message(), HasSubstr("cannot listen on the data-plane port"));
  ASSERT_FALSE(group[1].ok());  // its peer never published an address
  EXPECT_EQ(group[1].status().code(), absl::StatusCode::kDeadlineExceeded) << group[1].status();
}

TEST(GlooCommunicatorTest, RejectsPortOutsideTheTcpRange) {
  auto store = GlooCommunicator::MakeLocalStore();
  GlooCommunicator::Options o;
  o.store = store.get();
  o.size = 2;
  o.port = 70000;
  auto c = GlooCommunicator::Create(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("[0, 65535], got 70000"));
}

// The vocabulary-parallel LM head's gather: every member's share lands at its
// rank's offset on the root only; the others' outputs are untouched.
TEST(GlooCommunicatorTest, GatherCollectsEveryMembersShareOnTheRootInRankOrder) {
  auto store = GlooCommunicator::MakeLocalStore();
  auto group = FormGroup(store.get(), "gather", {"127.0.0.1", "127.0.0.1", "127.0.0.1"}, 0, std::chrono::seconds(20));
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(group[r].ok()) << "rank " << r << ": " << group[r].status();
  constexpr int kRoot = 1;
  std::vector<std::vector<float>> out(3, std::vector<float>(6, -1.0f));
  std::vector<absl::Status> status(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      const std::vector<float> share = {10.0f * r, 10.0f * r + 1};
      status[r] = (*group[r])->Gather(share.data(), share.size(), kRoot, r == kRoot ? out[r].data() : nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  EXPECT_EQ(out[kRoot], (std::vector<float>{0, 1, 10, 11, 20, 21}));
  EXPECT_EQ(out[0], std::vector<float>(6, -1.0f));
  EXPECT_EQ(out[2], std::vector<float>(6, -1.0f));

  const float one = 1;
  const absl::Status bad_root = (*group[0])->Gather(&one, 1, 3, nullptr);
  EXPECT_EQ(bad_root.code(), absl::StatusCode::kInvalidArgument) << bad_root;
  EXPECT_THAT(bad_root.message(), HasSubstr("root 3 is not a member of a group of 3"));
  const absl::Status no_output = (*group[kRoot])->Gather(&one, 1, kRoot, nullptr);
  EXPECT_EQ(no_output.code(), absl::StatusCode::kInvalidArgument) << no_output;
}

// A member whose peer goes away mid-stream gets an error from Send, and its process lives
// on. Gloo writes with writev, which raises SIGPIPE on a connection the peer has reset; with
// the signal's default action a pipeline stage died without a word when the next stage was
// killed (failure_test, kill -9, once in about ten runs: only a write after the peer's reset
// and before Gloo reads the close raises it, so the disposition is checked as well).
TEST(GlooCommunicatorTest, SendToAPeerThatWentAwayIsAnErrorNotTheEndOfTheProcess) {
  auto store = GlooCommunicator::MakeLocalStore();
  auto group = FormGroup(store.get(), "gone", {"127.0.0.1", "127.0.0.1"}, 0, std::chrono::seconds(20));
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(group[r].ok()) << "rank " << r << ": " << group[r].status();

  struct sigaction action {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &action), 0);
  EXPECT_EQ(action.sa_handler, SIG_IGN) << "a member must not die of its peer's reset";

  const std::vector<char> payload(1 << 16, 'x');
  absl::Status sent;
  std::thread sender([&] {
    for (int i = 0; i < 100000 && sent.ok(); ++i) sent = (*group[0])->Send(1, payload.data(), payload.size());
  });
  std::vector<char> in(payload.size());
  absl::Status received;
  for (int i = 0; i < 20 && received.ok(); ++i) received = (*group[1])->Recv(0, in.data(), in.size());
  group[1] = absl::UnavailableError("gone");  // closes its sockets mid-stream, as a killed process's kernel does
  sender.join();
  EXPECT_TRUE(received.ok()) << received;
  EXPECT_FALSE(sent.ok());
  EXPECT_THAT(sent.message(), HasSubstr("send to rank 1"));
}

}  // namespace
}  // namespace orca::engine
