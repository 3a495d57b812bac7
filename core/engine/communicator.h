#pragma once
/// The data plane between shards (paper §4.1): all-reduces inside a
/// tensor-parallel group and activations between pipeline stages. Control
/// messages never travel here. The vocabulary-parallel LM head gathers its
/// logit slices onto the rank that samples. Implemented with Gloo on CPU (and NCCL in the
/// CUDA build) behind this one interface.
///
/// Two kinds of members: host-ordered ones (Gloo) complete every operation before
/// returning, so their buffers must hold the data when called; stream-ordered ones
/// (NCCL without waiting) only queue the operation on the member's device stream, behind
/// the kernels that produce its input and ahead of the ones that read its output, and
/// never make the host wait for the device. A failure of a queued operation surfaces at a
/// later call or at Drain().

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace orca::engine {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int32_t rank() const = 0;
  virtual int32_t size() const = 0;
  /// In-place sum over all members. DeadlineExceeded / Unavailable when a peer
  /// is gone or hung past the timeout.
  virtual absl::Status AllReduceSum(float* data, size_t count) = 0;
  /// Gathers `count` floats from every member onto member `root`: member r's
  /// values land at out[r * count, (r + 1) * count) of the root's `out`
  /// (size() * count floats); other members pass nullptr. Every member calls
  /// it with the same `count` and `root`. Same failures as AllReduceSum.
  virtual absl::Status Gather(const float* data, size_t count, int32_t root, float* out) = 0;
  /// Point-to-point, matched in order between a pair of members.
  virtual absl::Status Send(int32_t peer, const void* data, size_t bytes) = 0;
  virtual absl::Status Recv(int32_t peer, void* data, size_t bytes) = 0;

  /// True when operations are queued on the member's device stream rather than completed
  /// on return (see above): the caller needs no host synchronisation before them.
  virtual bool stream_ordered() const { return false; }
  /// Waits until everything queued on the member's stream so far has completed, bounded by
  /// the operation timeout, and reports a failed or hung peer (DeadlineExceeded /
  /// Unavailable; the member is then aborted). Host-ordered members have nothing queued.
  virtual absl::Status Drain() { return absl::OkStatus(); }
  /// Abandons the group: an operation waiting for a peer returns as soon as it can and every
  /// later one fails. Any thread; the group is unusable after.
  virtual void Abort() = 0;
};

}  // namespace orca::engine
