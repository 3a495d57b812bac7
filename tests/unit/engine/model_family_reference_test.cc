// Every model family against llama.cpp, an independent implementation: a small random-weight GGUF written by
// `orca model synth` (the family's real layer structure), the same prompts, and llama.cpp's greedy tokens and
// logits recorded as data in data/llama_cpp_reference/ (README.md there: the peer's commit and the commands).
// The test rebuilds each file from the "synth" fields of its reference, runs the prompts together in one batch, and
// compares the first step's logits over the whole vocabulary and every greedy token. The Gemma files have a sliding
// window of 8: the 40-token prompt and the decoding run far past it.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/common/kv_footprint.h"
#include "core/convert/gguf_export.h"
#include "core/engine/engine.h"
#include "core/engine/models/model_family.h"
#include "core/text/synthetic_tokenizer.h"
#include "core/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/multimodal_layout.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

using json = nlohmann::json;

std::string ReferenceDir() {
  const char* src = std::getenv("ORCA_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/unit/engine/data/llama_cpp_reference";
}

// The options `orca model synth` turns the reference's recorded flags into.
SyntheticModelOptions SynthOptions(const json& s) {
  SyntheticModelOptions o;
  const ModelFamily* family = FindFamilyByName(s.at("arch").get<std::string>());
  EXPECT_NE(family, nullptr) << s.dump();
  o.arch = family != nullptr ? family->arch : ModelArch::kLlama;
  o.hidden_size = s.at("hidden_size");
  o.num_layers = s.at("num_layers");
  o.num_heads = s.at("num_heads");
  o.num_kv_heads = s.at("num_kv_heads");
  o.head_dim = s.value("head_dim", 0);
  o.intermediate_size = s.at("intermediate_size");
  o.vocab_size = s.at("vocab_size");
  o.max_position = s.value("max_position", 2048);
  o.tie_word_embeddings = s.value("tie_embeddings", true);
  o.rope_theta = s.value("rope_theta", 10000.0);
  o.rope_theta_local = s.value("rope_theta_local", 0.0);
  o.sliding_window = s.value("sliding_window", 0);
  o.sliding_window_pattern = s.value("sliding_window_pattern", 0);
  o.partial_rotary_factor = s.value("partial_rotary_factor", 1.0);
  // --rope-scaling as orca model synth turns it into options (the family draws LongRoPE's factors).
  const std::string scaling = s.value("rope_scaling", "");
  if (!scaling.empty()) {
    o.rope_scaling.type = scaling == "yarn"       ? RopeScaling::Type::kYarn
                          : scaling == "longrope" ? RopeScaling::Type::kLongRope
                                                  : RopeScaling::Type::kLinear;
    o.rope_scaling.factor = s.value("rope_scaling_factor", 1.0);
    o.rope_scaling.original_max_position = s.value("rope_original_context", int64_t{0});
  }
  o.attn_temperature_scale = s.value("attn_temperature_scale", 0.0f);
  o.seed = s.value("seed", 0);
  o.dtype = DType::kF32;
  return o;
}

std::string WriteGguf(const SyntheticModelOptions& o, const std::string& name) {
  const std::string path = absl::StrCat(testing::TempDir(), "/", name, "-", ::getpid(), ".gguf");
  auto files = text::MakeSyntheticByteLevelTokenizer(o.vocab_size);
  EXPECT_TRUE(files.ok()) << files.status();
  convert::ExportOptions eo;
  EXPECT_TRUE(convert::ParseQuantMix("f32", &eo.mix));
  auto report = convert::WriteSyntheticGguf(o, files->tokenizer_json, files->tokenizer_config_json, path, eo);
  EXPECT_TRUE(report.ok()) << report.status();
  return path;
}

class ModelFamilyReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelFamilyReferenceTest, GreedyTokensAndLogitsMatchLlamaCpp) {
  const std::string ref_path = ReferenceDir() + "/" + GetParam() + ".json";
  std::ifstream in(ref_path);
  ASSERT_TRUE(in) << ref_path << " is missing (ORCA_SOURCE_DIR must name the repository)";
  const json ref = json::parse(in);
  const std::string model = WriteGguf(SynthOptions(ref.at("synth")), GetParam());
  Engine::Options eo;
  eo.model_path = model;
  eo.n_slots = 4096;
  eo.keep_logits = true;
  auto engine = Engine::Create(eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const json& cases = ref.at("cases");
  ASSERT_GE(cases.size(), 2u);
  // All prompts as one batch (the selective-batching path), stepped together until each has its tokens.
  std::vector<StepSequence> seqs;
  std::vector<std::vector<int32_t>> got(cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    seqs.push_back(testing::NewSeq(100 + i, cases[i].at("prompt").get<std::vector<int32_t>>(), 512));
  const size_t steps = cases[0].at("greedy").size();
  for (size_t step = 0; step < steps; ++step) {
    StepInput input;
    input.seqs = seqs;
    StepOutput output;
    const absl::Status stepped = (*engine)->Step(input, nullptr, &output);
    ASSERT_TRUE(stepped.ok()) << stepped;
    const StepOutput* out = &output;
    const size_t vocab = static_cast<size_t>((*engine)->config().vocab_size);
    ASSERT_EQ(out->logits.size(), cases.size() * vocab);
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::vector<float> logits(out->logits.begin() + i * vocab, out->logits.begin() + (i + 1) * vocab);
      const std::vector<float> want_greedy_logits = cases[i].at("greedy_logits").get<std::vector<float>>();
      const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      got[i].push_back(best);
      if (step == 0)
        testing::ExpectLogitsClose(logits, cases[i].at("first_logits").get<std::vector<float>>(),
                                   absl::StrCat(GetParam(), " prompt ", i, " first step"),
                                   ref.value("logit_tolerance", 1e-3));
      EXPECT_NEAR(logits[best], want_greedy_logits[step], 1e-3 * (1 + std::abs(want_greedy_logits[step])))
          << GetParam() << " prompt " << i << " step " << step;
      seqs[i] = {seqs[i].request_id,
                 {best},
                 seqs[i].start_position + static_cast<int32_t>(seqs[i].token_ids.size()),
                 true,
                 std::nullopt};
    }
  }
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(got[i], cases[i].at("greedy").get<std::vector<int32_t>>()) << GetParam() << " prompt " << i;
  std::remove(model.c_str());
}

// Sliding window as memory: the local layers' KV in a pool of their own, only just big enough for what the
// window and each iteration cover (blocks of 4 tokens, window 8), the prompts computed in chunks of at most 16
// tokens and then decoded far past the window. After every iteration the pool holds exactly the blocks
// SlidingWindowKvBlocks says (the count the scheduler keeps), and the tokens and logits are still llama.cpp's —
// blocks freed and reused under the requests' feet change nothing they attend to.
class SlidingWindowPoolTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SlidingWindowPoolTest, HoldsOnlyTheWindowAndStillMatchesLlamaCpp) {
  std::ifstream in(ReferenceDir() + "/" + GetParam() + ".json");
  ASSERT_TRUE(in) << GetParam();
  const json ref = json::parse(in);
  const int32_t window = ref.at("synth").at("sliding_window");
  constexpr int32_t kBlock = 4, kChunk = 16;
  const json& cases = ref.at("cases");
  const size_t steps = cases[0].at("greedy").size();
  int64_t bound = 0, whole = 0;  // the requests' worst case at once (the pool is no bigger), and all their positions
  for (const json& c : cases) {
    const int64_t prompt = c.at("prompt").size();
    bound +=
        SlidingWindowKvBound(prompt + static_cast<int64_t>(steps), std::min<int64_t>(prompt, kChunk), window, kBlock);
    whole += (prompt + static_cast<int64_t>(steps) + kBlock - 1) / kBlock;
  }
  ASSERT_LT(bound, whole / 2) << "the test must hold less than half of what keeping every position would";
  const std::string model = WriteGguf(SynthOptions(ref.at("synth")), GetParam() + "-swa");
  Engine::Options eo;
  eo.model_path = model;
  eo.n_slots = 4096;
  eo.kv_block_size = kBlock;
  eo.kv_local_slots = bound * kBlock;
  eo.keep_logits = true;
  auto engine = Engine::Create(eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_EQ((*engine)->kv_local_slots_total(), bound * kBlock);
  const size_t vocab = static_cast<size_t>((*engine)->config().vocab_size);
  struct Req {
    std::vector<int32_t> prompt, got;
    int32_t next = 0;  // positions computed
  };
  std::vector<Req> reqs;
  for (const json& c : cases) reqs.push_back({c.at("prompt").get<std::vector<int32_t>>(), {}, 0});
  int64_t peak = 0;
  for (int iteration = 0; reqs[0].got.size() < steps || reqs[1].got.size() < steps; ++iteration) {
    ASSERT_LT(iteration, 200);
    StepInput input;
    std::vector<size_t> sampled;
    int64_t want_blocks = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      Req& r = reqs[i];
      if (r.got.size() >= steps) continue;
      const int32_t prompt = static_cast<int32_t>(r.prompt.size());
      std::vector<int32_t> tokens;
      if (r.next < prompt)
        tokens.assign(r.prompt.begin() + r.next, r.prompt.begin() + std::min(prompt, r.next + kChunk));
      else
        tokens = {r.got.back()};
      const bool sample = r.next + static_cast<int32_t>(tokens.size()) >= prompt;
      std::optional<SequenceSetup> setup;
      if (r.next == 0) setup = testing::NewSeq(0, r.prompt, 512).new_request;
      input.seqs.push_back({100 + i, tokens, r.next, sample, setup});
      if (sample) sampled.push_back(i);
      want_blocks += SlidingWindowKvBlocks(r.next, static_cast<int64_t>(tokens.size()), window, kBlock);
      r.next += static_cast<int32_t>(tokens.size());
    }
    for (size_t i = 0; i < reqs.size(); ++i)  // finished requests hold their last iteration's blocks
      if (reqs[i].got.size() >= steps) want_blocks += SlidingWindowKvBlocks(reqs[i].next - 1, 1, window, kBlock);
    StepOutput out;
    const absl::Status stepped = (*engine)->Step(input, nullptr, &out);
    ASSERT_TRUE(stepped.ok()) << stepped;
    EXPECT_EQ((*engine)->kv_local_slots_used(), want_blocks * kBlock) << "iteration " << iteration;
    peak = std::max(peak, (*engine)->kv_local_slots_used());
    ASSERT_EQ(out.logits.size(), sampled.size() * vocab);
    for (size_t k = 0; k < sampled.size(); ++k) {
      Req& r = reqs[sampled[k]];
      const json& c = cases[sampled[k]];
      const std::vector<float> logits(out.logits.begin() + k * vocab, out.logits.begin() + (k + 1) * vocab);
      const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (r.got.empty())
        testing::ExpectLogitsClose(logits, c.at("first_logits").get<std::vector<float>>(),
                                   absl::StrCat(GetParam(), " prompt ", sampled[k], " first step"),
                                   ref.value("logit_tolerance", 1e-3));
      const float want = c.at("greedy_logits")[r.got.size()];
      EXPECT_NEAR(logits[best], want, 1e-3 * (1 + std::abs(want))) << GetParam() << " prompt " << sampled[k];
      r.got.push_back(best);
    }
  }
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(std::vector<int32_t>(reqs[i].got.begin(), reqs[i].got.begin() + steps),
              cases[i].at("greedy").get<std::vector<int32_t>>())
        << GetParam() << " prompt " << i;
  (*engine)->Release(101);
  EXPECT_LT((*engine)->kv_local_slots_used(), peak);
  std::remove(model.c_str());
}

INSTANTIATE_TEST_SUITE_P(WindowedFamilies, SlidingWindowPoolTest, ::testing::Values("gemma2", "gemma3"));

// The same weights in Hugging Face layout (config.json + safetensors, what orca model synth writes) and as the
// GGUF file `orca model quantize --type f32` makes of them give the same logits: every family's config keys,
// tensor names, norm offsets, Q/K permutation and RoPE tables agree between the two formats.
TEST_P(ModelFamilyReferenceTest, HuggingFaceAndGgufOfTheSameWeightsGiveTheSameLogits) {
  std::ifstream in(ReferenceDir() + "/" + GetParam() + ".json");
  ASSERT_TRUE(in) << GetParam();
  const json ref = json::parse(in);
  const SyntheticModelOptions o = SynthOptions(ref.at("synth"));
  const std::string hf = absl::StrCat(testing::TempDir(), "/", GetParam(), "-hf-", ::getpid());
  ASSERT_TRUE(WriteSyntheticCheckpoint(o, hf).ok());
  const std::string gguf = hf + ".gguf";
  convert::ExportOptions eo;
  ASSERT_TRUE(convert::ParseQuantMix("f32", &eo.mix));
  auto report = convert::QuantizeCheckpoint(hf, gguf, eo);
  ASSERT_TRUE(report.ok()) << report.status();
  std::vector<std::vector<float>> logits;
  for (const std::string& path : {hf, gguf}) {
    Engine::Options eopt;
    eopt.model_path = path;
    eopt.n_slots = 1024;
    eopt.keep_logits = true;
    auto engine = Engine::Create(eopt);
    ASSERT_TRUE(engine.ok()) << path << ": " << engine.status();
    StepInput input;
    input.seqs = {testing::NewSeq(1, ref.at("cases")[1].at("prompt").get<std::vector<int32_t>>(), 256)};
    StepOutput out;
    ASSERT_TRUE((*engine)->Step(input, nullptr, &out).ok());
    logits.push_back(out.logits);
  }
  testing::ExpectLogitsClose(logits[1], logits[0], GetParam() + ": GGUF against Hugging Face layout", 1e-5);
  std::filesystem::remove_all(hf);
  std::remove(gguf.c_str());
}

// Gemma 3's multimodal checkpoints (model_type gemma3, Gemma3ForConditionalGeneration) hold the text model's
// config under text_config and its tensors under language_model.model. (transformers before 4.52) or
// model.language_model. (later): the same weights laid out either way give the text-only checkpoint's logits.
TEST(Gemma3MultimodalLayoutTest, TheLanguageModelOfAMultimodalCheckpointGivesTheTextCheckpointsLogits) {
  const std::string text_dir = testing::SyntheticModel(testing::SmallGemma3());
  const std::vector<int32_t> prompt = {5, 77, 3, 140, 9, 12, 250, 31, 8, 66, 1, 2, 3};
  const std::vector<float> want = testing::FirstStepLogits(text_dir, prompt);
  ASSERT_FALSE(want.empty());
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    const std::string dir = absl::StrCat(testing::TempDir(), "/gemma3-multimodal-", ::getpid(), "-", prefix.size());
    testing::WriteMultimodalCheckpoint(
        text_dir, dir,
        {prefix, "lm_head.weight", "gemma3", "Gemma3ForConditionalGeneration", "siglip_vision_model"});
    EXPECT_EQ(testing::FirstStepLogits(dir, prompt), want) << prefix;
    std::filesystem::remove_all(dir);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ModelFamilyReferenceTest,
                         ::testing::Values("llama", "gpt2", "qwen3", "qwen3-yarn", "gemma2", "gemma3", "granite",
                                           "olmo2", "starcoder2", "phi3", "mistral3"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace orca::engine
