// Gemma 2 (2B, 9B, 27B): the Gemma layer (gemma.h) without q/k norms; attention scores soft-capped at 50 and the
// final logits at 30 (cap · tanh(x / cap)); local (sliding-window, 4096) and global layers alternating, the first
// local; one RoPE base for both.
#include "core/engine/models/gemma.h"

namespace orca::engine {
namespace {

constexpr gemma::Variant kGemma2 = {
    .arch = ModelArch::kGemma2,
    .name = "gemma2",
    .hf_model_type = "gemma2",
    .hf_architecture = "Gemma2ForCausalLM",
    .hf_multimodal_model_type = "",
    .hf_multimodal_architecture = "",
    .hf_multimodal_prefixes = {"", ""},
    .pattern = 2,
    .qk_norm = false,
    .sliding_window = 4096,
    .attn_softcap = 50.0f,
    .final_softcap = 30.0f,
    .rope_theta_local = 0,
};

}  // namespace

extern const ModelFamily kGemma2Family;
const ModelFamily kGemma2Family = gemma::MakeFamily<kGemma2>();

}  // namespace orca::engine
