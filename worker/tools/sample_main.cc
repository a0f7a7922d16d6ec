// shardwise-sample: text from a GPT or a Llama a job wrote (output.final_model_path), on this
// machine's CPU. The CLI's `shardwise sample` runs this program in its place, so the CLI
// links no training code; it can also be run on its own.
//
//   shardwise-sample MODEL.safetensors [--prompt=TEXT] [--tokens=200] [--temperature=0.8]
//                    [--top_k=0] [--seed=0] [--tokenizer_dir=DIR]
//
// Text goes in and out through the model's tokenizer: the folder beside it
// (MODEL.tokenizer, which a job trained with data.tokens.tokenizer writes), run through
// `shardwise-tokenize encode|decode` (SentencePiece cannot share this process's
// protobuf); without one, bytes as tokens.

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/bazel_run.h"
#include "common/command_line_flags.h"
#include "common/companion_program.h"
#include "common/status_macros.h"
#include "contracts/safetensors.h"
#include "google/protobuf/util/json_util.h"
#include "proto/job_spec.pb.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/manifest.h"
#include "tokenizer/terminal_text.h"
#include "worker/compute/cpu/blas_kernels.h"
#include "worker/model/sampler.h"

ABSL_FLAG(std::string, prompt, "\n", "the text to continue");
ABSL_FLAG(int64_t, tokens, 200, "how many tokens to generate");
ABSL_FLAG(double, temperature, 0.8, "0 for greedy, else softmax(logits / T)");
ABSL_FLAG(int32_t, top_k, 0, "draw among the k most likely (0: all)");
ABSL_FLAG(uint64_t, seed, 0, "the generator's seed");
ABSL_FLAG(std::string, tokenizer_dir, "",
          "the model's tokenizer folder (default: MODEL.tokenizer beside the model, if there)");

namespace shardwise {
namespace {

constexpr char kUsage[] = R"(shardwise sample: continue a prompt with a GPT or a Llama a job wrote.

Usage:
  shardwise sample MODEL.safetensors [--prompt=TEXT] [--tokens=200]
                   [--temperature=0.8] [--top_k=0] [--seed=0] [--tokenizer_dir=DIR]

The model's spec comes from the file's metadata ("shardwise.model"), which every final
model (output.final_model_path) holds; it runs on this machine's CPU. The prompt and
the output go through the model's tokenizer (MODEL.tokenizer, written beside it by a job
with data.tokens.tokenizer); without one, each byte is a token.
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

// Encodes and decodes through `shardwise-tokenize` with a tokenizer folder, or as bytes.
class TextCodec {
 public:
  explicit TextCodec(std::string tokenizer_dir) : dir_(std::move(tokenizer_dir)) {}

  absl::StatusOr<std::vector<int64_t>> Encode(const std::string& text) const {
    if (dir_.empty()) {
      std::vector<int32_t> ids;
      tokenizer::ByteTokenizer().Encode(text, true, &ids);
      return std::vector<int64_t>(ids.begin(), ids.end());
    }
    return RunForIds({"encode", "--text=" + text});
  }

  // The ids a corpus put before each document (a BOS; none for bytes): the model saw
  // them at a document's start, so a prompt starts with them, as transformers'
  // tokenizer(prompt) starts it.
  absl::StatusOr<std::vector<int64_t>> DocumentPrefix() const {
    if (dir_.empty()) return std::vector<int64_t>();
    return RunForIds({"prefix"});
  }

  absl::StatusOr<std::string> Decode(const std::vector<int64_t>& ids) const {
    if (dir_.empty()) return tokenizer::ByteTokenizer().Decode({ids.begin(), ids.end()});
    if (ids.empty()) return std::string();  // the program refuses an empty list
    // Through a file: a command-line argument holds 128 KiB, some 25,000 ids.
    ASSIGN_OR_RETURN(const std::string file, WriteTemporaryFile(absl::StrJoin(ids, " ")));
    absl::StatusOr<std::string> text = Run({"decode", "--ids_file=" + file});
    std::remove(file.c_str());
    return text;
  }

 private:
  // `text` in a new file of this process's own under $TMPDIR (else /tmp); its path.
  static absl::StatusOr<std::string> WriteTemporaryFile(const std::string& text) {
    const char* tmp = std::getenv("TMPDIR");
    std::string path =
        absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/shardwise-sample-ids-XXXXXX");
    const int fd = ::mkstemp(path.data());
    if (fd < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot create a temporary file '", path, "': ", std::strerror(errno)));
    }
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!written) {
      std::remove(path.c_str());
      return absl::UnavailableError(absl::StrCat("cannot write the temporary file '", path, "'"));
    }
    return path;
  }

  absl::StatusOr<std::vector<int64_t>> RunForIds(std::vector<std::string> args) const {
    auto printed = Run(std::move(args));
    if (!printed.ok()) return printed.status();
    std::vector<int64_t> ids;
    for (absl::string_view field :
         absl::StrSplit(*printed, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      int64_t id = 0;
      if (!absl::SimpleAtoi(field, &id)) {
        return absl::InternalError("shardwise-tokenize printed something other than ids");
      }
      ids.push_back(id);
    }
    return ids;
  }

  absl::StatusOr<std::string> Run(std::vector<std::string> args) const {
    auto program = FindCompanionProgram("shardwise-tokenize", "tokenizer/shardwise-tokenize");
    if (!program.ok()) return program.status();
    args.insert(args.begin(), {"shardwise-tokenize", "--tokenizer_dir=" + dir_});
    return RunAndCapture(*program, args);
  }
  std::string dir_;
};

// --tokenizer_dir, else MODEL.tokenizer when it is there, else none (bytes).
std::string TokenizerDir(const std::string& model_path) {
  std::string dir = absl::GetFlag(FLAGS_tokenizer_dir);
  if (!dir.empty()) return dir;
  dir = tokenizer::ModelTokenizerFolder(model_path);
  std::error_code error;
  return std::filesystem::is_directory(dir, error) ? dir : "";
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
  const TextCodec codec(TokenizerDir(path));
  auto prefix = codec.DocumentPrefix();
  if (!prefix.ok()) return prefix.status();
  auto prompt = codec.Encode(absl::GetFlag(FLAGS_prompt));
  if (!prompt.ok()) return prompt.status();
  std::vector<int64_t> context = *prefix;
  context.insert(context.end(), prompt->begin(), prompt->end());
  auto ids = model::Generate(*model, *weights, context, options);
  if (!ids.ok()) return ids.status();
  // The prompt's text and what follows, without the prefix's special ids.
  ids->erase(ids->begin(), ids->begin() + static_cast<std::ptrdiff_t>(prefix->size()));
  auto text = codec.Decode(*ids);
  if (!text.ok()) return text.status();
  return tokenizer::ForTerminal(*text);
}

}  // namespace
}  // namespace shardwise

// Exit codes (as the CLI's usage states them): 0 done, 2 bad usage or an invalid argument,
// 1 any other failure. Offline, so never the CLI's 3 (an outcome unknown).
int main(int argc, char** argv) {
  // Paths the user typed are relative to where `bazel run` was typed, when it was.
  if (const absl::Status entered = shardwise::EnterBazelRunWorkingDirectory(); !entered.ok()) {
    std::fprintf(stderr, "%s: %s\n", "shardwise sample", std::string(entered.message()).c_str());
    return 1;
  }
  // Silently: what the sampler prints is the text.
  if (const auto upgrade = shardwise::cpu::BlasCoreUpgradeHere()) {
    shardwise::cpu::RestartWithBlasCore(*upgrade, argv);
  }
  absl::SetProgramUsageMessage(shardwise::kUsage);
  if (const std::optional<int> answered = shardwise::AnswerHelpOrFlagMistake(
          "shardwise sample", shardwise::kUsage, "worker/tools/sample_main.cc",
          std::vector<std::string>(argv + 1, argv + argc))) {
    return *answered;
  }
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
