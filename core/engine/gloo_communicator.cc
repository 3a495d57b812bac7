#include "core/engine/gloo_communicator.h"

#include <arpa/inet.h>
#include <gloo/allreduce.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <netinet/in.h>
#include <signal.h>

#include <cstring>
#include <exception>
#include <mutex>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace orca::engine {
namespace {

// Gloo reports failures by exception; they stop here.
absl::Status FromException(const std::exception& e, const std::string& what) {
  const std::string msg = e.what();
  if (msg.find("bind: ") != std::string::npos)
    return absl::UnavailableError(absl::StrCat(what, ": cannot listen on the data-plane port: ", msg));
  if (dynamic_cast<const gloo::IoException*>(&e) != nullptr) {
    if (msg.find("Timed out") != std::string::npos || msg.find("timed out") != std::string::npos ||
        msg.find("timeout") != std::string::npos)
      return absl::DeadlineExceededError(absl::StrCat(what, ": peer did not respond in time: ", msg));
    return absl::UnavailableError(absl::StrCat(what, ": connection to peer failed: ", msg));
  }
  return absl::InternalError(absl::StrCat(what, ": ", msg));
}

// Gloo's TCP pairs write with writev, which raises SIGPIPE when the peer has reset the
// connection, and the signal's default action ends the process without a word. A member
// whose peer was killed (kill -9, OOM, node loss) must see a failed operation instead, as it
// does when Gloo reads the close first. A handler the program installed itself is kept.
void IgnoreBrokenPipes() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  });
}

// Gloo 2022's tcp::Device keeps the address its pairs bind to in a const
// member, and its constructor refuses an address with a port (it looks the
// address up among the interfaces' addresses, port included). So the device is
// made for the bare address and the port set afterwards: attr_ is only read,
// by libgloo's own code (Pair::listen binds to it), never cached.
class FixedPortDevice final : public gloo::transport::tcp::Device {
 public:
  FixedPortDevice(const gloo::transport::tcp::attr& attr, uint16_t port) : Device(attr) {
    auto& a = const_cast<gloo::transport::tcp::attr&>(attr_);
    if (a.ai_addr.ss_family == AF_INET) {
      reinterpret_cast<sockaddr_in*>(&a.ai_addr)->sin_port = htons(port);
    } else {
      reinterpret_cast<sockaddr_in6*>(&a.ai_addr)->sin6_port = htons(port);
    }
  }
};

// A Gloo device whose pairs all listen on `port` of `hostname`'s address.
std::shared_ptr<gloo::transport::Device> CreateFixedPortDevice(const std::string& hostname, int32_t port) {
  gloo::transport::tcp::attr attr;
  attr.hostname = hostname;
  attr = gloo::transport::tcp::CreateDeviceAttr(attr);  // resolves the address (its port is 0)
  return std::make_shared<FixedPortDevice>(attr, static_cast<uint16_t>(port));
}

// A Gloo whose pairs listen elsewhere than the device's address (later Gloo
// versions bind one listener when the device is made) must fail loudly, not
// fall back to ephemeral ports a firewall does not admit.
void CheckListensOn(const gloo::transport::Pair& pair, uint16_t port) {
  const auto* address = dynamic_cast<const gloo::transport::tcp::Address*>(&pair.address());
  const sockaddr_storage& sa = address->getSockaddr();
  const uint16_t bound = ntohs(sa.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(&sa)->sin_port
                                                       : reinterpret_cast<const sockaddr_in6*>(&sa)->sin6_port);
  if (bound != port)
    throw gloo::Exception(absl::StrCat("this Gloo listens on ", address->str(), ", not on the data-plane port ", port));
}

// A context whose pairs share one listening port: they connect one at a time
// (see the header). Only gloo::Context's protected members make this possible
// without changing Gloo.
class SequentialMeshContext final : public gloo::Context {
 public:
  using gloo::Context::Context;

  void ConnectPairsInOrder(gloo::rendezvous::Store& store, const std::shared_ptr<gloo::transport::Device>& device,
                           uint16_t port) {
    const auto deadline = std::chrono::steady_clock::now() + getTimeout();
    auto transport = device->createContext(rank, size);
    transport->setTimeout(getTimeout());
    for (int a = 0; a < size; ++a) {
      for (int b = a + 1; b < size; ++b) {
        if (rank != a && rank != b) continue;
        const int peer = rank == a ? b : a;
        auto& pair = transport->createPair(peer);  // binds and listens on the fixed port
        pair->setLocalRank(0);
        CheckListensOn(*pair, port);
        const std::string key = absl::StrCat("pair-", a, "-", b, "/");
        store.set(key + std::to_string(rank), pair->address().bytes());
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) throw gloo::IoException(absl::StrCat("Timed out connecting to rank ", peer));
        store.wait({key + std::to_string(peer)}, left);
        pair->connect(store.get(key + std::to_string(peer)));  // returns once connected: the listener is closed
      }
    }
    device_ = device;
    transportContext_ = std::move(transport);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(const Options& o) {
  if (o.store == nullptr) return absl::InvalidArgumentError("GlooCommunicator needs a rendezvous store");
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    return absl::InvalidArgumentError(absl::StrCat("invalid rank ", o.rank, " for group size ", o.size));
  std::unique_ptr<GlooCommunicator> c(new GlooCommunicator());
  c->rank_ = o.rank;
  c->size_ = o.size;
  if (o.port < 0 || o.port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("data-plane port must be in [0, 65535], got ", o.port));
  c->timeout_ = o.op_timeout.count() > 0 ? o.op_timeout : o.timeout;
  IgnoreBrokenPipes();
  const std::string what = absl::StrCat("connecting data-plane group '", o.prefix, "' as rank ", o.rank, " of ", o.size,
                                        " on ", o.hostname, o.port > 0 ? absl::StrCat(":", o.port) : "");
  try {
    gloo::rendezvous::PrefixStore store(o.prefix, *o.store);
    if (o.port == 0) {
      gloo::transport::tcp::attr attr;
      attr.hostname = o.hostname;
      c->device_ = gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
      ctx->setTimeout(o.timeout);
      ctx->connectFullMesh(store, c->device_);
      ctx->setTimeout(c->timeout_);
      c->context_ = ctx;
    } else {
      c->device_ = CreateFixedPortDevice(o.hostname, o.port);
      auto ctx = std::make_shared<SequentialMeshContext>(o.rank, o.size);
      ctx->setTimeout(o.timeout);
      ctx->ConnectPairsInOrder(store, c->device_, static_cast<uint16_t>(o.port));
      ctx->setTimeout(c->timeout_);
      c->context_ = ctx;
    }
  } catch (const std::exception& e) {
    return FromException(e, what);
  }
  return c;
}

GlooCommunicator::~GlooCommunicator() = default;

absl::Status GlooCommunicator::AllReduceSum(float* data, size_t count) {
  if (size_ == 1 || count == 0) return absl::OkStatus();
  try {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, count);
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    return FromException(e, "all-reduce");
  }
  return absl::OkStatus();
}

absl::Status GlooCommunicator::Gather(const float* data, size_t count, int32_t root, float* out) {
  if (root < 0 || root >= size_)
    return absl::InvalidArgumentError(absl::StrCat("gather: root ", root, " is not a member of a group of ", size_));
  if (rank_ == root && out == nullptr) return absl::InvalidArgumentError("gather: the root needs an output buffer");
  if (count == 0) return absl::OkStatus();
  if (size_ == 1) {
    std::memmove(out, data, count * sizeof(float));
    return absl::OkStatus();
  }
  try {
    gloo::GatherOptions opts(context_);
    // Gloo's buffers are not const; the input is only read.
    opts.setInput(const_cast<float*>(data), count);
    if (rank_ == root) opts.setOutput(out, count * static_cast<size_t>(size_));
    opts.setRoot(root);
    opts.setTimeout(timeout_);
    gloo::gather(opts);
  } catch (const std::exception& e) {
    return FromException(e, absl::StrCat("gather of ", count, " floats onto rank ", root));
  }
  return absl::OkStatus();
}

absl::Status GlooCommunicator::Send(int32_t peer, const void* data, size_t bytes) {
  return PointToPoint(peer, const_cast<void*>(data), bytes, /*send=*/true);
}

absl::Status GlooCommunicator::Recv(int32_t peer, void* data, size_t bytes) {
  return PointToPoint(peer, data, bytes, /*send=*/false);
}

absl::Status GlooCommunicator::PointToPoint(int32_t peer, void* data, size_t bytes, bool send) {
  const std::string what = absl::StrCat(send ? "send to" : "receive from", " rank ", peer);
  try {
    std::unique_ptr<gloo::transport::UnboundBuffer> buf = context_->createUnboundBuffer(data, bytes);
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      if (aborted_) return absl::AbortedError(absl::StrCat(what, ": the data-plane group was abandoned"));
      waiting_ = buf.get();
    }
    // Declared after `buf`, so destroyed before it on every way out: a wait that throws
    // (Gloo's timeout) unwinds through here, and Abort() from another thread must never
    // see the buffer after it is gone (it did: a SIGSEGV in Abort() when a session
    // ended just as a receive timed out).
    absl::Cleanup forget_buffer = [this] {
      std::lock_guard<std::mutex> lock(abort_mu_);
      waiting_ = nullptr;
    };
    bool completed;
    if (send) {
      buf->send(peer, /*slot=*/0);
      completed = buf->waitSend(timeout_);
    } else {
      buf->recv(peer, /*slot=*/0);
      completed = buf->waitRecv(timeout_);
    }
    if (!completed) return absl::AbortedError(absl::StrCat(what, ": the data-plane group was abandoned"));
  } catch (const std::exception& e) {
    return FromException(e, what);
  }
  return absl::OkStatus();
}

void GlooCommunicator::Abort() {
  std::lock_guard<std::mutex> lock(abort_mu_);
  aborted_ = true;
  if (waiting_ != nullptr) {
    // Whichever wait it is in; the other abort flag is never read.
    waiting_->abortWaitSend();
    waiting_->abortWaitRecv();
  }
}

std::unique_ptr<gloo::rendezvous::Store> GlooCommunicator::MakeLocalStore() {
  return std::make_unique<gloo::rendezvous::HashStore>();
}

}  // namespace orca::engine
