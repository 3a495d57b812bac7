// NcclCommunicator: option validation everywhere; on machines with GPUs, a
// group over an in-process rendezvous store (one member per visible GPU, up
// to 4), all-reduce, gather and point-to-point on device memory, stream-ordered
// members that only queue their operations, a peer that leaves, and a rendezvous
// that times out instead of hanging. Compiled twice: against the real CUDA
// runtime and NCCL (label gpu) and against their host emulation
// (tests/unit/kernels/cuda_emulation, label unit: ranks are threads).

#include "core/engine/nccl_communicator.h"

#include <gloo/rendezvous/hash_store.h>

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend.h"

namespace orca {
namespace {

using kernels::CudaBackend;

TEST(NcclCommunicatorOptionsTest, RejectsMissingStoreBackendAndBadRanks) {
  gloo::rendezvous::HashStore store;
  engine::NcclCommunicator::Options o;
  o.prefix = "tp";
  auto no_store = engine::NcclCommunicator::Create(o);
  EXPECT_EQ(no_store.status().code(), absl::StatusCode::kInvalidArgument) << no_store.status();
  o.store = &store;
  auto no_backend = engine::NcclCommunicator::Create(o);
  EXPECT_EQ(no_backend.status().code(), absl::StatusCode::kInvalidArgument) << no_backend.status();
}

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int devices = CudaBackend::DeviceCount();
    if (devices == 0) GTEST_SKIP() << "no CUDA device visible";
    for (int d = 0; d < std::min(devices, 4); ++d) {
      auto b = CudaBackend::Create(d);
      ASSERT_TRUE(b.ok()) << b.status();
      backends_.push_back(std::move(*b));
    }
  }

  // Forms a group of `size` members (threads) over one store.
  std::vector<std::unique_ptr<engine::NcclCommunicator>> FormGroup(
      int size, const std::string& prefix, bool wait = true,
      std::chrono::milliseconds op_timeout = std::chrono::milliseconds(0)) {
    std::vector<std::unique_ptr<engine::NcclCommunicator>> comms(size);
    std::vector<absl::Status> status(size);
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r)
      threads.emplace_back([&, r] {
        engine::NcclCommunicator::Options o;
        o.store = &store_;
        o.prefix = prefix;
        o.rank = r;
        o.size = size;
        o.backend = backends_[r].get();
        o.timeout = std::chrono::milliseconds(30000);
        o.wait = wait;
        o.op_timeout = op_timeout;
        auto c = engine::NcclCommunicator::Create(o);
        status[r] = c.status();
        if (c.ok()) comms[r] = std::move(*c);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < size; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    return comms;
  }

  float* Upload(CudaBackend& be, const std::vector<float>& v) {
    auto p = be.Allocate(v.size() * sizeof(float));
    EXPECT_TRUE(p.ok()) << p.status();
    be.CopyToDevice(*p, v.data(), v.size() * sizeof(float));
    return static_cast<float*>(*p);
  }

  std::vector<float> Download(CudaBackend& be, const float* p, size_t n) {
    std::vector<float> v(n);
    be.CopyToHost(v.data(), p, n * sizeof(float));
    return v;
  }

  gloo::rendezvous::HashStore store_;
  std::vector<std::unique_ptr<CudaBackend>> backends_;
};

TEST_F(NcclCommunicatorTest, AllReduceSumsDeviceBuffersOfEveryMember) {
  const int size = static_cast<int>(backends_.size());
  auto comms = FormGroup(size, "allreduce");
  ASSERT_EQ(comms.size(), static_cast<size_t>(size));
  constexpr size_t kCount = 4099;
  std::vector<float*> data(size);
  for (int r = 0; r < size; ++r) data[r] = Upload(*backends_[r], std::vector<float>(kCount, static_cast<float>(r + 1)));
  std::vector<absl::Status> status(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { status[r] = comms[r]->AllReduceSum(data[r], kCount); });
  for (auto& t : threads) t.join();
  const float want = static_cast<float>(size * (size + 1) / 2);
  for (int r = 0; r < size; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    const std::vector<float> got = Download(*backends_[r], data[r], kCount);
    EXPECT_EQ(got.front(), want);
    EXPECT_EQ(got.back(), want);
    backends_[r]->Free(data[r]);
  }
}

TEST_F(NcclCommunicatorTest, SendToSelfOrOutsideTheGroupIsInvalid) {
  auto comms = FormGroup(1, "self");
  ASSERT_EQ(comms.size(), 1u);
  float* d = Upload(*backends_[0], {1.0f});
  EXPECT_EQ(comms[0]->Send(0, d, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comms[0]->Recv(3, d, 4).code(), absl::StatusCode::kInvalidArgument);
  backends_[0]->Free(d);
}

TEST_F(NcclCommunicatorTest, SendAndRecvMoveActivationsBetweenGpus) {
  // "needs N GPUs": scripts/gpu-check.sh accepts this skip on a machine with fewer.
  if (backends_.size() < 2) GTEST_SKIP() << "needs 2 GPUs";
  auto comms = FormGroup(2, "p2p");
  const std::vector<float> payload = {1.5f, -2.0f, 3.25f, 8.0f};
  float* src = Upload(*backends_[0], payload);
  float* dst = Upload(*backends_[1], std::vector<float>(payload.size(), 0.0f));
  absl::Status sent, received;
  std::thread sender([&] { sent = comms[0]->Send(1, src, payload.size() * sizeof(float)); });
  std::thread receiver([&] { received = comms[1]->Recv(0, dst, payload.size() * sizeof(float)); });
  sender.join();
  receiver.join();
  ASSERT_TRUE(sent.ok()) << sent;
  ASSERT_TRUE(received.ok()) << received;
  EXPECT_EQ(Download(*backends_[1], dst, payload.size()), payload);
  backends_[0]->Free(src);
  backends_[1]->Free(dst);
}

// Without waiting (the engine's forward path) a member only queues its operations on the
// stream; Drain waits for them and the data is there after it.
TEST_F(NcclCommunicatorTest, StreamOrderedMembersQueueAndDrainWaitsForTheStream) {
  if (backends_.size() < 2) GTEST_SKIP() << "needs 2 GPUs";
  auto comms = FormGroup(2, "p2p-queued", /*wait=*/false);
  ASSERT_EQ(comms.size(), 2u);
  EXPECT_TRUE(comms[0]->stream_ordered());
  const std::vector<float> payload = {4.0f, -1.0f, 0.5f};
  float* src = Upload(*backends_[0], payload);
  float* dst = Upload(*backends_[1], std::vector<float>(payload.size(), 0.0f));
  absl::Status sent, received;
  std::thread sender([&] {
    sent = comms[0]->Send(1, src, payload.size() * sizeof(float));
    if (sent.ok()) sent = comms[0]->Drain();
  });
  std::thread receiver([&] {
    received = comms[1]->Recv(0, dst, payload.size() * sizeof(float));
    if (received.ok()) received = comms[1]->Drain();
  });
  sender.join();
  receiver.join();
  ASSERT_TRUE(sent.ok()) << sent;
  ASSERT_TRUE(received.ok()) << received;
  EXPECT_EQ(Download(*backends_[1], dst, payload.size()), payload);
  backends_[0]->Free(src);
  backends_[1]->Free(dst);
}

// A peer that leaves (its communicator aborted, as when its process dies) while a member waits
// for its data: the member's wait ends with an error — the peer's failure, or the operation
// timeout — not a hang, and the member stays failed.
TEST_F(NcclCommunicatorTest, APeerThatLeavesFailsTheWaitForItsData) {
  if (backends_.size() < 2) GTEST_SKIP() << "needs 2 GPUs";
  auto comms = FormGroup(2, "p2p-peer-leaves", /*wait=*/false, std::chrono::milliseconds(5000));
  ASSERT_EQ(comms.size(), 2u);
  float* dst = Upload(*backends_[1], std::vector<float>(16, 0.0f));
  absl::Status received;
  std::thread receiver([&] {
    received = comms[1]->Recv(0, dst, 16 * sizeof(float));
    if (received.ok()) received = comms[1]->Drain();
  });
  comms[0]->Abort();
  receiver.join();
  ASSERT_FALSE(received.ok());
  EXPECT_TRUE(absl::IsUnavailable(received) || absl::IsDeadlineExceeded(received)) << received;
  EXPECT_EQ(comms[1]->Drain().code(), received.code()) << "the failure sticks";
  backends_[1]->Free(dst);
}

// The vocabulary-parallel LM head's gather: every member's device share lands
// at its rank's offset in the root's device buffer (the root's own by a copy).
TEST_F(NcclCommunicatorTest, GatherCollectsEveryMembersShareOnTheRoot) {
  const int size = static_cast<int>(backends_.size());
  auto comms = FormGroup(size, "gather");
  ASSERT_EQ(comms.size(), static_cast<size_t>(size));
  const int root = size - 1;
  constexpr size_t kCount = 1031;
  std::vector<float*> share(size);
  for (int r = 0; r < size; ++r) {
    std::vector<float> v(kCount);
    for (size_t i = 0; i < kCount; ++i) v[i] = static_cast<float>(r * 10000 + i);
    share[r] = Upload(*backends_[r], v);
  }
  float* out = Upload(*backends_[root], std::vector<float>(kCount * size, -1.0f));
  std::vector<absl::Status> status(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] { status[r] = comms[r]->Gather(share[r], kCount, root, r == root ? out : nullptr); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  const std::vector<float> got = Download(*backends_[root], out, kCount * size);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(got[r * kCount], static_cast<float>(r * 10000)) << "rank " << r;
    EXPECT_EQ(got[r * kCount + kCount - 1], static_cast<float>(r * 10000 + kCount - 1)) << "rank " << r;
  }
  EXPECT_EQ(comms[0]->Gather(share[0], kCount, size, nullptr).code(), absl::StatusCode::kInvalidArgument);
  for (int r = 0; r < size; ++r) backends_[r]->Free(share[r]);
  backends_[root]->Free(out);
}

TEST_F(NcclCommunicatorTest, MissingRankZeroIsADeadlineNotAHang) {
  engine::NcclCommunicator::Options o;
  o.store = &store_;
  o.prefix = "nobody-publishes";
  o.rank = 1;
  o.size = 2;
  o.backend = backends_[0].get();
  o.timeout = std::chrono::milliseconds(300);
  auto c = engine::NcclCommunicator::Create(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
}

}  // namespace
}  // namespace orca
