#include "worker/data/tokens.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/out_of_descriptors.h"
#include "common/testing/scratch.h"
#include "contracts/safetensors.h"
#include "contracts/token_files.h"
#include "gtest/gtest.h"
#include "worker/data/batches.h"

namespace shardwise {
namespace {

std::string TempPath(const std::string& name) { return testing::ScratchPath(name); }

std::string WriteUint16(const std::string& name, const std::vector<uint16_t>& ids) {
  std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(ids.data()),
             static_cast<std::streamsize>(ids.size() * 2));
  return path;
}

std::vector<uint16_t> Iota(int n) {
  std::vector<uint16_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = static_cast<uint16_t>(i % 50);
  return ids;
}

// SplitMix64's published first output for seed 0 is 0xE220A8397B1DCDAF.
TEST(SequenceStart, IsSplitMix64ModuloTheStarts) {
  EXPECT_EQ(SequenceStart(0, 0, 1000 + 8, 8), static_cast<int64_t>(0xE220A8397B1DCDAFULL % 1000));
  EXPECT_EQ(SequenceStart(0, 0, 1008, 8), 535);
  EXPECT_EQ(SequenceStart(7, 5, 1000, 8), 657);
}

TEST(TokenFile, BatchesAreSequencesAndTheirNextTokens) {
  auto file = TokenFile::Open("data.tokens.train_path", WriteUint16("train.bin", Iota(200)),
                              v1::TokenData::FORMAT_UNSPECIFIED, TokenModel{"model.gpt", 50, 8},
                              Links::kFollow);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->size(), 200);
  const std::vector<uint16_t> written = Iota(200);
  const std::vector<int64_t> ids(written.begin(), written.end());
  EXPECT_EQ((*file)->fingerprint(), FingerprintIds(kEmptyFingerprint, ids.data(), ids.size()));
  const absl::StatusOr<MicroBatch> read = TokenMicroBatch(**file, 3, 10, 2, 8);
  ASSERT_TRUE(read.ok()) << read.status();
  const MicroBatch& batch = *read;
  EXPECT_EQ(batch.rows, 16);
  EXPECT_EQ(batch.sequences, 2);
  for (int j = 0; j < 2; ++j) {
    const int64_t start = SequenceStart(3, 10 + j, 200, 8);
    for (int t = 0; t < 8; ++t) {
      EXPECT_EQ(batch.tokens[j * 8 + t], (start + t) % 50);
      EXPECT_EQ(batch.labels[j * 8 + t], (start + t + 1) % 50);
    }
  }
}

TEST(TokenFile, ReadsASafetensorsTensor) {
  HostTensor tokens;
  tokens.dtype = "I64";
  tokens.shape = {20};
  std::vector<int64_t> ids(20, 7);
  tokens.bytes.assign(reinterpret_cast<const char*>(ids.data()), size_t{20} * 8);
  const std::string path = TempPath("tokens") + ".safetensors";
  ASSERT_TRUE(WriteSafetensors(path, {{"tokens", tokens}}).ok());
  auto file = TokenFile::Open("data.tokens.train_path", path, v1::TokenData::FORMAT_UNSPECIFIED,
                              TokenModel{"model.gpt", 8, 4}, Links::kFollow);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->size(), 20);
  std::vector<int64_t> last;
  ASSERT_TRUE((*file)->Read(19, 1, &last).ok());
  EXPECT_EQ(last, std::vector<int64_t>{7});
}

// A token file is read a sequence at a time, whatever its size: one of more than the
// 64 GiB a whole safetensors file may have (18 billion I32 ids are 72 GB) is taken (a
// sparse file here: its header, then 66 GiB of holes). It was refused before.
TEST(TokenFile, ASafetensorsFileLargerThanAWholeFileReadIsTaken) {
  const int64_t count = int64_t{33} << 30;
  std::string header = absl::StrCat(R"({"tokens":{"dtype":"U16","shape":[)", count,
                                    R"(],"data_offsets":[0,)", 2 * count, "]}}");
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::string path = TempPath("huge") + ".safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    const uint64_t length = header.size();
    out.write(reinterpret_cast<const char*>(&length), sizeof(length));
    out << header;
  }
  std::filesystem::resize_file(path, 8 + header.size() + 2 * static_cast<uint64_t>(count));
  auto layout = InspectTokenFile("data.tokens.train_path", path, v1::TokenData::FORMAT_UNSPECIFIED,
                                 Links::kFollow);
  std::filesystem::remove(path);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->count, count);
  EXPECT_EQ(layout->element, 2);
  EXPECT_EQ(layout->offset, 8 + header.size());
}

// Ids are integers: a tensor of floats (F16, BF16, F32) is refused, not read as ids.
TEST(TokenFile, RefusesAFloatTensor) {
  for (const char* dtype : {"F16", "BF16", "F32"}) {
    HostTensor tokens;
    tokens.dtype = dtype;
    tokens.shape = {40};
    tokens.bytes.assign(size_t{40} * (std::string(dtype) == "F32" ? 4 : 2), '\0');
    const std::string path = TempPath(dtype) + ".safetensors";
    ASSERT_TRUE(WriteSafetensors(path, {{"tokens", tokens}}).ok());
    auto file = TokenFile::Open("data.tokens.train_path", path, v1::TokenData::FORMAT_UNSPECIFIED,
                                TokenModel{"model.gpt", 8, 4}, Links::kFollow);
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << dtype;
    EXPECT_NE(file.status().message().find("needs a 1-D tensor 'tokens' of U16, I32 or I64"),
              std::string::npos)
        << file.status();
  }
}

// A file cut short or rewritten while a job trains on it (nanoGPT's prepare.py writes in
// place) fails the read naming the file, where a mapping killed the worker (SIGBUS) or
// handed the model an id past its vocabulary.
TEST(TokenFile, AFileChangedAfterItWasOpenedFailsTheReadNamingIt) {
  const std::string path = WriteUint16("changing.bin", Iota(200));
  auto file = TokenFile::Open("data.tokens.train_path", path, v1::TokenData::UINT16,
                              TokenModel{"model.gpt", 50, 8}, Links::kFollow);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<uint16_t> rewritten = Iota(200);
  rewritten[150] = 999;
  WriteUint16("changing.bin", rewritten);
  std::vector<int64_t> ids;
  absl::Status read = (*file)->Read(140, 20, &ids);
  EXPECT_EQ(read.code(), absl::StatusCode::kInvalidArgument) << read;
  EXPECT_NE(read.message().find("token 150 (byte offset 300) is 999"), std::string::npos) << read;
  EXPECT_NE(read.message().find("changed since the job opened it"), std::string::npos) << read;
  ASSERT_EQ(truncate(path.c_str(), 100), 0);
  read = (*file)->Read(140, 20, &ids);
  EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss) << read;
  EXPECT_NE(read.message().find("was cut short"), std::string::npos) << read;
  EXPECT_NE(read.message().find(path), std::string::npos) << read;
  // A batch reading there fails the same way, the process alive.
  EXPECT_EQ(TokenMicroBatch(**file, 3, 0, 50, 8).status().code(), absl::StatusCode::kDataLoss);
}

TEST(TokenFile, NamesTheFieldTheFileAndTheOffsetOfABadId) {
  std::vector<uint16_t> ids = Iota(100);
  ids[37] = 60;
  const std::string path = WriteUint16("bad.bin", ids);
  auto file = TokenFile::Open("data.tokens.val_path", path, v1::TokenData::UINT16,
                              TokenModel{"model.gpt", 50, 8}, Links::kFollow);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(file.status().message(),
            absl::StrCat("job.data.tokens.val_path '", path,
                         "': token 37 (byte offset 74) is 60, not an id below "
                         "model.gpt.vocab_size 50"));
}

// A Llama's file is measured against model.llama, and its errors say so.
TEST(TokenFile, NamesTheModelsOwnFieldsForALlama) {
  std::vector<uint16_t> ids = Iota(100);
  ids[12] = 70;
  const TokenModel llama{"model.llama", 64, 8};
  const std::string bad = WriteUint16("llama_bad.bin", ids);
  auto file =
      TokenFile::Open("data.tokens.train_path", bad, v1::TokenData::UINT16, llama, Links::kFollow);
  EXPECT_EQ(file.status().message(),
            absl::StrCat("job.data.tokens.train_path '", bad,
                         "': token 12 (byte offset 24) is 70, not an id below "
                         "model.llama.vocab_size 64"));
  const std::string short_file = WriteUint16("llama_short.bin", Iota(8));
  file = TokenFile::Open("data.tokens.train_path", short_file, v1::TokenData::UINT16, llama,
                         Links::kFollow);
  EXPECT_EQ(file.status().message(),
            absl::StrCat("job.data.tokens.train_path '", short_file,
                         "': holds 8 tokens; a sequence of model.llama.block_size 8 needs at "
                         "least 9"));
}

// A job's token file is opened as it was checked, with no link in its path: its folder
// swapped for a link since (here to a copy of itself, which a plain open would read) is
// refused, not followed out of the folders the check allowed.
TEST(TokenFile, RefusesALinkPutInTheCheckedPathSinceTheCheck) {
  namespace fs = std::filesystem;
  const fs::path folder = TempPath("checked");
  fs::create_directories(folder);
  fs::rename(WriteUint16("train.bin", Iota(100)), folder / "train.bin");
  const std::string path = fs::canonical(folder / "train.bin").string();
  ASSERT_TRUE(TokenFile::Open("data.tokens.train_path", path, v1::TokenData::UINT16,
                              TokenModel{"model.gpt", 50, 8}, Links::kRefuseAll)
                  .ok());
  fs::rename(folder, folder.string() + ".old");
  fs::create_directory_symlink(folder.string() + ".old", folder);
  auto swapped = TokenFile::Open("data.tokens.train_path", path, v1::TokenData::UINT16,
                                 TokenModel{"model.gpt", 50, 8}, Links::kRefuseAll);
  EXPECT_EQ(swapped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(swapped.status().message().find("is a symbolic link"), std::string::npos)
      << swapped.status();
  EXPECT_NE(swapped.status().message().find("job.data.tokens.train_path"), std::string::npos)
      << swapped.status();
  EXPECT_TRUE(TokenFile::Open("data.tokens.train_path", path, v1::TokenData::UINT16,
                              TokenModel{"model.gpt", 50, 8}, Links::kFollow)
                  .ok());
}

TEST(TokenFile, RefusesShortOddAndIrregularFiles) {
  auto short_file =
      TokenFile::Open("data.tokens.train_path", WriteUint16("short.bin", Iota(8)),
                      v1::TokenData::UINT16, TokenModel{"model.gpt", 50, 8}, Links::kFollow);
  EXPECT_EQ(short_file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(short_file.status().message().find("holds 8 tokens"), std::string::npos);
  const std::string odd = TempPath("odd.bin");
  std::ofstream(odd, std::ios::binary) << "abc";
  EXPECT_NE(TokenFile::Open("f", odd, v1::TokenData::UINT16, TokenModel{"model.gpt", 50, 1},
                            Links::kFollow)
                .status()
                .message()
                .find("whole number"),
            std::string::npos);
  EXPECT_NE(TokenFile::Open("f", testing::ScratchRoot(), v1::TokenData::UINT16,
                            TokenModel{"model.gpt", 50, 1}, Links::kFollow)
                .status()
                .message()
                .find("not a regular file"),
            std::string::npos);
  EXPECT_EQ(TokenFile::Open("f", "/no/such/file", v1::TokenData::UINT16,
                            TokenModel{"model.gpt", 50, 1}, Links::kFollow)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// A source for another rank (a fault-tolerant rank covering one that left) shares the
// files opened and checked once: the same batches as that rank's own source, with the
// files gone meanwhile (not opened, nor every id scanned, again).
TEST(BatchSource, AnotherRanksSourceSharesTheOpenedFiles) {
  v1::JobSpec spec;
  v1::GptConfig* gpt = spec.mutable_model()->mutable_gpt();
  gpt->set_vocab_size(50);
  gpt->set_block_size(8);
  spec.mutable_data()->mutable_tokens()->set_train_path(WriteUint16("shared.bin", Iota(300)));
  spec.mutable_data()->mutable_tokens()->set_val_path(WriteUint16("shared-val.bin", Iota(100)));
  spec.set_global_batch_size(4);
  spec.set_world_size(2);
  auto own = OpenBatchSource(spec, 1);
  auto mine = OpenBatchSource(spec, 0);
  ASSERT_TRUE(own.ok() && mine.ok()) << own.status() << mine.status();
  std::filesystem::remove(spec.data().tokens().train_path());
  std::filesystem::remove(spec.data().tokens().val_path());
  const std::unique_ptr<BatchSource> covered = (*mine)->ForRank(1);
  for (int64_t step : {0, 7}) {
    auto want = (*own)->Train(step, 0);
    auto got = covered->Train(step, 0);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    EXPECT_EQ(got->tokens, want->tokens) << step;
    EXPECT_EQ(got->labels, want->labels) << step;
    EXPECT_NE(got->tokens, (*(*mine)->Train(step, 0)).tokens) << step;  // rank 0's are others
  }
  ASSERT_TRUE(covered->has_validation());
  EXPECT_EQ(covered->Validation(1, 0)->tokens, (*own)->Validation(1, 0)->tokens);
}

// A process out of file descriptors (EMFILE) cannot open a token file now, which says
// nothing of the file: UNAVAILABLE naming the field (the attempt's failure, re-queued),
// not INVALID_ARGUMENT (the job's, failed for good). In a child whose limit is used up.
TEST(TokenFile, AHostThatCannotOpenTheFileNowIsUnavailable) {
  const std::string bin = WriteUint16("emfile.bin", Iota(100));
  HostTensor tokens{"U16", {100}, std::string(200, '\0')};
  const std::string tensor = TempPath("emfile") + ".safetensors";
  ASSERT_TRUE(WriteSafetensors(tensor, {{"tokens", tokens}}).ok());
  EXPECT_EQ(testing::ExitCodeWithoutFileDescriptors([&] {
              int code = 0;
              for (const std::string& path : {bin, tensor}) {
                code += 2;
                const auto opened = TokenFile::Open("data.tokens.train_path", path,
                                                    v1::TokenData::FORMAT_UNSPECIFIED,
                                                    TokenModel{"model.gpt", 50, 8}, Links::kFollow);
                if (!absl::IsUnavailable(opened.status())) return code;
                if (!absl::StrContains(opened.status().message(), "job.data.tokens.train_path")) {
                  return code + 1;
                }
              }
              return 0;
            }),
            0);
}

}  // namespace
}  // namespace shardwise
