#pragma once
/// A ring of page-locked host memory for small host→device copies that stay
/// asynchronous: the caller's bytes are copied into the ring and the DMA is
/// queued on the stream, so the caller may reuse its buffer at once and the
/// GPU keeps running. Each of the ring's segments is reused only after an
/// event shows the copies out of it have finished.
///
/// Not thread-safe: one instance per stream (per CudaBackend).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace orca::kernels {

class PinnedStaging {
 public:
  static absl::StatusOr<std::unique_ptr<PinnedStaging>> Create(cudaStream_t stream, size_t segment_bytes,
                                                               int num_segments);
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  /// The largest copy CopyToDevice accepts.
  size_t segment_bytes() const { return segment_bytes_; }

  /// Queues dst ← src (bytes <= segment_bytes()) on the stream. May block until
  /// an older segment's copies have completed.
  cudaError_t CopyToDevice(void* dst, const void* src, size_t bytes);

 private:
  PinnedStaging(cudaStream_t stream, size_t segment_bytes) : stream_(stream), segment_bytes_(segment_bytes) {}

  cudaStream_t stream_;
  size_t segment_bytes_;
  void* host_ = nullptr;
  std::vector<cudaEvent_t> events_;  ///< one per segment: its last queued copy
  int current_ = 0;                  ///< segment being filled
  size_t used_ = 0;                  ///< bytes handed out of the current segment
};

}  // namespace orca::kernels
