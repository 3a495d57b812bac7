// Real checkpoints no one here wrote, against outputs of independent
// implementations (../shared/models; skipped when absent).

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/engine/engine.h"
#include "core/formats/gguf_file.h"
#include "core/formats/gguf_writer.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

bool Exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

nlohmann::json LoadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Greedy generation, one token per iteration after the prompt's initiation phase.
std::vector<int32_t> Greedy(Engine& engine, uint64_t id, const std::vector<int32_t>& prompt, int new_tokens,
                            std::vector<float>* first_logits = nullptr) {
  std::vector<int32_t> out;
  StepInput in;
  in.seqs.push_back({id, prompt, 0, true, SequenceSetup{static_cast<int32_t>(prompt.size()) + new_tokens, {}, prompt}});
  int32_t pos = 0;
  for (int i = 0; i < new_tokens; ++i) {
    StepOutput o;
    absl::Status s = engine.Step(in, nullptr, &o);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) break;
    if (i == 0 && first_logits) *first_logits = o.logits;
    const int32_t tok = o.samples.at(0).sample.token_id;
    out.push_back(tok);
    pos += static_cast<int32_t>(in.seqs[0].token_ids.size());
    in.seqs[0] = {id, {tok}, pos, true, std::nullopt};
  }
  engine.Release(id);
  return out;
}

class RealModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RealModelTest, Stories260KGreedyMatchesReference) {
  const std::string dir = testing::SharedModelsDir();
  if (!Exists(dir + "/stories260K.gguf")) GTEST_SKIP() << "no ../shared/models/stories260K.gguf";
  Engine::Options o;
  o.model_path = dir + "/stories260K.gguf";
  o.n_slots = 1024;
  if (std::string(GetParam()) == "bf16") o.dtype = DType::kBF16;
  auto engine = Engine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->config().vocab_size, 512);
  EXPECT_EQ((*engine)->config().num_kv_heads, 4);
  const auto ref = LoadJson(dir + "/stories260K.reference.json");
  for (const auto& c : ref["cases"]) {
    const auto prompt = c["prompt_token_ids"].get<std::vector<int32_t>>();
    const auto want = c["greedy_token_ids"].get<std::vector<int32_t>>();
    const auto got = Greedy(**engine, 1, prompt, static_cast<int>(want.size()));
    if (std::string(GetParam()) == "f32") {
      EXPECT_EQ(got, want) << "prompt: " << c["prompt"];
    } else {
      // bf16 weights round the model; the continuation must agree for a long prefix.
      size_t same = 0;
      while (same < got.size() && got[same] == want[same]) ++same;
      EXPECT_GE(same, 20u) << "prompt: " << c["prompt"];
    }
  }
}

TEST_P(RealModelTest, TinyGpt2MatchesReference) {
  const std::string dir = testing::SharedModelsDir() + "/tiny-gpt2";
  if (!Exists(dir + "/model.safetensors")) GTEST_SKIP() << "no ../shared/models/tiny-gpt2";
  if (std::string(GetParam()) == "bf16") GTEST_SKIP() << "n_embd=2 logits differ only past bf16 precision";
  Engine::Options o;
  o.model_path = dir;
  o.n_slots = 2048;
  o.keep_logits = true;
  auto engine = Engine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const auto ref = LoadJson(dir + "/reference.json");
  uint64_t id = 1;
  for (const auto& c : ref["cases"]) {
    const auto prompt = c["prompt_token_ids"].get<std::vector<int32_t>>();
    const auto want = c["greedy_token_ids"].get<std::vector<int32_t>>();
    std::vector<float> logits;
    const auto got = Greedy(**engine, id++, prompt, static_cast<int>(want.size()), &logits);
    EXPECT_EQ(got, want) << "prompt: " << c["prompt"];
    for (const auto& top : c["first_step_logits_top5"]) {
      const int32_t tok = top[0].get<int32_t>();
      EXPECT_NEAR(logits.at(tok), top[1].get<double>(), 2e-5) << "token " << tok;
    }
  }
}

// Llama 3.x GGUF files carry their RoPE scaling as `rope_freqs.weight`, per-frequency divisors that llama.cpp applies
// and that no metadata announces. stories260K with such a tensor added (divisors 1, 2, 4, 8 for its four frequencies)
// must continue greedily as llama.cpp continues it. The ids below are llama.cpp's (llama-server c392e50 on the same
// tensor added to the file by a one-off script, `/completion` with temperature 0, top_k 1, ignore_eos,
// return_tokens: bench/results/2026-11-24_issue12-quantized-gguf.md, twenty-first session); they leave the
// unscaled model's reference after 30 tokens of the first prompt.
TEST(RealModelRopeTest, Stories260KWithRopeFreqsContinuesAsLlamaCpp) {
  const std::string src = testing::SharedModelsDir() + "/stories260K.gguf";
  if (!Exists(src)) GTEST_SKIP() << "no ../shared/models/stories260K.gguf";
  auto g = formats::GgufFile::Open(src);
  ASSERT_TRUE(g.ok()) << g.status();
  formats::GgufWriter w;
  for (const auto& [key, value] : (*g)->metadata()) w.Copy(key, value);
  const std::vector<std::string> names = (*g)->Names();
  for (const std::string& name : names) {
    const formats::TensorInfo* t = (*g)->Find(name);
    ASSERT_TRUE(w.AddTensor(name, t->shape, t->dtype).ok()) << name;
  }
  const std::vector<float> divisors = {1, 2, 4, 8};
  ASSERT_TRUE(w.AddTensor("rope_freqs.weight", {4}, DType::kF32).ok());
  const std::string path = testing::TempDir() + "/stories260K-rope-freqs-" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(w.Write(path, [&](size_t i, std::string* out) {
                 if (i < names.size()) {
                   const formats::TensorInfo* t = (*g)->Find(names[i]);
                   out->assign(reinterpret_cast<const char*>(t->data), t->nbytes);
                 } else {
                   out->assign(reinterpret_cast<const char*>(divisors.data()), divisors.size() * sizeof(float));
                 }
                 return absl::OkStatus();
               }).ok());
  Engine::Options o;
  o.model_path = path;
  o.n_slots = 1024;
  auto engine = Engine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_EQ((*engine)->config().rope_freq_factors, divisors);
  const std::vector<int32_t> prompts[] = {{1}, {1, 403, 407, 261, 378, 432, 274, 287, 269, 345, 400, 428}};
  const std::vector<int32_t> llama_cpp[] = {
      {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337,
       410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 335, 311, 374, 419, 426, 385, 328, 432, 358, 263,
       377, 267, 265, 282, 295, 433, 335, 311, 357, 343, 269, 394, 261, 370, 268, 414, 444, 426, 338, 286,
       399, 393, 269, 279, 411, 429, 292, 266, 267, 262, 411, 411, 311, 374, 419, 426, 338, 286, 399, 393,
       269, 391, 266, 267, 337, 335, 311, 267, 422, 419, 426, 338, 261, 419, 355, 311, 357, 343, 432, 313,
       457, 303, 359, 337, 335, 311, 267, 422, 419, 450, 436, 320, 285, 357, 343, 336, 432, 313, 452, 406},
      {432, 261, 376, 298, 315, 421, 395, 317, 263, 377, 267, 265, 282, 295, 433, 426, 342, 394, 261, 370,
       268, 414, 444, 373, 280, 412, 264, 422, 269, 261, 370, 432, 352, 266, 268, 414, 444, 426, 342, 391,
       266, 267, 337, 335, 312, 432, 398, 366, 382, 276, 267, 414, 270, 333, 415, 322, 265, 282, 295, 433,
       426, 342, 391, 266, 267, 337, 335, 265, 315, 267, 422, 419, 426, 342, 391, 266, 267, 337, 335, 265,
       315, 267, 422, 419, 269, 262, 411, 411, 433, 426, 342, 391, 266, 267, 337, 335, 265, 315, 267, 422,
       419, 432, 398, 366, 382, 276, 267, 414, 270, 309, 426, 342, 391, 266, 267, 337, 335, 265, 315, 267}};
  for (int i = 0; i < 2; ++i) {
    const auto got = Greedy(**engine, 1 + i, prompts[i], static_cast<int>(llama_cpp[i].size()));
    EXPECT_EQ(got, llama_cpp[i]) << "prompt " << i;
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RealModelTest, ::testing::Values("f32", "bf16"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace orca::engine
