#pragma once
/// Element types of tensors (f32, f16, bf16) and the block-quantized weight
/// types of GGUF files (ggml's Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants
/// Q4_K, Q5_K, Q6_K), described by one traits table (ggml's type_traits): a
/// row per type with everything the loader, the kernels, tensor-parallel
/// sharding and `orca model quantize` ask of a type. They all read it through
/// TraitsOf and the functions below, so that adding a type is its DType value,
/// its block layout with decoder and quantizer (ggml_blocks.h,
/// ggml_quantize.h), its row in kDTypeTraits, and its kernels: the CPU
/// backend's panel row and kernels (kernels/cpu/quant_layout.h) and, for CUDA,
/// nothing more than the row (kernels/cuda/quant_kernels.cu decodes any block
/// type whose row says CudaGemm::kDequant).
///
/// A quantized type stores a row as a sequence of fixed-size blocks (32 or 256
/// values each, with their own scales): use DTypeRowBytes for its sizes;
/// DTypeSize is for the element types only.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/common/float16.h"
#include "core/common/ggml_blocks.h"
#include "core/common/ggml_quantize.h"

namespace orca {

enum class DType : uint8_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  // Block-quantized weight types (never activations or KV).
  kQ8_0 = 3,
  kQ4_0 = 4,
  kQ4_1 = 5,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ4_K = 8,
  kQ5_K = 9,
  kQ6_K = 10,
};

/// Which CPU GEMM computes with weights of a type (kernels/cpu/cpu_backend.cc
/// dispatches on it; the instruction set within it is chosen at run time).
enum class CpuGemm : uint8_t {
  kNone,   ///< no CPU kernels: the CPU backend refuses such weights
  kFloat,  ///< element types: oneDNN, the AVX-512 f32/bf16 panels, the bf16 dot products
  kInt8,   ///< repacked at load into quant panels (kernels/cpu/quant_layout.h) with a panel row
           ///< there; int8 dot products in portable C++, AVX-VNNI or AVX512-VNNI
};

/// Which CUDA GEMM computes with weights of a type (kernels/cuda).
enum class CudaGemm : uint8_t {
  kNone,     ///< no CUDA kernels: the CUDA backend refuses such weights
  kCublas,   ///< element types: cuBLAS
  kDequant,  ///< block types: quant_kernels.cu decodes the file's blocks inside the GEMM
};

/// An fp16 field of a block that holds a scale: NaN or infinity there makes
/// the block corrupt (every bit pattern of the quantized values is valid).
struct ScaleField {
  uint16_t offset = 0;         ///< byte offset in the block
  const char* name = nullptr;  ///< as error messages name it; nullptr: no field
};

/// One row of the traits table.
struct DTypeTraits {
  DType type;
  /// ggml's type name with a lower-case prefix ("f32", "q8_0", "q4_K"): DTypeName,
  /// ParseWeightDType, messages. GGUF spells it upper-case (GgufFile::GgmlTypeName).
  const char* name;
  uint32_t ggml_type;   ///< the type's id in GGUF tensor infos (ggml's enum ggml_type)
  int64_t block_elems;  ///< values per block (1 for the element types)
  size_t block_bytes;   ///< bytes per block (per element for the element types)
  bool quantized;
  /// Tensor parallelism: a shard's slice of a row (its first value and its
  /// length) must be a multiple of this many values. Block types: whole blocks
  /// (a block's values share its scales, so a split inside one cannot be computed).
  int64_t split_elems;
  ScaleField scales[2];  ///< the block's fp16 scale fields (FindCorruptBlock)
  /// Decodes `n` values (whole blocks) of a row to f32.
  void (*to_f32)(const void* src, float* dst, int64_t n);
  /// Encodes `n` finite f32 values (whole blocks) as this type; nullptr: no
  /// quantizer, so `orca model quantize` cannot write the type.
  void (*from_f32)(const float* src, void* dst, int64_t n);
  /// `orca model quantize` (llama.cpp's rule): the type written instead when a
  /// row is not whole blocks of this one; F16 when that one does not divide it either.
  DType quantize_fallback;
  CpuGemm cpu_gemm;
  CudaGemm cuda_gemm;
};

namespace dtype_internal {

template <DType T>
void ElementsToF32(const void* src, float* dst, int64_t n) {
  if constexpr (T == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  } else {
    auto* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = T == DType::kBF16 ? Bf16ToF32(s[i]) : F16ToF32(s[i]);
  }
}

template <DType T>
void ElementsFromF32(const float* src, void* dst, int64_t n) {
  if constexpr (T == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  } else {
    auto* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = T == DType::kBF16 ? F32ToBf16(src[i]) : F32ToF16(src[i]);
  }
}

}  // namespace dtype_internal

/// The block struct (ggml_blocks.h) of each block type: GgmlBlock<T>::type (its
/// row's sizes, decoder and quantizer come from it; the CUDA kernels decode it).
template <DType T>
struct GgmlBlock {};
// clang-format off
template <> struct GgmlBlock<DType::kQ8_0> { using type = ggml::BlockQ8_0; };
template <> struct GgmlBlock<DType::kQ4_0> { using type = ggml::BlockQ4_0; };
template <> struct GgmlBlock<DType::kQ4_1> { using type = ggml::BlockQ4_1; };
template <> struct GgmlBlock<DType::kQ5_0> { using type = ggml::BlockQ5_0; };
template <> struct GgmlBlock<DType::kQ5_1> { using type = ggml::BlockQ5_1; };
template <> struct GgmlBlock<DType::kQ4_K> { using type = ggml::BlockQ4_K; };
template <> struct GgmlBlock<DType::kQ5_K> { using type = ggml::BlockQ5_K; };
template <> struct GgmlBlock<DType::kQ6_K> { using type = ggml::BlockQ6_K; };
// clang-format on

/// The row of an element type stored as `Storage` (f32, f16, bf16).
template <DType T, typename Storage>
constexpr DTypeTraits ElementTypeRow(const char* name, uint32_t ggml_type) {
  return {T,
          name,
          ggml_type,
          1,
          sizeof(Storage),
          false,
          1,
          {},
          &dtype_internal::ElementsToF32<T>,
          &dtype_internal::ElementsFromF32<T>,
          T,
          CpuGemm::kFloat,
          CudaGemm::kCublas};
}

/// The row of a block type: block size, bytes, decoder and quantizer come from
/// its block struct (GgmlBlock<T>); a shard holds whole blocks.
template <DType T>
constexpr DTypeTraits BlockTypeRow(const char* name, uint32_t ggml_type, ScaleField scale, ScaleField second_scale,
                                   DType quantize_fallback, CpuGemm cpu, CudaGemm cuda) {
  using Block = typename GgmlBlock<T>::type;
  return {T,
          name,
          ggml_type,
          Block::kElems,
          sizeof(Block),
          true,
          Block::kElems,
          {scale, second_scale},
          &ggml::DecodeRow<Block>,
          &ggml::EncodeRow<Block>,
          quantize_fallback,
          cpu,
          cuda};
}

/// The traits table, indexed by DType. "id" is the GGUF (ggml) type id; gguf_file.cc names them all.
// clang-format off
inline constexpr DTypeTraits kDTypeTraits[] = {
  //             type          storage   name    id
  ElementTypeRow<DType::kF32,  float>   ("f32",  0),
  ElementTypeRow<DType::kF16,  uint16_t>("f16",  1),
  ElementTypeRow<DType::kBF16, uint16_t>("bf16", 30),
  //           type          name    id  fp16 scale fields        quantize      CPU GEMM        CUDA GEMM
  //                                                              fallback
  BlockTypeRow<DType::kQ8_0>("q8_0", 8,  {0, "d"},   {},          DType::kF16,  CpuGemm::kInt8, CudaGemm::kDequant),
  BlockTypeRow<DType::kQ4_0>("q4_0", 2,  {0, "d"},   {},          DType::kF16,  CpuGemm::kInt8, CudaGemm::kDequant),
  BlockTypeRow<DType::kQ4_1>("q4_1", 3,  {0, "d"},   {2, "m"},    DType::kF16,  CpuGemm::kInt8, CudaGemm::kDequant),
  BlockTypeRow<DType::kQ5_0>("q5_0", 6,  {0, "d"},   {},          DType::kF16,  CpuGemm::kInt8, CudaGemm::kDequant),
  BlockTypeRow<DType::kQ5_1>("q5_1", 7,  {0, "d"},   {2, "m"},    DType::kF16,  CpuGemm::kInt8, CudaGemm::kDequant),
  BlockTypeRow<DType::kQ4_K>("q4_K", 12, {0, "d"},   {2, "dmin"}, DType::kQ5_0, CpuGemm::kInt8, CudaGemm::kDequant),
  BlockTypeRow<DType::kQ5_K>("q5_K", 13, {0, "d"},   {2, "dmin"}, DType::kQ5_1, CpuGemm::kInt8, CudaGemm::kDequant),
  BlockTypeRow<DType::kQ6_K>("q6_K", 14, {208, "d"}, {},          DType::kQ8_0, CpuGemm::kInt8, CudaGemm::kDequant),
};
// clang-format on

namespace dtype_internal {
// What TraitsOf answers for a value outside the enum (not a type).
inline constexpr DTypeTraits kNotAType = {
    DType::kF32, "?", UINT32_MAX, 1, 0, false, 1, {}, nullptr, nullptr, DType::kF32, CpuGemm::kNone, CudaGemm::kNone};
constexpr bool RowsInEnumOrder() {
  for (size_t i = 0; i < std::size(kDTypeTraits); ++i)
    if (static_cast<size_t>(kDTypeTraits[i].type) != i) return false;
  return true;
}
}  // namespace dtype_internal
static_assert(dtype_internal::RowsInEnumOrder(), "kDTypeTraits[i] must describe DType i");

/// The row of `t`.
constexpr const DTypeTraits& TraitsOf(DType t) {
  const auto i = static_cast<size_t>(t);
  return i < std::size(kDTypeTraits) ? kDTypeTraits[i] : dtype_internal::kNotAType;
}

/// Calls f(std::integral_constant<DType, T>{}) with the type `t` as a
/// compile-time T if its row satisfies `Pred` (a constexpr predicate), for code
/// templated on the type (kernels): f is instantiated for those rows only.
/// Returns false, without calling f, for any other type.
template <bool (*Pred)(const DTypeTraits&), class F, size_t... I>
bool VisitDType(DType t, F&& f, std::index_sequence<I...>) {
  auto one = [&](auto index) {
    constexpr DType T = kDTypeTraits[decltype(index)::value].type;
    if constexpr (Pred(kDTypeTraits[decltype(index)::value])) {
      if (t == T) {
        f(std::integral_constant<DType, T>{});
        return true;
      }
    }
    return false;
  };
  return (one(std::integral_constant<size_t, I>{}) || ...);
}
template <bool (*Pred)(const DTypeTraits&), class F>
bool VisitDType(DType t, F&& f) {
  return VisitDType<Pred>(t, f, std::make_index_sequence<std::size(kDTypeTraits)>{});
}

constexpr bool IsQuantized(DType t) { return TraitsOf(t).quantized; }

/// Values per block: 1 for the element types, 32 or 256 for the quantized ones.
constexpr int64_t DTypeBlockElems(DType t) { return TraitsOf(t).block_elems; }

/// Bytes per block (per element for the element types).
constexpr size_t DTypeBlockBytes(DType t) { return TraitsOf(t).block_bytes; }

/// Bytes per element of an element type (f32, f16, bf16). Not meaningful for
/// quantized types: 0 there, so that a stride computed with it is visibly wrong.
constexpr size_t DTypeSize(DType t) { return IsQuantized(t) ? 0 : DTypeBlockBytes(t); }

/// Bytes of `n` consecutive values of a row; for quantized types `n` must be a
/// multiple of DTypeBlockElems (callers check it where it comes from input).
constexpr size_t DTypeRowBytes(DType t, int64_t n) {
  return static_cast<size_t>(n / DTypeBlockElems(t)) * DTypeBlockBytes(t);
}

/// Tensor parallelism's rule (DTypeTraits::split_elems): a shard may hold
/// values [offset, offset + len) of a row only if both are multiples of this.
constexpr int64_t DTypeSplitElems(DType t) { return TraitsOf(t).split_elems; }

/// "f32", "bf16", "q4_K", ... (quantized types as ggml names them, lower-case prefix).
constexpr const char* DTypeName(DType t) { return TraitsOf(t).name; }
/// Parses "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16". Returns false
/// otherwise (quantized types: ParseWeightDType).
bool ParseDType(std::string_view name, DType* out);
/// ParseDType plus the quantized types' names, case-insensitive: "q8_0", "q4_k", "Q6_K", ...
bool ParseWeightDType(std::string_view name, DType* out);

/// The DType of a ggml type id (GGUF tensor info); false for types Orca cannot use.
bool DTypeFromGgml(uint32_t ggml_type, DType* out);
/// The ggml type id of `t`.
constexpr uint32_t GgmlTypeOf(DType t) { return TraitsOf(t).ggml_type; }

/// Converts `n` elements of `src` (of an element type `from`: f32, f16, bf16)
/// to f32. Quantized rows: DequantizeRow.
void ConvertToF32(const void* src, DType from, float* dst, size_t n);
/// Converts `n` f32 elements to the element type `to`. Quantized: QuantizeRow.
void ConvertFromF32(const float* src, DType to, void* dst, size_t n);

/// Decodes `n` values of a row of type `t` (n a multiple of the block size;
/// element types are converted as ConvertToF32 does).
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);
/// Encodes `n` values of `src` as type `t` into `dst` (DTypeRowBytes(t, n)
/// bytes); n a multiple of DTypeBlockElems(t), inputs finite. The quantizers'
/// methods and bounds: ggml_quantize.h. `t` must have one (from_f32).
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);

/// Index of the first block among `num_blocks` whose fp16 scale fields are not
/// finite (NaN or infinity), with the field's name; -1 when all are. This is
/// what makes a block corrupt: every bit pattern of the quantized values is a
/// valid value.
int64_t FindCorruptBlock(DType t, const void* blocks, int64_t num_blocks, const char** field);

}  // namespace orca
