#pragma once
// Test helpers for the engine: synthetic checkpoints in a temp directory and
// a naive reference forward pass written plainly (no KV cache, full
// recompute, float64 accumulation) straight from the checkpoint's tensors.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/dtype.h"
#include "core/convert/gguf_export.h"
#include "core/engine/checkpoint.h"
#include "core/engine/step_records.h"
#include "core/engine/synthetic_checkpoint.h"
#include "gtest/gtest.h"

namespace orca::engine::testing {

inline std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : ::testing::TempDir();
}

/// A sequence's first step: its whole prompt, sampled at the end.
inline StepSequence NewSeq(uint64_t id, std::vector<int32_t> prompt, int32_t kv_reservation_slots = 48) {
  SequenceSetup setup;
  setup.kv_reservation_slots = kv_reservation_slots;
  setup.prompt_token_ids = prompt;
  return {id, std::move(prompt), 0, true, setup};
}

/// Every logit within `tolerance` (1e-3 unless given) of the standard deviation of the logits it is compared with.
inline void ExpectLogitsClose(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                              double tolerance = 1e-3) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double mean = 0, var = 0, worst = 0;
  for (float w : want) mean += w;
  mean /= want.size();
  for (float w : want) var += (w - mean) * (w - mean);
  const double tol = tolerance * std::sqrt(var / want.size());
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
  EXPECT_LE(worst, tol) << what << ": max |logit diff| " << worst;
}

inline std::string SharedModelsDir() {
  const char* s = std::getenv("ORCA_SHARED_DIR");
  return std::string(s ? s : "../shared") + "/models";
}

/// A small synthetic model written once per process and options.
inline std::string SyntheticModel(const SyntheticModelOptions& o) {
  static std::map<std::string, std::string> cache;
  const std::string key =
      absl::StrCat(ModelArchName(o.arch), "-h", o.hidden_size, "-l", o.num_layers, "-a", o.num_heads, "-kv",
                   o.num_kv_heads, "-v", o.vocab_size, "-", DTypeName(o.dtype), "-s", o.seed, "-t",
                   o.tie_word_embeddings, "-b", o.attention_bias, "-f", o.intermediate_size, "-d", o.head_dim,
                   "-w", o.sliding_window, "-p", o.sliding_window_pattern, "-r", o.rope_theta, "-rl", o.rope_theta_local,
                   "-pr", o.partial_rotary_factor, "-rs", static_cast<int>(o.rope_scaling.type));
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const std::string dir = absl::StrCat(TempDir(), "/orca-synth-", ::getpid(), "-", key);
  absl::Status s = WriteSyntheticCheckpoint(o, dir);
  EXPECT_TRUE(s.ok()) << s;
  cache[key] = dir;
  return dir;
}

/// A checkpoint exported as GGUF in a quantization mix ("q8_0", "q4_k_m", ...), once per process.
inline std::string QuantizedModel(const std::string& src, const std::string& mix) {
  static std::map<std::string, std::string> cache;
  const std::string key = src + "|" + mix;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const std::string path = absl::StrCat(src, "-", mix, ".gguf");
  convert::ExportOptions o;
  EXPECT_TRUE(convert::ParseQuantMix(mix, &o.mix)) << mix;
  auto report = convert::QuantizeCheckpoint(src, path, o);
  EXPECT_TRUE(report.ok()) << report.status();
  cache[key] = path;
  return path;
}

inline SyntheticModelOptions SmallLlama(DType dtype = DType::kF32) {
  SyntheticModelOptions o;
  o.arch = ModelArch::kLlama;
  o.hidden_size = 64;
  o.num_layers = 3;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.intermediate_size = 96;
  o.vocab_size = 300;
  o.max_position = 256;
  o.dtype = dtype;
  o.seed = 7;
  return o;
}

/// Gemma 3-shaped: q/k norms, sandwich norms, GeGLU, a sliding window of 8 on two of every three layers with
/// their own RoPE base, the global ones' RoPE scaled linearly.
inline SyntheticModelOptions SmallGemma3(DType dtype = DType::kF32) {
  SyntheticModelOptions o = SmallLlama(dtype);
  o.arch = ModelArch::kGemma3;
  o.head_dim = 32;
  o.sliding_window = 8;
  o.sliding_window_pattern = 3;
  o.rope_theta = 1e6;
  o.rope_theta_local = 1e4;
  o.rope_scaling.type = RopeScaling::Type::kLinear;
  o.rope_scaling.factor = 8;
  o.seed = 17;
  return o;
}

/// Gemma 2-shaped: soft-capped attention scores and logits, alternating local (window 8) and global layers.
inline SyntheticModelOptions SmallGemma2(DType dtype = DType::kF32) {
  SyntheticModelOptions o = SmallLlama(dtype);
  o.arch = ModelArch::kGemma2;
  o.sliding_window = 8;
  o.tie_word_embeddings = false;  // a tied random Gemma repeats its last token whatever the temperature
  o.seed = 19;
  return o;
}

/// Mistral-shaped (v0.1): Llama with a sliding window of 8 on every layer.
inline SyntheticModelOptions SmallMistral(DType dtype = DType::kF32) {
  SyntheticModelOptions o = SmallLlama(dtype);
  o.sliding_window = 8;
  o.seed = 41;
  return o;
}

/// Granite-shaped: Llama with Granite 3's embedding, attention, residual and logit multipliers.
inline SyntheticModelOptions SmallGranite(DType dtype = DType::kF32) {
  SyntheticModelOptions o = SmallLlama(dtype);
  o.arch = ModelArch::kGranite;
  o.seed = 23;
  return o;
}

/// OLMo 2-shaped: no pre-norms, post-norms, q/k norms over the whole projections.
inline SyntheticModelOptions SmallOlmo2(DType dtype = DType::kF32) {
  SyntheticModelOptions o = SmallLlama(dtype);
  o.arch = ModelArch::kOlmo2;
  o.seed = 29;
  return o;
}

/// StarCoder2-shaped: LayerNorm and biases everywhere, plain GELU MLP, RoPE, a window of 8 on every layer.
inline SyntheticModelOptions SmallStarcoder2(DType dtype = DType::kF32) {
  SyntheticModelOptions o = SmallLlama(dtype);
  o.arch = ModelArch::kStarcoder2;
  o.sliding_window = 8;
  o.seed = 31;
  return o;
}

/// Phi-3-shaped: fused qkv and gate_up, RoPE on half of each head, LongRoPE (its long factors: a context of 256
/// over an original one of 64).
inline SyntheticModelOptions SmallPhi3(DType dtype = DType::kF32) {
  SyntheticModelOptions o = SmallLlama(dtype);
  o.arch = ModelArch::kPhi3;
  o.partial_rotary_factor = 0.5;
  o.rope_scaling.type = RopeScaling::Type::kLongRope;
  o.rope_scaling.original_max_position = 64;
  o.seed = 37;
  return o;
}

/// Qwen3-shaped: heads × head_dim (4 × 32) wider than the hidden size (64), q/k norms.
inline SyntheticModelOptions SmallQwen3(DType dtype = DType::kF32) {
  SyntheticModelOptions o = SmallLlama(dtype);
  o.arch = ModelArch::kQwen3;
  o.head_dim = 32;
  o.seed = 13;
  return o;
}

/// Mistral 3-shaped (Ministral 3): heads × head_dim (4 × 32) wider than the hidden size, YaRN over an original
/// context of 16 with magnitude 1, and the queries' temperature stepping every 16 positions (a scale of 0.5, five
/// times Ministral 3's, so that each step shows).
inline SyntheticModelOptions SmallMistral3(DType dtype = DType::kF32) {
  SyntheticModelOptions o = SmallLlama(dtype);
  o.arch = ModelArch::kMistral3;
  o.head_dim = 32;
  o.rope_theta = 1e6;
  o.rope_scaling.type = RopeScaling::Type::kYarn;
  o.rope_scaling.factor = 4;
  o.rope_scaling.original_max_position = 16;
  o.attn_temperature_scale = 0.5f;
  o.seed = 43;
  return o;
}

inline SyntheticModelOptions SmallGpt2(DType dtype = DType::kF32) {
  SyntheticModelOptions o;
  o.arch = ModelArch::kGpt2;
  o.hidden_size = 64;
  o.num_layers = 3;
  o.num_heads = 4;
  o.vocab_size = 300;
  o.max_position = 256;
  o.dtype = dtype;
  o.seed = 11;
  return o;
}

/// Full-recompute forward of one token sequence; returns logits of every position.
class ReferenceModel {
 public:
  explicit ReferenceModel(const Checkpoint& ckpt) : ckpt_(ckpt), c_(ckpt.config()) {}

  std::vector<std::vector<double>> Logits(const std::vector<int32_t>& tokens) const {
    const int64_t T = static_cast<int64_t>(tokens.size()), H = c_.hidden_size, D = c_.head_dim;
    const bool gpt2 = c_.arch == ModelArch::kGpt2;
    std::vector<std::vector<double>> x(T, std::vector<double>(H));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < H; ++j) {
        x[t][j] = At(TensorRole::kTokenEmbedding, 0, tokens[t], j);
        if (gpt2) x[t][j] += At(TensorRole::kPositionEmbedding, 0, t, j);
        if (c_.embedding_scale > 0) x[t][j] *= c_.embedding_scale;
      }
    const bool gemma = c_.arch == ModelArch::kGemma2 || c_.arch == ModelArch::kGemma3;
    const bool olmo2 = c_.arch == ModelArch::kOlmo2, starcoder2 = c_.arch == ModelArch::kStarcoder2;
    const bool post_norms = gemma || olmo2, plain_mlp = gpt2 || starcoder2, phi3 = c_.arch == ModelArch::kPhi3;
    // Granite's multiplier of every block's output.
    const double residual = c_.residual_scale > 0 ? c_.residual_scale : 1.0;
    for (int l = 0; l < c_.num_layers; ++l) {
      auto h = olmo2 ? x : Norm(x, TensorRole::kAttnNorm, TensorRole::kAttnNormBias, l);
      const int64_t Q = static_cast<int64_t>(c_.num_heads) * D, KV = static_cast<int64_t>(c_.num_kv_heads) * D;
      std::vector<std::vector<double>> q, k, v;
      if (gpt2 || phi3) {  // one [Q | K | V] tensor
        auto qkv = Linear(h, TensorRole::kQkv, TensorRole::kQkvBias, l, Q + 2 * KV, H, gpt2);
        for (auto& row : qkv) {
          q.emplace_back(row.begin(), row.begin() + Q);
          k.emplace_back(row.begin() + Q, row.begin() + Q + KV);
          v.emplace_back(row.begin() + Q + KV, row.end());
        }
      }
      if (!gpt2) {
        if (!phi3) {
          q = Linear(h, TensorRole::kQ, c_.attention_bias ? TensorRole::kQBias : TensorRole::kQkvBias, l, Q, H,
                     c_.attention_bias);
          k = Linear(h, TensorRole::kK, c_.attention_bias ? TensorRole::kKBias : TensorRole::kQkvBias, l, KV, H,
                     c_.attention_bias);
          v = Linear(h, TensorRole::kV, c_.attention_bias ? TensorRole::kVBias : TensorRole::kQkvBias, l, KV, H,
                     c_.attention_bias);
        }
        for (int64_t t = 0; t < T && c_.qk_norm; ++t) {
          // OLMo 2's q/k norms span the whole projection: one "head" of all the values.
          HeadNorm(q[t], olmo2 ? 1 : c_.num_heads, TensorRole::kQNorm, l, olmo2 ? Q : D);
          HeadNorm(k[t], olmo2 ? 1 : c_.num_kv_heads, TensorRole::kKNorm, l, olmo2 ? KV : D);
        }
        // Local layers with a RoPE base of their own use it unscaled.
        const bool own_rope = c_.IsLocalLayer(l) && c_.rope_theta_local > 0;
        for (int64_t t = 0; t < T; ++t) {
          Rope(q[t], c_.num_heads, t, own_rope);
          Rope(k[t], c_.num_kv_heads, t, own_rope);
          // Llama 4's temperature of the rotated queries (Mistral 3), a step every attn_temperature_floor positions.
          if (c_.attn_temperature_scale != 0)
            for (double& e : q[t]) e *= 1 + c_.attn_temperature_scale * std::log(1 + t / c_.attn_temperature_floor);
        }
      }
      const int64_t group = c_.num_heads / c_.num_kv_heads;
      std::vector<std::vector<double>> attn(T, std::vector<double>(Q));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t hq = 0; hq < c_.num_heads; ++hq) {
          const int64_t hk = hq / group;
          std::vector<double> s(t + 1);
          double mx = -1e300;
          // A local layer's query sees the window's last positions only.
          const int64_t lo = c_.IsLocalLayer(l) ? std::max<int64_t>(0, t + 1 - c_.sliding_window) : 0;
          const double scale = c_.attention_scale > 0 ? c_.attention_scale : 1 / std::sqrt(static_cast<double>(D));
          for (int64_t j = lo; j <= t; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += q[t][hq * D + d] * k[j][hk * D + d];
            s[j] = dot * scale;
            if (c_.attn_softcap > 0) s[j] = c_.attn_softcap * std::tanh(s[j] / c_.attn_softcap);
            mx = std::max(mx, s[j]);
          }
          double sum = 0;
          for (int64_t j = lo; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
          for (int64_t j = lo; j <= t; ++j)
            for (int64_t d = 0; d < D; ++d) attn[t][hq * D + d] += s[j] / sum * v[j][hk * D + d];
        }
      auto o = Linear(attn, TensorRole::kO, TensorRole::kOBias, l, H, Q, gpt2 || (starcoder2 && c_.attention_bias));
      if (post_norms) o = Norm(o, TensorRole::kPostAttnNorm, TensorRole::kFfnNormBias, l, /*rms=*/true);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < H; ++j) x[t][j] += residual * o[t][j];
      h = olmo2 ? x : Norm(x, TensorRole::kFfnNorm, TensorRole::kFfnNormBias, l);
      std::vector<std::vector<double>> a;
      if (plain_mlp) {
        a = Linear(h, TensorRole::kUp, TensorRole::kUpBias, l, c_.intermediate_size, H, gpt2 || c_.mlp_bias);
        for (auto& row : a)
          for (auto& e : row) e = 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e)));
      } else {
        std::vector<std::vector<double>> g;
        if (phi3) {  // one [gate | up] tensor
          const int64_t F = c_.intermediate_size;
          for (auto& row : Linear(h, TensorRole::kUp, TensorRole::kUpBias, l, 2 * F, H, false)) {
            g.emplace_back(row.begin(), row.begin() + F);
            a.emplace_back(row.begin() + F, row.end());
          }
        } else {
          g = Linear(h, TensorRole::kGate, TensorRole::kUpBias, l, c_.intermediate_size, H, false);
          a = Linear(h, TensorRole::kUp, TensorRole::kUpBias, l, c_.intermediate_size, H, false);
        }
        for (size_t t = 0; t < a.size(); ++t)
          for (size_t j = 0; j < a[t].size(); ++j) {
            const double e = g[t][j];
            a[t][j] *= gemma ? 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e)))
                             : e / (1 + std::exp(-e));
          }
      }
      auto d = Linear(a, TensorRole::kDown, TensorRole::kDownBias, l, H, c_.intermediate_size, gpt2 || c_.mlp_bias);
      if (post_norms) d = Norm(d, TensorRole::kPostFfnNorm, TensorRole::kFfnNormBias, l, /*rms=*/true);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < H; ++j) x[t][j] += residual * d[t][j];
    }
    auto hf = Norm(x, TensorRole::kFinalNorm, TensorRole::kFinalNormBias, 0);
    const TensorRole head = c_.tie_word_embeddings ? TensorRole::kTokenEmbedding : TensorRole::kLmHead;
    std::vector<std::vector<double>> logits(T, std::vector<double>(c_.vocab_size));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t vtok = 0; vtok < c_.vocab_size; ++vtok) {
        double s = 0;
        for (int64_t j = 0; j < H; ++j) s += hf[t][j] * At(head, 0, vtok, j);
        if (c_.logit_scale > 0) s /= c_.logit_scale;
        logits[t][vtok] = c_.final_softcap > 0 ? c_.final_softcap * std::tanh(s / c_.final_softcap) : s;
      }
    return logits;
  }

 private:
  // Element (row, col) of a role's tensor as stored (row-major).
  double At(TensorRole role, int layer, int64_t row, int64_t col) const {
    const auto key = std::make_pair(static_cast<int>(role), layer);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      const formats::TensorInfo* t = *ckpt_.Find(role, layer);
      Tensor f32{std::vector<float>(t->NumElements()), t->shape.back()};
      // Row by row: quantized types decode whole rows of blocks.
      const size_t row_bytes = DTypeRowBytes(t->dtype, f32.cols);
      for (int64_t r = 0; r < t->NumElements() / f32.cols; ++r)
        DequantizeRow(t->dtype, t->data + r * row_bytes, f32.values.data() + r * f32.cols, f32.cols);
      it = cache_.emplace(key, std::move(f32)).first;
    }
    return it->second.values[row * it->second.cols + col];
  }
  double Vec(TensorRole role, int layer, int64_t i) const { return At(role, layer, 0, i); }

  // y = x Wᵀ + b for a logical [n, k] weight (Conv1D tensors are stored [k, n]).
  std::vector<std::vector<double>> Linear(const std::vector<std::vector<double>>& x, TensorRole w, TensorRole b,
                                          int layer, int64_t n, int64_t k, bool bias = true) const {
    const bool tr = ckpt_.IsTransposed(w);
    std::vector<std::vector<double>> y(x.size(), std::vector<double>(n));
    for (size_t t = 0; t < x.size(); ++t)
      for (int64_t o = 0; o < n; ++o) {
        double s = bias ? Vec(b, layer, o) : 0.0;
        for (int64_t i = 0; i < k; ++i) s += x[t][i] * (tr ? At(w, layer, i, o) : At(w, layer, o, i));
        y[t][o] = s;
      }
    return y;
  }

  // The family's norm (LayerNorm with its bias for GPT-2 and StarCoder2), or RMSNorm when `rms`.
  std::vector<std::vector<double>> Norm(const std::vector<std::vector<double>>& x, TensorRole w, TensorRole b,
                                        int layer, bool rms = false) const {
    const int64_t H = c_.hidden_size;
    std::vector<std::vector<double>> y = x;
    for (auto& row : y) {
      if (!rms && (c_.arch == ModelArch::kGpt2 || c_.arch == ModelArch::kStarcoder2)) {
        double mean = 0, var = 0;
        for (double e : row) mean += e;
        mean /= H;
        for (double e : row) var += (e - mean) * (e - mean);
        var /= H;
        for (int64_t j = 0; j < H; ++j)
          row[j] = (row[j] - mean) / std::sqrt(var + c_.norm_eps) * Vec(w, layer, j) + Vec(b, layer, j);
      } else {
        double ss = 0;
        for (double e : row) ss += e * e;
        const double inv = 1 / std::sqrt(ss / H + c_.norm_eps);
        for (int64_t j = 0; j < H; ++j) row[j] = row[j] * inv * (Vec(w, layer, j) + c_.norm_weight_offset);
      }
    }
    return y;
  }

  // RMSNorm of each head's head_dim values with one shared weight (Qwen3's q_norm / k_norm).
  void HeadNorm(std::vector<double>& v, int heads, TensorRole w, int layer, int64_t D) const {
    for (int h = 0; h < heads; ++h) {
      double ss = 0;
      for (int64_t d = 0; d < D; ++d) ss += v[h * D + d] * v[h * D + d];
      const double inv = 1 / std::sqrt(ss / D + c_.norm_eps);
      for (int64_t d = 0; d < D; ++d) v[h * D + d] *= inv * (Vec(w, layer, d) + c_.norm_weight_offset);
    }
  }

  void Rope(std::vector<double>& v, int heads, int64_t pos, bool local_rope) const {
    const double theta = local_rope ? c_.rope_theta_local : c_.rope_theta;
    const int64_t D = c_.head_dim, half = c_.rotary_dim / 2;
    for (int h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        double f = std::pow(theta, -2.0 * i / c_.rotary_dim);
        if (c_.rope_scaling.type == RopeScaling::Type::kLinear && !local_rope) f /= c_.rope_scaling.factor;
        if (c_.rope_scaling.type == RopeScaling::Type::kYarn && !local_rope) f = YarnFrequency(f, i, theta);
        if (!c_.rope_freq_factors.empty()) f /= c_.rope_freq_factors[i];  // Llama 3's and LongRoPE's divisors
        const double a = pos * f;
        const int64_t i0 = c_.rope_style == kernels::RopeStyle::kNeox ? i : 2 * i;
        const int64_t i1 = c_.rope_style == kernels::RopeStyle::kNeox ? i + half : 2 * i + 1;
        // YaRN's and LongRoPE's factor multiplies cos and sin: the rotated dimensions only.
        const double x0 = v[h * D + i0], x1 = v[h * D + i1], m = c_.RopeAttentionFactor();
        v[h * D + i0] = (x0 * std::cos(a) - x1 * std::sin(a)) * m;
        v[h * D + i1] = (x1 * std::cos(a) + x0 * std::sin(a)) * m;
      }
  }

  // YaRN (Peng et al. 2023, §3.2 "NTK-by-parts"): frequency i divided by the factor where its wavelength spans
  // the original context fewer than beta_slow times, kept where more than beta_fast times, linearly mixed between
  // (over dimensions floored/ceiled to whole ones, as transformers and ggml do).
  double YarnFrequency(double f, int64_t i, double theta) const {
    const RopeScaling& s = c_.rope_scaling;
    auto dim_of = [&](double rotations) {
      return c_.rotary_dim * std::log(s.original_max_position / (rotations * 2 * M_PI)) / (2 * std::log(theta));
    };
    const double lo = std::max(0.0, std::floor(dim_of(s.beta_fast)));
    const double hi = std::min(c_.rotary_dim - 1.0, std::ceil(dim_of(s.beta_slow)));
    const double interpolated = std::clamp((i - lo) / std::max(hi - lo, 0.001), 0.0, 1.0);
    return f / s.factor * interpolated + f * (1 - interpolated);
  }

  struct Tensor {
    std::vector<float> values;
    int64_t cols;
  };
  const Checkpoint& ckpt_;
  const ModelConfig& c_;
  mutable std::map<std::pair<int, int>, Tensor> cache_;
};

}  // namespace orca::engine::testing
