// Cast throughput on this CPU: the vectorised (F16C/AVX2) and portable FP32 <-> FP16/BF16
// conversions against memcpy moving the same bytes, in the same run. A cast of n elements
// reads and writes 6n bytes (4n + 2n); the baseline is a memcpy of 3n bytes, which also
// reads and writes 6n. Prints "CAST vector_GBps portable_GBps memcpy_GBps", GB/s of bytes
// read plus written.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench/best_seconds.h"
#include "worker/compute/casts.h"

int main() {
  namespace cpu = shardwise::cpu;
  using shardwise::bench::BestSeconds;
  const size_t n = size_t{16} << 20;  // 16 Mi elements: 64 MiB of FP32, beyond the caches
  std::vector<float> f32(n), back(n);
  std::vector<uint16_t> f16(n);
  std::vector<char> copy_from(3 * n, 1), copy_to(3 * n);
  for (size_t i = 0; i < n; ++i) f32[i] = static_cast<float>(i % 4099) * 0.37f - 700.0f;
  if (!cpu::internal::HasVectorCasts()) std::fprintf(stderr, "no F16C/AVX2: vector = portable\n");
  const double traffic_gb = 6.0 * n / 1e9;
  const double copy = BestSeconds(7, [&] { std::memcpy(copy_to.data(), copy_from.data(), 3 * n); });
  struct Case {
    const char* name;
    double vector, portable;
  };
  const Case cases[] = {
      {"fp32->fp16",
       BestSeconds(7, [&] { cpu::internal::FloatToHalfVector(f32.data(), f16.data(), n); }),
       BestSeconds(7, [&] { cpu::internal::FloatToHalfPortable(f32.data(), f16.data(), n); })},
      {"fp16->fp32",
       BestSeconds(7, [&] { cpu::internal::HalfToFloatVector(f16.data(), back.data(), n); }),
       BestSeconds(7, [&] { cpu::internal::HalfToFloatPortable(f16.data(), back.data(), n); })},
      {"fp32->bf16",
       BestSeconds(7, [&] { cpu::internal::FloatToBFloat16Vector(f32.data(), f16.data(), n); }),
       BestSeconds(7, [&] { cpu::internal::FloatToBFloat16Portable(f32.data(), f16.data(), n); })},
      {"bf16->fp32",
       BestSeconds(7, [&] { cpu::internal::BFloat16ToFloatVector(f16.data(), back.data(), n); }),
       BestSeconds(7, [&] { cpu::internal::BFloat16ToFloatPortable(f16.data(), back.data(), n); })},
  };
  for (const Case& c : cases) {
    std::printf("%s %.2f %.2f %.2f\n", c.name, traffic_gb / c.vector, traffic_gb / c.portable,
                traffic_gb / copy);
  }
  return 0;
}
