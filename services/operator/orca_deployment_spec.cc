#include "services/operator/orca_deployment_spec.h"

#include <algorithm>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/operator/quantity.h"

namespace orca::k8s {
namespace {

using nlohmann::json;

// Reads typed fields out of JSON objects, collecting every error with its path.
class SpecReader {
 public:
  // The object at `parent[key]`; an empty object when absent; an error when not an object.
  const json& Object(const json& parent, const char* key, const std::string& path) {
    static const json kEmpty = json::object();
    if (!parent.is_object() || !parent.contains(key) || parent[key].is_null()) return kEmpty;
    if (!parent[key].is_object()) {
      Error(path, "must be an object");
      return kEmpty;
    }
    return parent[key];
  }

  template <typename IntT>
  void Int(const json& obj, const char* key, const std::string& path, int64_t min, int64_t max, IntT* out) {
    if (!obj.contains(key) || obj[key].is_null()) return;
    const json& v = obj[key];
    if (!v.is_number_integer()) {
      Error(path, absl::StrCat("must be an integer, got ", v.dump()));
      return;
    }
    const int64_t value = v.get<int64_t>();
    if (value < min || value > max) {
      Error(path, absl::StrCat("must be in [", min, ", ", max, "], got ", value));
      return;
    }
    *out = static_cast<IntT>(value);
  }

  // A number; 0 or in (min_exclusive, max].
  void ZeroOrAbove(const json& obj, const char* key, const std::string& path, double min_exclusive, double max,
                   double* out) {
    if (!obj.contains(key) || obj[key].is_null()) return;
    const json& v = obj[key];
    if (!v.is_number()) {
      Error(path, absl::StrCat("must be a number, got ", v.dump()));
      return;
    }
    const double value = v.get<double>();
    if (!(value == 0 || (value > min_exclusive && value <= max))) {
      Error(path, absl::StrCat("must be 0 (off) or in (", min_exclusive, ", ", max, "], got ", v.dump()));
      return;
    }
    *out = value;
  }

  void Bool(const json& obj, const char* key, const std::string& path, bool* out) {
    if (!obj.contains(key) || obj[key].is_null()) return;
    if (!obj[key].is_boolean()) {
      Error(path, absl::StrCat("must be true or false, got ", obj[key].dump()));
      return;
    }
    *out = obj[key].get<bool>();
  }

  // A string; when `allowed` is non-empty it must be one of them.
  void String(const json& obj, const char* key, const std::string& path, std::string* out,
              const std::vector<std::string>& allowed = {}) {
    if (!obj.contains(key) || obj[key].is_null()) return;
    if (!obj[key].is_string()) {
      Error(path, absl::StrCat("must be a string, got ", obj[key].dump()));
      return;
    }
    std::string value = obj[key].get<std::string>();
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
      Error(path, absl::StrCat("must be one of ", absl::StrJoin(allowed, ", "), "; got '", value, "'"));
      return;
    }
    *out = std::move(value);
  }

  void StringMap(const json& obj, const char* key, const std::string& path, std::map<std::string, std::string>* out) {
    const json& m = Object(obj, key, path);
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (!it.value().is_string()) {
        Error(absl::StrCat(path, ".", it.key()), "must be a string");
        continue;
      }
      (*out)[it.key()] = it.value().get<std::string>();
    }
  }

  void Resources(const json& obj, const std::string& path, ResourceRequirements* out) {
    const json& r = Object(obj, "resources", path);
    for (const char* kind : {"limits", "requests"}) {
      const json& m = Object(r, kind, absl::StrCat(path, ".", kind));
      auto& dst = std::string(kind) == "limits" ? out->limits : out->requests;
      for (auto it = m.begin(); it != m.end(); ++it) {
        const std::string field = absl::StrCat(path, ".", kind, "[", it.key(), "]");
        auto parsed = ParseQuantity(it.value(), field);
        if (!parsed.ok()) {
          errors_.push_back(std::string(parsed.status().message()));
          continue;
        }
        dst[it.key()] = QuantityText(it.value());
      }
    }
  }

  // env (a list of EnvVar objects) and args (extra command-line flags) of one component.
  void Extras(const json& obj, const std::string& path, ContainerExtras* out) {
    if (obj.contains("env") && !obj["env"].is_null()) {
      if (!obj["env"].is_array()) {
        Error(path + ".env", "must be a list of environment variables ({name, value} or {name, valueFrom})");
      } else {
        for (size_t i = 0; i < obj["env"].size(); ++i) {
          const json& e = obj["env"][i];
          const std::string at = absl::StrCat(path, ".env[", i, "]");
          if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || e["name"].get<std::string>().empty()) {
            Error(at, "needs a non-empty name");
            continue;
          }
          if (e["name"] == "NVIDIA_VISIBLE_DEVICES") {
            Error(at,
                  "NVIDIA_VISIBLE_DEVICES is set by the NVIDIA device plugin from the GPUs the pod was given; "
                  "a fixed value would expose GPUs the pod was not allocated");
            continue;
          }
          out->env.push_back(e);
        }
      }
    }
    if (obj.contains("args") && !obj["args"].is_null()) {
      if (!obj["args"].is_array()) {
        Error(path + ".args", "must be a list of flags");
        return;
      }
      for (size_t i = 0; i < obj["args"].size(); ++i) {
        const json& a = obj["args"][i];
        const std::string at = absl::StrCat(path, ".args[", i, "]");
        if (!a.is_string() || a.get<std::string>().rfind("--", 0) != 0) {
          Error(at, "must be a flag starting with --");
        } else if (a.get<std::string>().rfind("--config", 0) == 0) {
          Error(at, "--config is the rendered flag file; set the flag itself instead");
        } else {
          out->args.push_back(a.get<std::string>());
        }
      }
    }
  }

  void Error(const std::string& path, const std::string& what) { errors_.push_back(absl::StrCat(path, ": ", what)); }
  void Add(const absl::Status& status) {
    if (!status.ok()) errors_.push_back(std::string(status.message()));
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::vector<std::string> errors_;
};

constexpr int64_t kInt32Max = 2147483647;

void ReadModel(SpecReader& r, const json& spec, OrcaDeployment& d) {
  const json& model = r.Object(spec, "model", "spec.model");
  if (!model.contains("uri")) {
    r.Error("spec.model.uri", "is required");
  } else {
    r.String(model, "uri", "spec.model.uri", &d.model.uri);
  }
  r.String(model, "servedModelName", "spec.model.servedModelName", &d.model.served_model_name);
  if (d.model.served_model_name.empty()) d.model.served_model_name = d.name;
  r.String(model, "format", "spec.model.format", &d.model.format, {"hf", "gguf"});
  r.String(model, "dtype", "spec.model.dtype", &d.model.dtype, {"auto", "f32", "bf16"});
  if (d.model.uri.empty()) return;
  auto source = ParseModelUri(d.model.uri);
  if (!source.ok()) {
    r.Add(source.status());
    return;
  }
  d.model.source = *source;
  if (source->kind == ModelSource::Kind::kSynthetic && d.model.format != "hf") {
    r.Error("spec.model.format", "synthetic:// models are written as Hugging Face directories; use format: hf");
  }
  if (d.model.format == "gguf") {
    const std::string path = source->ContainerModelPath();
    if (path.size() < 5 || path.substr(path.size() - 5) != ".gguf") {
      r.Error("spec.model.uri", absl::StrCat("format gguf needs the path of a .gguf file, got '", path, "'"));
    }
  }
}

void ReadImage(SpecReader& r, const json& spec, OrcaDeployment& d) {
  const json& image = r.Object(spec, "image", "spec.image");
  r.String(image, "repository", "spec.image.repository", &d.image.repository);
  r.String(image, "cudaRepository", "spec.image.cudaRepository", &d.image.cuda_repository);
  r.String(image, "tag", "spec.image.tag", &d.image.tag);
  r.String(image, "pullPolicy", "spec.image.pullPolicy", &d.image.pull_policy, {"Always", "IfNotPresent", "Never"});
  if (image.contains("pullSecrets") && !image["pullSecrets"].is_null()) {
    if (!image["pullSecrets"].is_array()) {
      r.Error("spec.image.pullSecrets", "must be a list of Secret names");
    } else {
      for (const json& s : image["pullSecrets"]) {
        if (s.is_string() && !s.get<std::string>().empty()) {
          d.image.pull_secrets.push_back(s.get<std::string>());
        } else {
          r.Error("spec.image.pullSecrets", "every entry must be a non-empty Secret name");
        }
      }
    }
  }
  if (d.image.repository.empty()) r.Error("spec.image.repository", "must not be empty");
  if (d.image.cuda_repository.empty()) r.Error("spec.image.cudaRepository", "must not be empty");
  if (d.image.tag.empty()) r.Error("spec.image.tag", "must not be empty");
}

// kvSlots, or slots derived from kvMemory (rounded down to whole KV blocks), against maxBatchSize.
void ReadKvBudget(SpecReader& r, const json& s, OrcaDeployment& d) {
  SchedulerSpec& out = d.scheduler;
  const bool has_slots = s.contains("kvSlots") && !s["kvSlots"].is_null();
  const bool has_memory = s.contains("kvMemory") && !s["kvMemory"].is_null();
  if (has_slots && has_memory) {
    r.Error("spec.scheduler", "set kvSlots or kvMemory, not both");
    return;
  }
  const int64_t block = out.kv_block_size;
  if (has_slots) {
    r.Int(s, "kvSlots", "spec.scheduler.kvSlots", 1, INT64_MAX, &out.kv_slots);
    // The scheduler and the workers allocate KV in whole blocks (KvSlotBudget, KvCache).
    if (out.kv_slots % block != 0) {
      r.Error("spec.scheduler.kvSlots", absl::StrCat(out.kv_slots, " is not a multiple of kvBlockSize (", block,
                                                     "): KV is allocated in whole blocks"));
    }
  } else if (has_memory) {
    const json& mem = r.Object(s, "kvMemory", "spec.scheduler.kvMemory");
    if (!mem.contains("size")) {
      r.Error("spec.scheduler.kvMemory.size", "is required");
      return;
    }
    auto bytes = ParseQuantity(mem["size"], "spec.scheduler.kvMemory.size");
    if (!bytes.ok()) {
      r.Add(bytes.status());
      return;
    }
    int64_t per_token = 0;
    r.Int(mem, "bytesPerToken", "spec.scheduler.kvMemory.bytesPerToken", 1, INT64_MAX, &per_token);
    if (per_token == 0) {
      if (d.model.source.kind != ModelSource::Kind::kSynthetic) {
        r.Error("spec.scheduler.kvMemory.bytesPerToken",
                "is required unless the model is synthetic:// (2 x layers x kvHeads x headDim x dtype bytes)");
        return;
      }
      per_token = d.model.source.synthetic.KvBytesPerToken();
    }
    out.kv_memory_bytes = *bytes;
    out.kv_bytes_per_token = per_token;
    out.kv_slots = *bytes / per_token / block * block;
    if (out.kv_slots < 1) {
      r.Error("spec.scheduler.kvMemory.size",
              absl::StrCat(*bytes, " bytes hold no KV block of ", block, " tokens at ", per_token, " bytes per token"));
      return;
    }
  } else if (out.kv_slots % block != 0) {
    r.Error("spec.scheduler.kvBlockSize",
            absl::StrCat("the default kvSlots (", out.kv_slots, ") is not a multiple of kvBlockSize (", block,
                         "): set kvSlots"));
    return;
  }
  const std::string field = has_memory ? "spec.scheduler.kvMemory" : "spec.scheduler.kvSlots";
  if (out.kv_slots < out.max_batch_size) {
    r.Error(field, absl::StrCat("gives ", out.kv_slots, " KV slots, fewer than maxBatchSize (", out.max_batch_size,
                                "): every request in a batch needs at least one slot"));
  }
  // A worker's KV cache indexes slots with int32 (KvCache); the paged pool holds at most 2^30 blocks.
  const int64_t blocks = out.kv_slots / block;
  const bool pooled = out.policy == "paged" || out.enable_prefix_caching;
  if (blocks > kInt32Max / block || (pooled && blocks > kInt32Max / 2)) {
    r.Error(field, absl::StrCat("gives ", out.kv_slots, " KV slots, ", blocks, " blocks of ", block,
                                " tokens: at most ", kInt32Max / block, " blocks fit a worker's KV cache",
                                pooled ? " and 1073741823 the paged block pool" : ""));
  }
}

// The scheduling knobs beyond the paper; the cross-field rules are the scheduler's own
// (sched::Scheduler::ValidateOptions), so that a spec the operator accepts starts.
void ReadSchedulingKnobs(SpecReader& r, const json& s, SchedulerSpec& out) {
  r.Int(s, "kvBlockSize", "spec.scheduler.kvBlockSize", 1, 256, &out.kv_block_size);
  r.Int(s, "maxNumBatchedTokens", "spec.scheduler.maxNumBatchedTokens", 0, kInt32Max, &out.max_num_batched_tokens);
  r.ZeroOrAbove(s, "maxPrefillSlowdown", "spec.scheduler.maxPrefillSlowdown", 1, 1000, &out.max_prefill_slowdown);
  r.Int(s, "longPrefillTokenThreshold", "spec.scheduler.longPrefillTokenThreshold", 0, kInt32Max,
        &out.long_prefill_token_threshold);
  r.Bool(s, "enablePrefixCaching", "spec.scheduler.enablePrefixCaching", &out.enable_prefix_caching);
  r.String(s, "schedulingOrder", "spec.scheduler.schedulingOrder", &out.scheduling_order, {"fcfs", "priority"});
  r.Int(s, "priorityAgingMs", "spec.scheduler.priorityAgingMs", 0, INT64_MAX, &out.priority_aging_ms);
  r.Int(s, "drainGraceSeconds", "spec.scheduler.drainGraceSeconds", 0, 3600, &out.drain_grace_seconds);
  if (out.max_num_batched_tokens > 0 && out.max_num_batched_tokens < out.max_batch_size) {
    r.Error("spec.scheduler.maxNumBatchedTokens",
            absl::StrCat("must be 0 (off) or at least maxBatchSize (", out.max_batch_size,
                         ") so that every decode fits, got ", out.max_num_batched_tokens));
  }
  if (out.policy == "request-level" && (out.max_num_batched_tokens > 0 || out.max_prefill_slowdown > 0 ||
                                        out.long_prefill_token_threshold > 0 || out.scheduling_order != "fcfs")) {
    r.Error("spec.scheduler.policy",
            "the request-level baseline takes neither maxNumBatchedTokens, maxPrefillSlowdown, "
            "longPrefillTokenThreshold nor schedulingOrder priority");
  }
  if (s.contains("apiKeys") && !s["apiKeys"].is_null()) {
    const json& keys = r.Object(s, "apiKeys", "spec.scheduler.apiKeys");
    r.String(keys, "secretName", "spec.scheduler.apiKeys.secretName", &out.api_keys.secret_name);
    r.String(keys, "key", "spec.scheduler.apiKeys.key", &out.api_keys.key);
    if (out.api_keys.secret_name.empty()) r.Error("spec.scheduler.apiKeys.secretName", "is required");
    if (out.api_keys.key.empty()) r.Error("spec.scheduler.apiKeys.key", "must not be empty");
  }
}

void ReadScheduler(SpecReader& r, const json& spec, OrcaDeployment& d) {
  const json& s = r.Object(spec, "scheduler", "spec.scheduler");
  SchedulerSpec& out = d.scheduler;
  r.String(s, "policy", "spec.scheduler.policy", &out.policy, {"orca", "paged", "request-level"});
  r.Int(s, "maxBatchSize", "spec.scheduler.maxBatchSize", 1, 4096, &out.max_batch_size);
  r.Int(s, "maxQueued", "spec.scheduler.maxQueued", 1, kInt32Max, &out.max_queued);
  r.Int(s, "numWorkers", "spec.scheduler.numWorkers", 0, 256, &out.num_workers);
  r.Resources(s, "spec.scheduler.resources", &out.resources);
  r.Extras(s, "spec.scheduler", &out.extras);
  r.String(s, "image", "spec.scheduler.image", &out.image);
  ReadSchedulingKnobs(r, s, out);
  ReadKvBudget(r, s, d);
}

void ReadWorker(SpecReader& r, const json& spec, OrcaDeployment& d) {
  const json& w = r.Object(spec, "worker", "spec.worker");
  r.Resources(w, "spec.worker.resources", &d.worker.resources);
  r.Int(w, "threads", "spec.worker.threads", 0, 1024, &d.worker.threads);
  r.Int(w, "kvLocalSlots", "spec.worker.kvLocalSlots", 0, INT64_MAX, &d.worker.kv_local_slots);
  r.StringMap(w, "nodeSelector", "spec.worker.nodeSelector", &d.worker.node_selector);
  r.String(w, "image", "spec.worker.image", &d.worker.image);
  r.String(w, "runtimeClassName", "spec.worker.runtimeClassName", &d.worker.runtime_class_name);
  if (w.contains("shmSize") && !w["shmSize"].is_null()) {
    auto shm = ParseQuantity(w["shmSize"], "spec.worker.shmSize");
    if (!shm.ok()) {
      r.Add(shm.status());
    } else if (*shm < (1 << 20)) {
      r.Error("spec.worker.shmSize", absl::StrCat("must be at least 1Mi, got ", QuantityText(w["shmSize"])));
    } else {
      d.worker.shm_size = QuantityText(w["shmSize"]);
    }
  }
  r.Extras(w, "spec.worker", &d.worker.extras);
  if (w.contains("affinity") && !w["affinity"].is_null()) {
    if (!w["affinity"].is_object()) {
      r.Error("spec.worker.affinity", "must be an object (a pod's affinity)");
    } else {
      d.worker.affinity = w["affinity"];
    }
  }
  if (w.contains("topologySpreadConstraints") && !w["topologySpreadConstraints"].is_null()) {
    if (!w["topologySpreadConstraints"].is_array()) {
      r.Error("spec.worker.topologySpreadConstraints", "must be a list");
    } else {
      d.worker.topology_spread_constraints = w["topologySpreadConstraints"];
    }
  }
  if (w.contains("tolerations") && !w["tolerations"].is_null()) {
    if (!w["tolerations"].is_array()) {
      r.Error("spec.worker.tolerations", "must be a list");
    } else {
      d.worker.tolerations = w["tolerations"];
    }
  }
  // Each pod hosts `tensor` shards, one GPU each: the pod must ask for exactly that many.
  for (const auto* m : {&d.worker.resources.limits, &d.worker.resources.requests}) {
    auto it = m->find("nvidia.com/gpu");
    if (it == m->end()) continue;
    auto gpus = ParseQuantity(json(it->second), "spec.worker.resources[nvidia.com/gpu]");
    if (gpus.ok() && *gpus != d.tensor) {
      r.Error(absl::StrCat("spec.worker.resources.", m == &d.worker.resources.limits ? "limits" : "requests",
                           "[nvidia.com/gpu]"),
              absl::StrCat("is ", *gpus, " but parallelism.tensor is ", d.tensor,
                           ": each worker pod runs one tensor-parallel shard per GPU"));
    }
  }
}

void ReadGateway(SpecReader& r, const json& spec, OrcaDeployment& d) {
  const json& g = r.Object(spec, "gateway", "spec.gateway");
  r.Int(g, "replicas", "spec.gateway.replicas", 0, 1024, &d.gateway.replicas);
  const json& svc = r.Object(g, "service", "spec.gateway.service");
  r.String(svc, "type", "spec.gateway.service.type", &d.gateway.service_type,
           {"ClusterIP", "NodePort", "LoadBalancer"});
  r.Int(svc, "port", "spec.gateway.service.port", 1, 65535, &d.gateway.port);
  r.StringMap(svc, "annotations", "spec.gateway.service.annotations", &d.gateway.service_annotations);
  if (g.contains("apiKeys") && !g["apiKeys"].is_null()) {
    const json& keys = r.Object(g, "apiKeys", "spec.gateway.apiKeys");
    r.String(keys, "secretName", "spec.gateway.apiKeys.secretName", &d.gateway.api_keys_secret);
    r.String(keys, "key", "spec.gateway.apiKeys.key", &d.gateway.api_keys_key);
    if (d.gateway.api_keys_secret.empty()) r.Error("spec.gateway.apiKeys.secretName", "is required");
    if (d.gateway.api_keys_key.empty()) r.Error("spec.gateway.apiKeys.key", "must not be empty");
  }
  r.Int(g, "drainGraceSeconds", "spec.gateway.drainGraceSeconds", 0, 3600, &d.gateway.drain_grace_seconds);
  r.Resources(g, "spec.gateway.resources", &d.gateway.resources);
  r.Extras(g, "spec.gateway", &d.gateway.extras);
  r.String(g, "image", "spec.gateway.image", &d.gateway.image);
}

void ReadMonitoring(SpecReader& r, const json& spec, OrcaDeployment& d) {
  const json& m = r.Object(spec, "monitoring", "spec.monitoring");
  const json& sm = r.Object(m, "serviceMonitor", "spec.monitoring.serviceMonitor");
  r.Bool(sm, "enabled", "spec.monitoring.serviceMonitor.enabled", &d.monitoring.service_monitor);
  r.String(sm, "interval", "spec.monitoring.serviceMonitor.interval", &d.monitoring.interval);
  r.StringMap(sm, "labels", "spec.monitoring.serviceMonitor.labels", &d.monitoring.labels);
  static const std::regex kDuration("^[0-9]+(ms|s|m|h)$");
  if (!std::regex_match(d.monitoring.interval, kDuration)) {
    r.Error("spec.monitoring.serviceMonitor.interval",
            absl::StrCat("'", d.monitoring.interval, "' is not a duration such as 30s or 1m"));
  }
}

void ReadRollout(SpecReader& r, const json& spec, OrcaDeployment& d) {
  const json& ro = r.Object(spec, "rollout", "spec.rollout");
  r.Int(ro, "maxUnavailable", "spec.rollout.maxUnavailable", 0, 64, &d.rollout.max_unavailable);
  r.Int(ro, "maxSurge", "spec.rollout.maxSurge", 0, 64, &d.rollout.max_surge);
  if (d.rollout.max_unavailable == 0 && d.rollout.max_surge == 0) {
    r.Error("spec.rollout", "maxUnavailable and maxSurge cannot both be 0: no replica could ever be replaced");
  }
  const json& np = r.Object(spec, "networkPolicy", "spec.networkPolicy");
  r.Bool(np, "enabled", "spec.networkPolicy.enabled", &d.network_policy);
}

void CheckNames(SpecReader& r, const OrcaDeployment& d) {
  static const std::regex kDnsLabel("^[a-z]([-a-z0-9]*[a-z0-9])?$");
  if (!std::regex_match(d.name, kDnsLabel)) {
    r.Error("metadata.name", absl::StrCat("'", d.name, "' must be a DNS label (lower-case letters, digits, '-')"));
    return;
  }
  const int32_t last = d.replicas > 0 ? d.replicas - 1 : 0;
  const std::string longest = absl::StrCat(d.name, "-r", last, "-", std::string(kRevisionLength, 'x'), "-sched");
  if (longest.size() > kMaxStatefulSetNameLength) {
    r.Error("metadata.name",
            absl::StrCat("'", d.name, "' is too long: StatefulSet '", longest, "' would have ", longest.size(),
                         " characters, the limit is ", kMaxStatefulSetNameLength, " (name length + digits of the last ",
                         "replica index must be at most ", kMaxNamePlusReplicaDigits, ")"));
  }
}

}  // namespace

bool OrcaDeployment::UsesGpus() const {
  for (const auto* m : {&worker.resources.limits, &worker.resources.requests}) {
    auto it = m->find("nvidia.com/gpu");
    if (it == m->end()) continue;
    auto gpus = ParseQuantity(json(it->second), "nvidia.com/gpu");
    if (gpus.ok() && *gpus > 0) return true;
  }
  return false;
}

absl::StatusOr<OrcaDeployment> ParseOrcaDeployment(const json& object) {
  if (!object.is_object()) return absl::InvalidArgumentError("an OrcaDeployment must be a JSON object");
  SpecReader r;
  OrcaDeployment d;
  const json& meta = r.Object(object, "metadata", "metadata");
  r.String(meta, "name", "metadata.name", &d.name);
  r.String(meta, "namespace", "metadata.namespace", &d.namespace_);
  r.String(meta, "uid", "metadata.uid", &d.uid);
  r.Int(meta, "generation", "metadata.generation", 0, INT64_MAX, &d.generation);
  if (d.namespace_.empty()) d.namespace_ = "default";
  if (!object.contains("spec")) r.Error("spec", "is required");
  const json& spec = r.Object(object, "spec", "spec");

  r.Int(spec, "replicas", "spec.replicas", 0, 64, &d.replicas);
  const json& par = r.Object(spec, "parallelism", "spec.parallelism");
  r.Int(par, "pipeline", "spec.parallelism.pipeline", 1, 64, &d.pipeline);
  r.Int(par, "tensor", "spec.parallelism.tensor", 1, 16, &d.tensor);
  ReadModel(r, spec, d);
  ReadImage(r, spec, d);
  ReadScheduler(r, spec, d);
  ReadWorker(r, spec, d);
  ReadGateway(r, spec, d);
  ReadMonitoring(r, spec, d);
  ReadRollout(r, spec, d);
  CheckNames(r, d);
  if (!r.errors().empty()) return absl::InvalidArgumentError(absl::StrJoin(r.errors(), "; "));
  return d;
}

}  // namespace orca::k8s
