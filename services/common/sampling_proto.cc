#include "services/common/sampling_proto.h"

#include <algorithm>

namespace orca::services {

SamplingParams SamplingFromProto(const v1::SamplingParams& proto) {
  SamplingParams params;
  params.temperature = proto.temperature();
  params.top_k = proto.top_k();
  params.top_p = proto.top_p() == 0.0f ? 1.0f : proto.top_p();
  params.min_p = proto.min_p();
  if (proto.has_seed()) params.seed = proto.seed();
  params.repetition_penalty = proto.repetition_penalty() == 0.0f ? 1.0f : proto.repetition_penalty();
  params.presence_penalty = proto.presence_penalty();
  params.frequency_penalty = proto.frequency_penalty();
  params.top_logprobs = proto.top_logprobs();
  params.logprobs = proto.logprobs() || proto.top_logprobs() > 0;
  params.logit_bias.assign(proto.logit_bias().begin(), proto.logit_bias().end());
  std::sort(params.logit_bias.begin(), params.logit_bias.end());  // a proto map has no order
  params.prompt_logprobs = proto.has_prompt_logprobs() ? proto.prompt_logprobs() : -1;
  return params;
}

void SamplingToProto(const SamplingParams& params, v1::SamplingParams* proto) {
  proto->set_temperature(params.temperature);
  proto->set_top_k(params.top_k);
  proto->set_top_p(params.top_p);
  proto->set_min_p(params.min_p);
  if (params.seed.has_value()) proto->set_seed(*params.seed);
  proto->set_repetition_penalty(params.repetition_penalty);
  proto->set_presence_penalty(params.presence_penalty);
  proto->set_frequency_penalty(params.frequency_penalty);
  proto->set_top_logprobs(params.top_logprobs);
  proto->set_logprobs(params.logprobs);
  for (const auto& [id, bias] : params.logit_bias) (*proto->mutable_logit_bias())[id] = bias;
  if (params.WantsPromptLogprobs()) proto->set_prompt_logprobs(params.prompt_logprobs);
}

}  // namespace orca::services
