// The mistral3 family's Hugging Face side: the config layouts its checkpoints come in (Ministral 3's text model
// with transformers 5's rope_parameters, the multimodal wrapper's text_config, Mistral Small 3.1's Mistral text
// model), YaRN's magnitude from mscale / mscale_all_dim as transformers computes it, and the multimodal tensor
// layouts of transformers before and after 4.52, which must give the text-only checkpoint's logits.
// (model_family_reference_test checks the family against llama.cpp and HF == GGUF on the same weights.)
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/model_config.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/multimodal_layout.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

using json = nlohmann::json;

// The text model of a Ministral 3 3B checkpoint, its keys as transformers 5's Ministral3Config names them (the
// rope parameters are Ministral3Config's defaults, which the released files carry).
json Ministral3Text() {
  return {{"model_type", "ministral3"},
          {"hidden_size", 3072},
          {"num_hidden_layers", 26},
          {"num_attention_heads", 32},
          {"num_key_value_heads", 8},
          {"head_dim", 128},
          {"intermediate_size", 9216},
          {"vocab_size", 131072},
          {"max_position_embeddings", 262144},
          {"rms_norm_eps", 1e-5},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", true},
          {"sliding_window", nullptr},
          {"rope_parameters",
           {{"type", "yarn"},
            {"rope_type", "yarn"},
            {"rope_theta", 1000000.0},
            {"factor", 16.0},
            {"original_max_position_embeddings", 16384},
            {"max_position_embeddings", 262144},
            {"beta_fast", 32.0},
            {"beta_slow", 1.0},
            {"mscale", 1.0},
            {"mscale_all_dim", 1.0},
            {"llama_4_scaling_beta", 0.1}}}};
}

TEST(Mistral3ConfigTest, MinistralThreeTextAndMultimodalConfigsGiveYarnWithoutMagnitudeAndTheTemperature) {
  const json multimodal = {{"model_type", "mistral3"},
                           {"architectures", {"Mistral3ForConditionalGeneration"}},
                           {"text_config", Ministral3Text()},
                           {"vision_config", {{"model_type", "pixtral"}}}};
  json text_only = Ministral3Text();
  text_only["architectures"] = {"Ministral3ForCausalLM"};
  for (const json& j : {multimodal, text_only}) {
    absl::StatusOr<ModelConfig> c = ParseHfConfig(j.dump(), "config.json");
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->arch, ModelArch::kMistral3);
    EXPECT_EQ(c->head_dim, 128);
    EXPECT_EQ(c->num_heads * c->head_dim, 4096);  // wider than the hidden size
    EXPECT_EQ(c->rope_theta, 1e6);
    EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kYarn);
    EXPECT_EQ(c->rope_scaling.factor, 16);
    EXPECT_EQ(c->rope_scaling.original_max_position, 16384);
    // mscale / mscale_all_dim = 1 / 1: no magnitude change (not YaRN's default 1 + 0.1 ln 16).
    EXPECT_DOUBLE_EQ(c->RopeAttentionFactor(), 1.0);
    EXPECT_FLOAT_EQ(c->attn_temperature_scale, 0.1f);
    EXPECT_EQ(c->attn_temperature_floor, 16384);
    EXPECT_EQ(c->sliding_window, 0);
    EXPECT_TRUE(c->tie_word_embeddings);
  }
  // Ministral3Attention always scales its queries: a file without the beta is refused by name.
  text_only["rope_parameters"].erase("llama_4_scaling_beta");
  absl::StatusOr<ModelConfig> c = ParseHfConfig(text_only.dump(), "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("llama_4_scaling_beta"), std::string::npos) << c.status();
}

// Mistral Small 3.1 / 3.2: the multimodal wrapper around a Mistral text model (transformers 4 keys), no YaRN and no
// temperature; its untied head and window-less attention as the text config says.
TEST(Mistral3ConfigTest, MistralSmallThreeOneIsItsMistralTextModel) {
  const json j = {{"model_type", "mistral3"},
                  {"architectures", {"Mistral3ForConditionalGeneration"}},
                  {"text_config",
                   {{"model_type", "mistral"},
                    {"hidden_size", 5120},
                    {"num_hidden_layers", 40},
                    {"num_attention_heads", 32},
                    {"num_key_value_heads", 8},
                    {"head_dim", 128},
                    {"intermediate_size", 32768},
                    {"vocab_size", 131072},
                    {"max_position_embeddings", 131072},
                    {"rms_norm_eps", 1e-5},
                    {"rope_theta", 1000000000.0},
                    {"sliding_window", nullptr}}}};
  absl::StatusOr<ModelConfig> c = ParseHfConfig(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->arch, ModelArch::kMistral3);
  EXPECT_EQ(c->rope_theta, 1e9);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_EQ(c->attn_temperature_scale, 0);
  EXPECT_FALSE(c->tie_word_embeddings);
  json other = j;
  other["text_config"]["model_type"] = "llama";
  EXPECT_EQ(ParseHfConfig(other.dump(), "config.json").status().code(), absl::StatusCode::kUnimplemented);
}

// transformers' _compute_yarn_parameters for every family: an explicit attention_factor wins; otherwise mscale and
// mscale_all_dim (both non-zero) give get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim); otherwise
// get_mscale(factor) = 1 + 0.1 ln(factor).
TEST(Mistral3ConfigTest, YarnMagnitudeFollowsTransformers) {
  auto factor_of = [](json scaling) {
    const json j = {{"model_type", "qwen2"},           {"hidden_size", 64},       {"num_hidden_layers", 1},
                    {"num_attention_heads", 4},        {"intermediate_size", 96}, {"vocab_size", 300},
                    {"max_position_embeddings", 1024}, {"rope_scaling", scaling}};
    absl::StatusOr<ModelConfig> c = ParseHfConfig(j.dump(), "config.json");
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->RopeAttentionFactor() : -1.0;
  };
  const json yarn = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 256}};
  const double default_mscale = 1 + 0.1 * std::log(4.0);
  EXPECT_DOUBLE_EQ(factor_of(yarn), default_mscale);
  json both = yarn;
  both["mscale"] = 0.707, both["mscale_all_dim"] = 0.707;
  EXPECT_DOUBLE_EQ(factor_of(both), 1.0);
  both["mscale"] = 1.0, both["mscale_all_dim"] = 0.5;
  EXPECT_DOUBLE_EQ(factor_of(both), default_mscale / (1 + 0.05 * std::log(4.0)));
  json one = yarn;
  one["mscale_all_dim"] = 1.0;  // alone: the default
  EXPECT_DOUBLE_EQ(factor_of(one), default_mscale);
  both["attention_factor"] = 1.25;
  EXPECT_DOUBLE_EQ(factor_of(both), 1.25);
}

// Mistral3ForConditionalGeneration checkpoints hold the language model under language_model.model. with its head
// as language_model.lm_head.weight (transformers before 4.52) or under model.language_model. with lm_head.weight
// (later): the same weights laid out either way give the text-only checkpoint's logits.
TEST(Mistral3MultimodalLayoutTest, TheLanguageModelOfAMultimodalCheckpointGivesTheTextCheckpointsLogits) {
  SyntheticModelOptions o = testing::SmallMistral3();
  o.tie_word_embeddings = false;  // the head's name differs between the layouts
  const std::string text_dir = testing::SyntheticModel(o);
  // Past two temperature steps.
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 40; ++i) prompt.push_back((i * 37 + 5) % 300);
  const std::vector<float> want = testing::FirstStepLogits(text_dir, prompt);
  ASSERT_FALSE(want.empty());
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    const std::string dir =
        absl::StrCat(testing::TempDir(), "/mistral3-multimodal-", ::getpid(), "-", prefix.substr(0, 5));
    const std::string head = prefix == "language_model.model." ? "language_model.lm_head.weight" : "lm_head.weight";
    testing::WriteMultimodalCheckpoint(text_dir, dir,
                                       {prefix, head, "mistral3", "Mistral3ForConditionalGeneration", "pixtral"});
    EXPECT_EQ(testing::FirstStepLogits(dir, prompt), want) << prefix;
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace orca::engine
