// GPU kernels against baselines measured in the same run, on the same stream, timed with
// CUDA events (median of 20 after 5 warm-ups):
//   - casts FP32 <-> FP16/BF16 against a device-to-device cudaMemcpyAsync that reads and
//     writes the same bytes (a cast of n elements moves 6n bytes; the copy is of 3n);
//   - the runtime's GEMMs (cuda/blas.h) against cublasGemmEx called directly with the
//     same shapes and types, in TFLOP/s;
//   - the fused optimizer kernels in GB/s of the bytes they must move.
// Build with --config=cuda; prints one line per case.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "worker/cuda/blas.h"
#include "worker/cuda/kernels.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {
namespace {

void Check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
    std::exit(1);
  }
}

void Check(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }
}

// Median milliseconds of `run` enqueued on `stream`.
double MedianMs(cudaStream_t stream, const std::function<void()>& run) {
  for (int i = 0; i < 5; ++i) run();
  std::vector<double> times;
  auto start = Event::Create(true);
  auto end = Event::Create(true);
  Check(start.status(), "event");
  Check(end.status(), "event");
  for (int i = 0; i < 20; ++i) {
    Check(start->Record(stream), "record");
    run();
    Check(end->Record(stream), "record");
    Check(end->Synchronize(), "sync");
    times.push_back(*Event::ElapsedMs(*start, *end));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void* DeviceAlloc(size_t bytes) {
  void* p = nullptr;
  Check(cudaMalloc(&p, bytes), "cudaMalloc");
  Check(cudaMemset(p, 0, bytes), "cudaMemset");
  return p;
}

void Casts(cudaStream_t stream) {
  const size_t n = size_t{64} << 20;  // 64 Mi elements: 256 MiB of FP32
  auto* f32 = static_cast<float*>(DeviceAlloc(n * 4));
  auto* f16 = static_cast<uint16_t*>(DeviceAlloc(n * 2));
  void* copy_from = DeviceAlloc(3 * n);
  void* copy_to = DeviceAlloc(3 * n);
  const double gb = 6.0 * n / 1e9;
  const double copy_ms = MedianMs(stream, [&] {
    Check(cudaMemcpyAsync(copy_to, copy_from, 3 * n, cudaMemcpyDeviceToDevice, stream), "copy");
  });
  std::printf("%-28s %8.1f GB/s\n", "d2d copy (same bytes)", gb / copy_ms * 1e3);
  for (ScalarType type : {ScalarType::kBFloat16, ScalarType::kFloat16}) {
    const double narrow_ms =
        MedianMs(stream, [&] { Check(Narrow(type, f32, f16, n, stream), "narrow"); });
    const double widen_ms =
        MedianMs(stream, [&] { Check(Widen(type, f16, f32, n, stream), "widen"); });
    std::printf("cast FP32->%-17s %8.1f GB/s  %.3f of copy\n", ScalarTypeName(type),
                gb / narrow_ms * 1e3, copy_ms / narrow_ms);
    std::printf("cast %s->FP32%-13s %8.1f GB/s  %.3f of copy\n", ScalarTypeName(type), "",
                gb / widen_ms * 1e3, copy_ms / widen_ms);
  }
  cudaFree(f32);
  cudaFree(f16);
  cudaFree(copy_from);
  cudaFree(copy_to);
}

cudaDataType_t DataType(ScalarType type) {
  return type == ScalarType::kBFloat16  ? CUDA_R_16BF
         : type == ScalarType::kFloat16 ? CUDA_R_16F
                                        : CUDA_R_32F;
}

void Gemms(cudaStream_t stream) {
  auto blas = Blas::Create(stream);
  Check(blas.status(), "Blas::Create");
  cublasHandle_t direct = nullptr;
  if (cublasCreate(&direct) != CUBLAS_STATUS_SUCCESS) std::exit(1);
  cublasSetStream(direct, stream);
  struct Case {
    const char* name;
    GemmTypes types;
    bool tf32;
  };
  const Case cases[] = {
      {"FP32 (TF32 off)", {ScalarType::kFloat32, ScalarType::kFloat32}, false},
      {"FP32 (TF32 on)", {ScalarType::kFloat32, ScalarType::kFloat32}, true},
      {"BF16 in, FP32 out", {ScalarType::kBFloat16, ScalarType::kFloat32}, false},
      {"BF16 in, BF16 out", {ScalarType::kBFloat16, ScalarType::kBFloat16}, false},
      {"FP16 in, FP16 out", {ScalarType::kFloat16, ScalarType::kFloat16}, false},
  };
  for (int64_t size : {4096, 8192}) {
    const int64_t m = size, n = size, k = size;
    void* a = DeviceAlloc(m * k * 4);
    void* b = DeviceAlloc(k * n * 4);
    void* c = DeviceAlloc(m * n * 4);
    const double flops = 2.0 * m * n * k;
    for (const Case& test : cases) {
      (*blas)->set_allow_tf32(test.tf32);
      const double ours_ms = MedianMs(
          stream, [&] { Check((*blas)->Gemm(a, b, c, m, n, k, 0.0f, test.types), "Blas::Gemm"); });
      const float alpha = 1, beta = 0;
      const cublasComputeType_t compute =
          test.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      const double direct_ms = MedianMs(stream, [&] {
        cublasGemmEx(direct, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b,
                     DataType(test.types.operands), n, a, DataType(test.types.operands), k, &beta,
                     c, DataType(test.types.output), n, compute, CUBLAS_GEMM_DEFAULT);
      });
      std::printf("gemm %5lld^3 %-20s ours %7.1f TFLOP/s  cublas %7.1f TFLOP/s  ratio %.3f\n",
                  static_cast<long long>(size), test.name, flops / ours_ms / 1e9,
                  flops / direct_ms / 1e9, direct_ms / ours_ms);
    }
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }
  cublasDestroy(direct);
}

void Optimizers(cudaStream_t stream) {
  const size_t n = size_t{64} << 20;
  auto* p = static_cast<float*>(DeviceAlloc(n * 4));
  auto* g = static_cast<float*>(DeviceAlloc(n * 4));
  auto* m = static_cast<float*>(DeviceAlloc(n * 4));
  auto* v = static_cast<float*>(DeviceAlloc(n * 4));
  SgdScalars sgd{0.01f, 0.9f, 0.0f, 0.0f, false};
  // SGD with momentum reads p, g, buf and writes p, buf: 20 bytes per element.
  const double sgd_ms =
      MedianMs(stream, [&] { Check(SgdUpdate(sgd, false, p, g, m, n, stream), "sgd"); });
  AdamWScalars adamw;
  // AdamW reads p, g, m, v and writes p, m, v: 28 bytes per element.
  const double adamw_ms =
      MedianMs(stream, [&] { Check(AdamWUpdate(adamw, p, g, m, v, n, stream), "adamw"); });
  std::printf("%-28s %8.1f GB/s\n", "SGD (momentum) update", 20.0 * n / sgd_ms / 1e6);
  std::printf("%-28s %8.1f GB/s\n", "AdamW update", 28.0 * n / adamw_ms / 1e6);
  cudaFree(p);
  cudaFree(g);
  cudaFree(m);
  cudaFree(v);
}

}  // namespace
}  // namespace shardwise::cuda

int main() {
  using namespace shardwise::cuda;
  cudaDeviceProp props;
  Check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
  std::printf("GPU: %s (sm_%d%d, %zu MiB)\n", props.name, props.major, props.minor,
              props.totalGlobalMem >> 20);
  auto stream = Stream::Create();
  Check(stream.status(), "stream");
  Casts(stream->get());
  Gemms(stream->get());
  Optimizers(stream->get());
  return 0;
}
