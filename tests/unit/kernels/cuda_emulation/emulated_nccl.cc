// A host emulation of the NCCL calls Orca's engine makes (include/nccl.h), for ranks that are
// threads of one process, next to the emulated CUDA runtime (emulated_runtime.cc).
//
// Ranks meet by unique id in process-global state. The emulated streams run every queued
// operation at once, so a collective runs when it is called: an all-reduce returns when every
// rank has contributed (the sum is taken in rank order), a receive when the matching send has
// arrived. Sends are buffered (they return at once), which is more lenient than real NCCL,
// where a send without a matching receive stalls the stream; the receive side and the sizes
// are checked. Calls between ncclGroupStart and ncclGroupEnd run at the end, sends first, so
// grouped exchanges cannot deadlock. Non-blocking initialisation reports ncclInProgress from
// ncclCommGetAsyncError until every rank has joined, as real NCCL does.
//
// Faults: a rank whose communicator is aborted or destroyed is gone; its peers' waiting and
// later operations end with ncclRemoteError as their asynchronous error, as when a peer process
// dies. Two ranks of one communicator on the same device are refused (ncclInvalidUsage), as
// real NCCL refuses them.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl.h"

namespace {

struct Group {
  explicit Group(int n) : nranks(n), joined(n, false), gone(n, false), devices(n, -1), mail(n * n), reduce(n) {}
  const int nranks;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<bool> joined;
  std::vector<bool> gone;
  std::vector<int> devices;
  std::vector<std::deque<std::vector<char>>> mail;  // [src * nranks + dst]: messages in send order
  // The all-reduce being assembled: each rank's buffers, then the sum written by the last to arrive.
  struct Slot {
    const float* send = nullptr;
    float* recv = nullptr;
  };
  std::vector<Slot> reduce;
  size_t reduce_count = 0;
  int reduce_arrived = 0;
  unsigned long reduce_generation = 0;

  bool AllJoined() const { return std::all_of(joined.begin(), joined.end(), [](bool j) { return j; }); }
  bool AnyGone() const { return std::any_of(gone.begin(), gone.end(), [](bool g) { return g; }); }
};

struct Registry {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<Group>> groups;
  unsigned long next_id = 0;
  std::atomic<long> all_reduces{0}, sends{0}, recvs{0};
  std::atomic<size_t> bytes_sent{0};
};

Registry& R() {
  static Registry* registry = new Registry();
  return *registry;
}

size_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclInt32:
    case ncclFloat32:
      return 4;
  }
  return 0;
}

// Calls between ncclGroupStart and ncclGroupEnd on this thread, run at the end.
thread_local int g_group_depth = 0;
thread_local std::vector<std::function<void()>> g_group_sends;
thread_local std::vector<std::function<void()>> g_group_others;

}  // namespace

struct ncclComm {
  std::shared_ptr<Group> group;
  int rank = 0;
  std::atomic<int> async_error{ncclSuccess};
  // Held by its creator until destroyed or aborted, and by every operation running on it: an
  // abort from another thread does not free it under a waiting receive.
  std::atomic<int> refs{1};
  std::mutex error_mu;
  std::string last_error;

  // A failed operation: reported by ncclCommGetAsyncError from now on (the first error sticks).
  void SetError(ncclResult_t r, const std::string& why) {
    int expected = ncclSuccess;
    if (async_error.compare_exchange_strong(expected, r)) {
      std::lock_guard<std::mutex> lock(error_mu);
      last_error = why;
    }
  }
};

namespace {

void Unref(ncclComm* comm) {
  if (--comm->refs == 0) delete comm;
}

class Hold {
 public:
  explicit Hold(ncclComm* comm) : comm_(comm) { ++comm_->refs; }
  ~Hold() { Unref(comm_); }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;

 private:
  ncclComm* comm_;
};

// Marks the rank gone (aborted, destroyed, or a dead peer as its peers see it) and wakes every waiter.
void Leave(ncclComm* comm) {
  Group& g = *comm->group;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.gone[comm->rank] = true;
  }
  g.cv.notify_all();
}

void RunSend(ncclComm* comm, const void* buf, size_t bytes, int peer) {
  Hold hold(comm);
  Group& g = *comm->group;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.gone[peer]) return comm->SetError(ncclRemoteError, "send: the peer is gone");
    const char* p = static_cast<const char*>(buf);
    g.mail[comm->rank * g.nranks + peer].emplace_back(p, p + bytes);
  }
  ++R().sends;
  R().bytes_sent += bytes;
  g.cv.notify_all();
}

void RunRecv(ncclComm* comm, void* buf, size_t bytes, int peer) {
  Hold hold(comm);
  Group& g = *comm->group;
  std::unique_lock<std::mutex> lock(g.mu);
  auto& box = g.mail[peer * g.nranks + comm->rank];
  g.cv.wait(lock, [&] { return !box.empty() || g.gone[peer] || g.gone[comm->rank]; });
  if (box.empty()) return comm->SetError(ncclRemoteError, "receive: the peer is gone");
  std::vector<char> msg = std::move(box.front());
  box.pop_front();
  lock.unlock();
  ++R().recvs;
  if (msg.size() != bytes)
    return comm->SetError(ncclInvalidUsage, "receive: the peer sent " + std::to_string(msg.size()) +
                                                " bytes, the receive expects " + std::to_string(bytes));
  std::memcpy(buf, msg.data(), bytes);
}

void RunAllReduce(ncclComm* comm, const float* send, float* recv, size_t count) {
  Hold hold(comm);
  Group& g = *comm->group;
  std::unique_lock<std::mutex> lock(g.mu);
  if (g.AnyGone()) return comm->SetError(ncclRemoteError, "all-reduce: a peer is gone");
  if (g.reduce_arrived == 0) g.reduce_count = count;
  if (g.reduce_count != count) return comm->SetError(ncclInvalidUsage, "all-reduce: ranks disagree on the count");
  g.reduce[comm->rank] = {send, recv};
  ++R().all_reduces;
  const unsigned long generation = g.reduce_generation;
  if (++g.reduce_arrived == g.nranks) {
    std::vector<float> sum(count, 0.0f);
    for (const Group::Slot& s : g.reduce)
      for (size_t i = 0; i < count; ++i) sum[i] += s.send[i];
    for (const Group::Slot& s : g.reduce) std::memcpy(s.recv, sum.data(), count * sizeof(float));
    g.reduce_arrived = 0;
    ++g.reduce_generation;
    lock.unlock();
    g.cv.notify_all();
    return;
  }
  g.cv.wait(lock, [&] { return g.reduce_generation != generation || g.AnyGone(); });
  if (g.reduce_generation == generation) comm->SetError(ncclRemoteError, "all-reduce: a peer is gone");
}

// Runs `op` now, or at ncclGroupEnd inside a group.
ncclResult_t Issue(bool is_send, std::function<void()> op) {
  if (g_group_depth > 0) {
    (is_send ? g_group_sends : g_group_others).push_back(std::move(op));
    return ncclSuccess;
  }
  op();
  return ncclSuccess;
}

ncclResult_t CheckComm(ncclComm* comm, int peer) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (peer >= comm->group->nranks || peer < 0 || peer == comm->rank) return ncclInvalidArgument;
  return ncclSuccess;
}

}  // namespace

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  std::memset(unique_id->internal, 0, sizeof(unique_id->internal));
  std::lock_guard<std::mutex> lock(R().mu);
  const std::string id = "emulated-nccl-" + std::to_string(++R().next_id);
  std::memcpy(unique_id->internal, id.data(), id.size());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId comm_id, int rank,
                                    ncclConfig_t* config) {
  *out = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  int device = 0;
  cudaGetDevice(&device);
  const std::string key(comm_id.internal, sizeof(comm_id.internal));
  std::shared_ptr<Group> group;
  {
    std::lock_guard<std::mutex> lock(R().mu);
    group = R().groups[key].lock();
    if (group == nullptr) {
      group = std::make_shared<Group>(nranks);
      R().groups[key] = group;
    }
  }
  if (group->nranks != nranks) return ncclInvalidArgument;
  {
    std::lock_guard<std::mutex> lock(group->mu);
    if (group->joined[rank]) return ncclInvalidUsage;
    for (int r = 0; r < nranks; ++r)
      if (group->joined[r] && group->devices[r] == device) return ncclInvalidUsage;  // one device, two ranks
    group->joined[rank] = true;
    group->devices[rank] = device;
  }
  group->cv.notify_all();
  auto* comm = new ncclComm();
  comm->group = group;
  comm->rank = rank;
  *out = comm;
  const bool blocking = config == nullptr || config->blocking != 0;
  if (!blocking) return ncclInProgress;
  std::unique_lock<std::mutex> lock(group->mu);
  group->cv.wait(lock, [&] { return group->AllJoined() || group->AnyGone(); });
  return group->AnyGone() ? ncclRemoteError : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr) return ncclInvalidArgument;
  *async_error = static_cast<ncclResult_t>(comm->async_error.load());
  if (*async_error != ncclSuccess) return ncclSuccess;
  std::lock_guard<std::mutex> lock(comm->group->mu);
  if (!comm->group->AllJoined()) *async_error = comm->group->AnyGone() ? ncclRemoteError : ncclInProgress;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm == nullptr ? ncclInvalidArgument : ncclSuccess; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  Leave(comm);
  Unref(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclNumResults:
      break;
  }
  return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t comm) {
  if (comm == nullptr) return "";
  std::lock_guard<std::mutex> lock(comm->error_mu);
  return comm->last_error.c_str();  // stable until the next error, which never comes (the first one sticks)
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t) {
  if (comm == nullptr || datatype != ncclFloat32 || op != ncclSum) return ncclInvalidArgument;
  if (count == 0) return ncclSuccess;
  return Issue(false, [=] {
    RunAllReduce(comm, static_cast<const float*>(sendbuff), static_cast<float*>(recvbuff), count);
  });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t) {
  if (ncclResult_t r = CheckComm(comm, peer); r != ncclSuccess) return r;
  const size_t bytes = count * TypeSize(datatype);
  if (bytes == 0) return ncclSuccess;
  return Issue(true, [=] { RunSend(comm, sendbuff, bytes, peer); });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t) {
  if (ncclResult_t r = CheckComm(comm, peer); r != ncclSuccess) return r;
  const size_t bytes = count * TypeSize(datatype);
  if (bytes == 0) return ncclSuccess;
  return Issue(false, [=] { RunRecv(comm, recvbuff, bytes, peer); });
}

ncclResult_t ncclGroupStart() {
  ++g_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (g_group_depth == 0) return ncclInvalidUsage;
  if (--g_group_depth > 0) return ncclSuccess;
  std::vector<std::function<void()>> sends, others;
  sends.swap(g_group_sends);
  others.swap(g_group_others);
  for (auto& op : sends) op();
  for (auto& op : others) op();
  return ncclSuccess;
}

EmulatedNcclCounts EmulatedNcclTotals() {
  EmulatedNcclCounts c;
  c.all_reduces = R().all_reduces.load();
  c.sends = R().sends.load();
  c.recvs = R().recvs.load();
  c.bytes_sent = R().bytes_sent.load();
  return c;
}
