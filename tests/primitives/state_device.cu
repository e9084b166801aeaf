// Device unit test of the attention state (csrc/include/ffpa/attn/state.cuh), the online-softmax
// update, normalisation, LSE and split-merge weight every kernel uses, against a double-precision
// host reference (tests/test_primitives.py compiles and runs this with nvcc on a GPU):
//  * one thread per row folds the row's base-2 scores in key tiles with online_update (output =
//    a weighted sum of per-key values), finishing with inv_row_sum / row_lse / row_lse2;
//  * the same rows cut into parts (disjoint key ranges) merged with merge_weight;
//  * rows that exercise the guards: every key masked (-inf), the first tiles masked, one key kept,
//    huge finite negative scores, parts with no key, every part empty. An empty row must give
//    output 0 and LSE -inf, nothing may be NaN.
// Prints one line per failed check and "N checks, M failed"; exits 1 on any failure.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "ffpa/attn/state.cuh"

namespace {

constexpr int kKeys = 96;   // keys per row
constexpr int kTile = 16;   // keys per online_update
constexpr int kParts = 4;   // key ranges merged by merge_weight
constexpr float kNegInf = -INFINITY;

struct Result {
  float out, lse, lse2;
};

// Row `row` over keys [k0, k1) in tiles of kTile: (normalised output, natural LSE, base-2 LSE).
__device__ Result fold(const float* s, const float* v, int k0, int k1) {
  float m = kNegInf, l = 0.f, acc = 0.f;
  for (int t = k0; t < k1; t += kTile) {
    const int end = t + kTile < k1 ? t + kTile : k1;
    float tile_max = kNegInf;
    for (int j = t; j < end; ++j) tile_max = fmaxf(tile_max, s[j]);
    float neg_m;
    const float alpha = ffpa::attn::online_update(m, l, tile_max, neg_m);
    acc *= alpha;
    for (int j = t; j < end; ++j) {
      const float p = ffpa::ptx::ex2_approx_ftz(s[j] + neg_m);
      l += p;
      acc += p * v[j];
    }
  }
  return {acc * ffpa::attn::inv_row_sum(l), ffpa::attn::row_lse(m, l), ffpa::attn::row_lse2(m, l)};
}

__global__ void state_kernel(const float* scores, const float* values, int rows, Result* whole, Result* merged) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* s = scores + row * kKeys;
  const float* v = values + row * kKeys;
  whole[row] = fold(s, v, 0, kKeys);
  Result part[kParts];
  float mx = kNegInf;
  for (int i = 0; i < kParts; ++i) {
    part[i] = fold(s, v, i * kKeys / kParts, (i + 1) * kKeys / kParts);
    mx = fmaxf(mx, part[i].lse2);
  }
  float sum = 0.f, out = 0.f;
  for (int i = 0; i < kParts; ++i) {
    const float w = ffpa::attn::merge_weight(part[i].lse2, mx);
    sum += w;
    out += w * part[i].out;
  }
  merged[row] = {out * ffpa::attn::inv_row_sum(sum), ffpa::attn::row_lse(ffpa::attn::exp_base(mx), sum), 0.f};
}

long g_checks = 0, g_failed = 0;

void check(bool ok, const char* what, int row, double got, double want) {
  ++g_checks;
  if (!ok && ++g_failed <= 40) std::printf("FAIL %s (row %d): got %.9g, want %.9g\n", what, row, got, want);
}

// Output and LSE close to the reference (relative 2e-5 on the LSE, 1e-4 of the value scale on the
// output: ex2.approx is ~2^-22 relative per term); an empty reference row: exactly 0 and -inf.
void compare(const char* what, int row, const Result& got, double want_out, double want_lse) {
  check(!std::isnan(got.out) && !std::isnan(got.lse), what, row, got.out, want_out);
  if (std::isinf(want_lse)) {
    check(got.out == 0.f, what, row, got.out, 0.0);
    check(std::isinf(got.lse) && got.lse < 0, what, row, got.lse, want_lse);
    return;
  }
  check(std::fabs(got.out - want_out) <= 1e-4, what, row, got.out, want_out);
  check(std::fabs(got.lse - want_lse) <= 2e-5 * (1.0 + std::fabs(want_lse)), what, row, got.lse, want_lse);
}

}  // namespace

int main() {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.f, 4.f);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  const int kRandom = 512;
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < kRandom; ++r) {  // random rows, some keys masked at random
    std::vector<float> s(kKeys);
    for (float& x : s) x = rng() % 5 == 0 ? kNegInf : normal(rng);
    rows.push_back(s);
  }
  rows.push_back(std::vector<float>(kKeys, kNegInf));  // every key masked
  {
    std::vector<float> s(kKeys, kNegInf);  // the first two tiles and the first two parts masked
    for (int j = kKeys / 2; j < kKeys; ++j) s[j] = normal(rng);
    rows.push_back(s);
  }
  {
    std::vector<float> s(kKeys, kNegInf);  // one key kept, in the last tile
    s[kKeys - 1] = 3.f;
    rows.push_back(s);
  }
  {
    std::vector<float> s(kKeys);  // huge finite negative scores with one moderate key: no overflow
    for (float& x : s) x = -1e30f;
    s[5] = -200.f;
    rows.push_back(s);
  }
  {
    std::vector<float> s(kKeys);  // a rising row: every tile raises the max (alpha < 1 each time)
    for (int j = 0; j < kKeys; ++j) s[j] = 0.5f * j;
    rows.push_back(s);
  }
  const int n = static_cast<int>(rows.size());
  std::vector<float> scores(n * kKeys), values(n * kKeys);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < kKeys; ++j) {
      scores[r * kKeys + j] = rows[r][j];
      values[r * kKeys + j] = unit(rng);
    }

  float *d_s = nullptr, *d_v = nullptr;
  Result *d_whole = nullptr, *d_merged = nullptr;
  if (cudaMalloc(&d_s, scores.size() * 4) != cudaSuccess || cudaMalloc(&d_v, values.size() * 4) != cudaSuccess ||
      cudaMalloc(&d_whole, n * sizeof(Result)) != cudaSuccess || cudaMalloc(&d_merged, n * sizeof(Result)) != cudaSuccess) {
    std::printf("cudaMalloc failed\n0 checks, 1 failed\n");
    return 1;
  }
  cudaMemcpy(d_s, scores.data(), scores.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_v, values.data(), values.size() * 4, cudaMemcpyHostToDevice);
  cudaMemset(d_whole, 0xff, n * sizeof(Result));  // poisoned: NaN where a row is not written
  cudaMemset(d_merged, 0xff, n * sizeof(Result));
  state_kernel<<<(n + 127) / 128, 128>>>(d_s, d_v, n, d_whole, d_merged);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::printf("kernel failed: %s\n0 checks, 1 failed\n", cudaGetErrorString(err));
    return 1;
  }
  std::vector<Result> whole(n), merged(n);
  cudaMemcpy(whole.data(), d_whole, n * sizeof(Result), cudaMemcpyDeviceToHost);
  cudaMemcpy(merged.data(), d_merged, n * sizeof(Result), cudaMemcpyDeviceToHost);

  for (int r = 0; r < n; ++r) {
    double mx = -INFINITY;
    for (int j = 0; j < kKeys; ++j) mx = std::fmax(mx, static_cast<double>(scores[r * kKeys + j]));
    double sum = 0.0, acc = 0.0;
    if (!std::isinf(mx))
      for (int j = 0; j < kKeys; ++j) {
        const double p = std::exp2(static_cast<double>(scores[r * kKeys + j]) - mx);
        sum += p;
        acc += p * values[r * kKeys + j];
      }
    const double want_out = sum > 0 ? acc / sum : 0.0;
    const double want_lse = sum > 0 ? (mx + std::log2(sum)) * std::log(2.0) : -INFINITY;
    compare("whole row", r, whole[r], want_out, want_lse);
    compare("merged parts", r, merged[r], want_out, want_lse);
  }
  std::printf("%ld checks, %ld failed\n", g_checks, g_failed);
  return g_failed == 0 ? 0 : 1;
}
