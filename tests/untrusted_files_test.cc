// Every file a job names is untrusted (docs/operations.md, "What a job's files may be"):
// files crafted by this test, given to a real coordinator, workers and the CLI. Each is
// refused, naming what is wrong, or survived; none crashes, hangs or floods a process.
//   - a job's tokenizer folder: a link to a file outside the allowed roots, a link to a
//     device, a FIFO for a file, a file whose hash is not its manifest's, a SentencePiece
//     model whose normaliser would crash SentencePiece;
//   - Hugging Face checkpoints: headers whose offsets overlap, leave gaps or trailing
//     bytes, values of the wrong type, more entries than any model has, config.json keys
//     of the wrong type or of another model, JSON nested without end;
//   - values echoed in errors: cut and escaped (a job id of 20 KB, a 1 MiB hidden_act);
//     path fields with a NUL over raw gRPC;
//   - the tokenizer program's inputs: ranks past any vocabulary, a corpus too short to
//     split; the tokens file's principals; a worker whose name is refused.

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/token_hash.h"
#include "contracts/huggingface_layout.h"
#include "contracts/safetensors_header.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/job_service.grpc.pb.h"
#include "tests/cluster.h"
#include "tokenizer/sentencepiece_model_check.h"

namespace shardwise::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int64_t kVocab = 512;

v1::LlamaConfig SmallLlama() {
  v1::LlamaConfig llama;
  llama.set_vocab_size(kVocab);
  llama.set_hidden_size(32);
  llama.set_intermediate_size(64);
  llama.set_num_hidden_layers(2);
  llama.set_num_attention_heads(4);
  llama.set_num_key_value_heads(2);
  llama.set_max_position_embeddings(32);
  return llama;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A safetensors file of `header` (JSON, as given) and `data_bytes` zero bytes of data.
void WriteRawSafetensors(const std::string& path, const std::string& header, size_t data_bytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(header.size() >> (8 * i));
  WriteFile(path, bytes + header + std::string(data_bytes, '\0'));
}

class UntrustedFilesTest : public ::testing::Test {
 protected:
  // One coordinator, no workers (a refused submission needs none); a SentencePiece
  // tokenizer folder the CLI made, and token files.
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    cluster_->StartCoordinator();
    std::string output;
    tokens_ = new std::string(cluster_->dir() + "/tokens");
    ASSERT_EQ(Cluster::RunCli({"tokenize", "/usr/share/common-licenses/GPL-3", "-o", *tokens_,
                               "--tokenizer=sentencepiece", absl::StrCat("--vocab_size=", kVocab)},
                              &output),
              0)
        << output;
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  // A folder of its own for one case.
  static std::string CaseDir(const std::string& name) {
    std::string dir = absl::StrCat(cluster_->dir(), "/case-", name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
  }

  // A copy of the tokenizer folder `tokenize` wrote, for a case to change.
  static std::string TokenizerCopy(const std::string& name) {
    std::string dir = CaseDir(name) + "/tokenizer";
    fs::copy(*tokens_ + "/tokenizer", dir, fs::copy_options::recursive);
    return dir;
  }

  // Sets the hash its manifest gives `file` to that of `bytes`.
  static void SetManifestHash(const std::string& folder, const std::string& bytes) {
    const std::string path = folder + "/shardwise-tokenizer.json";
    std::ifstream in(path);
    Json manifest = Json::parse(in);
    manifest["files"]["model"]["sha256"] = TokenHash(bytes);
    WriteFile(path, manifest.dump(2));
  }

  // A Llama job on the token files, with the tokenizer folder `tokenizer` (none if empty).
  static v1::JobSpec Spec(const std::string& tokenizer) {
    v1::JobSpec spec = Cluster::Spec(2);
    spec.mutable_model()->Clear();
    *spec.mutable_model()->mutable_llama() = SmallLlama();
    spec.clear_data();
    spec.mutable_data()->mutable_tokens()->set_train_path(*tokens_ + "/train.bin");
    if (!tokenizer.empty()) spec.mutable_data()->mutable_tokens()->set_tokenizer(tokenizer);
    spec.set_global_batch_size(4);
    spec.set_steps(3);
    return spec;
  }

  // A Hugging Face checkpoint folder for the job's Llama: config.json as HF writes it,
  // changed by `config` (a key set to a JSON value, parsed), and `header` as the weights'
  // header (valid JSON or not) with `data_bytes` of data.
  static v1::JobSpec CheckpointSpec(const std::string& name, const std::string& key,
                                    const std::string& value, const std::string& header,
                                    size_t data_bytes) {
    const std::string dir = CaseDir(name);
    v1::JobSpec spec = Spec("");
    Json config = Json::parse(HuggingFaceConfigJson(spec.model()));
    if (!key.empty()) config[key] = Json::parse(value);
    WriteFile(dir + "/config.json", config.dump(2));
    WriteRawSafetensors(dir + "/model.safetensors", header, data_bytes);
    spec.mutable_init()->mutable_huggingface()->set_dir(dir);
    return spec;
  }

  static absl::Status Submit(const v1::JobSpec& spec) {
    return cluster_->client().Submit(spec).status();
  }

  static Cluster* cluster_;
  static std::string* tokens_;
};

Cluster* UntrustedFilesTest::cluster_ = nullptr;
std::string* UntrustedFilesTest::tokens_ = nullptr;

void ExpectRefused(const absl::Status& status, const std::string& message) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), message)) << status;
}

TEST_F(UntrustedFilesTest, ATokenizerFolderIsReadAsItIsEveryFileOfIt) {
  // A link to a file outside the allowed roots, its hash written into the manifest: the
  // worker would copy that file beside the model.
  std::string folder = TokenizerCopy("outside-link");
  std::ifstream license("/usr/share/common-licenses/GPL-3");
  const std::string outside((std::istreambuf_iterator<char>(license)), {});
  fs::remove(folder + "/tokenizer.model");
  fs::create_symlink("/usr/share/common-licenses/GPL-3", folder + "/tokenizer.model");
  SetManifestHash(folder, outside);
  ExpectRefused(Submit(Spec(folder)), folder + "/tokenizer.model' is a symbolic link");

  // The manifest a link to /dev/zero: read whole, it took the coordinator's memory.
  folder = TokenizerCopy("dev-zero");
  fs::remove(folder + "/shardwise-tokenizer.json");
  fs::create_symlink("/dev/zero", folder + "/shardwise-tokenizer.json");
  ExpectRefused(Submit(Spec(folder)), "shardwise-tokenizer.json' is a symbolic link");

  // A file whose bytes are not those its manifest names: found now, not after training.
  folder = TokenizerCopy("changed");
  WriteFile(folder + "/tokenizer.model", "not the model");
  ExpectRefused(Submit(Spec(folder)), "tokenizer.model: its SHA-256 is");
}

// Opening a FIFO plainly blocks until a writer comes: each such submission held a
// client-call thread, and after four every call failed. Refused at once now, and the
// other calls go on.
TEST_F(UntrustedFilesTest, AFifoInATokenizerFolderIsRefusedWithoutBlocking) {
  for (const char* file : {"shardwise-tokenizer.json", "tokenizer.model"}) {
    for (int i = 0; i < 6; ++i) {
      const std::string folder = TokenizerCopy(absl::StrCat("fifo-", file, i));
      fs::remove(folder + "/" + file);
      ASSERT_EQ(::mkfifo((folder + "/" + file).c_str(), 0644), 0);
      ExpectRefused(Submit(Spec(folder)), absl::StrCat(file, "' is not a regular file"));
    }
  }
  EXPECT_TRUE(cluster_->client().ListJobs().ok());
}

// A SentencePiece model whose normaliser (a darts-clone trie) would send SentencePiece
// outside its array: the coordinator refuses the folder, and the CLI's tokenize and
// sample (which run SentencePiece) refuse the model instead of dying of SIGSEGV.
TEST_F(UntrustedFilesTest, ASentencePieceModelThatWouldCrashTheLibraryIsRefused) {
  const std::string dir = CaseDir("charsmap");
  std::string output;
  // A model with NFKC's rules, whose charsmap is a real trie (the CLI's own use none).
  ASSERT_EQ(RunShell(absl::StrCat("/usr/bin/spm_train --input=/usr/share/common-licenses/GPL-3 "
                                  "--model_prefix=",
                                  dir, "/nfkc --vocab_size=", kVocab,
                                  " --normalization_rule_name=nmt_nfkc --minloglevel=2"),
                     &output),
            0)
      << output;
  ASSERT_EQ(
      Cluster::RunCli({"tokenize", "/usr/share/common-licenses/GPL-2", "-o", dir + "/tokens",
                       "--tokenizer=sentencepiece", "--sentencepiece_model=" + dir + "/nfkc.model"},
                      &output),
      0)
      << output;
  const std::string folder = dir + "/tokens/tokenizer";
  std::ifstream in(folder + "/tokenizer.model", std::ios::binary);
  std::string model((std::istreambuf_iterator<char>(in)), {});
  const absl::string_view charsmap = tokenizer::FindNormalizerCharsmap(model);
  ASSERT_GT(charsmap.size(), 8u);
  const uint32_t far = 0x7FFFFC00u;  // the root's offset, far past the array
  std::memcpy(model.data() + (charsmap.data() - model.data()) + 4, &far, 4);
  WriteFile(folder + "/tokenizer.model", model);
  WriteFile(dir + "/corrupt.model", model);
  SetManifestHash(folder, model);

  ExpectRefused(Submit(Spec(folder)), "precompiled_charsmap is corrupt");
  EXPECT_EQ(Cluster::RunCli(
                {"tokenize", "/usr/share/common-licenses/GPL-2", "-o", dir + "/again",
                 "--tokenizer=sentencepiece", "--sentencepiece_model=" + dir + "/corrupt.model"},
                &output),
            2)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "precompiled_charsmap is corrupt")) << output;
  // What `sample` runs to encode its prompt with the model's tokenizer.
  EXPECT_EQ(Cluster::RunCli(
                {"tokenize", "encode", "--tokenizer_dir=" + folder, "--text=The Program"}, &output),
            2)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "precompiled_charsmap is corrupt")) << output;
}

struct CheckpointCase {
  std::string name;
  std::string key, value;  // a config.json key and the JSON it is set to
  std::string header;      // the weights file's header
  size_t data_bytes;
  std::string message;
};

class HostileCheckpoints : public UntrustedFilesTest,
                           public ::testing::WithParamInterface<CheckpointCase> {};

constexpr char kTwoFloats[] = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST_P(HostileCheckpoints, AreRefusedNamingTheKeyAndTheValue) {
  const CheckpointCase& c = GetParam();
  const absl::Status status =
      Submit(CheckpointSpec(c.name, c.key, c.value, c.header, c.data_bytes));
  ExpectRefused(status, c.message);
  EXPECT_TRUE(absl::StartsWith(status.message(), "job.init.huggingface.dir: ")) << status;
  EXPECT_LT(status.message().size(), 1024u);
}

INSTANTIATE_TEST_SUITE_P(
    EveryKind, HostileCheckpoints,
    ::testing::Values(
        CheckpointCase{"overlapping", "", "",
                       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       12, "where the tensor before it still lies"},
        CheckpointCase{"gap", "", "",
                       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                       12, "a gap follows the tensor before it"},
        CheckpointCase{"fractional-offset", "", "",
                       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}})", 8,
                       "data_offsets holding 8.0, not an integer >= 0"},
        CheckpointCase{"fractional-shape", "", "",
                       R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8,
                       "shape holding 2.5"},
        CheckpointCase{"trailing-bytes", "", "", kTwoFloats, 24, "16 bytes follow them"},
        CheckpointCase{"metadata-number", "", "",
                       R"({"__metadata__":{"format":7},"a":{"dtype":"F32","shape":[2],)"
                       R"("data_offsets":[0,8]}})",
                       8, "__metadata__.format 7, not a string"},
        CheckpointCase{"string-shape", "", "",
                       R"({"a":{"dtype":"F32","shape":["32"],"data_offsets":[0,128]}})", 128,
                       R"(shape holding "32", not an integer >= 0)"},
        CheckpointCase{"number-dtype", "", "",
                       R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", 8,
                       "dtype 7, not a string"},
        CheckpointCase{"gpt2-type", "model_type", R"("gpt2")", kTwoFloats, 8,
                       "config.json has model_type 'gpt2', not a Llama's"},
        CheckpointCase{"rope-scaling-string", "rope_scaling", R"("llama3")", kTwoFloats, 8,
                       R"(config.json has rope_scaling "llama3", not an object)"},
        CheckpointCase{"eps-string", "rms_norm_eps", R"("big")", kTwoFloats, 8,
                       R"(config.json has rms_norm_eps "big", not a number)"},
        CheckpointCase{"vocab-string", "vocab_size", R"("256")", kTwoFloats, 8,
                       R"(config.json has vocab_size "256", not an integer)"},
        CheckpointCase{"vocab-float", "vocab_size", "256.0", kTwoFloats, 8,
                       "config.json has vocab_size 256.0, not an integer"},
        CheckpointCase{"vocab-huge", "vocab_size", "1e308", kTwoFloats, 8,
                       "config.json has vocab_size 1e+308, not an integer"},
        CheckpointCase{"vocab-2-63", "vocab_size", "9223372036854775808", kTwoFloats, 8,
                       "config.json has vocab_size 9223372036854775808, not an integer"}),
    [](const auto& info) {
      std::string name = info.param.name;
      for (char& c : name) {
        if (c == '-') c = '_';
      }
      return name;
    });

// Sizes past any model: a header of more entries, an index of more keys, a config.json
// of nothing but '[' (parsed whole, each took gigabytes and a minute of a call thread).
TEST_F(UntrustedFilesTest, CheckpointsPastAnyModelsSizeAreRefusedQuickly) {
  std::string header = "{";
  for (size_t i = 0; i <= kMaxSafetensorsEntries; ++i) {
    absl::StrAppend(&header, i ? "," : "", "\"t", i,
                    R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})");
  }
  header += "}";
  const absl::Time start = absl::Now();
  ExpectRefused(Submit(CheckpointSpec("many-entries", "", "", header, 0)),
                absl::StrCat("more than ", kMaxSafetensorsEntries, " entries"));

  v1::JobSpec nested = CheckpointSpec("nested", "", "", kTwoFloats, 8);
  WriteFile(nested.init().huggingface().dir() + "/config.json", std::string(8 << 20, '['));
  ExpectRefused(Submit(nested), "nests deeper than 64 levels");

  v1::JobSpec indexed = CheckpointSpec("many-keys", "", "", kTwoFloats, 8);
  const std::string dir = indexed.init().huggingface().dir();
  fs::remove(dir + "/model.safetensors");
  std::string index = R"({"weight_map":{)";
  for (size_t i = 0; i <= kMaxSafetensorsEntries; ++i) {
    absl::StrAppend(&index, i ? "," : "", "\"t", i, R"(":"model-1.safetensors")");
  }
  WriteFile(dir + "/model.safetensors.index.json", index + "}}");
  ExpectRefused(Submit(indexed), absl::StrCat("maps ", kMaxSafetensorsEntries + 1, " tensors"));
  // The three together took minutes of call threads before; generous for a loaded machine.
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

// Values echoed in errors are cut and escaped: an error message over gRPC's 8 KiB metadata
// limit failed the call as RESOURCE_EXHAUSTED, which the client retried for minutes.
TEST_F(UntrustedFilesTest, ValuesEchoedInErrorsAreCut) {
  auto job = cluster_->client().Get(std::string(20000, 'j'));
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(job.status().message().size(), 200u) << job.status();

  const absl::Status act = Submit(CheckpointSpec(
      "long-act", "hidden_act", Json(std::string(1 << 20, 'x')).dump(), kTwoFloats, 8));
  ExpectRefused(act, "(1048576 bytes)");
  EXPECT_LT(act.message().size(), 1024u);

  // A path of a megabyte, outside the roots: refused as such, its message within bounds.
  v1::JobSpec long_path = Spec("");
  long_path.mutable_data()->mutable_tokens()->set_train_path("/" + std::string(1 << 20, 'p'));
  const absl::Status path = Submit(long_path);
  EXPECT_EQ(path.code(), absl::StatusCode::kPermissionDenied) << path.message().substr(0, 300);
  // The cut path leaves no room for the rest of the reason: the field names it.
  EXPECT_TRUE(absl::StrContains(path.message(), "data.tokens.train_path: '/ppp"))
      << path.message().substr(0, 300);
  EXPECT_LE(path.message().size(), 4096u);
}

// The client library refuses these before sending; over raw gRPC the coordinator must:
// the file system reads a path up to its NUL, so the path checked would not be the one
// written in the spec.
TEST_F(UntrustedFilesTest, APathWithANulIsRefusedForEveryPathField) {
  auto stub = v1::JobService::NewStub(
      grpc::CreateChannel(cluster_->address(), grpc::InsecureChannelCredentials()));
  const std::string junk("\0junk", 5);
  v1::JobSpec tokens = Spec("");
  tokens.mutable_data()->mutable_tokens()->set_train_path(*tokens_ + "/train.bin" + junk);
  v1::JobSpec checkpoint = CheckpointSpec("nul", "", "", kTwoFloats, 8);
  checkpoint.mutable_init()->mutable_huggingface()->set_dir(checkpoint.init().huggingface().dir() +
                                                            junk);
  for (const v1::JobSpec& spec : {tokens, checkpoint}) {
    grpc::ClientContext context;
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    v1::SubmitJobResponse response;
    const grpc::Status status = stub->SubmitJob(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(status.error_message(),
                                  "\\u{0000}junk' contains the control "
                                  "character U+0000"))
        << status.error_message();
  }
}

// A folder that changed between submission and the attempt: the worker checks it too,
// before joining, instead of training every step and then blocking in open() forever.
TEST_F(UntrustedFilesTest, AWorkerRefusesAFolderThatBecameAFifoBeforeTraining) {
  Cluster cluster;
  cluster.StartCoordinator();
  const std::string folder = TokenizerCopy("fifo-at-worker");
  v1::JobSpec spec = Spec(folder);
  spec.set_world_size(1);
  spec.set_global_batch_size(2);
  auto job_id = cluster.client().Submit(spec);  // no worker yet: it waits
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  fs::remove(folder + "/tokenizer.model");
  ASSERT_EQ(::mkfifo((folder + "/tokenizer.model").c_str(), 0644), 0);
  cluster.AddWorker("w0");
  const v1::Job job = cluster.WaitForState(*job_id, v1::FAILED, absl::Seconds(60));
  EXPECT_TRUE(absl::StrContains(job.reason(), "tokenizer.model' is not a regular file"))
      << job.reason();
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.WorkerState("w0") == v1::IDLE; }));
}

TEST_F(UntrustedFilesTest, TheTokenizerProgramRefusesRanksPastAnyVocabularyAndAnEmptySplit) {
  const std::string dir = CaseDir("ranks");
  std::string ranks;
  for (int byte = 0; byte < 256; ++byte) {
    absl::StrAppend(&ranks, absl::Base64Escape(std::string(1, static_cast<char>(byte))), " ", byte,
                    "\n");
  }
  WriteFile(dir + "/huge.tiktoken", ranks + absl::Base64Escape("ab") + " 2147483647\n");
  std::string output;
  EXPECT_EQ(Cluster::RunCli({"tokenize", "/usr/share/common-licenses/GPL-2", "-o", dir + "/out",
                             "--tokenizer=tiktoken", "--encoding=r50k_base",
                             "--tiktoken=" + dir + "/huge.tiktoken"},
                            &output),
            2)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "huge.tiktoken:257: the rank \"2147483647\" is not an id"))
      << output;

  WriteFile(dir + "/one-line.txt", "a single line of text without a line break");
  EXPECT_EQ(Cluster::RunCli({"tokenize", dir + "/one-line.txt", "-o", dir + "/split"}, &output), 2)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "left no validation text")) << output;
  // Refused whole: no tokenizer, no token file, no temporary file left.
  EXPECT_TRUE(fs::is_empty(dir + "/split")) << fs::directory_iterator(dir + "/split")->path();
}

// A run refused or failed leaves the output folder as the run before left it: its
// tokenizer still the one its token files were written with (a tokenizer replaced before
// the input was checked described token files it did not write).
TEST_F(UntrustedFilesTest, ATokenizerRunThatFailsLeavesTheFolderAsItWas) {
  const std::string dir = CaseDir("kept");
  std::string output;
  ASSERT_EQ(Cluster::RunCli({"tokenize", "/usr/share/common-licenses/GPL-2", "-o", dir + "/out"},
                            &output),
            0)
      << output;
  const std::string manifest = ReadWholeFile(dir + "/out/tokenizer/shardwise-tokenizer.json");
  const std::string train = ReadWholeFile(dir + "/out/train.bin");
  ASSERT_FALSE(manifest.empty());
  WriteFile(dir + "/one-line.txt", "a single line of text without a line break");
  // Another kind of tokenizer than the folder's (a byte-level BPE of the 256 bytes).
  std::string ranks;
  for (int byte = 0; byte < 256; ++byte) {
    absl::StrAppend(&ranks, absl::Base64Escape(std::string(1, static_cast<char>(byte))), " ", byte,
                    "\n");
  }
  WriteFile(dir + "/bytes.tiktoken", ranks);
  const std::vector<std::string> tiktoken = {"--tokenizer=tiktoken", "--encoding=r50k_base",
                                             "--tiktoken=" + dir + "/bytes.tiktoken"};
  const auto with_tiktoken = [&](std::vector<std::string> args) {
    args.insert(args.end(), tiktoken.begin(), tiktoken.end());
    return args;
  };
  for (const std::vector<std::string>& refused :
       {std::vector<std::string>{"tokenize", dir + "/missing.txt", "-o", dir + "/out",
                                 "--tokenizer=sentencepiece", "--vocab_size=300"},
        with_tiktoken({"tokenize", dir + "/missing.txt", "-o", dir + "/out"}),
        with_tiktoken({"tokenize", dir + "/one-line.txt", "-o", dir + "/out"}),
        std::vector<std::string>{"tokenize", "/usr/share/common-licenses/GPL-2", "-o", dir + "/out",
                                 "--val_fraction=1"},
        std::vector<std::string>{"tokenize", "/usr/share/common-licenses/GPL-2", "-o", dir + "/out",
                                 "--threads=0"},
        // Refused once the tokenizer was staged: the split left no validation text.
        std::vector<std::string>{"tokenize", dir + "/one-line.txt", "-o", dir + "/out"}}) {
    EXPECT_NE(Cluster::RunCli(refused, &output), 0) << absl::StrJoin(refused, " ");
    if (refused[1] == dir + "/missing.txt") {  // refused before a model is trained
      EXPECT_TRUE(absl::StrContains(output, "missing.txt' is not a readable file")) << output;
      EXPECT_FALSE(absl::StrContains(output, "training a SentencePiece model")) << output;
    }
    EXPECT_EQ(ReadWholeFile(dir + "/out/tokenizer/shardwise-tokenizer.json"), manifest) << output;
    EXPECT_EQ(ReadWholeFile(dir + "/out/train.bin"), train) << output;
    EXPECT_FALSE(fs::exists(dir + "/out/.tokenizer.staged"));
  }
}

TEST_F(UntrustedFilesTest, APrincipalIsPrintableTextOnly) {
  std::string output;
  EXPECT_EQ(Cluster::RunCli({"token", "create", "--principal=m\n  role: admin", "--role=viewer"},
                            &output),
            2)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "contains the control character U+000A")) << output;

  const std::string dir = CaseDir("principal");
  WriteFile(dir + "/tokens.yaml",
            absl::StrCat("tokens:\n  - principal: \"ev\\x1b[2Jil\"\n    role: admin\n    sha256: ",
                         TokenHash("sw_token"), "\n"));
  Process coordinator(
      {Cluster::BinaryPath("server/shardwise-coordinator"), "--address=127.0.0.1:0",
       "--state_file=" + dir + "/state.db", "--tokens_file=" + dir + "/tokens.yaml"},
      dir + "/coordinator.log");
  EXPECT_NE(coordinator.Wait(), 0);
  EXPECT_TRUE(absl::StrContains(ReadWholeFile(dir + "/coordinator.log"),
                                "contains the control character U+001B"))
      << ReadWholeFile(dir + "/coordinator.log");
}

// A name the coordinator refuses is the worker's flag, which no retry changes: the worker
// exits saying why instead of retrying forever.
TEST_F(UntrustedFilesTest, AWorkerWhoseNameIsRefusedExitsSayingWhy) {
  Process& worker = cluster_->AddWorker("bad\x1b[2Jname", {}, {}, /*wait=*/false);
  ASSERT_TRUE(Cluster::WaitFor([&] { return !worker.Running(); }, absl::Seconds(30)));
  EXPECT_EQ(worker.Wait(), 2);
  EXPECT_TRUE(
      absl::StrContains(ReadWholeFile(worker.log_path()), "the coordinator refused this worker"))
      << ReadWholeFile(worker.log_path());
}

}  // namespace
}  // namespace shardwise::testing
