#include "core/engine/kv_cache.h"

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"

namespace orca::engine {

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const Options& o, kernels::Backend* backend) {
  if (o.n_slots <= 0) return absl::InvalidArgumentError(absl::StrCat("n_slots must be positive, got ", o.n_slots));
  if (o.block_size <= 0 || o.block_size > 256)
    return absl::InvalidArgumentError(absl::StrCat("KV block size must be in [1, 256], got ", o.block_size));
  if (o.dtype != DType::kF32 && o.dtype != DType::kBF16)
    return absl::InvalidArgumentError(absl::StrCat("KV cache dtype must be f32 or bf16, not ", DTypeName(o.dtype)));
  std::unique_ptr<KvCache> kv(new KvCache(o, backend));
  kv->num_blocks_ = (o.n_slots + o.block_size - 1) / o.block_size;
  if (kv->num_blocks_ > INT32_MAX / o.block_size) return absl::InvalidArgumentError("n_slots is too large");
  kv->layer_elems_ = static_cast<size_t>(kv->num_blocks_) * o.block_size * o.num_kv_heads * o.head_dim;
  kv->bytes_ = kv->layer_elems_ * 2 * static_cast<size_t>(std::max(o.num_layers, 0)) * DTypeSize(o.dtype);
  if (kv->bytes_ > 0) {
    auto pool = backend->Allocate(kv->bytes_);
    if (!pool.ok())
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate the KV pool: ", kv->bytes_ / (1 << 20),
                                                       " MiB for ", o.n_slots, " slots: ", pool.status().message()));
    kv->pool_ = *pool;
  }
  kv->free_blocks_.reserve(static_cast<size_t>(kv->num_blocks_));
  for (int64_t b = kv->num_blocks_ - 1; b >= 0; --b) kv->free_blocks_.push_back(static_cast<int32_t>(b));
  return kv;
}

KvCache::~KvCache() {
  if (pool_ != nullptr) backend_->Free(pool_);
}

absl::Status KvCache::Reserve(uint64_t id, int32_t max_tokens) {
  if (max_tokens <= 0)
    return absl::InvalidArgumentError(absl::StrCat("request ", id, ": max_tokens must be positive, got ", max_tokens));
  if (requests_.contains(id))
    return absl::AlreadyExistsError(absl::StrCat("request ", id, " already holds a KV reservation"));
  const int64_t need = (max_tokens + options_.block_size - 1) / options_.block_size;
  if (need > num_free_blocks())
    return absl::ResourceExhaustedError(absl::StrCat("request ", id, " needs ", need, " KV blocks (", max_tokens,
                                                     " tokens) but only ", num_free_blocks(), " of ", num_blocks_,
                                                     " are free"));
  Entry e;
  e.max_tokens = max_tokens;
  e.blocks.resize(static_cast<size_t>(need));
  for (auto& b : e.blocks) {
    b = free_blocks_.back();
    free_blocks_.pop_back();
  }
  requests_.emplace(id, std::move(e));
  return absl::OkStatus();
}

absl::Status KvCache::Release(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV reservation"));
  for (int32_t b : it->second.blocks) free_blocks_.push_back(b);
  requests_.erase(it);
  return absl::OkStatus();
}

void KvCache::ReleaseAll() {
  for (auto& [id, e] : requests_)
    for (int32_t b : e.blocks) free_blocks_.push_back(b);
  requests_.clear();
}

absl::Status KvCache::CheckWrite(uint64_t id, int32_t start, int32_t count) const {
  auto it = requests_.find(id);
  if (it == requests_.end())
    return absl::FailedPreconditionError(absl::StrCat("request ", id, " has no KV reservation"));
  const Entry& e = it->second;
  if (count <= 0)
    return absl::InvalidArgumentError(absl::StrCat("request ", id, ": an iteration needs at least one token"));
  if (start < 0 || start > e.num_cached)
    return absl::InvalidArgumentError(
        absl::StrCat("request ", id, ": start position ", start, " skips past the ", e.num_cached, " cached tokens"));
  if (static_cast<int64_t>(start) + count > e.max_tokens)
    return absl::OutOfRangeError(absl::StrCat("request ", id, ": tokens up to position ", start + count,
                                              " exceed its KV reservation of ", e.max_tokens));
  return absl::OkStatus();
}

void KvCache::CommitWrite(uint64_t id, int32_t start, int32_t count) {
  Entry& e = requests_.at(id);
  e.num_cached = start + count;
}

int32_t KvCache::Slot(uint64_t id, int32_t position) const {
  const Entry& e = requests_.at(id);
  return e.blocks[position / options_.block_size] * options_.block_size + position % options_.block_size;
}

const std::vector<int32_t>* KvCache::BlockTable(uint64_t id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second.blocks;
}

kernels::KvLayerView KvCache::Layer(int32_t l) const {
  kernels::KvLayerView v;
  const size_t es = DTypeSize(options_.dtype);
  uint8_t* base = static_cast<uint8_t*>(pool_) + static_cast<size_t>(l) * 2 * layer_elems_ * es;
  v.k = base;
  v.v = base + layer_elems_ * es;
  v.dtype = options_.dtype;
  v.block_size = options_.block_size;
  v.num_kv_heads = options_.num_kv_heads;
  v.head_dim = options_.head_dim;
  return v;
}

}  // namespace orca::engine
