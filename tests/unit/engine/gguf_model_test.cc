// GGUF checkpoints with F16 and BF16 tensors: a synthetic HF model re-encoded
// as GGUF (qwen2 architecture: rotate-half RoPE like HF, no permuted Q/K)
// gives the same logits as the original, within the rounding of the dtype.

#include <cstring>
#include <fstream>

#include "core/common/mapped_file.h"
#include "core/engine/engine.h"
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

TEST_P(GgufModelTest, HalfPrecisionGgufMatchesTheCheckpointItWasMadeFrom) {
  SyntheticModelOptions so = testing::SmallLlama(DType::kF32);
  so.tie_word_embeddings = false;
  const std::string hf = testing::SyntheticModel(so);
  auto ckpt = Checkpoint::Open(hf);
  ASSERT_TRUE(ckpt.ok());
  const ModelConfig& c = (*ckpt)->config();
  GgufBuilder g;
  g.Str("general.architecture", "qwen2");
  g.U32("qwen2.embedding_length", c.hidden_size);
  g.U32("qwen2.block_count", c.num_layers);
  g.U32("qwen2.attention.head_count", c.num_heads);
  g.U32("qwen2.attention.head_count_kv", c.num_kv_heads);
  g.U32("qwen2.feed_forward_length", c.intermediate_size);
  g.U32("qwen2.context_length", c.max_position);
  g.F32("qwen2.attention.layer_norm_rms_epsilon", c.norm_eps);
  g.F32("qwen2.rope.freq_base", static_cast<float>(c.rope_theta));
  const uint32_t type = GetParam();
  const char* hf_to_gguf[][2] = {
      {"self_attn.q_proj", "attn_q"},      {"self_attn.k_proj", "attn_k"},   {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"}, {"mlp.gate_proj", "ffn_gate"},    {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},       {"input_layernorm", "attn_norm"}, {"post_attention_layernorm", "ffn_norm"}};
  for (const std::string& name : (*ckpt)->tensors().Names()) {
    const formats::TensorInfo* t = (*ckpt)->tensors().Find(name);
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

}  // namespace
}  // namespace orca::engine
