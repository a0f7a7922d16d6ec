// shardwise-sample: text from a GPT a job wrote (output.final_model_path), on this
// machine's CPU. The CLI's `shardwise sample` runs this program in its place, so the CLI
// links no training code; it can also be run on its own.
//
//   shardwise-sample MODEL.safetensors [--prompt=TEXT] [--tokens=200] [--temperature=0.8]
//                    [--top_k=0] [--seed=0]

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "contracts/byte_tokens.h"
#include "contracts/safetensors.h"
#include "google/protobuf/util/json_util.h"
#include "proto/job_spec.pb.h"
#include "worker/model/sampler.h"

ABSL_FLAG(std::string, prompt, "\n", "the text to continue");
ABSL_FLAG(int64_t, tokens, 200, "how many tokens to generate");
ABSL_FLAG(double, temperature, 0.8, "0 for greedy, else softmax(logits / T)");
ABSL_FLAG(int32_t, top_k, 0, "draw among the k most likely (0: all)");
ABSL_FLAG(uint64_t, seed, 0, "the generator's seed");

namespace shardwise {
namespace {

constexpr char kUsage[] = R"(shardwise sample: continue a prompt with a GPT a job wrote.

Usage:
  shardwise sample MODEL.safetensors [--prompt=TEXT] [--tokens=200]
                   [--temperature=0.8] [--top_k=0] [--seed=0]

The model's spec comes from the file's metadata ("shardwise.model"), which every final
model (output.final_model_path) holds; it runs on this machine's CPU.
)";

// The model's spec, from the file's metadata.
absl::StatusOr<v1::ModelSpec> ReadModelSpec(const std::string& path) {
  auto metadata = ReadSafetensorsMetadata(path);
  if (!metadata.ok()) return metadata.status();
  auto spec_json = metadata->find("shardwise.model");
  v1::ModelSpec model;
  if (spec_json == metadata->end() ||
      !google::protobuf::util::JsonStringToMessage(spec_json->second, &model).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": no model spec in its metadata (\"shardwise.model\"); was it written by a "
                     "Shardwise job?"));
  }
  return model;
}

absl::StatusOr<std::string> Sample(const std::string& path) {
  auto model = ReadModelSpec(path);
  if (!model.ok()) return model.status();
  auto weights = ReadSafetensors(path);
  if (!weights.ok()) return weights.status();
  model::SampleOptions options;
  options.tokens = absl::GetFlag(FLAGS_tokens);
  options.temperature = absl::GetFlag(FLAGS_temperature);
  options.top_k = absl::GetFlag(FLAGS_top_k);
  options.seed = absl::GetFlag(FLAGS_seed);
  auto ids = model::Generate(*model, *weights, BytesToIds(absl::GetFlag(FLAGS_prompt)), options);
  if (!ids.ok()) return ids.status();
  return IdsToPrintable(*ids);
}

}  // namespace
}  // namespace shardwise

// Exit codes as the CLI's: 0 done, 2 bad usage or an invalid argument, 1 any other failure.
int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(shardwise::kUsage);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::fprintf(stderr, "shardwise sample: takes one model file\n\n%s", shardwise::kUsage);
    return 2;
  }
  auto text = shardwise::Sample(args[1]);
  if (!text.ok()) {
    std::fprintf(stderr, "shardwise sample: %s\n", std::string(text.status().message()).c_str());
    return text.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::printf("%s\n", text->c_str());
  return 0;
}
