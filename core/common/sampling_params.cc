#include "core/common/sampling_params.h"

#include "absl/strings/str_cat.h"

namespace orca {

std::string SamplingParams::Validate() const {
  const std::pair<const RealLimit*, float> reals[] = {
      {&limits::kTemperature, temperature},
      {&limits::kTopP, top_p},
      {&limits::kMinP, min_p},
      {&limits::kRepetitionPenalty, repetition_penalty},
      {&limits::kPresencePenalty, presence_penalty},
      {&limits::kFrequencyPenalty, frequency_penalty},
  };
  for (const auto& [limit, value] : reals)
    if (std::string error = limit->Check(value); !error.empty()) return error;
  if (std::string error = limits::kTopK.Check(top_k); !error.empty()) return error;
  if (std::string error = limits::kTopLogprobs.Check(top_logprobs); !error.empty()) return error;
  if (prompt_logprobs != -1) {  // -1: none
    if (std::string error = limits::kPromptLogprobs.Check(prompt_logprobs); !error.empty()) return error;
  }
  return ValidateLogitBias();
}

std::string SamplingParams::ValidateLogitBias() const {
  if (std::string error = limits::kLogitBiasEntries.Check(static_cast<int64_t>(logit_bias.size())); !error.empty())
    return error;
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto& [id, bias] = logit_bias[i];
    if (id < 0) return absl::StrCat("'logit_bias' keys must be token ids (non-negative integers), got '", id, "'");
    if (i > 0 && id <= logit_bias[i - 1].first) return "'logit_bias' token ids must be sorted and unique";
    if (!limits::kLogitBias.Contains(bias)) return LogitBiasValueError(id, bias);
  }
  return "";
}

}  // namespace orca
