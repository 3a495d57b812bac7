#pragma once
/// The data plane between shards (paper §4.1): all-reduces inside a
/// tensor-parallel group and activations between pipeline stages. Control
/// messages never travel here. Implemented with Gloo on CPU (and NCCL in the
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
  /// Point-to-point, matched in order between a pair of members.
  virtual absl::Status Send(int32_t peer, const void* data, size_t bytes) = 0;
  virtual absl::Status Recv(int32_t peer, void* data, size_t bytes) = 0;
};

}  // namespace orca::engine
