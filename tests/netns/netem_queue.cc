// netem_queue: delays and drops the packets an iptables NFQUEUE rule hands it,
// for kernels without the netem qdisc (tests/netns/netns.mjs uses `tc netem`
// where it exists, this elsewhere). Each packet gets its verdict (accept after
// --delay-ms, or drop with probability --loss-percent) in arrival order, so a
// constant delay keeps the order of a flow. Raw nfnetlink_queue protocol (no
// library); runs until killed, inside the host whose packets it holds.
//
//   netem_queue --queue 101 --delay-ms 200 --loss-percent 5
//   iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 101

#include <arpa/inet.h>  // before the kernel headers: glibc's definitions win over linux/in.h's
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  uint16_t queue = 0;
  int delay_ms = 0;
  double loss_percent = 0;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "netem_queue: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

bool ParseOptions(int argc, char** argv, Options* o) {
  bool have_queue = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    char* end = nullptr;
    const double v = std::strtod(argv[i + 1], &end);
    if (*end != '\0') return false;
    if (flag == "--queue" && v >= 0 && v <= 65535) {
      o->queue = static_cast<uint16_t>(v);
      have_queue = true;
    } else if (flag == "--delay-ms" && v >= 0 && v <= 60000) {
      o->delay_ms = static_cast<int>(v);
    } else if (flag == "--loss-percent" && v >= 0 && v <= 100) {
      o->loss_percent = v;
    } else {
      return false;
    }
  }
  return have_queue && argc % 2 == 1;
}

// One nfnetlink message to the queue subsystem, built attribute by attribute.
class Message {
 public:
  Message(uint8_t type, uint16_t queue) : buf_(NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg)), 0) {
    auto* nh = reinterpret_cast<nlmsghdr*>(buf_.data());
    nh->nlmsg_type = static_cast<uint16_t>((NFNL_SUBSYS_QUEUE << 8) | type);
    nh->nlmsg_flags = NLM_F_REQUEST;
    auto* g = reinterpret_cast<nfgenmsg*>(buf_.data() + NLMSG_HDRLEN);
    g->nfgen_family = AF_UNSPEC;
    g->version = NFNETLINK_V0;
    g->res_id = htons(queue);
  }

  template <typename T>
  Message& Attr(uint16_t type, const T& value) {
    const size_t at = buf_.size();
    buf_.resize(at + NLA_ALIGN(NLA_HDRLEN + sizeof(T)), 0);
    auto* a = reinterpret_cast<nlattr*>(buf_.data() + at);
    a->nla_type = type;
    a->nla_len = static_cast<uint16_t>(NLA_HDRLEN + sizeof(T));
    std::memcpy(buf_.data() + at + NLA_HDRLEN, &value, sizeof(T));
    return *this;
  }

  void Send(int fd) {
    reinterpret_cast<nlmsghdr*>(buf_.data())->nlmsg_len = static_cast<uint32_t>(buf_.size());
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (sendto(fd, buf_.data(), buf_.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0)
      Die("sendto");
  }

 private:
  std::vector<char> buf_;
};

void Verdict(int fd, uint16_t queue, uint32_t id, uint32_t verdict) {
  nfqnl_msg_verdict_hdr v{htonl(verdict), htonl(id)};
  Message(NFQNL_MSG_VERDICT, queue).Attr(NFQA_VERDICT_HDR, v).Send(fd);
}

// Packet ids of the NFQNL_MSG_PACKET messages in one receive buffer.
void PacketIds(const char* buf, ssize_t len, std::vector<uint32_t>* ids) {
  for (auto* nh = reinterpret_cast<const nlmsghdr*>(buf); NLMSG_OK(nh, static_cast<unsigned>(len));
       nh = NLMSG_NEXT(nh, len)) {
    if (nh->nlmsg_type == NLMSG_ERROR) {
      const auto* err = reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(nh));
      if (err->error != 0) {
        errno = -err->error;
        Die("kernel rejected a request");
      }
      continue;
    }
    if ((nh->nlmsg_type & 0xff) != NFQNL_MSG_PACKET) continue;
    const char* attrs = reinterpret_cast<const char*>(NLMSG_DATA(nh)) + NLMSG_ALIGN(sizeof(nfgenmsg));
    int left = static_cast<int>(nh->nlmsg_len) - static_cast<int>(attrs - reinterpret_cast<const char*>(nh));
    while (left >= static_cast<int>(NLA_HDRLEN)) {
      const auto* a = reinterpret_cast<const nlattr*>(attrs);
      if (a->nla_len < NLA_HDRLEN || a->nla_len > left) break;
      if ((a->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR) {
        nfqnl_msg_packet_hdr h;
        std::memcpy(&h, attrs + NLA_HDRLEN, sizeof(h));
        ids->push_back(ntohl(h.packet_id));
      }
      attrs += NLA_ALIGN(a->nla_len);
      left -= static_cast<int>(NLA_ALIGN(a->nla_len));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, &o)) {
    std::fprintf(stderr, "usage: netem_queue --queue N [--delay-ms MS (0-60000)] [--loss-percent P (0-100)]\n");
    return 2;
  }
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd < 0) Die("socket(NETLINK_NETFILTER)");
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) < 0) Die("bind");
  const int rcvbuf = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
  nfqnl_msg_config_cmd bind_cmd{NFQNL_CFG_CMD_BIND, 0, htons(AF_INET)};
  Message(NFQNL_MSG_CONFIG, o.queue).Attr(NFQA_CFG_CMD, bind_cmd).Send(fd);
  nfqnl_msg_config_params params{htonl(0), NFQNL_COPY_META};
  Message(NFQNL_MSG_CONFIG, o.queue).Attr(NFQA_CFG_PARAMS, params).Send(fd);
  Message(NFQNL_MSG_CONFIG, o.queue).Attr(NFQA_CFG_QUEUE_MAXLEN, htonl(65536u)).Send(fd);
  std::printf("ready: queue %u, delay %d ms, loss %.2f%%\n", o.queue, o.delay_ms, o.loss_percent);
  std::fflush(stdout);

  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> uniform(0.0, 100.0);
  std::deque<std::pair<Clock::time_point, uint32_t>> held;  // due time, packet id; in arrival order
  std::vector<char> buf(1 << 16);
  std::vector<uint32_t> ids;
  while (true) {
    int timeout_ms = -1;
    if (!held.empty()) {
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(held.front().first - Clock::now());
      timeout_ms = static_cast<int>(std::max<int64_t>(0, wait.count()));
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) < 0 && errno != EINTR) Die("poll");
    if (p.revents & POLLIN) {
      const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != ENOBUFS) Die("recv");
      ids.clear();
      if (n > 0) PacketIds(buf.data(), n, &ids);
      const auto due = Clock::now() + std::chrono::milliseconds(o.delay_ms);
      for (uint32_t id : ids) {
        if (o.loss_percent > 0 && uniform(rng) < o.loss_percent) {
          Verdict(fd, o.queue, id, NF_DROP);
        } else {
          held.emplace_back(due, id);
        }
      }
    }
    const auto now = Clock::now();
    while (!held.empty() && held.front().first <= now) {
      Verdict(fd, o.queue, held.front().second, NF_ACCEPT);
      held.pop_front();
    }
  }
}
