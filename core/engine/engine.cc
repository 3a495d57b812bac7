#include "core/engine/engine.h"

#include <gloo/rendezvous/store.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/common/logging.h"
#include "core/common/sampling_limits.h"
#include "core/common/status_macros.h"
#include "core/engine/gloo_communicator.h"
#include "core/engine/prompt_logprobs.h"
#include "core/structured/compile.h"
#include "core/text/tokenizer.h"
#include "kernels/include/backend_factory.h"
#ifdef ORCA_WITH_NCCL
#include "core/engine/nccl_communicator.h"
#include "kernels/cuda/cuda_backend.h"
#endif

namespace orca::engine {

// GPU shards all-reduce over NCCL; a CUDA build without it (ORCA_NCCL off) runs one shard per process.
#ifdef ORCA_WITH_NCCL
constexpr bool kHaveNccl = true;
#else
constexpr bool kHaveNccl = false;
#endif

struct Engine::Shard {
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<ModelWeights> weights;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> pipeline;  // device link to the same shard of the other stages
  std::unique_ptr<ModelRunner> runner;
};

// Runs a function on every shard at once: shard 0 on the caller's thread,
// the others on one long-lived thread each (one thread per TP shard).
class Engine::ShardPool {
 public:
  explicit ShardPool(int num_shards) : results_(num_shards) {
    for (int i = 1; i < num_shards; ++i) threads_.emplace_back([this, i] { Loop(i); });
  }
  ~ShardPool() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.SignalAll();
    for (auto& t : threads_) t.join();
  }

  absl::Status RunAll(const std::function<absl::Status(int)>& fn) {
    {
      absl::MutexLock lock(&mu_);
      fn_ = &fn;
      pending_ = static_cast<int>(threads_.size());
      ++generation_;
    }
    cv_.SignalAll();
    absl::Status own = fn(0);
    absl::MutexLock lock(&mu_);
    results_[0] = std::move(own);
    while (pending_ != 0) done_cv_.Wait(&mu_);
    fn_ = nullptr;
    for (const auto& s : results_)
      if (!s.ok()) return s;
    return absl::OkStatus();
  }

 private:
  void Loop(int index) {
    uint64_t seen = 0;
    while (true) {
      const std::function<absl::Status(int)>* fn;
      {
        absl::MutexLock lock(&mu_);
        while (!stop_ && generation_ == seen) cv_.Wait(&mu_);
        if (stop_) return;
        seen = generation_;
        fn = fn_;
      }
      absl::Status s = (*fn)(index);
      absl::MutexLock lock(&mu_);
      results_[index] = std::move(s);
      if (--pending_ == 0) done_cv_.SignalAll();
    }
  }

  absl::Mutex mu_;
  absl::CondVar cv_, done_cv_;  // work published / every shard done
  const std::function<absl::Status(int)>* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<absl::Status> results_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;  // started in the constructor, joined in the destructor
};

Engine::~Engine() {
  pool_.reset();  // join shard threads before their shards go away
}

bool Engine::CanLinkDevices() const { return kHaveNccl && options_.device == "cuda"; }

absl::Status Engine::ConnectPipeline(const PipelineLinkOptions& po) {
  DisconnectPipeline();
  if (!CanLinkDevices())
    return absl::FailedPreconditionError(
        "device-to-device pipeline links need GPU shards and a build with NCCL; activations go through the host");
  if (po.store == nullptr) return absl::InvalidArgumentError("pipeline links need a rendezvous store");
#ifdef ORCA_WITH_NCCL
  const Options& o = options_;
  ORCA_RETURN_IF_ERROR(pool_->RunAll([&](int r) -> absl::Status {
    NcclCommunicator::Options no;
    no.store = po.store;
    no.prefix = absl::StrCat(po.prefix, "/tp", r);
    no.rank = o.stage;
    no.size = o.num_stages;
    no.backend = static_cast<kernels::CudaBackend*>(shards_[r]->backend.get());
    no.timeout = po.timeout;
    no.op_timeout = po.op_timeout;
    no.wait = false;
    ORCA_ASSIGN_OR_RETURN(shards_[r]->pipeline, NcclCommunicator::Create(no));
    return absl::OkStatus();
  }));
  for (auto& shard : shards_) shard->runner->SetPipeline(shard->pipeline.get());
  pipeline_connected_ = true;
  return absl::OkStatus();
#else
  return absl::InternalError("unreachable: CanLinkDevices() without NCCL");
#endif
}

void Engine::DisconnectPipeline() {
  for (auto& shard : shards_) {
    if (shard->runner != nullptr) shard->runner->SetPipeline(nullptr);
    shard->pipeline.reset();
  }
  pipeline_connected_ = false;
}

void Engine::AbortPipeline() {
  for (auto& shard : shards_)
    if (shard->pipeline != nullptr) shard->pipeline->Abort();
}

namespace {

// The stage and tensor-parallel layout the options ask for, checked before anything is loaded.
absl::Status CheckLayout(const Engine::Options& o) {
  if (o.num_stages < 1 || o.stage < 0 || o.stage >= o.num_stages)
    return absl::InvalidArgumentError(absl::StrCat("stage ", o.stage, " of ", o.num_stages, " is invalid"));
  if (o.first_device < 0)
    return absl::InvalidArgumentError(absl::StrCat("the first GPU must be >= 0, got ", o.first_device));
  if (o.tp_size < 1 || o.tp_size > 64)
    return absl::InvalidArgumentError(absl::StrCat("tensor parallelism must be in [1, 64], got ", o.tp_size));
  if (o.reserve_tokens < 0)
    return absl::InvalidArgumentError(absl::StrCat("reserve_tokens must be >= 0, got ", o.reserve_tokens));
  if (o.cuda_graphs && o.device != "cuda")
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA graphs (--cuda-graphs) need the cuda device, got '", o.device, "'"));
  if (o.cuda_graphs && (o.num_stages > 1 || o.tp_size > 1))
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA graphs (--cuda-graphs) are implemented for one pipeline stage with tensor parallelism 1 (the capture "
        "does not hold NCCL collectives or pipeline links yet); got ",
        o.num_stages, " stages, tensor parallelism ", o.tp_size));
  if (o.device == "cuda" && o.tp_size > 1 && !kHaveNccl && kernels::CudaAvailable())
    return absl::FailedPreconditionError(
        absl::StrCat("tensor parallelism ", o.tp_size,
                     " on GPUs needs NCCL, and this build has none (NCCL was not found or "
                     "ORCA_ENABLE_NCCL=OFF when it was configured): run tensor parallelism 1, or a build with NCCL"));
  return absl::OkStatus();
}

// Joins shard `rank`'s tensor-parallel group through `store`: over NCCL on GPUs when the build has it (the id is
// exchanged through the same store), over Gloo otherwise.
absl::StatusOr<std::unique_ptr<Communicator>> JoinTensorParallelGroup(const Engine::Options& o,
                                                                      gloo::rendezvous::Store* store, int rank,
                                                                      kernels::Backend* backend) {
#ifdef ORCA_WITH_NCCL
  if (o.device == "cuda") {
    NcclCommunicator::Options no;
    no.store = store;
    no.prefix = absl::StrCat(o.tp_group, "/stage", o.stage, "/nccl");
    no.rank = rank;
    no.size = o.tp_size;
    no.backend = static_cast<kernels::CudaBackend*>(backend);
    no.timeout = std::chrono::milliseconds(o.peer_timeout_ms);
    no.wait = false;  // stream-ordered: the all-reduces never make the host wait (paper §4.1)
    return NcclCommunicator::Create(no);
  }
#else
  (void)backend;
#endif
  GlooCommunicator::Options go;
  go.store = store;
  go.prefix = absl::StrCat(o.tp_group, "/stage", o.stage);
  go.rank = rank;
  go.size = o.tp_size;
  go.hostname = o.data_plane_host;
  go.timeout = std::chrono::milliseconds(o.peer_timeout_ms);
  return GlooCommunicator::Create(go);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine::Shard>> Engine::LoadShard(int rank, int num_threads) const {
  const Options& o = options_;
  const ModelConfig& c = checkpoint_->config();
  auto shard = std::make_unique<Shard>();
  kernels::BackendOptions bo;
  bo.device = o.device;
  bo.device_index = o.first_device + rank;
  bo.num_threads = num_threads;
  bo.small_gemm_max_rows = o.small_gemm_max_rows;
  bo.panel_gemm_max_rows = o.panel_gemm_max_rows;
  bo.cpu_bf16_dot = o.cpu_bf16_dot;
  ORCA_ASSIGN_OR_RETURN(shard->backend, kernels::CreateBackend(bo));
  ModelWeights::Options wo;
  wo.partition = Partition::ForStage(o.stage, o.num_stages, c.num_layers, rank, o.tp_size);
  wo.dtype = o.dtype;
  wo.vocab_parallel_head = o.vocab_parallel_head;
  ORCA_ASSIGN_OR_RETURN(shard->weights, ModelWeights::Load(*checkpoint_, wo, shard->backend.get()));
  KvCache::Options ko;
  ko.num_layers = shard->weights->num_local_layers();
  ko.num_kv_heads = shard->weights->local_kv_heads();
  ko.head_dim = c.head_dim;
  ko.n_slots = o.n_slots;
  ko.block_size = o.kv_block_size;
  // bf16 KV for bf16 and quantized weights (half the bytes attention reads), f32 for f32 ones.
  const DType wd = shard->weights->dtype();
  ko.dtype = o.kv_dtype.value_or(wd == DType::kBF16 || IsQuantized(wd) ? DType::kBF16 : DType::kF32);
  ORCA_ASSIGN_OR_RETURN(shard->kv, KvCache::Create(ko, shard->backend.get()));
  return shard;
}

absl::Status Engine::ConnectShards() {
  const Options& o = options_;
  gloo::rendezvous::Store* store = o.tp_store;
  if (store == nullptr) {
    local_store_ = GlooCommunicator::MakeLocalStore();
    store = local_store_.get();
  }
  // Every shard joins its group at once: the mesh forms only when all have.
  return pool_->RunAll([&](int r) -> absl::Status {
    ORCA_ASSIGN_OR_RETURN(shards_[r]->tp, JoinTensorParallelGroup(o, store, r, shards_[r]->backend.get()));
    return absl::OkStatus();
  });
}

void Engine::LogReady() const {
  const Options& o = options_;
  ORCA_LOG(INFO) << "engine ready: " << config().Summary() << "; stage " << o.stage << "/" << o.num_stages
                 << " layers [" << partition().layer_begin << ", " << partition().layer_end << "), tp " << o.tp_size
                 << ", " << DTypeName(shards_[0]->weights->dtype()) << " weights (" << weight_bytes() / (1 << 20)
                 << " MiB read per step, " << shards_[0]->weights->packed_bytes() / (1 << 20)
                 << " MiB packed at load in " << shards_[0]->weights->load_seconds() << " s), " << kv_slots_total()
                 << " KV slots (" << kv_bytes() / (1 << 20) << " MiB), " << backend_name();
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const Options& o) {
  ORCA_RETURN_IF_ERROR(CheckLayout(o));
  std::unique_ptr<Engine> e(new Engine());
  e->options_ = o;
  ORCA_ASSIGN_OR_RETURN(e->checkpoint_, Checkpoint::Open(o.model_path));
  const ModelConfig& c = e->checkpoint_->config();
  if (o.num_stages > c.num_layers)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", c.num_layers, " layers over ", o.num_stages, " pipeline stages"));
  const int total_threads =
      o.num_threads > 0 ? o.num_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads_per_shard = std::max(1, total_threads / o.tp_size);
  e->sample_threads_ = total_threads;
  for (int r = 0; r < o.tp_size; ++r) {
    ORCA_ASSIGN_OR_RETURN(std::unique_ptr<Shard> shard, e->LoadShard(r, threads_per_shard));
    e->shards_.push_back(std::move(shard));
  }
  e->pool_ = std::make_unique<ShardPool>(o.tp_size);
  if (o.tp_size > 1) ORCA_RETURN_IF_ERROR(e->ConnectShards());
  for (auto& shard : e->shards_) {
    ModelRunner::Options ro;
    ro.weights = shard->weights.get();
    ro.kv = shard->kv.get();
    ro.backend = shard->backend.get();
    ro.tp = shard->tp.get();
    ro.fused_kernels = o.fused_kernels;
    ro.decode_graphs = o.cuda_graphs;
    ORCA_ASSIGN_OR_RETURN(shard->runner, ModelRunner::Create(ro));
    ORCA_RETURN_IF_ERROR(shard->runner->Reserve(std::min(o.reserve_tokens, o.n_slots)));
  }
  e->LogReady();
  return e;
}

absl::Status SetDTypeAndDeviceFromFlags(const std::string& dtype, const std::string& device, Engine::Options* options) {
  if (dtype == "auto") {
    options->dtype.reset();
  } else {
    DType parsed;
    // f16 weights would be converted for compute anyway; bf16 is the 16-bit choice.
    if (!ParseDType(dtype, &parsed) || parsed == DType::kF16) {
      return absl::InvalidArgumentError("--dtype must be auto, f32 or bf16, got '" + dtype + "'");
    }
    options->dtype = parsed;
  }
  if (device != "cpu" && device != "cuda") {
    return absl::InvalidArgumentError("--device must be cpu or cuda, got '" + device + "'");
  }
  options->device = device;
  return absl::OkStatus();
}

const ModelConfig& Engine::config() const { return checkpoint_->config(); }
const Partition& Engine::partition() const { return shards_[0]->weights->partition(); }
int64_t Engine::kv_slots_total() const { return shards_[0]->kv->slots_total(); }
int64_t Engine::kv_slots_used() const { return shards_[0]->kv->slots_used(); }
// TEMP (issue 47, scheduler branch): the engine side defines these; drop this on merge.
int32_t Engine::sliding_window() const { return 0; }
int64_t Engine::kv_local_slots_total() const { return 0; }
int64_t Engine::kv_local_slots_used() const { return 0; }
int64_t Engine::num_requests() const { return shards_[0]->kv->num_requests(); }
std::string Engine::backend_name() const { return shards_[0]->backend->name(); }
int64_t Engine::graphs_captured() const { return shards_[0]->runner->graphs_captured(); }
int64_t Engine::graph_launches() const { return shards_[0]->runner->graph_launches(); }

size_t Engine::weight_bytes() const {
  size_t total = 0;
  for (const auto& s : shards_) {
    const ModelWeights& w = *s->weights;
    for (int32_t l = 0; l < w.num_local_layers(); ++l) {
      const LayerWeights& lw = w.layer(l);
      for (const auto* v : {&lw.q, &lw.k, &lw.v, &lw.o, &lw.gate, &lw.up, &lw.down})
        if (!v->empty()) total += v->ReadBytes();
    }
    if (!w.lm_head().empty()) total += w.lm_head().ReadBytes();
  }
  return total;
}

size_t Engine::kv_bytes() const {
  size_t total = 0;
  for (const auto& s : shards_) total += s->kv->bytes();
  return total;
}

size_t Engine::packed_weight_bytes() const {
  size_t total = 0;
  for (const auto& s : shards_) total += s->weights->packed_bytes();
  return total;
}

DType Engine::weight_dtype() const { return shards_[0]->weights->dtype(); }

size_t Engine::owned_weight_bytes() const {
  size_t total = 0;
  for (const auto& s : shards_) total += s->weights->owned_bytes();
  return total;
}

void Engine::Release(uint64_t id) {
  for (auto& s : shards_) {
    (void)s->kv->Release(id);
    // Its prompt padding, if it had any (the FasterTransformer baseline).
    if (s->kv->Contains(PaddingSequenceId(id))) (void)s->kv->Release(PaddingSequenceId(id));
  }
  samplers_.erase(id);
  samplers_.erase(PaddingSequenceId(id));
  failed_.erase(id);
  prompt_logprobs_.erase(id);
}

void Engine::ReleaseAll() {
  for (auto& s : shards_) s->kv->ReleaseAll();
  samplers_.clear();
  failed_.clear();
  prompt_logprobs_.clear();
}

absl::Status Engine::SetUpKv(const StepSequence& s, std::vector<uint64_t>* reserved) {
  if (s.new_request.has_value()) {
    const SequenceSetup& setup = *s.new_request;
    const std::string err = setup.sampling.Validate();
    if (!err.empty()) return absl::InvalidArgumentError(absl::StrCat("request ", s.request_id, ": ", err));
    if (!setup.sampling.logit_bias.empty() && setup.sampling.logit_bias.back().first >= config().vocab_size)
      return absl::InvalidArgumentError(absl::StrCat("request ", s.request_id, ": logit_bias token id ",
                                                     setup.sampling.logit_bias.back().first,
                                                     " is outside the vocabulary [0, ", config().vocab_size, ")"));
    if (setup.kv_block_size > 0 && setup.kv_block_size != options_.kv_block_size)
      return absl::InvalidArgumentError(absl::StrCat("request ", s.request_id, ": the scheduler's KV blocks hold ",
                                                     setup.kv_block_size, " tokens but this stage's hold ",
                                                     options_.kv_block_size, " (give both the same --kv-block-size)"));
    if (setup.kv_block_size == 0 && !s.block_ids.empty())
      return absl::InvalidArgumentError(
          absl::StrCat("request ", s.request_id, ": KV block ids without a scheduler block size"));
    reserved->push_back(s.request_id);  // before any shard changes: a rollback releases it everywhere
    if (is_last_stage() && setup.sampling.WantsPromptLogprobs()) {
      for (int32_t t : setup.prompt_token_ids)
        if (t < 0 || t >= config().vocab_size)
          return absl::InvalidArgumentError(absl::StrCat("request ", s.request_id, ": prompt token id ", t,
                                                         " is outside the vocabulary [0, ", config().vocab_size, ")"));
      prompt_logprobs_[s.request_id] = {setup.prompt_token_ids, setup.sampling.prompt_logprobs};
    }
    for (auto& shard : shards_) {
      if (setup.kv_block_size > 0) {
        ORCA_RETURN_IF_ERROR(
            shard->kv->Assign(s.request_id, setup.kv_reservation_slots, s.block_ids, s.start_position));
      } else {
        ORCA_RETURN_IF_ERROR(shard->kv->Reserve(s.request_id, setup.kv_reservation_slots));
      }
    }
    return absl::OkStatus();
  }
  if (s.block_ids.empty()) return absl::OkStatus();
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (absl::Status st = shards_[i]->kv->AppendBlocks(s.request_id, s.block_ids); !st.ok()) {
      for (size_t j = 0; j < i; ++j) shards_[j]->kv->DropLastBlocks(s.request_id, s.block_ids.size());
      return st;
    }
  }
  appended_.emplace_back(s.request_id, s.block_ids.size());
  return absl::OkStatus();
}

void Engine::RollBack(const std::vector<uint64_t>& reserved) {
  for (const auto& [id, count] : appended_)
    for (auto& shard : shards_) shard->kv->DropLastBlocks(id, count);
  appended_.clear();
  for (uint64_t id : reserved) Release(id);
}

absl::Status Engine::ValidateAndReserve(const StepInput& in, std::vector<uint64_t>* reserved) {
  const ModelConfig& c = config();
  KvCache& kv0 = *shards_[0]->kv;
  seen_.clear();  // member: no allocation per iteration once it has grown
  for (const StepSequence& s : in.seqs) {
    if (!seen_.insert(s.request_id).second)
      return absl::InvalidArgumentError(
          absl::StrCat("request ", s.request_id, " appears twice in iteration ", in.iteration_id));
    const int32_t n = static_cast<int32_t>(s.token_ids.size());
    if (n == 0)
      return absl::InvalidArgumentError(
          absl::StrCat("request ", s.request_id, " has no tokens in iteration ", in.iteration_id));
    if (static_cast<int64_t>(s.start_position) + n > c.max_position)
      return absl::OutOfRangeError(absl::StrCat("request ", s.request_id, ": position ", s.start_position + n,
                                                " exceeds the model's context of ", c.max_position));
    if (partition().has_embedding)
      for (int32_t t : s.token_ids)
        if (t < 0 || t >= c.vocab_size)
          return absl::InvalidArgumentError(absl::StrCat("request ", s.request_id, ": token id ", t,
                                                         " is outside the vocabulary [0, ", c.vocab_size, ")"));
    ORCA_RETURN_IF_ERROR(SetUpKv(s, reserved));
    ORCA_RETURN_IF_ERROR(kv0.CheckWrite(s.request_id, s.start_position, n));
  }
  return absl::OkStatus();
}

absl::Status Engine::Step(const StepInput& in, const float* hidden_in, StepOutput* out) {
  out->Clear();
  for (uint64_t id : in.released_ids) Release(id);
  if (in.seqs.empty()) return absl::OkStatus();
  std::vector<uint64_t>& reserved = reserved_;
  reserved.clear();
  appended_.clear();
  if (absl::Status s = ValidateAndReserve(in, &reserved); !s.ok()) {
    Reject(in, hidden_in, reserved);
    return s;
  }
  const int64_t samples = PlanForward(in);
  if (absl::Status s = RunForward(hidden_in, samples, out); !s.ok()) {
    RollBack(reserved);
    return s;
  }
  if (!is_last_stage()) return absl::OkStatus();
  for (const StepSequence& s : in.seqs)
    if (s.new_request.has_value()) AddSampler(s, out);
  CollectLogits(in, out);
  DrawSamples(config().vocab_size, out);
  return absl::OkStatus();
}

void Engine::Reject(const StepInput& in, const float* hidden_in, const std::vector<uint64_t>& reserved) {
  RollBack(reserved);
  if (pipeline_connected_ && hidden_in == nullptr) {
    // The previous stage's activations are on their way over the links: take them off, or
    // its sends would stall its stream.
    int64_t tokens = 0;
    for (const StepSequence& q : in.seqs) tokens += static_cast<int64_t>(q.token_ids.size());
    absl::Status drained = pool_->RunAll([&](int r) { return shards_[r]->runner->DiscardInput(tokens); });
    if (!drained.ok()) ORCA_LOG(ERROR) << "dropping the activations of a rejected iteration: " << drained;
  }
}

int64_t Engine::PlanForward(const StepInput& in) {
  seq_specs_.clear();
  token_ids_.clear();
  int64_t samples = 0;
  for (const StepSequence& s : in.seqs) {
    SeqSpec spec{s.request_id, static_cast<int32_t>(s.token_ids.size()), s.start_position, s.sample};
    if (auto it = prompt_logprobs_.find(s.request_id); it != prompt_logprobs_.end())
      spec.all_logits =
          StepHasPromptPositions(spec.start_pos, spec.num_tokens, static_cast<int32_t>(it->second.prompt.size()));
    seq_specs_.push_back(spec);
    token_ids_.insert(token_ids_.end(), s.token_ids.begin(), s.token_ids.end());
    samples += spec.LogitRows();
  }
  return samples;
}

absl::Status Engine::RunForward(const float* hidden_in, int64_t samples, StepOutput* out) {
  const ModelConfig& c = config();
  const int64_t tokens = static_cast<int64_t>(token_ids_.size());  // every sequence's, flattened
  if (is_last_stage())
    logits_.resize(static_cast<size_t>(samples) * c.vocab_size);
  else if (!pipeline_connected_)
    out->hidden.resize(static_cast<size_t>(tokens) * c.hidden_size);
  ForwardInput fin{seq_specs_, token_ids_, hidden_in};
  std::vector<ForwardTimings>& timings = timings_;
  timings.assign(shards_.size(), ForwardTimings{});
  ORCA_RETURN_IF_ERROR(pool_->RunAll([&](int r) {
    // Every shard ends with the same hidden states (after the all-reduce); rank 0 hands them on.
    return shards_[r]->runner->Forward(fin, r == 0 && !out->hidden.empty() ? out->hidden.data() : nullptr,
                                       r == 0 ? logits_.data() : nullptr, &timings[r]);
  }));
  out->timings = timings[0];
  for (auto& shard : shards_)
    for (const SeqSpec& s : seq_specs_) shard->kv->CommitWrite(s.request_id, s.start_pos, s.num_tokens);
  return absl::OkStatus();
}

void Engine::CollectLogits(const StepInput& in, StepOutput* out) {
  const ModelConfig& c = config();
  int64_t row = 0;  // the sequence's first row of logits
  sample_jobs_.clear();
  for (size_t i = 0; i < in.seqs.size(); ++i) {
    const StepSequence& s = in.seqs[i];
    const SeqSpec& spec = seq_specs_[i];
    if (spec.all_logits) {
      const PromptLogprobsState& state = prompt_logprobs_.at(s.request_id);
      out->prompt_logprobs.push_back(ComputePromptLogprobs(s.request_id, state.prompt, spec.start_pos, spec.num_tokens,
                                                           logits_.data() + row * c.vocab_size, c.vocab_size,
                                                           state.top_k, &logprob_scratch_));
    }
    row += spec.LogitRows();
    if (s.sample) AddSampleJob(s, logits_.data() + (row - 1) * c.vocab_size, out);  // the last of its rows
  }
}

void Engine::AddSampleJob(const StepSequence& s, float* logits, StepOutput* out) {
  if (auto failed = failed_.find(s.request_id); failed != failed_.end()) {
    // Still in the batch until the scheduler has seen the failure: no token, the same error again.
    if (!s.new_request.has_value()) out->failures.push_back({s.request_id, failed->second});
    return;
  }
  const int32_t vocab = config().vocab_size;
  if (options_.keep_logits) out->logits.insert(out->logits.end(), logits, logits + vocab);
  auto it = samplers_.find(s.request_id);
  if (it == samplers_.end()) {
    // A request known to the KV cache but never announced here: greedy by default.
    it = samplers_
             .emplace(s.request_id,
                      std::make_unique<Sampler>(SamplingParams{}, s.request_id, absl::Span<const int32_t>{}))
             .first;
  }
  sample_jobs_.push_back({it->second.get(), logits, out->samples.size()});
  out->samples.push_back({s.request_id, {}});
}

void Engine::DrawSamples(int32_t vocab, StepOutput* out) {
  // Each sampler draws from its own row with its own generator, so the rows are drawn in
  // parallel and the tokens do not depend on which thread drew them. Samplers with a
  // structured-output matcher draw first, one after another: matchers of one grammar share
  // its runtime's mask cache.
  for (const SampleJob& j : sample_jobs_)
    if (j.sampler->matcher() != nullptr) out->samples[j.out].sample = j.sampler->Sample(j.logits, vocab);
  const int64_t n = static_cast<int64_t>(sample_jobs_.size());
  const int threads = static_cast<int>(std::clamp<int64_t>(n, 1, sample_threads_));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) if (threads > 1)
  for (int64_t i = 0; i < n; ++i) {
    const SampleJob& j = sample_jobs_[i];
    if (j.sampler->matcher() == nullptr) out->samples[j.out].sample = j.sampler->Sample(j.logits, vocab);
  }
}

void Engine::AddSampler(const StepSequence& s, StepOutput* out) {
  std::unique_ptr<structured::GrammarMatcher> matcher;
  if (s.new_request->sampling.structured.enabled()) {
    absl::StatusOr<std::unique_ptr<structured::GrammarMatcher>> m = NewMatcher(s.new_request->sampling.structured);
    if (!m.ok()) {
      ORCA_LOG(ERROR).With("request_id", s.request_id) << m.status();
      samplers_.erase(s.request_id);
      failed_[s.request_id] = m.status();
      out->failures.push_back({s.request_id, m.status()});
      return;
    }
    matcher = *std::move(m);
  }
  failed_.erase(s.request_id);
  samplers_[s.request_id] =
      std::make_unique<Sampler>(s.new_request->sampling, s.request_id, s.new_request->prompt_token_ids,
                                s.new_request->output_token_ids, std::move(matcher));
}

absl::StatusOr<std::unique_ptr<structured::GrammarMatcher>> Engine::NewMatcher(const StructuredOutputSpec& spec) {
  // The scheduler checked all this before admitting the request; a worker checks again, failing this
  // request alone (AddSampler), rather than trust whoever reached its port.
  if (std::string error = CheckStructuredOutputLimits(spec, config().vocab_size); !error.empty())
    return absl::InvalidArgumentError(absl::StrCat("the structured-output constraint is refused: ", error));
  if (structured_ == nullptr && structured_unavailable_.ok()) {
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<text::Tokenizer>> tokenizer = text::Tokenizer::Load(options_.model_path);
    absl::StatusOr<std::shared_ptr<const structured::TokenVocabulary>> vocab =
        tokenizer.ok() ? structured::TokenVocabulary::FromTokenizer(**tokenizer, config().vocab_size)
                       : absl::StatusOr<std::shared_ptr<const structured::TokenVocabulary>>(tokenizer.status());
    if (!vocab.ok()) {
      structured_unavailable_ = absl::FailedPreconditionError(
          absl::StrCat("structured outputs are unavailable on this worker: loading the tokenizer of ",
                       options_.model_path, " failed: ", vocab.status().message()));
    } else {
      ORCA_LOG(INFO) << "structured outputs: vocabulary of " << (*vocab)->vocab_size() << " tokens ("
                     << (*vocab)->num_trie_tokens() << " in the trie) built in "
                     << absl::ToDoubleMilliseconds(absl::Now() - start) << " ms";
      structured_ = std::make_unique<structured::MatcherFactory>(*std::move(vocab));
    }
  }
  if (structured_ == nullptr) return structured_unavailable_;
  absl::StatusOr<std::unique_ptr<structured::GrammarMatcher>> matcher = structured_->NewMatcher(spec);
  if (!matcher.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("the structured-output constraint does not compile: ", matcher.status().message()));
  return matcher;
}

structured::GrammarRuntime::Stats Engine::structured_stats() const {
  return structured_ == nullptr ? structured::GrammarRuntime::Stats{} : structured_->stats();
}

}  // namespace orca::engine
