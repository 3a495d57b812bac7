#pragma once
/// The data plane between shards (paper §4.1): all-reduces inside a
/// tensor-parallel group and activations between pipeline stages. Control
/// messages never travel here. The vocabulary-parallel LM head gathers its
/// logit slices onto the rank that samples. Implemented with Gloo on CPU (and NCCL in the
/// CUDA build) behind this one interface.

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
};

}  // namespace orca::engine
