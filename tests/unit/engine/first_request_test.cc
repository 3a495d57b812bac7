// The first request after load runs like a later one (Engine::Options::reserve_tokens): the
// activation buffers and the KV pool are allocated and made resident at load, so the first
// prefill takes no more page faults than the same prefill later. Page faults are what a
// first request used to pay (TinyLlama BF16, 512 tokens: 1.03–1.10× a later one's time).

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/engine/engine.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

int64_t MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Minor page faults of one prefill of `tokens` tokens as request `id` (released after).
int64_t PrefillFaults(Engine& e, uint64_t id, int32_t tokens) {
  std::vector<int32_t> prompt(tokens);
  for (int32_t i = 0; i < tokens; ++i) prompt[i] = (i * 37 + static_cast<int32_t>(id)) % e.config().vocab_size;
  StepInput in;
  in.seqs.push_back(testing::NewSeq(id, prompt, tokens + 1));
  StepOutput out;
  const int64_t before = MinorFaults();
  const absl::Status s = e.Step(in, nullptr, &out);
  const int64_t faults = MinorFaults() - before;
  EXPECT_TRUE(s.ok()) << s;
  e.Release(id);
  return faults;
}

// In a fresh process (a death-test child, re-executed): in a process that has run other
// tests, the allocator hands out heap pages those tests already faulted in, which would hide
// the faults this test looks for. Prints the counts and exits 0 when `expect` holds for them.
[[noreturn]] void MeasureAndExit(int64_t reserve_tokens, int32_t tokens, bool (*expect)(int64_t, int64_t)) {
  SyntheticModelOptions m = testing::SmallLlama();
  m.hidden_size = 512;
  m.intermediate_size = 1408;
  m.max_position = 1024;
  Engine::Options o;
  o.model_path = testing::SyntheticModel(m);
  o.n_slots = 4096;
  o.num_threads = 2;
  o.reserve_tokens = reserve_tokens;
  auto e = Engine::Create(o);
  if (!e.ok()) {
    std::fprintf(stderr, "%s\n", e.status().ToString().c_str());
    std::_Exit(2);
  }
  const int64_t first = PrefillFaults(**e, 1, tokens);
  // The later prefill compared is the third: the second may still meet lazily sized host vectors.
  int64_t later = PrefillFaults(**e, 2, tokens);
  later = std::max(later, PrefillFaults(**e, 3, tokens));
  std::fprintf(stderr, "reserve_tokens %ld: page faults of a %d-token prefill: first %ld, later %ld\n",
               static_cast<long>(reserve_tokens), tokens, static_cast<long>(first), static_cast<long>(later));
  std::_Exit(expect(first, later) ? 0 : 1);
}

constexpr int32_t kTokens = 384;

TEST(FirstRequestTest, WithoutTheReservationTheFirstPrefillFaultsItsBuffersIn) {
  // What the next test must be able to see: about 8 MiB of activations at 384 tokens, ~1000
  // faults with the two largest buffers on huge pages, ~2000 without.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(MeasureAndExit(0, kTokens, [](int64_t first, int64_t later) { return first > later + 500; }),
              ::testing::ExitedWithCode(0), "page faults");
}

TEST(FirstRequestTest, ReservedBuffersLeaveTheFirstPrefillNoPageFaultsToTake) {
  // The same faults as a later prefill, up to 1 MiB (256 pages) of per-thread scratch the
  // kernels size on first use (24–71 pages seen).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(MeasureAndExit(512, kTokens, [](int64_t first, int64_t later) { return first <= later + 256; }),
              ::testing::ExitedWithCode(0), "page faults");
}

TEST(FirstRequestTest, NegativeReservationIsRefused) {
  Engine::Options o;
  o.model_path = testing::SyntheticModel(testing::SmallLlama());
  o.reserve_tokens = -1;
  auto e = Engine::Create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("reserve_tokens must be >= 0"), std::string::npos) << e.status();
}

}  // namespace
}  // namespace orca::engine
