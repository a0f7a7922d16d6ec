// A stand-in for the CUDA driver (libcuda.so.1) for the CPU tests of cuDNN's deviceless
// planning (cudnn_attention_plan_test): cuDNN compiles an engine's kernels on the CPU and
// then hands the binary to the driver to load, which a machine without a GPU cannot. This
// library answers the calls cuDNN's plan building makes: it "loads" each library and
// kernel (a token handle, the kernel's name recorded for the test to read back), reports a
// context and device 0 but none of its properties (the description cuDNN plans for says
// those), and refuses everything that would run work (launches, copies, synchronisation)
// with CUDA_ERROR_NOT_SUPPORTED, so no test can mistake it for a GPU.
//
// The test dlopen()s it before cuDNN looks for the driver; its soname is libcuda.so.1, so
// cuDNN's own dlopen of that name finds it. Never on a GPU host's library path.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

using Result = int;
constexpr Result kSuccess = 0;
constexpr Result kNotSupported = 801;  // CUDA_ERROR_NOT_SUPPORTED
constexpr Result kNotFound = 500;      // CUDA_ERROR_NOT_FOUND
constexpr int kDriverVersion = 13000;  // the toolkit's CUDA 13.0

// What a handle points at: nothing; only its address is compared.
char token_context, token_library, token_kernel, token_link, token_module, token_function;
// A linker's output: cuDNN copies it and hands it back to cuLibraryLoadData.
char linked_binary[16];

std::mutex kernels_mutex;
std::vector<std::string>& Kernels() {
  static auto* kernels = new std::vector<std::string>();
  return *kernels;
}

}  // namespace

extern "C" {

// For the test: the kernels loaded since the last reset, one name per line, copied into
// `out` (at most `size` bytes with the terminating NUL); returns the length needed.
size_t ShardwiseFakeDriverKernels(char* out, size_t size) {
  std::lock_guard<std::mutex> lock(kernels_mutex);
  std::string joined;
  for (const std::string& name : Kernels()) joined += name + "\n";
  if (out != nullptr && size > 0) {
    const size_t n = joined.size() < size - 1 ? joined.size() : size - 1;
    std::memcpy(out, joined.data(), n);
    out[n] = '\0';
  }
  return joined.size() + 1;
}

void ShardwiseFakeDriverReset() {
  std::lock_guard<std::mutex> lock(kernels_mutex);
  Kernels().clear();
}

// Initialisation, the device and its context.
Result cuInit(unsigned /*flags*/) { return kSuccess; }
Result cuDriverGetVersion(int* version) {
  *version = kDriverVersion;
  return kSuccess;
}
Result cuDeviceGetCount(int* count) {
  *count = 1;
  return kSuccess;
}
Result cuDeviceGet(int* device, int /*ordinal*/) {
  *device = 0;
  return kSuccess;
}
// A device's properties come from the description cuDNN plans for, not from here.
Result cuDeviceGetAttribute(int* /*value*/, int /*attribute*/, int /*device*/) {
  return kNotSupported;
}
Result cuCtxGetCurrent(void** context) {
  *context = &token_context;
  return kSuccess;
}
Result cuCtxGetDevice(int* device) {
  *device = 0;
  return kSuccess;
}
Result cuCtxGetLimit(size_t* value, int /*limit*/) {
  *value = 0;
  return kSuccess;
}
Result cuCtxPushCurrent(void* /*context*/) { return kSuccess; }
Result cuCtxPopCurrent(void** context) {
  if (context != nullptr) *context = &token_context;
  return kSuccess;
}
Result cuDevicePrimaryCtxRetain(void** context, int /*device*/) {
  *context = &token_context;
  return kSuccess;
}
Result cuDevicePrimaryCtxRelease(int /*device*/) { return kSuccess; }
Result cuDevicePrimaryCtxReset(int /*device*/) { return kSuccess; }
Result cuStreamGetCtx(void* /*stream*/, void** context) {
  *context = &token_context;
  return kSuccess;
}
Result cuGetErrorName(Result /*error*/, const char** name) {
  *name = "CUDA_ERROR_NOT_SUPPORTED (the fake driver of the CPU tests)";
  return kSuccess;
}
Result cuGetErrorString(Result /*error*/, const char** text) {
  *text = "the CPU tests' fake CUDA driver runs nothing";
  return kSuccess;
}
// The runtime's private tables and entry points: none here.
Result cuGetExportTable(const void** table, const void* /*id*/) {
  *table = nullptr;
  return kNotFound;
}
Result cuGetProcAddress(const char* /*symbol*/, void** function, int /*version*/,
                        uint64_t /*flags*/) {
  *function = nullptr;
  return kNotFound;
}
Result cuGetProcAddress_v2(const char* /*symbol*/, void** function, int /*version*/,
                           uint64_t /*flags*/, int* status) {
  *function = nullptr;
  if (status != nullptr) *status = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  return kNotFound;
}

// Loading compiled kernels: recorded, not loaded.
Result cuLibraryLoadData(void** library, const void* /*code*/, void* /*jit_options*/,
                         void* /*jit_values*/, unsigned /*jit_count*/, void* /*options*/,
                         void* /*values*/, unsigned /*count*/) {
  *library = &token_library;
  return kSuccess;
}
Result cuLibraryLoadFromFile(void** library, const char* /*path*/, void* /*jit_options*/,
                             void* /*jit_values*/, unsigned /*jit_count*/, void* /*options*/,
                             void* /*values*/, unsigned /*count*/) {
  *library = &token_library;
  return kSuccess;
}
Result cuLibraryUnload(void* /*library*/) { return kSuccess; }
Result cuLibraryGetKernel(void** kernel, void* /*library*/, const char* name) {
  {
    std::lock_guard<std::mutex> lock(kernels_mutex);
    Kernels().emplace_back(name != nullptr ? name : "");
  }
  *kernel = &token_kernel;
  return kSuccess;
}
Result cuKernelGetAttribute(int* value, int /*attribute*/, void* /*kernel*/, int /*device*/) {
  *value = 0;
  return kSuccess;
}
Result cuKernelSetAttribute(int /*attribute*/, int /*value*/, void* /*kernel*/, int /*device*/) {
  return kSuccess;
}
Result cuFuncGetAttribute(int* value, int /*attribute*/, void* /*function*/) {
  *value = 0;
  return kSuccess;
}
Result cuFuncSetAttribute(void* /*function*/, int /*attribute*/, int /*value*/) { return kSuccess; }
Result cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void* /*function*/,
                                                   int /*block_size*/, size_t /*shared*/) {
  *blocks = 1;
  return kSuccess;
}
Result cuOccupancyMaxPotentialClusterSize(int* size, void* /*function*/, const void* /*config*/) {
  *size = 1;
  return kSuccess;
}
Result cuLinkCreate(unsigned /*count*/, void* /*options*/, void* /*values*/, void** state) {
  *state = &token_link;
  return kSuccess;
}
Result cuLinkCreate_v2(unsigned count, void* options, void* values, void** state) {
  return cuLinkCreate(count, options, values, state);
}
Result cuLinkAddData(void* /*state*/, int /*type*/, void* /*data*/, size_t /*size*/,
                     const char* /*name*/, unsigned /*count*/, void* /*options*/,
                     void* /*values*/) {
  return kSuccess;
}
Result cuLinkAddData_v2(void* state, int type, void* data, size_t size, const char* name,
                        unsigned count, void* options, void* values) {
  return cuLinkAddData(state, type, data, size, name, count, options, values);
}
Result cuLinkAddFile_v2(void* /*state*/, int /*type*/, const char* /*path*/, unsigned /*count*/,
                        void* /*options*/, void* /*values*/) {
  return kSuccess;
}
Result cuLinkComplete(void* /*state*/, void** binary, size_t* size) {
  *binary = linked_binary;
  *size = sizeof(linked_binary);
  return kSuccess;
}
Result cuLinkDestroy(void* /*state*/) { return kSuccess; }
Result cuModuleLoadData(void** module, const void* /*image*/) {
  *module = &token_module;
  return kSuccess;
}
Result cuModuleLoadDataEx(void** module, const void* image, unsigned /*count*/, void* /*options*/,
                          void* /*values*/) {
  return cuModuleLoadData(module, image);
}
Result cuModuleLoadFatBinary(void** module, const void* image) {
  return cuModuleLoadData(module, image);
}
Result cuModuleUnload(void* /*module*/) { return kSuccess; }
Result cuModuleGetFunction(void** function, void* /*module*/, const char* name) {
  {
    std::lock_guard<std::mutex> lock(kernels_mutex);
    Kernels().emplace_back(name != nullptr ? name : "");
  }
  *function = &token_function;
  return kSuccess;
}
Result cuModuleGetGlobal_v2(void** pointer, size_t* size, void* /*module*/, const char* /*name*/) {
  *pointer = nullptr;
  if (size != nullptr) *size = 0;
  return kSuccess;
}
// A tensor map describes device memory for a kernel's copies: nothing to describe here.
Result cuTensorMapEncodeTiled(void* /*map*/, int /*type*/, unsigned /*rank*/, void* /*address*/,
                              const uint64_t* /*dims*/, const uint64_t* /*strides*/,
                              const unsigned* /*box*/, const unsigned* /*element_strides*/,
                              int /*interleave*/, int /*swizzle*/, int /*promotion*/,
                              int /*fill*/) {
  return kSuccess;
}

// Work: refused.
Result cuLaunchKernel(void* /*function*/, unsigned /*grid_x*/, unsigned /*grid_y*/,
                      unsigned /*grid_z*/, unsigned /*block_x*/, unsigned /*block_y*/,
                      unsigned /*block_z*/, unsigned /*shared_bytes*/, void* /*stream*/,
                      void** /*parameters*/, void** /*extra*/) {
  return kNotSupported;
}
Result cuLaunchKernelEx(const void* /*config*/, void* /*function*/, void** /*parameters*/,
                        void** /*extra*/) {
  return kNotSupported;
}
Result cuLaunchCooperativeKernel(void* /*function*/, unsigned /*grid_x*/, unsigned /*grid_y*/,
                                 unsigned /*grid_z*/, unsigned /*block_x*/, unsigned /*block_y*/,
                                 unsigned /*block_z*/, unsigned /*shared_bytes*/, void* /*stream*/,
                                 void** /*parameters*/) {
  return kNotSupported;
}
Result cuMemcpyDtoH_v2(void* /*destination*/, uint64_t /*source*/, size_t /*size*/) {
  return kNotSupported;
}
Result cuStreamSynchronize(void* /*stream*/) { return kNotSupported; }

}  // extern "C"
