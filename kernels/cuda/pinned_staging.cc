#include "kernels/cuda/pinned_staging.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace orca::kernels {
namespace {

constexpr size_t kCopyAlignment = 256;

}  // namespace

absl::StatusOr<std::unique_ptr<PinnedStaging>> PinnedStaging::Create(cudaStream_t stream, size_t segment_bytes,
                                                                     int num_segments) {
  if (segment_bytes == 0 || segment_bytes % kCopyAlignment != 0 || num_segments < 2)
    return absl::InvalidArgumentError(
        absl::StrCat("pinned staging needs >= 2 segments of a multiple of ", kCopyAlignment, " bytes"));
  std::unique_ptr<PinnedStaging> s(new PinnedStaging(stream, segment_bytes));
  const size_t total = segment_bytes * static_cast<size_t>(num_segments);
  if (cudaError_t e = cudaMallocHost(&s->host_, total); e != cudaSuccess) {
    s->host_ = nullptr;
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", total, " bytes of pinned host memory: ", cudaGetErrorString(e)));
  }
  s->events_.resize(static_cast<size_t>(num_segments), nullptr);
  for (cudaEvent_t& ev : s->events_) {
    if (cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess) {
      ev = nullptr;
      return absl::InternalError(absl::StrCat("cudaEventCreate: ", cudaGetErrorString(e)));
    }
  }
  return s;
}

PinnedStaging::~PinnedStaging() {
  // Copies still queued read from the ring: let them finish before it goes away.
  for (cudaEvent_t ev : events_)
    if (ev != nullptr) cudaEventSynchronize(ev);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (cudaEvent_t ev : events_)
    if (ev != nullptr) cudaEventDestroy(ev);
  if (host_ != nullptr) cudaFreeHost(host_);
}

cudaError_t PinnedStaging::CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (bytes > segment_bytes_) return cudaErrorInvalidValue;
  const size_t rounded = (bytes + kCopyAlignment - 1) / kCopyAlignment * kCopyAlignment;
  if (used_ + rounded > segment_bytes_) {
    // Seal the current segment behind an event and move to the next one, once
    // the copies queued from it last time round have completed.
    if (cudaError_t e = cudaEventRecord(events_[current_], stream_); e != cudaSuccess) return e;
    current_ = (current_ + 1) % static_cast<int>(events_.size());
    used_ = 0;
    // An event never recorded counts as complete.
    if (cudaError_t e = cudaEventSynchronize(events_[current_]); e != cudaSuccess) return e;
  }
  uint8_t* slot = static_cast<uint8_t*>(host_) + static_cast<size_t>(current_) * segment_bytes_ + used_;
  std::memcpy(slot, src, bytes);
  used_ += rounded;
  return cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, stream_);
}

}  // namespace orca::kernels
