// A CUDA injection library (the driver loads the library named by CUDA_INJECTION64_PATH
// into a process as it initialises CUDA and calls its InitializeInjection, as Nsight's
// tools attach) that records every kernel, copy and memset the process runs on the GPU
// through CUPTI's activity API and writes them, at the process's exit, to the file named
// by SHARDWISE_GPU_BUSY_TRACE in busy_trace.h's text form. It works on any CUDA process
// (a Shardwise worker, PyTorch) and changes nothing it computes; records buffer on the
// host until the exit. bench/gpu_gpt_busy.sh uses it; gpu_busy_report reads the trace.

#include <cupti.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "bench/gpu_busy/busy_trace.h"

namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kRecordAlignment = 8;

std::mutex trace_mutex;
std::FILE* trace = nullptr;  // guarded by trace_mutex

void Write(int64_t start, int64_t end, const char* name) {
  const std::string line =
      shardwise::gpu_busy::FormatActivity({start, end, name != nullptr ? name : "?"}) + "\n";
  std::lock_guard<std::mutex> lock(trace_mutex);
  if (trace != nullptr) std::fputs(line.c_str(), trace);
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kRecordAlignment, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        Write(static_cast<int64_t>(kernel->start), static_cast<int64_t>(kernel->end), kernel->name);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        Write(static_cast<int64_t>(copy->start), static_cast<int64_t>(copy->end), "memcpy");
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* set = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        Write(static_cast<int64_t>(set->start), static_cast<int64_t>(set->end), "memset");
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
}

void FlushAtExit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(trace_mutex);
  if (trace != nullptr) std::fclose(trace);
  trace = nullptr;
}

}  // namespace

// Called by the CUDA driver; a nonzero return tells it the library loaded.
extern "C" int InitializeInjection(void) {
  const char* path = std::getenv("SHARDWISE_GPU_BUSY_TRACE");
  if (path == nullptr) {
    std::fprintf(stderr, "cupti_trace_injection: SHARDWISE_GPU_BUSY_TRACE is unset; no trace\n");
    return 1;
  }
  // "x": created, never truncated. A process that PyTorch starts later (torch.compile's
  // workers inherit the environment) and that touches CUDA records nothing, rather than
  // erase the trace of the process measured, which started CUDA first.
  std::FILE* file = std::fopen(path, "wx");
  if (file == nullptr) {
    std::fprintf(stderr,
                 "cupti_trace_injection: cannot create %s (another process of this run holds "
                 "it, or it cannot be written); no trace in process %d\n",
                 path, static_cast<int>(getpid()));
    return 1;
  }
  {
    std::lock_guard<std::mutex> lock(trace_mutex);
    trace = file;
  }
  if (cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "cupti_trace_injection: CUPTI refused the activity recording\n");
    return 1;
  }
  std::atexit(FlushAtExit);
  return 1;
}
