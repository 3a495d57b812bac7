#include "core/engine/kv_cache.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"

namespace orca::engine {

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const Options& o, kernels::Backend* backend) {
  if (o.n_slots <= 0) return absl::InvalidArgumentError(absl::StrCat("n_slots must be positive, got ", o.n_slots));
  if (o.block_size <= 0 || o.block_size > 256)
    return absl::InvalidArgumentError(absl::StrCat("KV block size must be in [1, 256], got ", o.block_size));
  if (o.dtype != DType::kF32 && o.dtype != DType::kBF16)
    return absl::InvalidArgumentError(absl::StrCat("KV cache dtype must be f32 or bf16, not ", DTypeName(o.dtype)));
  const int32_t num_layers = std::max(o.num_layers, 0);
  int32_t num_local = 0;
  if (o.window > 0 && o.n_local_slots > 0)
    for (int32_t l = 0; l < num_layers; ++l)
      num_local += l < static_cast<int32_t>(o.local_layers.size()) && o.local_layers[l];
  if (o.n_local_slots < 0)
    return absl::InvalidArgumentError(absl::StrCat("n_local_slots must not be negative, got ", o.n_local_slots));
  std::unique_ptr<KvCache> kv(new KvCache(o, backend));
  kv->num_blocks_ = (o.n_slots + o.block_size - 1) / o.block_size;
  const int64_t num_local_blocks = num_local > 0 ? (o.n_local_slots + o.block_size - 1) / o.block_size : 0;
  if (std::max(kv->num_blocks_, num_local_blocks) > INT32_MAX / o.block_size)
    return absl::InvalidArgumentError(absl::StrCat(
        "n_slots must be at most ", INT32_MAX / o.block_size * o.block_size, " with KV blocks of ", o.block_size,
        " tokens, got ", o.n_slots, num_local > 0 ? absl::StrCat(" (local ", o.n_local_slots, ")") : ""));
  kv->num_local_blocks_ = num_local_blocks;
  // Each layer's place: its index among the layers of the pool it lives in.
  kv->layer_local_.assign(static_cast<size_t>(num_layers), false);
  kv->layer_index_.assign(static_cast<size_t>(num_layers), 0);
  for (int32_t l = 0, g = 0, lo = 0; l < num_layers; ++l) {
    kv->layer_local_[l] = num_local > 0 && l < static_cast<int32_t>(o.local_layers.size()) && o.local_layers[l];
    kv->layer_index_[l] = kv->layer_local_[l] ? lo++ : g++;
  }
  const size_t es = DTypeSize(o.dtype), row = static_cast<size_t>(o.block_size) * o.num_kv_heads * o.head_dim;
  kv->layer_elems_ = static_cast<size_t>(kv->num_blocks_) * row;
  kv->local_layer_elems_ = static_cast<size_t>(num_local_blocks) * row;
  const size_t main_bytes = kv->layer_elems_ * 2 * static_cast<size_t>(num_layers - num_local) * es;
  const size_t local_bytes = kv->local_layer_elems_ * 2 * static_cast<size_t>(num_local) * es;
  kv->bytes_ = main_bytes + local_bytes;
  for (auto [bytes, ptr, slots] :
       {std::tuple{main_bytes, &kv->pool_, o.n_slots}, std::tuple{local_bytes, &kv->local_pool_, o.n_local_slots}}) {
    if (bytes == 0) continue;
    auto pool = backend->Allocate(bytes);
    if (!pool.ok())
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate the KV pool: ", bytes / (1 << 20), " MiB for ",
                                                       slots, " slots: ", pool.status().message()));
    *ptr = *pool;
    // Resident from the start: no request pays for the pool's page faults, and a pool the
    // machine cannot hold fails here, at load, not in the middle of serving.
    backend->Prefault(*ptr, bytes);
  }
  kv->block_refs_.assign(static_cast<size_t>(kv->num_blocks_), 0);
  kv->free_blocks_.reserve(static_cast<size_t>(kv->num_blocks_));
  for (int64_t b = kv->num_blocks_ - 1; b >= 0; --b) kv->free_blocks_.push_back(static_cast<int32_t>(b));
  kv->local_free_.reserve(static_cast<size_t>(num_local_blocks));
  for (int64_t b = num_local_blocks - 1; b >= 0; --b) kv->local_free_.push_back(static_cast<int32_t>(b));
  return kv;
}

KvCache::~KvCache() {
  if (pool_ != nullptr) backend_->Free(pool_);
  if (local_pool_ != nullptr) backend_->Free(local_pool_);
}

absl::Status KvCache::Reserve(uint64_t id, int32_t kv_reservation_slots) {
  if (kv_reservation_slots <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("request ", id, ": kv_reservation_slots must be positive, got ", kv_reservation_slots));
  if (requests_.contains(id))
    return absl::AlreadyExistsError(absl::StrCat("request ", id, " already holds a KV reservation"));
  if (num_assigned_requests_ > 0)
    return absl::FailedPreconditionError(absl::StrCat(
        "request ", id, " asks this stage to reserve its KV, but the scheduler owns the block tables of ",
        num_assigned_requests_, " requests here (scheduler and workers disagree on who allocates KV blocks)"));
  const int64_t need = (kv_reservation_slots + options_.block_size - 1) / options_.block_size;
  if (need > num_free_blocks())
    return absl::ResourceExhaustedError(absl::StrCat("request ", id, " needs ", need, " KV blocks (",
                                                     kv_reservation_slots, " tokens) but only ", num_free_blocks(),
                                                     " of ", num_blocks_, " are free"));
  Entry e;
  e.kv_reservation_slots = kv_reservation_slots;
  e.blocks.resize(static_cast<size_t>(need));
  for (auto& b : e.blocks) {
    b = free_blocks_.back();
    free_blocks_.pop_back();
  }
  requests_.emplace(id, std::move(e));
  return absl::OkStatus();
}

absl::Status KvCache::CheckBlockIds(uint64_t id, absl::Span<const int32_t> block_ids,
                                    const std::vector<int32_t>& existing) const {
  for (size_t i = 0; i < block_ids.size(); ++i) {
    const int32_t b = block_ids[i];
    if (b < 0 || b >= num_blocks_)
      return absl::InvalidArgumentError(
          absl::StrCat("request ", id, ": KV block ", b, " is outside this stage's pool of ", num_blocks_, " blocks"));
    const bool twice = std::find(existing.begin(), existing.end(), b) != existing.end() ||
                       std::find(block_ids.begin(), block_ids.begin() + i, b) != block_ids.begin() + i;
    if (twice) return absl::InvalidArgumentError(absl::StrCat("request ", id, ": KV block ", b, " listed twice"));
  }
  return absl::OkStatus();
}

absl::Status KvCache::Assign(uint64_t id, int32_t kv_reservation_slots, absl::Span<const int32_t> block_ids,
                             int32_t num_cached) {
  if (kv_reservation_slots <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("request ", id, ": kv_reservation_slots must be positive, got ", kv_reservation_slots));
  if (requests_.contains(id))
    return absl::AlreadyExistsError(absl::StrCat("request ", id, " already holds a KV reservation"));
  if (static_cast<int64_t>(requests_.size()) > num_assigned_requests_)
    return absl::FailedPreconditionError(
        absl::StrCat("request ", id, " comes with the scheduler's block table, but this stage reserved the KV of ",
                     requests_.size() - num_assigned_requests_,
                     " requests itself (scheduler and workers disagree on who allocates KV blocks)"));
  ORCA_RETURN_IF_ERROR(CheckBlockIds(id, block_ids, {}));
  if (num_cached < 0 || static_cast<int64_t>(num_cached) > static_cast<int64_t>(block_ids.size()) * options_.block_size)
    return absl::InvalidArgumentError(absl::StrCat("request ", id, ": ", num_cached, " cached positions but ",
                                                   block_ids.size(), " blocks of ", options_.block_size));
  if (num_cached > 0 && has_local_pool())
    return absl::FailedPreconditionError(absl::StrCat(
        "request ", id, " comes with ", num_cached,
        " cached positions, but this stage keeps only the window of its "
        "sliding-window layers, and a cached prefix's window was never computed here: prefix caching needs the "
        "workers started with --swa-full"));
  Entry e;
  e.kv_reservation_slots = kv_reservation_slots;
  e.num_cached = num_cached;
  e.assigned = true;
  e.blocks.assign(block_ids.begin(), block_ids.end());
  for (int32_t b : e.blocks)
    if (block_refs_[b]++ == 0) ++num_assigned_blocks_;
  requests_.emplace(id, std::move(e));
  ++num_assigned_requests_;
  return absl::OkStatus();
}

absl::Status KvCache::AppendBlocks(uint64_t id, absl::Span<const int32_t> block_ids) {
  auto it = requests_.find(id);
  if (it == requests_.end() || !it->second.assigned)
    return absl::FailedPreconditionError(
        absl::StrCat("request ", id, " got KV block ids but has no block table from the scheduler here"));
  ORCA_RETURN_IF_ERROR(CheckBlockIds(id, block_ids, it->second.blocks));
  for (int32_t b : block_ids) {
    it->second.blocks.push_back(b);
    if (block_refs_[b]++ == 0) ++num_assigned_blocks_;
  }
  return absl::OkStatus();
}

void KvCache::DropLastBlocks(uint64_t id, size_t count) {
  auto it = requests_.find(id);
  if (it == requests_.end() || !it->second.assigned) return;
  std::vector<int32_t>& blocks = it->second.blocks;
  for (size_t i = 0; i < count && !blocks.empty(); ++i) {
    if (--block_refs_[blocks.back()] == 0) --num_assigned_blocks_;
    blocks.pop_back();
  }
}

absl::Status KvCache::Release(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV reservation"));
  if (it->second.assigned) {
    DropLastBlocks(id, it->second.blocks.size());
    --num_assigned_requests_;
  } else {
    for (int32_t b : it->second.blocks) free_blocks_.push_back(b);
  }
  const Entry& e = it->second;
  for (size_t i = e.local_first; i < e.local.size(); ++i) local_free_.push_back(e.local[i]);
  requests_.erase(it);
  return absl::OkStatus();
}

void KvCache::ReleaseAll() {
  for (auto& [id, e] : requests_)
    if (!e.assigned)
      for (int32_t b : e.blocks) free_blocks_.push_back(b);
  requests_.clear();
  local_free_.clear();
  for (int64_t b = num_local_blocks_ - 1; b >= 0; --b) local_free_.push_back(static_cast<int32_t>(b));
  std::fill(block_refs_.begin(), block_refs_.end(), 0);
  num_assigned_blocks_ = 0;
  num_assigned_requests_ = 0;
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
  if (static_cast<int64_t>(start) + count > e.kv_reservation_slots)
    return absl::OutOfRangeError(absl::StrCat("request ", id, ": tokens up to position ", start + count,
                                              " exceed its KV reservation of ", e.kv_reservation_slots));
  if (static_cast<int64_t>(start) + count > static_cast<int64_t>(e.blocks.size()) * options_.block_size)
    return absl::OutOfRangeError(absl::StrCat("request ", id, ": tokens up to position ", start + count,
                                              " exceed its block table of ", e.blocks.size(), " blocks of ",
                                              options_.block_size));
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

void KvCache::FreeOutOfWindow(uint64_t id, int32_t start) {
  if (!has_local_pool()) return;
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Entry& e = it->second;
  const int32_t first = std::max(0, start - options_.window + 1) / options_.block_size;
  for (; e.local_first < std::min<int32_t>(first, static_cast<int32_t>(e.local.size())); ++e.local_first)
    local_free_.push_back(e.local[e.local_first]);
}

absl::Status KvCache::AllocateLocal(uint64_t id, int32_t start, int32_t count) {
  if (!has_local_pool()) return absl::OkStatus();
  auto it = requests_.find(id);
  if (it == requests_.end())
    return absl::FailedPreconditionError(absl::StrCat("request ", id, " has no KV reservation"));
  Entry& e = it->second;
  const int32_t bs = options_.block_size;
  const int32_t first = std::max(0, start - options_.window + 1) / bs;
  if (first < e.local_first)
    return absl::FailedPreconditionError(absl::StrCat("request ", id, ": position ", start, " sees keys from block ",
                                                      first, " on, but its sliding-window KV before block ",
                                                      e.local_first, " was freed"));
  const int32_t last = (start + count - 1) / bs;
  const int64_t need = last + 1 - static_cast<int64_t>(e.local.size());
  if (need <= 0) return absl::OkStatus();
  if (need > static_cast<int64_t>(local_free_.size()))
    return absl::ResourceExhaustedError(
        absl::StrCat("request ", id, " needs ", need, " more blocks of sliding-window KV for positions up to ",
                     start + count - 1, " but only ", local_free_.size(), " of the local pool's ", num_local_blocks_,
                     " are free (the scheduler must count them: SlidingWindowKvBlocks)"));
  // Blocks no longer held stay in the table as stale entries: attention never reads them.
  for (int64_t i = 0; i < need; ++i) {
    e.local.push_back(local_free_.back());
    local_free_.pop_back();
  }
  return absl::OkStatus();
}

int32_t KvCache::LocalSlot(uint64_t id, int32_t position) const {
  const Entry& e = requests_.at(id);
  return e.local[position / options_.block_size] * options_.block_size + position % options_.block_size;
}

const std::vector<int32_t>* KvCache::LocalBlockTable(uint64_t id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second.local;
}

const std::vector<int32_t>* KvCache::BlockTable(uint64_t id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second.blocks;
}

kernels::KvLayerView KvCache::Layer(int32_t l) const {
  kernels::KvLayerView v;
  const size_t es = DTypeSize(options_.dtype);
  const bool local = layer_local_[l];
  const size_t elems = local ? local_layer_elems_ : layer_elems_;
  uint8_t* base =
      static_cast<uint8_t*>(local ? local_pool_ : pool_) + static_cast<size_t>(layer_index_[l]) * 2 * elems * es;
  v.k = base;
  v.v = base + elems * es;
  v.dtype = options_.dtype;
  v.block_size = options_.block_size;
  v.num_kv_heads = options_.num_kv_heads;
  v.head_dim = options_.head_dim;
  return v;
}

}  // namespace orca::engine
