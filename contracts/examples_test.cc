// Every job spec under examples/ (what the README and the docs point users at) parses
// and passes the coordinator's validation, so the examples stay true to the schema.

#include <filesystem>
#include <string>
#include <vector>

#include "contracts/job_spec_io.h"
#include "contracts/job_spec_validation.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(Examples, EveryExampleSpecIsValid) {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator("examples")) {
    if (entry.path().extension() == ".yaml") paths.push_back(entry.path().string());
  }
  // demo.yaml (the GPT), mlp.yaml, mixed-precision.yaml, cuda.yaml at least.
  ASSERT_GE(paths.size(), 4u);
  for (const std::string& path : paths) {
    auto spec = ReadJobSpecFile(path);
    ASSERT_TRUE(spec.ok()) << path << ": " << spec.status();
    // Files the specs name are the user's machine's business: not checked.
    const absl::Status valid = ValidateJobSpec(*spec, JobLimits{}, nullptr);
    EXPECT_TRUE(valid.ok()) << path << ": " << valid;
  }
}

}  // namespace
}  // namespace shardwise
