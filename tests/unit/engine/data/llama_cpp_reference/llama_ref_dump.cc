// Reference outputs from llama.cpp for Orca's model-family tests: evaluates each prompt (token ids), then decodes
// greedily, printing JSON with the greedy ids, every step's argmax logit, and the first step's full logits.
// Built against llama.cpp (outside Orca's repository):
//   g++ -O2 -std=c++17 llama_ref_dump.cc -I$LLAMA/include -I$LLAMA/ggml/include -L$LLAMA/build/bin -lllama \
//       -Wl,-rpath,$LLAMA/build/bin -o llama_ref_dump
// Usage: llama_ref_dump MODEL.gguf N_PREDICT "ids,ids,..." ["ids,..." ...]
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  const int n_predict = std::atoi(argv[2]);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::printf("{\"model\": \"%s\", \"cases\": [\n", argv[1]);
  for (int a = 3; a < argc; ++a) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 4096;
    cp.n_batch = 4096;
    cp.n_ubatch = 4096;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = GGML_TYPE_F32;  // the default f16 cache would round keys and values
    cp.type_v = GGML_TYPE_F32;
    llama_context* ctx = llama_init_from_model(model, cp);
    std::vector<llama_token> prompt;
    std::stringstream ss(argv[a]);
    for (std::string tok; std::getline(ss, tok, ',');) prompt.push_back(std::atoi(tok.c_str()));
    std::vector<llama_token> out;
    std::vector<float> top;
    std::vector<float> first;
    llama_batch batch = llama_batch_get_one(prompt.data(), static_cast<int32_t>(prompt.size()));
    for (int step = 0; step < n_predict; ++step) {
      if (llama_decode(ctx, batch) != 0) return 1;
      const float* logits = llama_get_logits_ith(ctx, -1);
      if (step == 0) first.assign(logits, logits + n_vocab);
      int best = 0;
      for (int i = 1; i < n_vocab; ++i)
        if (logits[i] > logits[best]) best = i;
      out.push_back(best);
      top.push_back(logits[best]);
      batch = llama_batch_get_one(&out.back(), 1);
    }
    std::printf("  {\"prompt\": [");
    for (size_t i = 0; i < prompt.size(); ++i) std::printf("%s%d", i ? ", " : "", prompt[i]);
    std::printf("],\n   \"greedy\": [");
    for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? ", " : "", out[i]);
    std::printf("],\n   \"greedy_logits\": [");
    for (size_t i = 0; i < top.size(); ++i) std::printf("%s%.6g", i ? ", " : "", top[i]);
    std::printf("],\n   \"first_logits\": [");
    for (size_t i = 0; i < first.size(); ++i) std::printf("%s%.6g", i ? ", " : "", first[i]);
    std::printf("]}%s\n", a + 1 < argc ? "," : "");
    llama_free(ctx);
  }
  std::printf("]}\n");
  llama_model_free(model);
  return 0;
}
