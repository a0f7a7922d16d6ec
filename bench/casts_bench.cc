// Cast throughput on this CPU: the vectorised (F16C/AVX2) and portable FP32 <-> FP16/BF16
// conversions against memcpy of the same output bytes, in the same run. Prints
// "CAST vector_GBps portable_GBps memcpy_GBps" (GB/s of input read).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "worker/compute/casts.h"

namespace {

template <typename Fn>
double BestSeconds(Fn&& fn) {
  double best = 1e30;
  for (int round = 0; round < 7; ++round) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main() {
  namespace cpu = shardwise::cpu;
  const size_t n = size_t{16} << 20;  // 16 Mi elements: 64 MiB of FP32, beyond the caches
  std::vector<float> f32(n), back(n);
  std::vector<uint16_t> f16(n), copy16(n);
  for (size_t i = 0; i < n; ++i) f32[i] = static_cast<float>(i % 4099) * 0.37f - 700.0f;
  if (!cpu::internal::HasVectorCasts()) std::fprintf(stderr, "no F16C/AVX2: vector = portable\n");
  const double gb = n * 4 / 1e9;
  const double gb16 = n * 2 / 1e9;
  const double copy_narrow = BestSeconds([&] { std::memcpy(copy16.data(), f16.data(), n * 2); });
  const double copy_wide = BestSeconds([&] { std::memcpy(back.data(), f32.data(), n * 4); });
  struct Case {
    const char* name;
    double vector, portable, copy, input_gb;
  };
  const Case cases[] = {
      {"fp32->fp16", BestSeconds([&] { cpu::internal::FloatToHalfVector(f32.data(), f16.data(), n); }),
       BestSeconds([&] { cpu::internal::FloatToHalfPortable(f32.data(), f16.data(), n); }),
       copy_narrow, gb},
      {"fp16->fp32", BestSeconds([&] { cpu::internal::HalfToFloatVector(f16.data(), back.data(), n); }),
       BestSeconds([&] { cpu::internal::HalfToFloatPortable(f16.data(), back.data(), n); }),
       copy_wide, gb16},
      {"fp32->bf16", BestSeconds([&] { cpu::internal::FloatToBFloat16Vector(f32.data(), f16.data(), n); }),
       BestSeconds([&] { cpu::internal::FloatToBFloat16Portable(f32.data(), f16.data(), n); }),
       copy_narrow, gb},
      {"bf16->fp32", BestSeconds([&] { cpu::internal::BFloat16ToFloatVector(f16.data(), back.data(), n); }),
       BestSeconds([&] { cpu::internal::BFloat16ToFloatPortable(f16.data(), back.data(), n); }),
       copy_wide, gb16},
  };
  for (const Case& c : cases) {
    std::printf("%s %.2f %.2f %.2f\n", c.name, c.input_gb / c.vector, c.input_gb / c.portable,
                c.input_gb / c.copy);
  }
  return 0;
}
