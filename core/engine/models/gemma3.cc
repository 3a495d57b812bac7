// Gemma 3 (text; 270M-27B): the Gemma layer (gemma.h) with q/k norms and no soft-capping; five local
// (sliding-window) layers to one global, the local ones with their own unscaled RoPE base (10000), the global one
// with the file's base and its linear scaling. From text-only checkpoints (model_type gemma3_text) and the language
// model of the multimodal ones (model_type gemma3: the config under text_config, the vision tower ignored).
#include "core/engine/models/gemma.h"

namespace orca::engine {
namespace {

constexpr gemma::Variant kGemma3 = {
    .arch = ModelArch::kGemma3,
    .name = "gemma3",
    .hf_model_type = "gemma3_text",
    .hf_architecture = "Gemma3ForCausalLM",
    .hf_multimodal_model_type = "gemma3",
    .hf_multimodal_architecture = "Gemma3ForConditionalGeneration",
    // transformers before 4.52 wrote language_model.model.*, later ones model.language_model.*
    .hf_multimodal_prefixes = {"language_model.model.", "model.language_model."},
    .pattern = 6,
    .qk_norm = true,
    .sliding_window = 0,  // a GGUF file without the key has none (llama.cpp)
    .attn_softcap = 0,
    .final_softcap = 0,
    .rope_theta_local = 10000.0,
};

}  // namespace

extern const ModelFamily kGemma3Family;
const ModelFamily kGemma3Family = gemma::MakeFamily<kGemma3>();

}  // namespace orca::engine
