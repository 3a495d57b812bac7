// GGUF checkpoints with F16 and BF16 tensors: a synthetic HF model re-encoded
// as GGUF (qwen2 architecture: rotate-half RoPE like HF, no permuted Q/K)
// gives the same logits as the original, within the rounding of the dtype.

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/common/mapped_file.h"
#include "core/convert/gguf_export.h"
#include "core/engine/engine.h"
#include "core/formats/gguf_file.h"
#include "core/text/components.h"
#include "core/text/synthetic_tokenizer.h"
#include "core/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

class GgufBuilder {
 public:
  void U32(const std::string& key, uint32_t v) { Key(key, 4), Pod(v), ++kv_; }
  void F32(const std::string& key, float v) { Key(key, 6), Pod(v), ++kv_; }
  void Str(const std::string& key, const std::string& v) { Key(key, 8), S(v), ++kv_; }
  // A tensor given row-major (outermost first) with f32 values, stored as `ggml_type` (0 f32, 1 f16, 30 bf16).
  void Tensor(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& v,
              uint32_t ggml_type) {
    std::string bytes;
    for (float f : v) {
      if (ggml_type == 0)
        bytes.append(reinterpret_cast<const char*>(&f), 4);
      else {
        const uint16_t h = ggml_type == 1 ? F32ToF16(f) : F32ToBf16(f);
        bytes.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    while (data_.size() % 32) data_.push_back('\0');
    std::string info;
    auto pod = [&](auto x) { info.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
    pod(static_cast<uint64_t>(name.size()));
    info += name;
    pod(static_cast<uint32_t>(shape.size()));
    for (auto it = shape.rbegin(); it != shape.rend(); ++it) pod(static_cast<uint64_t>(*it));  // ne[0] innermost
    pod(ggml_type);
    pod(static_cast<uint64_t>(data_.size()));
    infos_ += info;
    data_ += bytes;
    ++tensors_;
  }
  /// Rewrites the data offset of the last tensor added (to forge corrupt files).
  void OverrideLastOffset(uint64_t offset) { std::memcpy(&infos_[infos_.size() - 8], &offset, 8); }
  void Write(const std::string& path) {
    std::string out;
    auto pod = [&](auto x) { out.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
    pod(uint32_t{0x46554747});
    pod(uint32_t{3});
    pod(static_cast<uint64_t>(tensors_));
    pod(static_cast<uint64_t>(kv_));
    out += kvs_ + infos_;
    while (out.size() % 32) out.push_back('\0');
    out += data_;
    ASSERT_TRUE(WriteStringToFile(path, out).ok());
  }

 private:
  template <typename T>
  void Pod(T v) {
    kvs_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void S(const std::string& s) { Pod(static_cast<uint64_t>(s.size())), kvs_ += s; }
  void Key(const std::string& k, uint32_t type) { S(k), Pod(type); }
  std::string kvs_, infos_, data_;
  int kv_ = 0, tensors_ = 0;
};

std::vector<float> ToF32(const formats::TensorInfo& t) {
  std::vector<float> v(t.NumElements());
  ConvertToF32(t.data, t.dtype, v.data(), v.size());
  return v;
}

std::vector<float> Logits(const std::string& path) {
  Engine::Options o;
  o.model_path = path;
  o.n_slots = 64;
  o.keep_logits = true;
  o.dtype = DType::kF32;
  auto engine = Engine::Create(o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  StepInput in;
  in.seqs.push_back({1, {7, 2, 9, 4, 100, 31}, 0, true, SequenceSetup{16, {}, {}}});
  StepOutput out;
  EXPECT_TRUE((*engine)->Step(in, nullptr, &out).ok());
  return out.logits;
}

class GgufModelTest : public ::testing::TestWithParam<uint32_t> {};

// The small synthetic Llama as a qwen2 GGUF: metadata, then every tensor
// (norms f32, the rest `type`). `rope_theta` < 0: the checkpoint's.
std::string HfCheckpoint() {
  SyntheticModelOptions so = testing::SmallLlama(DType::kF32);
  so.tie_word_embeddings = false;
  return testing::SyntheticModel(so);
}

void AddQwen2Metadata(const ModelConfig& c, GgufBuilder& g, double rope_theta = -1) {
  g.Str("general.architecture", "qwen2");
  g.U32("qwen2.embedding_length", c.hidden_size);
  g.U32("qwen2.block_count", c.num_layers);
  g.U32("qwen2.attention.head_count", c.num_heads);
  g.U32("qwen2.attention.head_count_kv", c.num_kv_heads);
  g.U32("qwen2.feed_forward_length", c.intermediate_size);
  g.U32("qwen2.context_length", c.max_position);
  g.F32("qwen2.attention.layer_norm_rms_epsilon", c.norm_eps);
  g.F32("qwen2.rope.freq_base", static_cast<float>(rope_theta < 0 ? c.rope_theta : rope_theta));
}

void AddQwen2Tensors(const Checkpoint& ckpt, uint32_t type, GgufBuilder& g) {
  const char* hf_to_gguf[][2] = {
      {"self_attn.q_proj", "attn_q"},      {"self_attn.k_proj", "attn_k"},   {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"}, {"mlp.gate_proj", "ffn_gate"},    {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},       {"input_layernorm", "attn_norm"}, {"post_attention_layernorm", "ffn_norm"}};
  for (const std::string& name : ckpt.tensors().Names()) {
    const formats::TensorInfo* t = ckpt.tensors().Find(name);
    std::string out;
    if (name == "model.embed_tokens.weight")
      out = "token_embd.weight";
    else if (name == "model.norm.weight")
      out = "output_norm.weight";
    else if (name == "lm_head.weight")
      out = "output.weight";
    else {
      const size_t dot = name.find('.', 13);  // model.layers.N.
      const std::string layer = name.substr(13, dot - 13), rest = name.substr(dot + 1);
      for (auto& m : hf_to_gguf)
        if (rest.rfind(m[0], 0) == 0) out = "blk." + layer + "." + m[1] + rest.substr(std::strlen(m[0]));
    }
    ASSERT_FALSE(out.empty()) << name;
    const bool norm = t->shape.size() == 1;  // norms stay f32, as llama.cpp's converter keeps them
    g.Tensor(out, t->shape, ToF32(*t), norm ? 0 : type);
  }
}

TEST_P(GgufModelTest, HalfPrecisionGgufMatchesTheCheckpointItWasMadeFrom) {
  const std::string hf = HfCheckpoint();
  auto ckpt = Checkpoint::Open(hf);
  ASSERT_TRUE(ckpt.ok());
  const uint32_t type = GetParam();
  GgufBuilder g;
  AddQwen2Metadata((*ckpt)->config(), g);
  AddQwen2Tensors(**ckpt, type, g);
  const std::string path =
      testing::TempDir() + "/synthetic-" + std::to_string(type) + "-" + std::to_string(::getpid()) + ".gguf";
  g.Write(path);
  const std::vector<float> want = Logits(hf), got = Logits(path);
  ASSERT_EQ(want.size(), got.size());
  double max_diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::abs(want[i] - got[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  EXPECT_GT(max_diff, 0.0);  // the weights really were rounded
  EXPECT_LT(max_diff, (type == 1 ? 5e-3 : 5e-2) * scale) << "max |diff| " << max_diff;
}

INSTANTIATE_TEST_SUITE_P(Types, GgufModelTest, ::testing::Values(1u, 30u),
                         [](const auto& info) { return info.param == 1 ? std::string("F16") : std::string("BF16"); });

// Tests that re-encode the small HF checkpoint as GGUF files.
class HfCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ckpt = Checkpoint::Open(HfCheckpoint());
    ASSERT_TRUE(ckpt.ok());
    ckpt_ = std::move(*ckpt);
  }
  std::unique_ptr<Checkpoint> ckpt_;
};

// Issue 11: corrupt or nonsensical GGUF files are refused with the file and
// the field named, never read from the wrong place or run with a broken RoPE.
class GgufRejectTest : public HfCheckpointTest {
 protected:
  absl::Status Open(GgufBuilder& g, const std::string& name) {
    path_ = testing::TempDir() + "/reject-" + name + "-" + std::to_string(::getpid()) + ".gguf";
    g.Write(path_);
    return Checkpoint::Open(path_).status();
  }
  std::string path_;
};

TEST_F(GgufRejectTest, ATensorOffsetThatWouldWrapAroundIsRejected) {
  GgufBuilder g;
  AddQwen2Metadata(ckpt_->config(), g);
  AddQwen2Tensors(*ckpt_, 0, g);
  // data_start + offset wraps to a small number: the old check passed and the tensor read the header.
  g.OverrideLastOffset(~uint64_t{0} - 31);
  absl::Status s = Open(g, "wrap");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find(path_), std::string::npos) << s;
  EXPECT_NE(s.message().find("extends past the end of the file"), std::string::npos) << s;
}

TEST_F(GgufRejectTest, AMisalignedTensorOffsetIsRejected) {
  GgufBuilder g;
  AddQwen2Metadata(ckpt_->config(), g);
  AddQwen2Tensors(*ckpt_, 0, g);
  g.OverrideLastOffset(4);
  absl::Status s = Open(g, "misaligned");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find(path_), std::string::npos) << s;
  EXPECT_NE(s.message().find("not a multiple of the alignment 32"), std::string::npos) << s;
}

TEST_F(GgufRejectTest, RopeFreqBaseZeroIsRejectedNamingTheKey) {
  GgufBuilder g;
  AddQwen2Metadata(ckpt_->config(), g, /*rope_theta=*/0);
  AddQwen2Tensors(*ckpt_, 0, g);
  absl::Status s = Open(g, "rope0");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(path_), std::string::npos) << s;
  EXPECT_NE(s.message().find("qwen2.rope.freq_base must be a positive number, got 0"), std::string::npos) << s;
}

TEST_F(GgufRejectTest, MixtureOfExpertsIsRefusedNamingTheKey) {
  GgufBuilder g;
  AddQwen2Metadata(ckpt_->config(), g);
  g.U32("qwen2.expert_count", 8);
  AddQwen2Tensors(*ckpt_, 0, g);
  absl::Status s = Open(g, "moe");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find(path_ + ": mixture-of-experts models (qwen2.expert_count 8) are not supported"),
            std::string::npos)
      << s;
}

TEST_F(GgufRejectTest, OutOfVocabularyEosIsRejectedNamingTheKey) {
  GgufBuilder g;
  AddQwen2Metadata(ckpt_->config(), g);
  g.U32("tokenizer.ggml.eos_token_id", 5000);  // vocabulary: 300
  AddQwen2Tensors(*ckpt_, 0, g);
  absl::Status s = Open(g, "eos");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path_), std::string::npos) << s;
  EXPECT_NE(s.message().find("tokenizer.ggml.eos_token_id 5000 is outside the vocabulary (vocab_size 300)"),
            std::string::npos)
      << s;
}

// RoPE scaling in GGUF as llama.cpp writes and reads it. Llama 3.x files carry their scaling as the tensor
// `rope_freqs.weight` (per-frequency divisors; no metadata), linear scaling as `{arch}.rope.scaling.type/factor`.
// Each must give the logits of the Hugging Face checkpoint with the same `rope_scaling`; a file read without it
// must not (the prompt's positions are far enough for the scaling to matter).
class GgufRopeScalingTest : public HfCheckpointTest {
 protected:
  // A copy of the HF checkpoint whose config.json has `rope_scaling`.
  static std::string ScaledHf(const std::string& name, const nlohmann::json& rope_scaling) {
    const std::string dir = testing::TempDir() + "/rope-" + name + "-" + std::to_string(::getpid());
    std::filesystem::remove_all(dir);
    std::filesystem::copy(HfCheckpoint(), dir);
    nlohmann::json config = nlohmann::json::parse(*ReadFileToString(dir + "/config.json"));
    config["rope_scaling"] = rope_scaling;
    EXPECT_TRUE(WriteStringToFile(dir + "/config.json", config.dump()).ok());
    return dir;
  }
  std::string Write(GgufBuilder& g, const std::string& name) {
    const std::string path = testing::TempDir() + "/rope-" + name + "-" + std::to_string(::getpid()) + ".gguf";
    g.Write(path);
    return path;
  }
  // Llama 3's divisors as llama.cpp's converter defines them, written out here from that definition.
  static std::vector<float> Llama3Divisors(int rotary_dim, double theta, double factor, double low, double high,
                                           double original) {
    std::vector<float> out;
    for (int i = 0; i < rotary_dim; i += 2) {
      const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / rotary_dim);
      const double wavelen = 2 * M_PI / freq;
      if (wavelen < original / high) {
        out.push_back(1.0f);
      } else if (wavelen > original / low) {
        out.push_back(static_cast<float>(factor));
      } else {
        const double smooth = (original / wavelen - low) / (high - low);
        out.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
      }
    }
    return out;
  }
  // max |a - b| / max |a|.
  static double RelDiff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    EXPECT_FALSE(a.empty());
    double d = 0, scale = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
      scale = std::max(scale, static_cast<double>(std::abs(a[i])));
    }
    return scale > 0 ? d / scale : d;
  }
  const nlohmann::json kLlama3 = {{"rope_type", "llama3"},
                                  {"factor", 8.0},
                                  {"low_freq_factor", 1.0},
                                  {"high_freq_factor", 4.0},
                                  {"original_max_position_embeddings", 16}};
};

TEST_F(GgufRopeScalingTest, RopeFreqsTensorGivesTheLlama3CheckpointsLogits) {
  const ModelConfig& c = ckpt_->config();
  const std::vector<float> divisors = Llama3Divisors(c.rotary_dim, c.rope_theta, 8, 1, 4, 16);
  ASSERT_EQ(divisors.size(), 8u);
  EXPECT_EQ(divisors.front() > 1 && divisors.front() < 8, true) << divisors.front();  // interpolated
  EXPECT_EQ(divisors.back(), 8.0f);
  GgufBuilder scaled, plain;
  for (GgufBuilder* g : {&scaled, &plain}) {
    AddQwen2Metadata(c, *g);
    AddQwen2Tensors(*ckpt_, 0, *g);
  }
  scaled.Tensor("rope_freqs.weight", {static_cast<int64_t>(divisors.size())}, divisors, 0);
  const std::string scaled_path = Write(scaled, "freqs"), plain_path = Write(plain, "plain");
  auto read = Checkpoint::Open(scaled_path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)->config().rope_freq_factors, divisors);
  EXPECT_NE((*read)->config().Summary().find("rope_freqs.weight"), std::string::npos) << (*read)->config().Summary();

  const std::vector<float> want = Logits(ScaledHf("llama3", kLlama3));
  EXPECT_LT(RelDiff(want, Logits(scaled_path)), 1e-4);
  EXPECT_GT(RelDiff(want, Logits(plain_path)), 1e-2);  // the scaling matters at these positions
}

TEST_F(GgufRopeScalingTest, LinearScalingKeysGiveTheLinearCheckpointsLogits) {
  GgufBuilder g;
  AddQwen2Metadata(ckpt_->config(), g);
  g.Str("qwen2.rope.scaling.type", "linear");
  g.F32("qwen2.rope.scaling.factor", 4.0f);
  AddQwen2Tensors(*ckpt_, 0, g);
  const std::string path = Write(g, "linear");
  const std::vector<float> want = Logits(ScaledHf("linear", {{"type", "linear"}, {"factor", 4.0}}));
  EXPECT_LT(RelDiff(want, Logits(path)), 1e-4);
  EXPECT_GT(RelDiff(want, Logits(HfCheckpoint())), 1e-2);
}

TEST_F(GgufRopeScalingTest, BadRopeFreqsAndUnsupportedScalingAreRefusedNamingTheTensorOrKey) {
  const ModelConfig& c = ckpt_->config();
  struct Case {
    std::string name;
    std::function<void(GgufBuilder&)> add;
    absl::StatusCode code;
    std::string message;
  } cases[] = {
      {"short", [](GgufBuilder& g) { g.Tensor("rope_freqs.weight", {7}, std::vector<float>(7, 2.0f), 0); },
       absl::StatusCode::kInvalidArgument,
       "rope_freqs.weight must hold 8 f32 values (one per rotary frequency: qwen2.rope.dimension_count 16 / 2), got "
       "f32 [7]"},
      {"f16", [](GgufBuilder& g) { g.Tensor("rope_freqs.weight", {8}, std::vector<float>(8, 2.0f), 1); },
       absl::StatusCode::kInvalidArgument, "rope_freqs.weight must hold 8 f32 values"},
      {"zero",
       [](GgufBuilder& g) {
         std::vector<float> v(8, 2.0f);
         v[3] = 0;
         g.Tensor("rope_freqs.weight", {8}, v, 0);
       },
       absl::StatusCode::kInvalidArgument, "rope_freqs.weight[3] = 0 must be a positive number"},
      {"dynamic",  // yarn is read since issue 47; a type nothing reads is refused by name
       [](GgufBuilder& g) {
         g.Str("qwen2.rope.scaling.type", "dynamic");
         g.F32("qwen2.rope.scaling.factor", 4.0f);
       },
       absl::StatusCode::kUnimplemented,
       "qwen2.rope.scaling.type 'dynamic' with qwen2.rope.scaling.factor 4 is not supported"},
      {"negative", [](GgufBuilder& g) { g.F32("qwen2.rope.scale_linear", -2.0f); }, absl::StatusCode::kInvalidArgument,
       "qwen2.rope.scale_linear must be a positive number (or 0: no scaling), got -2"},
  };
  for (const Case& k : cases) {
    GgufBuilder g;
    AddQwen2Metadata(c, g);
    g.U32("qwen2.rope.dimension_count", static_cast<uint32_t>(c.rotary_dim));
    k.add(g);
    AddQwen2Tensors(*ckpt_, 0, g);
    const std::string path = Write(g, k.name);
    absl::Status s = Checkpoint::Open(path).status();
    EXPECT_EQ(s.code(), k.code) << k.name << ": " << s;
    EXPECT_NE(s.message().find(path + ": " + k.message), std::string::npos) << k.name << ": " << s;
  }
}

// `orca model quantize` of a Llama 3 checkpoint writes the divisors as llama.cpp's converter does, and the file gives
// the checkpoint's logits; a linearly scaled one writes the two keys.
TEST_F(GgufRopeScalingTest, ExportedGgufCarriesTheCheckpointsScaling) {
  const ModelConfig& c = ckpt_->config();
  struct Case {
    std::string name;
    nlohmann::json rope_scaling;
  } cases[] = {{"llama3", kLlama3}, {"linear", {{"type", "linear"}, {"factor", 4.0}}}};
  for (const Case& k : cases) {
    const std::string hf = ScaledHf("export-" + k.name, k.rope_scaling);
    const std::string out = testing::TempDir() + "/rope-export-" + k.name + "-" + std::to_string(::getpid()) + ".gguf";
    convert::ExportOptions eo;
    ASSERT_TRUE(convert::ParseQuantMix("f32", &eo.mix));
    auto report = convert::QuantizeCheckpoint(hf, out, eo);
    ASSERT_TRUE(report.ok()) << k.name << ": " << report.status();
    auto g = formats::GgufFile::Open(out);
    ASSERT_TRUE(g.ok()) << g.status();
    const formats::TensorInfo* t = (*g)->Find("rope_freqs.weight");
    if (k.name == "llama3") {
      ASSERT_NE(t, nullptr);
      const std::vector<float> want = Llama3Divisors(c.rotary_dim, c.rope_theta, 8, 1, 4, 16);
      ASSERT_EQ(t->NumElements(), static_cast<int64_t>(want.size()));
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(reinterpret_cast<const float*>(t->data)[i], want[i], 1e-6 * want[i]) << i;
      EXPECT_FALSE((*g)->Has("llama.rope.scaling.type"));
    } else {
      EXPECT_EQ(t, nullptr);
      EXPECT_EQ(*(*g)->GetString("llama.rope.scaling.type"), "linear");
      EXPECT_EQ(*(*g)->GetFloat("llama.rope.scaling.factor"), 4.0);
    }
    EXPECT_LT(RelDiff(Logits(hf), Logits(out)), 1e-4) << k.name;
    EXPECT_GT(RelDiff(Logits(HfCheckpoint()), Logits(out)), 1e-2) << k.name;
  }
}

// `orca model synth --preset llama-3.x` models have Llama 3's scaling, as the real ones: config.json's `rope_scaling`,
// and in a GGUF the divisors, so that a synthetic file exercises what a real Llama 3.x file does.
TEST_F(GgufRopeScalingTest, SyntheticLlama3ModelCarriesItsScalingInBothFormats) {
  SyntheticModelOptions so = testing::SmallLlama(DType::kF32);
  so.rope_theta = 500000;
  so.rope_scaling.type = RopeScaling::Type::kLlama3;
  so.rope_scaling.factor = 32;
  const std::string dir = testing::TempDir() + "/rope-synth-" + std::to_string(::getpid());
  ASSERT_TRUE(WriteSyntheticCheckpoint(so, dir).ok());
  auto hf = Checkpoint::Open(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  const RopeScaling& rs = (*hf)->config().rope_scaling;
  EXPECT_EQ(rs.type, RopeScaling::Type::kLlama3);
  EXPECT_EQ(rs.factor, 32);
  EXPECT_EQ(rs.low_freq_factor, 1);
  EXPECT_EQ(rs.high_freq_factor, 4);
  EXPECT_EQ(rs.original_max_position, 8192);
  const std::string gguf = dir + ".gguf";
  convert::ExportOptions eo;
  ASSERT_TRUE(convert::ParseQuantMix("f32", &eo.mix));
  auto report = convert::WriteSyntheticGguf(so, "", "", gguf, eo);
  ASSERT_TRUE(report.ok()) << report.status();
  auto g = Checkpoint::Open(gguf);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->config().rope_freq_factors, Llama3Divisors(16, 500000, 32, 1, 4, 8192));
  EXPECT_LT(RelDiff(Logits(dir), Logits(gguf)), 1e-4);
}

// A tokenizer.json whose Split is o200k's (gpt-oss, Phi-4-mini) or Tekken's (Ministral) is exported under the
// pre-tokenizer name llama.cpp knows it by, not the Llama 3 one its \p{N}{1,3} resembles, and the GGUF file
// encodes as the tokenizer.json does (tokenizer_parity_test checks both against Hugging Face's tokenizers).
TEST(GgufExportTest, KnownSplitsAreNamedAsLlamaCppNamesThem) {
  for (const auto& [regex, want] : {std::pair{text::kGpt4oPattern, "gpt-4o"}, std::pair{text::kTekkenPattern, "tekken"},
                                    std::pair{text::kLlama3Pattern, "llama-bpe"}}) {
    auto files = text::MakeSyntheticByteLevelTokenizer(512);
    ASSERT_TRUE(files.ok()) << files.status();
    nlohmann::json tj = nlohmann::json::parse(files->tokenizer_json);
    tj["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", std::string(regex)}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
    SyntheticModelOptions o = testing::SmallLlama();
    o.vocab_size = 512;
    const std::string path = testing::TempDir() + "/split-" + want + ".gguf";
    convert::ExportOptions eo;
    ASSERT_TRUE(convert::ParseQuantMix("f32", &eo.mix));
    auto report = convert::WriteSyntheticGguf(o, tj.dump(), files->tokenizer_config_json, path, eo);
    ASSERT_TRUE(report.ok()) << report.status();
    auto gguf = formats::GgufFile::Open(path);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    EXPECT_EQ(*(*gguf)->GetString("tokenizer.ggml.pre"), want);
    auto from_gguf = text::Tokenizer::Load(path);
    ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
    auto from_json = text::Tokenizer::FromJson(tj.dump(), files->tokenizer_config_json);
    ASSERT_TRUE(from_json.ok()) << from_json.status();
    for (const std::string text : {"HelloWorld don't DON'T 1234567", "ÉcoleNormale x\n\n  y/\r\nz", "naïveCAFÉ's"})
      EXPECT_EQ((*from_gguf)->Encode(text, false), (*from_json)->Encode(text, false)) << want << ": " << text;
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace orca::engine
