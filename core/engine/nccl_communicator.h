#pragma once
/// Communicator over NCCL for the CUDA build: all-reduces inside a
/// tensor-parallel group and activations between pipeline stages, straight
/// from GPU memory (paper §4.1: tensors never travel over gRPC). Members meet
/// through the same gloo::rendezvous::Store the Gloo communicator uses — the
/// scheduler's key-value store across processes, or an in-process store for
/// threads: rank 0 publishes an ncclUniqueId under the group's prefix and the
/// others read it.
///
/// Every operation is queued on the member's CudaBackend stream, so it is
/// ordered after the kernels that produced its input and before the ones that
/// consume its output. With `Options::wait` the call then waits for the
/// operation to finish, which bounds it by `op_timeout` and reports a hung or
/// failed peer as a status, like GlooCommunicator. Without it (the engine's
/// forward path, paper §4.1) the member is stream-ordered: the host never
/// waits for the GPU, and a hung or failed peer surfaces at Drain() (the last
/// stage's wait for its logits), which polls ncclCommGetAsyncError and gives
/// up after `op_timeout`. A communicator that timed out or failed is aborted
/// (ncclCommAbort, which also ends its kernels still queued on the stream)
/// and returns its error from then on; the group must be formed again.
///
/// Data pointers are device memory of the member's GPU. One thread at a time
/// per member (a TP shard's thread), except Abort(), which any thread may call.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/engine/communicator.h"

struct ncclComm;
struct CUevent_st;

namespace gloo::rendezvous {
class Store;
}
namespace orca::kernels {
class CudaBackend;
}

namespace orca::engine {

class NcclCommunicator final : public Communicator {
 public:
  struct Options {
    gloo::rendezvous::Store* store = nullptr;  ///< must outlive Create()
    std::string prefix;                        ///< group name, unique per group and generation
    int32_t rank = 0;
    int32_t size = 1;
    /// This member's GPU and stream; must outlive the communicator.
    kernels::CudaBackend* backend = nullptr;
    std::chrono::milliseconds timeout{10000};  ///< for forming the group
    std::chrono::milliseconds op_timeout{0};   ///< per operation when waiting; 0 = `timeout`
    /// Wait for each operation to complete (bounded by op_timeout). Without it
    /// operations only get queued and a failure surfaces at a later call.
    bool wait = true;
  };

  /// Exchanges the unique id and initialises the NCCL communicator; blocks
  /// until every member has joined. DeadlineExceeded when they do not in
  /// `timeout`; Unavailable / Internal for NCCL failures; InvalidArgument for
  /// bad options.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(const Options& options);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  /// In-place sum of `count` floats of device memory over all members.
  absl::Status AllReduceSum(float* data, size_t count) override;
  /// Gather of device memory onto `root`: one NCCL group of sends to the root
  /// and its receives (the root's own share is a device copy on the stream).
  absl::Status Gather(const float* data, size_t count, int32_t root, float* out) override;
  /// Point-to-point of device memory, matched in order between a pair of members.
  absl::Status Send(int32_t peer, const void* data, size_t bytes) override;
  absl::Status Recv(int32_t peer, void* data, size_t bytes) override;
  bool stream_ordered() const override { return !wait_; }
  /// Waits for the member's stream (everything queued so far, NCCL or not), polling this
  /// communicator's asynchronous error, for at most `op_timeout`.
  absl::Status Drain() override;
  /// Aborts the communicator: a call polling for a peer returns Aborted at its next poll, and
  /// kernels of this communicator still queued on the stream end. The emulation's
  /// (tests/unit/kernels/cuda_emulation) collectives block inside the NCCL call instead of on
  /// the stream; such a call ends only when its peer leaves.
  void Abort() override;

 private:
  explicit NcclCommunicator(const Options& options);
  absl::Status CheckPeer(int32_t peer, const char* what) const;
  /// Completes a just-issued NCCL call: waits out ncclInProgress, then (with
  /// `wait_`) the operation itself, aborting the communicator on failure.
  absl::Status Finish(int result, const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Waits for the event `done_` just recorded on the stream (see Drain).
  absl::Status WaitForStream(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Sticky: aborts the communicator and remembers `status` for later calls.
  absl::Status Fail(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  int32_t rank_;
  int32_t size_;
  kernels::CudaBackend* backend_;
  std::chrono::milliseconds op_timeout_;
  bool wait_;
  // Held by every operation, and by Abort() from another thread; a poll loop gives it up as
  // soon as abort_requested_ is set.
  absl::Mutex mu_;
  std::atomic<bool> abort_requested_{false};
  ncclComm* comm_ ABSL_GUARDED_BY(mu_) = nullptr;
  CUevent_st* done_ = nullptr;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orca::engine
