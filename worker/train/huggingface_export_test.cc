// huggingface_export.h on real files: an export that replaces an earlier one (another
// job's, with output.overwrite) leaves none of its files that it does not write itself,
// and one cut short leaves no config.json.

#include "worker/train/huggingface_export.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/scratch.h"
#include "contracts/huggingface_layout.h"
#include "gtest/gtest.h"
#include "tokenizer/manifest.h"
#include "worker/testing/token_corpus.h"

namespace shardwise {
namespace {

namespace fs = std::filesystem;

// A GPT's final model, zeros, in the model's own names and orientation.
TensorMap ZeroModel(const v1::ModelSpec& model) {
  auto layout =
      HuggingFaceTensors(model, v1::HuggingFaceCheckpoint::HUGGING_FACE, "output.huggingface_dir");
  EXPECT_TRUE(layout.ok()) << layout.status();
  TensorMap weights;
  for (const HuggingFaceTensor& t : *layout) {
    std::vector<int64_t> shape = t.shape;
    if (t.transposed) std::swap(shape[0], shape[1]);
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const std::vector<float> zeros(numel, 0.0f);
    weights[t.param] = F32Tensor(shape, zeros.data());
  }
  return weights;
}

// A tokenizer folder of `kind` holding `files` (role -> name, contents) and the ids.
std::string TokenizerFolder(const std::string& dir, const std::string& kind,
                            const std::map<std::string, std::pair<std::string, std::string>>& files,
                            std::optional<int32_t> bos, std::optional<int32_t> eos) {
  fs::create_directories(dir);
  tokenizer::Manifest manifest;
  manifest.kind = kind;
  manifest.vocab_size = 64;
  manifest.bos_id = bos;
  manifest.eos_id = eos;
  for (const auto& [role, file] : files) {
    EXPECT_TRUE(tokenizer::WriteFolderFile(dir, file.first, file.second).ok());
    manifest.files[role] = {file.first, *tokenizer::FileSha256(dir + "/" + file.first)};
  }
  EXPECT_TRUE(tokenizer::WriteManifest(dir, manifest).ok());
  return dir;
}

// ExportHuggingFace with the tensors of `model`.
absl::Status Export(const v1::JobSpec& spec, const TensorMap& model, const JobIdentity& job,
                    int32_t attempt) {
  return ExportHuggingFace(
      spec, [&](const std::string& param) -> absl::StatusOr<HostTensor> { return model.at(param); },
      job, attempt);
}

std::string Contents(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

v1::JobSpec ExportSpec(const std::string& hf_dir, const std::string& tokenizer_dir) {
  v1::JobSpec spec;
  *spec.mutable_model()->mutable_gpt() = testing::CorpusGpt(16, 16);
  spec.mutable_model()->mutable_gpt()->set_bias(true);
  spec.mutable_data()->mutable_tokens()->set_tokenizer(tokenizer_dir);
  spec.mutable_output()->set_huggingface_dir(hf_dir);
  return spec;
}

TEST(HuggingFaceExport, AReplacedExportLeavesNoneOfItsOwnFilesBehind) {
  const std::string dir = testing::FreshScratchFolder("hf-export-replaced");
  const std::string gpt2 =
      TokenizerFolder(dir + "/gpt2", "gpt2",
                      {{"encoder_json", {"encoder.json", "{}"}},
                       {"vocab_bpe", {"vocab.bpe", "#version: 0.2\n"}},
                       {"tokenizer_config_json", {"tokenizer_config.json", R"({"gpt2": true})"}}},
                      50, 50);
  const std::string sentencepiece =
      TokenizerFolder(dir + "/sp", "sentencepiece",
                      {{"model", {"sp.model", "model bytes"}},
                       {"tokenizer_config_json", {"tokenizer_config.json", R"({"llama": true})"}}},
                      std::nullopt, std::nullopt);
  const std::string hf = dir + "/hf";
  const v1::JobSpec first = ExportSpec(hf, gpt2);
  const TensorMap model = ZeroModel(first.model());
  ASSERT_TRUE(Export(first, model, {"job-1", "aaaa"}, 1).ok());
  for (const char* name : {"vocab.json", "merges.txt", "tokenizer_config.json",
                           "generation_config.json", "config.json", "model.safetensors"}) {
    EXPECT_TRUE(fs::exists(hf + "/" + name)) << name;
  }
  std::ofstream(hf + "/model.safetensors.index.json") << "{}";
  std::ofstream(hf + "/README.md") << "a person's";

  // Another job, told to overwrite, with a tokenizer of another kind and no BOS or EOS.
  v1::JobSpec second = ExportSpec(hf, sentencepiece);
  second.mutable_output()->set_overwrite(true);
  ASSERT_TRUE(Export(second, model, {"job-2", "bbbb"}, 1).ok());
  EXPECT_EQ(Contents(hf + "/tokenizer.model"), "model bytes");
  EXPECT_EQ(Contents(hf + "/tokenizer_config.json"), R"({"llama": true})");
  for (const char* gone :
       {"vocab.json", "merges.txt", "generation_config.json", "model.safetensors.index.json"}) {
    EXPECT_FALSE(fs::exists(hf + "/" + gone)) << gone;
  }
  EXPECT_TRUE(fs::exists(hf + "/config.json"));
  EXPECT_EQ(Contents(hf + "/README.md"), "a person's");

  // Without a tokenizer, tokenizer files are not the export's: a person may have put them.
  v1::JobSpec untokenized = ExportSpec(hf, "");
  untokenized.mutable_output()->set_overwrite(true);
  ASSERT_TRUE(Export(untokenized, model, {"job-3", "cccc"}, 1).ok());
  EXPECT_EQ(Contents(hf + "/tokenizer.model"), "model bytes");
}

TEST(HuggingFaceExport, AReplacementCutShortLeavesNoConfig) {
  const std::string dir = testing::FreshScratchFolder("hf-export-cut-short");
  const std::string good = TokenizerFolder(dir + "/good", "sentencepiece",
                                           {{"model", {"sp.model", "model bytes"}}}, 1, 2);
  const std::string hf = dir + "/hf";
  v1::JobSpec spec = ExportSpec(hf, good);
  const TensorMap model = ZeroModel(spec.model());
  ASSERT_TRUE(Export(spec, model, {"job-1", "aaaa"}, 1).ok());
  ASSERT_TRUE(fs::exists(hf + "/config.json"));

  // A tokenizer file changed since its manifest: the copy fails, after the earlier
  // config.json went, so no folder names the earlier weights with a mix of files.
  const std::string damaged = TokenizerFolder(dir + "/damaged", "sentencepiece",
                                              {{"model", {"sp.model", "other bytes"}}}, 1, 2);
  std::ofstream(damaged + "/sp.model") << "changed";
  spec = ExportSpec(hf, damaged);
  spec.mutable_output()->set_overwrite(true);
  EXPECT_EQ(Export(spec, model, {"job-2", "bbbb"}, 1).code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(fs::exists(hf + "/config.json"));
  EXPECT_EQ(Contents(hf + "/tokenizer.model"), "model bytes");

  // Not told to overwrite another job's export: refused, nothing removed.
  spec = ExportSpec(hf, good);
  ASSERT_TRUE(Export(spec, model, {"job-1", "aaaa"}, 2).ok());
  spec = ExportSpec(hf, damaged);
  EXPECT_EQ(Export(spec, model, {"job-3", "cccc"}, 1).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(fs::exists(hf + "/config.json"));
}

}  // namespace
}  // namespace shardwise
