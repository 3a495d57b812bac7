#include "services/common/control_convert.h"

#include <algorithm>

namespace orca::services {
namespace {

/// The throwaway sequence that computes `num_padding_tokens` of prompt padding for
/// `request_id` (the FasterTransformer baseline): pad token 0 from position 0, nothing
/// sampled, its KV reserved until the request is released.
engine::StepSequence PaddingSequence(uint64_t request_id, int32_t num_padding_tokens) {
  engine::StepSequence s;
  s.request_id = engine::PaddingSequenceId(request_id);
  s.token_ids.assign(static_cast<size_t>(num_padding_tokens), 0);
  s.start_position = 0;
  s.sample = false;
  s.new_request = engine::SequenceSetup{num_padding_tokens, {}, {}, {}, 0};
  return s;
}

}  // namespace

engine::StepInput PlanToStepInput(const sched::IterationPlan& plan) {
  engine::StepInput in;
  in.iteration_id = plan.iteration_id;
  in.released_ids.assign(plan.released_request_ids.begin(), plan.released_request_ids.end());
  in.seqs.reserve(plan.requests.size());
  for (const sched::ScheduledRequest& r : plan.requests) {
    engine::StepSequence s;
    s.request_id = r.request_id;
    s.token_ids = r.input_token_ids;
    s.start_position = r.start_position;
    s.sample = r.sample;
    s.block_ids = r.new_block_ids;
    if (r.new_request.has_value()) {
      const sched::NewRequestData& n = *r.new_request;
      s.new_request = engine::SequenceSetup{n.kv_reservation_slots, n.sampling, n.prompt_token_ids, n.output_token_ids,
                                            n.kv_block_size};
    }
    in.seqs.push_back(std::move(s));
    if (r.num_padding_tokens > 0) in.seqs.push_back(PaddingSequence(r.request_id, r.num_padding_tokens));
  }
  return in;
}

void PlanToControlMessage(const sched::IterationPlan& plan, v1::ControlMessage* msg) {
  msg->set_iteration_id(plan.iteration_id);
  for (sched::RequestId id : plan.released_request_ids) msg->add_released_request_ids(id);
  for (const sched::ScheduledRequest& r : plan.requests) {
    v1::ScheduledRequest* s = msg->add_requests();
    s->set_request_id(r.request_id);
    s->set_phase(r.phase == sched::Phase::kInitiation ? v1::PHASE_INITIATION : v1::PHASE_INCREMENT);
    s->mutable_token_ids()->Add(r.input_token_ids.begin(), r.input_token_ids.end());
    s->set_start_position(r.start_position);
    s->set_sample(r.sample);
    s->mutable_block_ids()->Add(r.new_block_ids.begin(), r.new_block_ids.end());
    s->set_num_padding_tokens(r.num_padding_tokens);
    if (r.new_request.has_value()) {
      v1::NewRequestInfo* n = s->mutable_new_request();
      n->set_kv_reservation_slots(r.new_request->kv_reservation_slots);
      SamplingToProto(r.new_request->sampling, n->mutable_sampling());
      n->mutable_prompt_token_ids()->Add(r.new_request->prompt_token_ids.begin(),
                                         r.new_request->prompt_token_ids.end());
      n->mutable_output_token_ids()->Add(r.new_request->output_token_ids.begin(),
                                         r.new_request->output_token_ids.end());
      n->set_kv_block_size(r.new_request->kv_block_size);
    }
  }
}

engine::StepInput ControlMessageToStepInput(const v1::ControlMessage& msg) {
  engine::StepInput in;
  in.iteration_id = msg.iteration_id();
  in.released_ids.assign(msg.released_request_ids().begin(), msg.released_request_ids().end());
  in.seqs.reserve(msg.requests_size());
  for (const v1::ScheduledRequest& r : msg.requests()) {
    engine::StepSequence s;
    s.request_id = r.request_id();
    s.token_ids.assign(r.token_ids().begin(), r.token_ids().end());
    s.start_position = r.start_position();
    s.sample = r.sample();
    s.block_ids.assign(r.block_ids().begin(), r.block_ids().end());
    if (r.has_new_request()) {
      const v1::NewRequestInfo& n = r.new_request();
      s.new_request = engine::SequenceSetup{
          n.kv_reservation_slots(), SamplingFromProto(n.sampling()),
          std::vector<int32_t>(n.prompt_token_ids().begin(), n.prompt_token_ids().end()),
          std::vector<int32_t>(n.output_token_ids().begin(), n.output_token_ids().end()), n.kv_block_size()};
    }
    in.seqs.push_back(std::move(s));
    if (r.num_padding_tokens() > 0) in.seqs.push_back(PaddingSequence(r.request_id(), r.num_padding_tokens()));
  }
  return in;
}

std::vector<sched::RequestResult> SamplesToResults(const std::vector<engine::SequenceSample>& tokens) {
  std::vector<sched::RequestResult> out;
  out.reserve(tokens.size());
  for (const engine::SequenceSample& t : tokens) {
    sched::RequestResult r;
    r.request_id = t.request_id;
    r.token.token_id = t.sample.token_id;
    r.token.logprob = t.sample.logprob;
    for (const engine::TokenLogprob& lp : t.sample.top_logprobs)
      r.token.top_logprobs.push_back({lp.token_id, lp.logprob});
    out.push_back(std::move(r));
  }
  return out;
}

void SamplesToProto(const std::vector<engine::SequenceSample>& tokens, v1::IterationResult* result) {
  for (const engine::SequenceSample& t : tokens) {
    v1::RequestResult* r = result->add_results();
    r->set_request_id(t.request_id);
    v1::SampledToken* s = r->mutable_token();
    s->set_token_id(t.sample.token_id);
    s->set_logprob(t.sample.logprob);
    for (const engine::TokenLogprob& lp : t.sample.top_logprobs) {
      v1::TopLogprob* top = s->add_top_logprobs();
      top->set_token_id(lp.token_id);
      top->set_logprob(lp.logprob);
    }
  }
}

namespace {

sched::SampledToken ToSched(const engine::SampleResult& s) {
  sched::SampledToken t;
  t.token_id = s.token_id;
  t.logprob = s.logprob;
  t.rank = s.rank;
  for (const engine::TokenLogprob& lp : s.top_logprobs) t.top_logprobs.push_back({lp.token_id, lp.logprob});
  return t;
}

void ToProto(const engine::SampleResult& s, v1::SampledToken* out) {
  out->set_token_id(s.token_id);
  out->set_logprob(s.logprob);
  out->set_rank(s.rank);
  for (const engine::TokenLogprob& lp : s.top_logprobs) {
    v1::TopLogprob* top = out->add_top_logprobs();
    top->set_token_id(lp.token_id);
    top->set_logprob(lp.logprob);
  }
}

sched::SampledToken FromProto(const v1::SampledToken& s) {
  sched::SampledToken t;
  t.token_id = s.token_id();
  t.logprob = s.logprob();
  t.rank = s.rank();
  for (const v1::TopLogprob& lp : s.top_logprobs()) t.top_logprobs.push_back({lp.token_id(), lp.logprob()});
  return t;
}

}  // namespace

void AddPromptLogprobs(const std::vector<engine::PromptLogprobs>& records, std::vector<sched::RequestResult>* results) {
  for (const engine::PromptLogprobs& p : records) {
    auto it = std::find_if(results->begin(), results->end(),
                           [&](const sched::RequestResult& r) { return r.request_id == p.request_id; });
    if (it == results->end()) {
      results->emplace_back();
      it = results->end() - 1;
      it->request_id = p.request_id;
      it->has_token = false;
    }
    it->prompt_first_position = p.first_position;
    for (const engine::SampleResult& s : p.tokens) it->prompt_logprobs.push_back(ToSched(s));
  }
}

void PromptLogprobsToProto(const std::vector<engine::PromptLogprobs>& records, v1::IterationResult* result) {
  for (const engine::PromptLogprobs& p : records) {
    v1::RequestResult* r = nullptr;
    for (v1::RequestResult& existing : *result->mutable_results())
      if (existing.request_id() == p.request_id) r = &existing;
    if (r == nullptr) {
      r = result->add_results();
      r->set_request_id(p.request_id);
    }
    r->set_prompt_first_position(p.first_position);
    for (const engine::SampleResult& s : p.tokens) ToProto(s, r->add_prompt_logprobs());
  }
}

void AddFailures(const std::vector<engine::RequestFailure>& failures, std::vector<sched::RequestResult>* results) {
  for (const engine::RequestFailure& f : failures) {
    auto it = std::find_if(results->begin(), results->end(),
                           [&](const sched::RequestResult& r) { return r.request_id == f.request_id; });
    if (it == results->end()) {
      results->emplace_back();
      it = results->end() - 1;
      it->request_id = f.request_id;
    }
    it->has_token = false;
    it->error = f.status;
  }
}

void FailuresToProto(const std::vector<engine::RequestFailure>& failures, v1::IterationResult* result) {
  for (const engine::RequestFailure& f : failures) {
    v1::RequestResult* r = nullptr;
    for (v1::RequestResult& existing : *result->mutable_results())
      if (existing.request_id() == f.request_id) r = &existing;
    if (r == nullptr) {
      r = result->add_results();
      r->set_request_id(f.request_id);
    }
    r->clear_token();
    r->set_error(std::string(f.status.message()));
    r->set_error_code(static_cast<int32_t>(f.status.code()));
  }
}

std::vector<sched::RequestResult> ProtoToResults(const v1::IterationResult& result) {
  std::vector<sched::RequestResult> out;
  out.reserve(result.results_size());
  for (const v1::RequestResult& r : result.results()) {
    sched::RequestResult rr;
    rr.request_id = r.request_id();
    rr.has_token = r.has_token();
    if (rr.has_token) rr.token = FromProto(r.token());
    rr.prompt_first_position = r.prompt_first_position();
    for (const v1::SampledToken& p : r.prompt_logprobs()) rr.prompt_logprobs.push_back(FromProto(p));
    if (!r.error().empty() || r.error_code() != 0) {
      const auto code = static_cast<absl::StatusCode>(r.error_code());
      rr.error = absl::Status(code == absl::StatusCode::kOk ? absl::StatusCode::kInternal : code, r.error());
    }
    out.push_back(std::move(rr));
  }
  return out;
}

}  // namespace orca::services
