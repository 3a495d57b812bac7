#pragma once
/// Communicator over Gloo's TCP transport. Members meet through a rendezvous
/// store (in-process for threads, or the scheduler's key-value store across
/// processes and hosts), under a key prefix naming the group.
///
/// Ports: Gloo's TCP transport (Debian 12's gloo) listens on one socket per
/// pair of members. With `Options::port` 0 every pair takes an ephemeral port
/// and all pairs connect at once. With a fixed port, every pair of this member
/// listens on that one port: the pairs are connected one after another in a
/// global order (pair (a, b), a < b, in lexicographic order, which every
/// member follows, so no member waits on a pair its peer has not reached), and
/// a pair's listening socket is closed once it is connected, before the next
/// one binds. A firewall (a Kubernetes NetworkPolicy) then only needs to admit
/// that one port.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "core/engine/communicator.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
namespace transport {
class Device;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace orca::engine {

class GlooCommunicator final : public Communicator {
 public:
  struct Options {
    gloo::rendezvous::Store* store = nullptr;  ///< must outlive Create()
    std::string prefix;                        ///< group name, unique per group and generation
    int32_t rank = 0;
    int32_t size = 1;
    std::string hostname = "127.0.0.1";  ///< address peers use to reach this member
    int32_t port = 0;                    ///< listening port of every pair (see above); 0 = ephemeral, one per pair
    std::chrono::milliseconds timeout{10000};  ///< for forming the group
    std::chrono::milliseconds op_timeout{0};   ///< per operation; 0 = `timeout`
  };
  /// Connects the full mesh; blocks until every member has joined or the timeout passes.
  /// Sets SIGPIPE to ignored if it has its default action: a write to a peer that
  /// is gone is then a failed operation, not the end of the process.
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Create(const Options& options);
  ~GlooCommunicator() override;

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  absl::Status AllReduceSum(float* data, size_t count) override;
  absl::Status Gather(const float* data, size_t count, int32_t root, float* out) override;
  absl::Status Send(int32_t peer, const void* data, size_t bytes) override;
  absl::Status Recv(int32_t peer, void* data, size_t bytes) override;

  /// Makes a Send or Recv that is waiting (and every later one) return
  /// Aborted at once: the group is being abandoned (a new pipeline session)
  /// and its peer may never answer. Any thread; the group is unusable after.
  void Abort() override;

  /// An in-process store for groups whose members are threads of one process.
  static std::unique_ptr<gloo::rendezvous::Store> MakeLocalStore();

 private:
  GlooCommunicator() = default;
  absl::Status PointToPoint(int32_t peer, void* data, size_t bytes, bool send);

  int32_t rank_ = 0;
  int32_t size_ = 1;
  std::chrono::milliseconds timeout_{10000};
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;

  // The point-to-point operation waiting right now, for Abort().
  std::mutex abort_mu_;
  bool aborted_ = false;
  gloo::transport::UnboundBuffer* waiting_ = nullptr;
};

}  // namespace orca::engine
