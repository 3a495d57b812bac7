#include "kernels/cpu/onednn_gemm.h"

#include <omp.h>

#include <dnnl.hpp>

#include "core/common/logging.h"

namespace orca::kernels {

namespace {
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, int, bool, bool>;
constexpr size_t kMaxCachedPrimitives = 512;

dnnl::memory::data_type ToDnnl(DType t) {
  switch (t) {
    case DType::kF32:
      return dnnl::memory::data_type::f32;
    case DType::kBF16:
      return dnnl::memory::data_type::bf16;
    case DType::kF16:
      return dnnl::memory::data_type::f16;
    default:  // quantized weights never reach oneDNN (they are packed: quant_gemm.h)
      return dnnl::memory::data_type::undef;
  }
}
}  // namespace

struct OnednnGemm::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
    std::list<Key>::iterator lru;
  };
  std::map<Key, Entry> cache;
  std::list<Key> lru;
  std::vector<uint16_t> x_bf16;

  Entry& Get(int64_t m, const WeightView& w, bool has_bias, bool accumulate) {
    Key key{m, w.n, w.k, w.ld, w.transposed, static_cast<int>(w.dtype), has_bias, accumulate};
    auto it = cache.find(key);
    if (it != cache.end()) {
      lru.splice(lru.begin(), lru, it->second.lru);
      return it->second;
    }
    using dt = dnnl::memory::data_type;
    const dt wdt = ToDnnl(w.dtype);
    const dt src_dt = w.dtype == DType::kF32 ? dt::f32 : wdt;
    dnnl::memory::desc src({m, w.k}, src_dt, dnnl::memory::dims{w.k, 1});
    // Logical weights are [k, n]; a row-major [n, k] tensor is its transpose.
    dnnl::memory::desc wei({w.k, w.n}, wdt, w.transposed ? dnnl::memory::dims{w.ld, 1} : dnnl::memory::dims{1, w.ld});
    dnnl::memory::desc dst({m, w.n}, dt::f32, dnnl::memory::dims{w.n, 1});
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd;
    if (has_bias) {
      dnnl::memory::desc bias({1, w.n}, dt::f32, dnnl::memory::dims{w.n, 1});
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, bias, dst), attr, engine);
    } else {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), attr, engine);
    }
    if (cache.size() >= kMaxCachedPrimitives) {
      cache.erase(lru.back());
      lru.pop_back();
    }
    lru.push_front(key);
    auto [ins, ok] = cache.emplace(key, Entry{pd, dnnl::matmul(pd), lru.begin()});
    return ins->second;
  }
};

OnednnGemm::OnednnGemm() : impl_(std::make_unique<Impl>()) {}
OnednnGemm::~OnednnGemm() = default;

void OnednnGemm::Run(const float* x, int64_t m, const WeightView& w, const float* bias, float* y, bool accumulate,
                     int num_threads) {
  omp_set_num_threads(num_threads);
  try {
    Impl::Entry& e = impl_->Get(m, w, bias != nullptr, accumulate);
    const void* src_ptr = x;
    if (w.dtype != DType::kF32) {
      const size_t n = static_cast<size_t>(m * w.k);
      if (impl_->x_bf16.size() < n) impl_->x_bf16.resize(n);
      ConvertFromF32(x, w.dtype, impl_->x_bf16.data(), n);
      src_ptr = impl_->x_bf16.data();
    }
    auto& eng = impl_->engine;
    dnnl::memory src(e.pd.src_desc(), eng, const_cast<void*>(src_ptr));
    dnnl::memory wei(e.pd.weights_desc(), eng, const_cast<void*>(w.data));
    dnnl::memory dst(e.pd.dst_desc(), eng, y);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e.pd.bias_desc(), eng, const_cast<float*>(bias)));
    e.prim.execute(impl_->stream, args);
    impl_->stream.wait();
  } catch (const dnnl::error& err) {
    ORCA_LOG(FATAL) << "oneDNN matmul failed (m=" << m << " n=" << w.n << " k=" << w.k << "): " << err.what();
  }
}

}  // namespace orca::kernels
