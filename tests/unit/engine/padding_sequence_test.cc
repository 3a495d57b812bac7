// The FasterTransformer baseline's prompt padding on the engine (engine::PaddingSequenceId):
// the padding is computed as a throwaway sequence next to its request, changes nothing the
// request computes, samples nothing, holds KV until the request is released, and is freed
// with it.

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/engine/engine.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

std::unique_ptr<Engine> MakeEngine(const std::string& path) {
  Engine::Options o;
  o.model_path = path;
  o.n_slots = 1024;
  o.kv_block_size = 16;
  o.keep_logits = true;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.ok()) << e.status();
  return std::move(*e);
}

StepSequence Prompt(uint64_t id, std::vector<int32_t> tokens, int32_t kv_reservation_slots) {
  StepSequence s;
  s.request_id = id;
  s.new_request = SequenceSetup{kv_reservation_slots, {}, tokens};
  s.token_ids = std::move(tokens);
  return s;
}

TEST(PaddingSequenceTest, PaddingIsComputedBesideItsRequestAndFreedWithIt) {
  const std::string path = testing::SyntheticModel(testing::SmallLlama());
  auto padded = MakeEngine(path);
  auto plain = MakeEngine(path);
  const std::vector<int32_t> prompt = {5, 17, 42, 9};

  StepInput with_padding;
  with_padding.seqs.push_back(Prompt(7, prompt, 8));
  StepSequence pad = Prompt(PaddingSequenceId(7), std::vector<int32_t>(20, 0), 20);
  pad.sample = false;
  with_padding.seqs.push_back(pad);
  StepInput without;
  without.seqs.push_back(Prompt(7, prompt, 8));

  StepOutput a, b;
  ASSERT_TRUE(padded->Step(with_padding, nullptr, &a).ok());
  ASSERT_TRUE(plain->Step(without, nullptr, &b).ok());
  // One sample (the request's), the same logits as without padding.
  ASSERT_EQ(a.samples.size(), 1u);
  EXPECT_EQ(a.samples[0].request_id, 7u);
  ASSERT_EQ(a.logits.size(), b.logits.size());
  for (size_t i = 0; i < a.logits.size(); ++i) ASSERT_NEAR(a.logits[i], b.logits[i], 1e-4) << "logit " << i;
  EXPECT_EQ(a.samples[0].sample.token_id, b.samples[0].sample.token_id);
  // The padding holds its KV (two 16-token blocks) on top of the request's (one block).
  EXPECT_EQ(padded->kv_slots_used(), plain->kv_slots_used() + 32);

  // The request decodes on; releasing it frees its padding too.
  StepInput next;
  StepSequence decode;
  decode.request_id = 7;
  decode.token_ids = {a.samples[0].sample.token_id};
  decode.start_position = static_cast<int32_t>(prompt.size());
  next.seqs.push_back(decode);
  ASSERT_TRUE(padded->Step(next, nullptr, &a).ok());
  padded->Release(7);
  EXPECT_EQ(padded->kv_slots_used(), 0);
  // Releasing a request that had no padding is unchanged.
  plain->Release(7);
  EXPECT_EQ(plain->kv_slots_used(), 0);
}

}  // namespace
}  // namespace orca::engine
