#include "core/engine/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <gloo/rendezvous/prefix_store.h>
#include <nccl.h>

#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "kernels/cuda/cuda_backend.h"

namespace orca::engine {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kUniqueIdKey[] = "nccl_unique_id";
// Polling: yield this many times (sub-millisecond operations), then sleep.
constexpr int kSpinPolls = 2000;
constexpr auto kPollSleep = std::chrono::microseconds(50);

absl::Status FromNccl(ncclResult_t r, const std::string& what, ncclComm_t comm) {
  std::string detail = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') absl::StrAppend(&detail, ": ", last);
  switch (r) {
    case ncclSystemError:
    case ncclRemoteError:
      return absl::UnavailableError(absl::StrCat(what, ": a peer or the network failed: ", detail));
    case ncclInvalidArgument:
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", detail));
    case ncclInvalidUsage:
      return absl::FailedPreconditionError(absl::StrCat(what, ": ", detail));
    default:
      return absl::InternalError(absl::StrCat(what, ": ", detail));
  }
}

// Store failures arrive as exceptions (gloo::IoException on timeouts); they stop here.
absl::Status FromStoreException(const std::exception& e, const std::string& what) {
  const std::string msg = e.what();
  if (msg.find("imeout") != std::string::npos || msg.find("imed out") != std::string::npos)
    return absl::DeadlineExceededError(absl::StrCat(what, ": the group did not form in time: ", msg));
  return absl::UnavailableError(absl::StrCat(what, ": rendezvous store failed: ", msg));
}

// Polls `comm` until `done()` holds, the communicator reports an error, the
// deadline passes or `abort` is set. `done` returns StatusOr<bool>.
template <typename Done>
absl::Status PollUntil(ncclComm_t comm, Clock::time_point deadline, std::chrono::milliseconds budget,
                       const std::string& what, const std::atomic<bool>* abort, Done done) {
  for (int polls = 0;; ++polls) {
    if (abort != nullptr && abort->load(std::memory_order_relaxed))
      return absl::AbortedError(absl::StrCat(what, ": the group was abandoned"));
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t r = ncclCommGetAsyncError(comm, &state); r != ncclSuccess) return FromNccl(r, what, comm);
    if (state != ncclSuccess && state != ncclInProgress) return FromNccl(state, what, comm);
    absl::StatusOr<bool> finished = done(state);
    if (!finished.ok()) return finished.status();
    if (*finished) return absl::OkStatus();
    if (Clock::now() >= deadline)
      return absl::DeadlineExceededError(absl::StrCat(what, ": peers did not respond within ", budget.count(), " ms"));
    if (polls < kSpinPolls)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(kPollSleep);
  }
}

absl::StatusOr<ncclUniqueId> ExchangeUniqueId(const NcclCommunicator::Options& o, const std::string& what) {
  ncclUniqueId id;
  if (o.rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) return FromNccl(r, what, nullptr);
  }
  try {
    gloo::rendezvous::PrefixStore store(o.prefix, *o.store);
    if (o.rank == 0) {
      store.set(kUniqueIdKey, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
    } else {
      store.wait({kUniqueIdKey}, o.timeout);
      const std::vector<char> bytes = store.get(kUniqueIdKey);
      if (bytes.size() != sizeof(id.internal))
        return absl::InternalError(
            absl::StrCat(what, ": the published NCCL id has ", bytes.size(), " bytes, expected ", sizeof(id.internal)));
      std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
    }
  } catch (const std::exception& e) {
    return FromStoreException(e, what);
  }
  return id;
}

}  // namespace

NcclCommunicator::NcclCommunicator(const Options& o)
    : rank_(o.rank),
      size_(o.size),
      backend_(o.backend),
      op_timeout_(o.op_timeout.count() > 0 ? o.op_timeout : o.timeout),
      wait_(o.wait) {}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(const Options& o) {
  if (o.store == nullptr) return absl::InvalidArgumentError("NcclCommunicator needs a rendezvous store");
  if (o.backend == nullptr) return absl::InvalidArgumentError("NcclCommunicator needs the member's CUDA backend");
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    return absl::InvalidArgumentError(absl::StrCat("invalid rank ", o.rank, " for group size ", o.size));
  if (o.timeout.count() <= 0)
    return absl::InvalidArgumentError(absl::StrCat("timeout must be positive, got ", o.timeout.count(), " ms"));
  const std::string what = absl::StrCat("forming NCCL group '", o.prefix, "' as rank ", o.rank, " of ", o.size,
                                        " on GPU ", o.backend->device_index());
  const Clock::time_point deadline = Clock::now() + o.timeout;
  o.backend->MakeCurrent();
  ORCA_ASSIGN_OR_RETURN(ncclUniqueId id, ExchangeUniqueId(o, what));

  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(o));
  absl::MutexLock lock(&c->mu_);
  if (cudaError_t e = cudaEventCreateWithFlags(&c->done_, cudaEventDisableTiming); e != cudaSuccess) {
    c->done_ = nullptr;
    return absl::InternalError(absl::StrCat(what, ": cudaEventCreate: ", cudaGetErrorString(e)));
  }
  // Non-blocking initialisation so that a member that never shows up is a
  // timeout, not a hang.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, o.size, id, o.rank, &config);
  c->comm_ = comm;
  if (r != ncclSuccess && r != ncclInProgress) return c->Fail(FromNccl(r, what, comm));
  absl::Status s = PollUntil(comm, deadline, o.timeout, what, nullptr,
                             [](ncclResult_t state) -> absl::StatusOr<bool> { return state == ncclSuccess; });
  if (!s.ok()) return c->Fail(s);
  return c;
}

NcclCommunicator::~NcclCommunicator() {
  absl::MutexLock lock(&mu_);
  if (comm_ != nullptr) {
    backend_->MakeCurrent();
    // Flush and tear down; a vanished peer can stall the flush, so bound it.
    const ncclResult_t r = ncclCommFinalize(comm_);
    absl::Status s = r == ncclSuccess || r == ncclInProgress ? absl::OkStatus() : FromNccl(r, "finalize", comm_);
    if (s.ok())
      s = PollUntil(comm_, Clock::now() + op_timeout_, op_timeout_, "finalize", &abort_requested_,
                    [](ncclResult_t state) -> absl::StatusOr<bool> { return state == ncclSuccess; });
    if (s.ok())
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);
  }
  if (done_ != nullptr) cudaEventDestroy(done_);
}

void NcclCommunicator::Abort() {
  abort_requested_ = true;  // a poll loop holding mu_ gives it up at its next poll
  absl::MutexLock lock(&mu_);
  if (comm_ != nullptr) (void)Fail(absl::AbortedError("the NCCL group was abandoned"));
}

absl::Status NcclCommunicator::Fail(absl::Status status) {
  if (comm_ != nullptr) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  failed_ = status;
  return status;
}

absl::Status NcclCommunicator::CheckPeer(int32_t peer, const char* what) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    return absl::InvalidArgumentError(absl::StrCat(what, ": peer ", peer, " is not another member of a group of ",
                                                   size_, " (this is rank ", rank_, ")"));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Finish(int result, const std::string& what) {
  const auto r = static_cast<ncclResult_t>(result);
  if (r != ncclSuccess && r != ncclInProgress) return Fail(FromNccl(r, what, comm_));
  const Clock::time_point deadline = Clock::now() + op_timeout_;
  // A non-blocking communicator may still be enqueueing the operation.
  absl::Status s = PollUntil(comm_, deadline, op_timeout_, what, &abort_requested_,
                             [](ncclResult_t state) -> absl::StatusOr<bool> { return state == ncclSuccess; });
  if (!s.ok()) return Fail(s);
  if (!wait_) return absl::OkStatus();
  return WaitForStream(what);
}

absl::Status NcclCommunicator::Drain() {
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  backend_->MakeCurrent();
  return WaitForStream(absl::StrCat("waiting for the queued work of NCCL rank ", rank_, " of ", size_));
}

absl::Status NcclCommunicator::WaitForStream(const std::string& what) {
  const Clock::time_point deadline = Clock::now() + op_timeout_;
  if (cudaError_t e = cudaEventRecord(done_, backend_->stream()); e != cudaSuccess)
    return Fail(absl::InternalError(absl::StrCat(what, ": cudaEventRecord: ", cudaGetErrorString(e))));
  absl::Status s = PollUntil(comm_, deadline, op_timeout_, what, &abort_requested_, [&](ncclResult_t) -> absl::StatusOr<bool> {
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) return false;
    return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")"));
  });
  if (!s.ok()) return Fail(s);
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllReduceSum(float* data, size_t count) {
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  if (count == 0) return absl::OkStatus();
  backend_->MakeCurrent();
  const ncclResult_t r = ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, backend_->stream());
  return Finish(r, absl::StrCat("all-reduce of ", count, " floats"));
}

absl::Status NcclCommunicator::Gather(const float* data, size_t count, int32_t root, float* out) {
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  if (root < 0 || root >= size_)
    return absl::InvalidArgumentError(absl::StrCat("gather: root ", root, " is not a member of a group of ", size_));
  if (rank_ == root && out == nullptr) return absl::InvalidArgumentError("gather: the root needs an output buffer");
  if (count == 0) return absl::OkStatus();
  backend_->MakeCurrent();
  const std::string what = absl::StrCat("gather of ", count, " floats onto rank ", root);
  if (rank_ == root) {
    if (cudaError_t e = cudaMemcpyAsync(out + static_cast<size_t>(rank_) * count, data, count * sizeof(float),
                                        cudaMemcpyDeviceToDevice, backend_->stream());
        e != cudaSuccess)
      return Fail(absl::InternalError(absl::StrCat(what, ": cudaMemcpyAsync: ", cudaGetErrorString(e))));
  }
  if (size_ == 1) return absl::OkStatus();
  // One group: the root's receives from every peer proceed together.
  ncclResult_t first_error = ncclSuccess;
  auto note = [&](ncclResult_t r) {
    if (r != ncclSuccess && r != ncclInProgress && first_error == ncclSuccess) first_error = r;
  };
  note(ncclGroupStart());
  if (rank_ == root) {
    for (int32_t peer = 0; peer < size_; ++peer)
      if (peer != root)
        note(ncclRecv(out + static_cast<size_t>(peer) * count, count, ncclFloat, peer, comm_, backend_->stream()));
  } else {
    note(ncclSend(data, count, ncclFloat, root, comm_, backend_->stream()));
  }
  const ncclResult_t end = ncclGroupEnd();
  return Finish(first_error != ncclSuccess ? first_error : end, what);
}

absl::Status NcclCommunicator::Send(int32_t peer, const void* data, size_t bytes) {
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  ORCA_RETURN_IF_ERROR(CheckPeer(peer, "send"));
  if (bytes == 0) return absl::OkStatus();
  backend_->MakeCurrent();
  const ncclResult_t r = ncclSend(data, bytes, ncclUint8, peer, comm_, backend_->stream());
  return Finish(r, absl::StrCat("send of ", bytes, " bytes to rank ", peer));
}

absl::Status NcclCommunicator::Recv(int32_t peer, void* data, size_t bytes) {
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  ORCA_RETURN_IF_ERROR(CheckPeer(peer, "receive"));
  if (bytes == 0) return absl::OkStatus();
  backend_->MakeCurrent();
  const ncclResult_t r = ncclRecv(data, bytes, ncclUint8, peer, comm_, backend_->stream());
  return Finish(r, absl::StrCat("receive of ", bytes, " bytes from rank ", peer));
}

}  // namespace orca::engine
