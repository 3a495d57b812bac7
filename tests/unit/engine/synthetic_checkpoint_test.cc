// Synthetic checkpoints are reference data: the same options and seed must always give the
// same weights (the default model, bench results and the parity tests rest on it).

#include "core/engine/synthetic_checkpoint.h"

#include <gtest/gtest.h>

#include <vector>

namespace orca::engine {
namespace {

std::vector<float> FirstValues(const SyntheticModelOptions& options, const std::string& name, size_t count) {
  for (const SyntheticTensor& t : SyntheticTensors(options)) {
    if (t.name != name) continue;
    std::vector<float> values(static_cast<size_t>(t.NumElements()));
    SyntheticTensorValues(options, t, values.data());
    values.resize(count);
    return values;
  }
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

TEST(SyntheticCheckpointTest, WeightsArePinnedForAGivenSeed) {
  SyntheticModelOptions options;
  options.hidden_size = 64;
  options.num_layers = 1;
  options.vocab_size = 300;
  options.seed = 7;
  EXPECT_EQ(FirstValues(options, "model.embed_tokens.weight", 4),
            (std::vector<float>{-0x1.f4e116p-13f, -0x1.bc2c44p-2f, 0x1.f3541ep-3f, -0x1.6a1008p-3f}));
  EXPECT_EQ(FirstValues(options, "model.layers.0.mlp.down_proj.weight", 4),
            (std::vector<float>{-0x1.8fdd3ap-5f, 0x1.dadb38p-6f, -0x1.a67dcep-8f, -0x1.019514p-7f}));
}

}  // namespace
}  // namespace orca::engine
