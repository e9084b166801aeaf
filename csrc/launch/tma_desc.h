// Host side of TMA (ptx/tma.cuh): encoding the tensor map (CUtensorMap) of a strided global tensor,
// through the driver's cuTensorMapEncodeTiled as the CUDA runtime hands it out (no link against
// libcuda). Torch-free and header-only, so the launchers and the primitive tests share it.
//
// A map describes a rank-1..5 tensor by its sizes (innermost first, elements) and the byte strides of
// dims 1.. (dim 0 contiguous), the box one load moves, and the shared-memory swizzle. What TMA cannot
// take (a base not 16-byte aligned, a stride not a multiple of 16 bytes, a box row of other than a
// multiple of 16 bytes, a 128-byte swizzle with box rows over 128 bytes) is cudaErrorInvalidValue, so
// a launcher can fall back to its cp.async kernel.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ffpa::launch {

enum class TmaElem : int { kFloat16 = 0, kBFloat16 = 1, kUInt8 = 2 };  // kUInt8: FP8 bytes
enum class TmaSwizzle : int { kNone = 0, k64B = 1, k128B = 2, k32B = 3 };

struct TmaTensor {
  const void* base = nullptr;
  TmaElem elem = TmaElem::kBFloat16;
  int rank = 0;                  // 1..5
  uint64_t dims[5] = {};         // elements, innermost first
  uint64_t strides[5] = {};      // bytes; strides[i] of dim i >= 1 (strides[0] unused: dim 0 contiguous)
  uint32_t box[5] = {};          // elements a load moves per dim (1..256)
};

inline int tma_elem_bytes(TmaElem e) { return e == TmaElem::kUInt8 ? 1 : 2; }

// The driver's encoder, looked up once (null where the driver has none: then every encode fails).
inline PFN_cuTensorMapEncodeTiled_v12000 tma_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status) !=
            cudaSuccess ||
        status != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// Whether TMA can take t with this swizzle (the checks cuTensorMapEncodeTiled would fail on).
inline bool tma_ok(const TmaTensor& t, TmaSwizzle swizzle) {
  if (t.rank < 1 || t.rank > 5 || t.base == nullptr || reinterpret_cast<uintptr_t>(t.base) % 16 != 0) return false;
  const uint64_t row_bytes = static_cast<uint64_t>(t.box[0]) * tma_elem_bytes(t.elem);
  if (row_bytes % 16 != 0) return false;
  if (swizzle == TmaSwizzle::k128B && row_bytes > 128) return false;
  if (swizzle == TmaSwizzle::k64B && row_bytes > 64) return false;
  if (swizzle == TmaSwizzle::k32B && row_bytes > 32) return false;
  for (int i = 0; i < t.rank; ++i) {
    if (t.dims[i] < 1 || t.dims[i] > (uint64_t{1} << 32) || t.box[i] < 1 || t.box[i] > 256) return false;
    if (i > 0 && (t.strides[i] % 16 != 0 || t.strides[i] >= (uint64_t{1} << 40))) return false;
  }
  return true;
}

// Encode t into *out (64-byte aligned). cudaErrorInvalidValue where TMA cannot take t,
// cudaErrorNotSupported where the driver has no encoder.
inline cudaError_t encode_tma(CUtensorMap* out, const TmaTensor& t, TmaSwizzle swizzle) {
  if (out == nullptr || reinterpret_cast<uintptr_t>(out) % 64 != 0 || !tma_ok(t, swizzle)) return cudaErrorInvalidValue;
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tma_encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], elem_strides[5];
  for (int i = 0; i < t.rank; ++i) {
    dims[i] = t.dims[i];
    box[i] = t.box[i];
    elem_strides[i] = 1;
    if (i > 0) strides[i - 1] = t.strides[i];
  }
  const CUtensorMapDataType type = t.elem == TmaElem::kFloat16    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                   : t.elem == TmaElem::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                  : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const CUtensorMapSwizzle sw = swizzle == TmaSwizzle::k128B  ? CU_TENSOR_MAP_SWIZZLE_128B
                                : swizzle == TmaSwizzle::k64B ? CU_TENSOR_MAP_SWIZZLE_64B
                                : swizzle == TmaSwizzle::k32B ? CU_TENSOR_MAP_SWIZZLE_32B
                                                              : CU_TENSOR_MAP_SWIZZLE_NONE;
  const CUresult r = encode(out, type, static_cast<cuuint32_t>(t.rank), const_cast<void*>(t.base), dims, strides, box,
                            elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// The map of a strided tensor of rank 1..5 (sizes innermost first; strides in elements, dim 0
// contiguous), loaded in boxes of `box` elements per dim with the swizzle wgmma reads (128 bytes unless
// told).
// Strides of size-1 dims are irrelevant to the loads and are set to a value TMA takes. A broadcast
// dim (stride 0, size > 1) is not a TMA tensor: cudaErrorNotSupported, as for anything else TMA
// cannot take, so the caller runs its cp.async kernel.
inline cudaError_t encode_strided_tma(CUtensorMap* map, TmaElem elem, const void* base, int rank,
                                      const uint64_t* dims, const int64_t* strides, const uint32_t* box,
                                      TmaSwizzle swizzle = TmaSwizzle::k128B) {
  TmaTensor t;
  t.base = base;
  t.elem = elem;
  t.rank = rank;
  const uint64_t eb = static_cast<uint64_t>(tma_elem_bytes(elem));
  for (int i = 0; i < rank; ++i) {
    t.dims[i] = dims[i];
    t.box[i] = box[i];
    if (i == 0) continue;
    const uint64_t packed = i == 1 ? dims[0] * eb : t.strides[i - 1] * dims[i - 1];
    if (dims[i] > 1 && strides[i] <= 0) return cudaErrorNotSupported;
    t.strides[i] = dims[i] == 1 ? packed : static_cast<uint64_t>(strides[i]) * eb;
  }
  return encode_tma(map, t, swizzle) == cudaSuccess ? cudaSuccess : cudaErrorNotSupported;
}

// The rank-4 map (head dim, position, head, batch) of one attention tensor (q, k, v: strides in
// elements, as FwdParams holds them), loaded in boxes of 64 columns x box_rows positions.
inline cudaError_t encode_attn_tma(CUtensorMap* map, TmaElem elem, const void* base, int cols, int rows, int heads,
                                   int batch, int64_t row_stride, int64_t head_stride, int64_t batch_stride,
                                   int box_rows) {
  const uint64_t dims[4] = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), static_cast<uint64_t>(heads),
                            static_cast<uint64_t>(batch)};
  const int64_t strides[4] = {1, row_stride, head_stride, batch_stride};
  const uint32_t box[4] = {64, static_cast<uint32_t>(box_rows), 1, 1};
  return encode_strided_tma(map, elem, base, 4, dims, strides, box);
}

// The rank-5 map (64 columns, position, 64-column chunk, head, batch) of the same tensor: one load moves
// box_rows positions x box_chunks chunks, chunk c landing box_rows x 128 bytes after chunk c - 1 (a
// GmmaSw128Tile of box_rows rows), where the rank-4 map takes a load per chunk (the producer thread's
// instructions per tile are what a paged decode cache showed to matter). cols: a multiple of 64.
inline cudaError_t encode_attn_tma_chunked(CUtensorMap* map, TmaElem elem, const void* base, int cols, int rows,
                                           int heads, int batch, int64_t row_stride, int64_t head_stride,
                                           int64_t batch_stride, int box_rows, int box_chunks) {
  if (cols % 64 != 0) return cudaErrorNotSupported;
  const uint64_t dims[5] = {64, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols / 64),
                            static_cast<uint64_t>(heads), static_cast<uint64_t>(batch)};
  const int64_t strides[5] = {1, row_stride, 64, head_stride, batch_stride};
  const uint32_t box[5] = {64, static_cast<uint32_t>(box_rows), static_cast<uint32_t>(box_chunks), 1, 1};
  return encode_strided_tma(map, elem, base, 5, dims, strides, box);
}

}  // namespace ffpa::launch
