#include "services/common/sampling_proto.h"

#include <algorithm>

namespace orca::services {

void StructuredFromProto(const v1::StructuredOutput& proto, StructuredOutputSpec* spec) {
  using Kind = StructuredOutputSpec::Kind;
  switch (proto.kind()) {
    case v1::StructuredOutput::KIND_JSON_OBJECT:
      spec->kind = Kind::kJsonObject;
      break;
    case v1::StructuredOutput::KIND_JSON_SCHEMA:
      spec->kind = Kind::kJsonSchema;
      break;
    case v1::StructuredOutput::KIND_REGEX:
      spec->kind = Kind::kRegex;
      break;
    case v1::StructuredOutput::KIND_CHOICE:
      spec->kind = Kind::kChoice;
      break;
    case v1::StructuredOutput::KIND_TOOL_CALLS:
      spec->kind = Kind::kToolCalls;
      break;
    default:
      spec->kind = Kind::kNone;
      return;
  }
  spec->schema = proto.schema();
  spec->regex = proto.regex();
  spec->choices.assign(proto.choices().begin(), proto.choices().end());
  spec->end_token_ids.assign(proto.end_token_ids().begin(), proto.end_token_ids().end());
  spec->calls_begin = proto.calls_begin();
  spec->calls_separator = proto.calls_separator();
  spec->calls_end = proto.calls_end();
  spec->max_calls = proto.max_calls();
}

void StructuredToProto(const StructuredOutputSpec& spec, v1::StructuredOutput* proto) {
  using Kind = StructuredOutputSpec::Kind;
  switch (spec.kind) {
    case Kind::kJsonObject:
      proto->set_kind(v1::StructuredOutput::KIND_JSON_OBJECT);
      break;
    case Kind::kJsonSchema:
      proto->set_kind(v1::StructuredOutput::KIND_JSON_SCHEMA);
      break;
    case Kind::kRegex:
      proto->set_kind(v1::StructuredOutput::KIND_REGEX);
      break;
    case Kind::kChoice:
      proto->set_kind(v1::StructuredOutput::KIND_CHOICE);
      break;
    case Kind::kToolCalls:
      proto->set_kind(v1::StructuredOutput::KIND_TOOL_CALLS);
      break;
    case Kind::kNone:
      proto->set_kind(v1::StructuredOutput::KIND_UNSPECIFIED);
      break;
  }
  proto->set_schema(spec.schema);
  proto->set_regex(spec.regex);
  for (const std::string& c : spec.choices) proto->add_choices(c);
  for (int32_t id : spec.end_token_ids) proto->add_end_token_ids(id);
  proto->set_calls_begin(spec.calls_begin);
  proto->set_calls_separator(spec.calls_separator);
  proto->set_calls_end(spec.calls_end);
  proto->set_max_calls(spec.max_calls);
}

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
  if (proto.has_structured()) StructuredFromProto(proto.structured(), &params.structured);
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
  if (params.structured.enabled()) StructuredToProto(params.structured, proto->mutable_structured());
}

}  // namespace orca::services
