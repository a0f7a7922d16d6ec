// The job-spec parser (YAML and JSON) and everything a parsed spec goes through at
// submission: validation (without file checks), defaults, the model description and the
// wrap policy, printing. Nothing may crash, hang or allocate without bound.

#include <cstddef>
#include <cstdint>
#include <string>

#include "contracts/job_spec_defaults.h"
#include "contracts/job_spec_io.h"
#include "contracts/job_spec_validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardwise;
  auto spec = ParseJobSpec(std::string(reinterpret_cast<const char*>(data), size));
  if (!spec.ok()) return 0;
  if (!ValidateJobSpec(*spec, JobLimits{}, nullptr).ok()) return 0;
  ApplyJobSpecDefaults(&*spec);
  if (!ValidateJobSpec(*spec, JobLimits{}, nullptr).ok())
    __builtin_trap();  // defaults keep it valid
  (void)JobSpecToJson(*spec);
  return 0;
}
