// Training end to end with real processes: jobs submitted to a real coordinator run on
// real worker daemons over real Gloo, and the model file rank 0 writes equals the
// single-process reference (rtol 1e-5 / atol 1e-6, fp32).

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster.h"
#include "worker/fsdp/reference_training.h"
#include "worker/testing/model_compare.h"

namespace shardwise::testing {
namespace {

v1::JobSpec TrainingSpec(int world, v1::ShardingStrategy::Value strategy, bool adamw,
                         const std::string& model_path) {
  v1::JobSpec spec = Cluster::Spec(world);
  spec.mutable_model()->clear_layer_widths();
  for (int w : {10, 32, 24, 4}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_fsdp()->set_sharding_strategy(strategy);
  if (strategy == v1::ShardingStrategy::HYBRID_SHARD) spec.mutable_fsdp()->set_shard_group_size(2);
  if (adamw) {
    spec.mutable_optimizer()->mutable_adamw()->set_lr(0.01);
  } else {
    spec.mutable_optimizer()->mutable_sgd()->set_momentum(0.9);
  }
  spec.set_global_batch_size(int64_t{12} * world);
  spec.set_steps(20);
  spec.mutable_output()->set_final_model_path(model_path);
  return spec;
}

TEST(Training, JobsOnWorkerProcessesMatchTheReference) {
  Cluster cluster;
  cluster.StartCoordinator();
  for (const char* name : {"w0", "w1", "w2", "w3"}) cluster.AddWorker(name);
  struct Case {
    int world;
    v1::ShardingStrategy::Value strategy;
    bool adamw;
  };
  for (const Case& c : {Case{3, v1::ShardingStrategy::FULL_SHARD, true},
                        Case{4, v1::ShardingStrategy::HYBRID_SHARD, false},
                        Case{2, v1::ShardingStrategy::NO_SHARD, false}}) {
    const std::string path =
        cluster.dir() + "/model-" + v1::ShardingStrategy::Value_Name(c.strategy) + ".safetensors";
    const v1::JobSpec spec = TrainingSpec(c.world, c.strategy, c.adamw, path);
    auto job_id = cluster.client().Submit(spec);
    ASSERT_TRUE(job_id.ok()) << job_id.status();
    v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(60));
    EXPECT_EQ(job.progress().step(), 20);
    EXPECT_LT(job.progress().loss(), job.progress().first_loss()) << "the loss did not fall";
    EXPECT_TRUE(absl::StrContains(job.result(), "model written to " + path)) << job.result();

    auto reference = fsdp::TrainReference(spec);
    ASSERT_TRUE(reference.ok()) << reference.status();
    auto trained = ReadSafetensors(path);
    ASSERT_TRUE(trained.ok()) << trained.status();
    EXPECT_TRUE(testing::ModelsClose(*trained, reference->model, /*rtol=*/1e-5, /*atol=*/1e-6));
    EXPECT_NEAR(job.progress().first_loss(), reference->losses.front(),
                1e-5 * reference->losses.front());
  }
}

// SEMANTICS of the control plane: in steady state the step makes no call to the
// coordinator (progress, timelines and positions go out from other threads). The first
// step makes one: the execution-order report.
TEST(Training, TheStepMakesNoCoordinatorCallsAfterTheFirst) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_steps(100);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(60));
  EXPECT_EQ(job.progress().step(), 100);
  EXPECT_EQ(job.progress().first_step_coordinator_calls(), 1);
  EXPECT_EQ(job.progress().critical_path_coordinator_calls(), 0);
}

TEST(Training, ABadDataFileFailsTheJobNamingIt) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  // Readable (so the coordinator accepts it) but not safetensors.
  const std::string path = cluster.dir() + "/not-data.safetensors";
  std::ofstream(path) << "hello";
  v1::JobSpec spec = Cluster::Spec(1);
  spec.mutable_data()->set_safetensors_path(path);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  v1::Job job = cluster.WaitForState(*job_id, v1::FAILED);
  EXPECT_TRUE(absl::StrContains(
      job.reason(), "rank 0 (worker w0) failed: " + path + ": not a valid safetensors file"))
      << job.reason();

  // A header declaring sizes that overflow once multiplied: refused, the worker lives.
  const std::string header =
      R"({"x":{"dtype":"F32","shape":[60000,60000,60000,60000,0],"data_offsets":[0,0]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
  const std::string overflowing = cluster.dir() + "/overflowing.safetensors";
  std::ofstream(overflowing, std::ios::binary) << bytes << header << std::string(60000, '\0');
  spec.mutable_data()->set_safetensors_path(overflowing);
  job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  job = cluster.WaitForState(*job_id, v1::FAILED);
  EXPECT_TRUE(absl::StrContains(job.reason(),
                                "tensor 'x' has a dimension of 60000 that does not fit "
                                "the file"))
      << job.reason();
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.WorkerState("w0") == v1::IDLE; }));
}

// Failures every attempt would repeat are not re-queued, whatever the restart policy: a
// loss that stops being finite fails the job at that step, naming it; so does a token id
// outside the vocabulary, naming the file and the offset. The workers stay usable.
TEST(Training, DivergenceAndBadTokensFailTheJobWithoutRestarts) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  v1::JobSpec diverging = Cluster::Spec(2);
  diverging.mutable_optimizer()->mutable_sgd()->set_lr(1e30);
  diverging.set_steps(50);
  diverging.mutable_restart_policy()->set_max_restarts(3);
  auto job_id = cluster.client().Submit(diverging);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  v1::Job job = cluster.WaitForState(*job_id, v1::FAILED, absl::Seconds(60));
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(absl::StrContains(job.reason(), "training diverged: the loss of step "))
      << job.reason();
  EXPECT_TRUE(absl::StrContains(job.reason(), "not re-queued")) << job.reason();
  EXPECT_LT(job.progress().step(), 50);

  // Token ids of 300 in a model whose vocabulary is 256.
  const std::string tokens = cluster.dir() + "/bad.bin";
  {
    std::vector<uint16_t> ids(200, 65);
    ids[123] = 300;
    std::ofstream(tokens, std::ios::binary).write(reinterpret_cast<const char*>(ids.data()), 400);
  }
  v1::JobSpec bad = Cluster::Spec(2);
  bad.mutable_model()->Clear();
  v1::GptConfig* gpt = bad.mutable_model()->mutable_gpt();
  gpt->set_vocab_size(256);
  gpt->set_block_size(8);
  gpt->set_n_layer(1);
  gpt->set_n_head(1);
  gpt->set_n_embd(8);
  bad.mutable_data()->Clear();
  bad.mutable_data()->mutable_tokens()->set_train_path(tokens);
  bad.mutable_restart_policy()->set_max_restarts(2);
  job_id = cluster.client().Submit(bad);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  job = cluster.WaitForState(*job_id, v1::FAILED, absl::Seconds(60));
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(absl::StrContains(job.reason(), "token 123 (byte offset 246) is 300"))
      << job.reason();
  EXPECT_TRUE(Cluster::WaitFor([&] {
    return cluster.WorkerState("w0") == v1::IDLE && cluster.WorkerState("w1") == v1::IDLE;
  }));
}

// A two-layer GPT over two ranks that trains on `train_path`.
v1::JobSpec SmallGptSpec(int64_t vocab_size, const std::string& train_path) {
  return Cluster::WithSmallGpt(Cluster::Spec(2), vocab_size, train_path);
}

// The same shape as a Llama (grouped-query attention, untied head).
v1::JobSpec SmallLlamaSpec(int64_t vocab_size, const std::string& train_path) {
  v1::JobSpec spec = SmallGptSpec(vocab_size, train_path);
  spec.mutable_model()->Clear();
  v1::LlamaConfig* llama = spec.mutable_model()->mutable_llama();
  llama->set_vocab_size(vocab_size);
  llama->set_hidden_size(32);
  llama->set_intermediate_size(64);
  llama->set_num_hidden_layers(2);
  llama->set_num_attention_heads(4);
  llama->set_num_key_value_heads(2);
  llama->set_max_position_embeddings(32);
  return spec;
}

// A transformer (GPT, or Llama when the parameter is true) from text to samples with real
// processes and the real CLI: tokenize a text the machine ships, submit a job that the
// coordinator validates (the token files included), train on two worker processes, read
// the order and plan the coordinator recorded and what describe shows, then sample from
// the model the job wrote.
class TransformerJob : public ::testing::TestWithParam<bool> {};

TEST_P(TransformerJob, FromTextToSamples) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  std::string output;
  const std::string tokens = cluster.dir() + "/tokens";
  ASSERT_EQ(
      Cluster::RunCli({"tokenize", "/usr/share/common-licenses/GPL-3", "-o", tokens}, &output), 0)
      << output;

  const bool llama = GetParam();
  v1::JobSpec spec =
      llama ? SmallLlamaSpec(256, tokens + "/train.bin") : SmallGptSpec(256, tokens + "/train.bin");
  spec.mutable_data()->mutable_tokens()->set_val_path(tokens + "/val.bin");
  spec.mutable_evaluation()->set_interval_steps(10);
  spec.mutable_optimizer()->Clear();
  spec.mutable_optimizer()->mutable_adamw()->set_lr(3e-3);
  spec.set_global_batch_size(8);
  spec.set_steps(30);
  const std::string model_path = cluster.dir() + (llama ? "/llama" : "/gpt") + ".safetensors";
  spec.mutable_output()->set_final_model_path(model_path);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  const v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(90));
  const v1::Progress& p = job.progress();
  EXPECT_LT(p.loss(), p.first_loss());
  EXPECT_EQ(p.val_loss_step(), 30);
  EXPECT_LT(p.val_loss(), p.first_val_loss());
  EXPECT_GT(p.tokens_per_second(), 0);
  // Rank 0's memory at its peak: the estimate the job was admitted with is above it (on
  // the CPU an upper bound, docs/operations.md "Memory per rank"), and the allocator held
  // at least what was live.
  EXPECT_GT(p.peak_allocated_bytes(), 0);
  EXPECT_LE(p.peak_allocated_bytes(), job.memory_per_rank().total_bytes());
  EXPECT_GE(p.peak_reserved_bytes(), p.peak_allocated_bytes());
  // The root (unit 2) first in pre-forward and last in post-forward; each block
  // prefetches the one before it in backward.
  EXPECT_EQ(std::vector<int>(job.execution_order().pre_forward().begin(),
                             job.execution_order().pre_forward().end()),
            (std::vector<int>{2, 0, 1}));
  EXPECT_EQ(std::vector<int>(job.prefetch_plan().backward_target().begin(),
                             job.prefetch_plan().backward_target().end()),
            (std::vector<int>{-1, 0, 1}));
  ASSERT_EQ(Cluster::RunCli({"--coordinator=" + cluster.address(), "describe", *job_id}, &output),
            0)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "tokens/s, learning rate")) << output;
  EXPECT_TRUE(absl::StrContains(output, "Validation: loss")) << output;
  EXPECT_TRUE(absl::StrContains(output, "reserved on rank 0 so far")) << output;

  ASSERT_EQ(Cluster::RunCli(
                {"sample", model_path, "--prompt=The ", "--tokens=20", "--temperature=0"}, &output),
            0)
      << output;
  EXPECT_TRUE(absl::StartsWith(output, "The ")) << output;
  EXPECT_GE(output.size(), 24u) << output;

  // A token file too short for one sequence is refused at submission, naming the field.
  v1::JobSpec short_file = spec;
  std::ofstream(cluster.dir() + "/short.bin", std::ios::binary) << std::string(40, 'a');
  short_file.mutable_data()->mutable_tokens()->set_val_path(cluster.dir() + "/short.bin");
  short_file.mutable_output()->set_final_model_path(cluster.dir() + "/never.safetensors");
  auto refused = cluster.client().Submit(short_file);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(
      refused.status().message(),
      "job.data.tokens.val_path: '" + cluster.dir() + "/short.bin' holds 20 tokens"))
      << refused.status();
}

INSTANTIATE_TEST_SUITE_P(GptAndLlama, TransformerJob, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Llama" : "Gpt"; });

// What `sample` asks of the tokenizer program beyond encode and decode: the ids before
// each document (the BOS, 1), and a decode through a file of ids, more than a
// command-line argument holds.
void ExpectThePrefixAndALongDecode(Cluster& cluster, const std::string& tokenizer) {
  std::string output;
  // Each document starts with the BOS, which `sample` puts before the prompt too.
  ASSERT_EQ(Cluster::RunCli({"tokenize", "prefix", "--tokenizer_dir=" + tokenizer}, &output), 0)
      << output;
  EXPECT_EQ(output, "1\n");
  // `sample` decodes through a file of ids: more than a command-line argument holds.
  const std::string ids_file = cluster.dir() + "/ids.txt";
  std::string many;
  for (int i = 0; i < 50000; ++i) absl::StrAppend(&many, i == 0 ? "" : " ", 100);
  std::ofstream(ids_file) << many;
  ASSERT_EQ(Cluster::RunCli(
                {"tokenize", "decode", "--tokenizer_dir=" + tokenizer, "--ids_file=" + ids_file},
                &output),
            0);
  const size_t decoded = output.size();
  ASSERT_EQ(Cluster::RunCli({"tokenize", "decode", "--tokenizer_dir=" + tokenizer, "--ids=100,100"},
                            &output),
            0)
      << output;
  EXPECT_GE(decoded, 25000 * output.size()) << "50,000 ids decoded to " << decoded << " bytes";
  // What it decodes is named, and nothing is no list (it printed nothing, and exited 0).
  std::ofstream(ids_file, std::ios::trunc) << "\n";
  EXPECT_EQ(Cluster::RunCli(
                {"tokenize", "decode", "--tokenizer_dir=" + tokenizer, "--ids_file=" + ids_file},
                &output),
            2);
  EXPECT_TRUE(absl::StrContains(output, "--ids_file: no ids given")) << output;
  EXPECT_EQ(Cluster::RunCli({"tokenize", "decode", "--tokenizer_dir=" + tokenizer,
                             "--ids_file=" + cluster.dir(), "--ids=1"},
                            &output),
            2);
  EXPECT_TRUE(absl::StrContains(output, "--ids and --ids_file: give one of them")) << output;
  EXPECT_NE(Cluster::RunCli({"tokenize", "decode", "--ids_file=" + cluster.dir()}, &output), 0);
  EXPECT_TRUE(absl::StrContains(output, "--tokenizer_dir: decode needs the tokenizer folder"))
      << output;
  EXPECT_NE(Cluster::RunCli({"tokenize", "decode", "--tokenizer_dir=" + tokenizer,
                             "--ids_file=" + cluster.dir()},
                            &output),
            0);
  EXPECT_TRUE(
      absl::StrContains(output, "--ids_file: '" + cluster.dir() + "' is not a regular file"))
      << output;
}

// The same with a SentencePiece tokenizer trained on the text: the job names the folder
// `tokenize` wrote, a model whose vocabulary is smaller is refused naming both, the final
// model gets the tokenizer beside it, and `sample` takes and prints text through it. The
// Hugging Face export gets the tokenizer as transformers reads it (tokenizer.model with a
// tokenizer_config.json) and the BOS and EOS ids in config.json and generation_config.json.
TEST(Training, AGptJobWithASentencePieceTokenizer) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  std::string output;
  const std::string tokens = cluster.dir() + "/tokens";
  ASSERT_EQ(Cluster::RunCli({"tokenize", "/usr/share/common-licenses/GPL-3", "-o", tokens,
                             "--tokenizer=sentencepiece", "--vocab_size=512"},
                            &output),
            0)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "sentencepiece, vocabulary 512")) << output;
  ExpectThePrefixAndALongDecode(cluster, tokens + "/tokenizer");

  v1::JobSpec spec = SmallGptSpec(300, tokens + "/train.bin");
  spec.mutable_data()->mutable_tokens()->set_tokenizer(tokens + "/tokenizer");
  spec.set_global_batch_size(8);
  spec.set_steps(10);
  const std::string model_path = cluster.dir() + "/gpt.safetensors";
  spec.mutable_output()->set_final_model_path(model_path);
  const std::string exported = cluster.dir() + "/hf";
  spec.mutable_output()->set_huggingface_dir(exported);
  auto refused = cluster.client().Submit(spec);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "data.tokens.tokenizer"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "model.gpt.vocab_size 300"))
      << refused.status();

  spec.mutable_model()->mutable_gpt()->set_vocab_size(512);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(90));
  EXPECT_TRUE(std::filesystem::exists(cluster.dir() + "/gpt.tokenizer/tokenizer.model"));
  const auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes(exported + "/tokenizer.model"), bytes(tokens + "/tokenizer/tokenizer.model"));
  const auto json = [&](const std::string& name) {
    std::ifstream in(exported + "/" + name);
    return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  };
  EXPECT_EQ(json("tokenizer_config.json")["tokenizer_class"], "LlamaTokenizer");
  EXPECT_EQ(json("tokenizer_config.json")["bos_token"], "<s>");
  EXPECT_EQ(json("tokenizer_config.json")["eos_token"], "</s>");
  for (const char* name : {"config.json", "generation_config.json"}) {
    EXPECT_EQ(json(name)["bos_token_id"], 1) << name;
    EXPECT_EQ(json(name)["eos_token_id"], 2) << name;
  }
  // A second job into the same folder is refused for the tokenizer's files too.
  spec.mutable_output()->set_final_model_path(cluster.dir() + "/other.safetensors");
  std::filesystem::remove(exported + "/model.safetensors");
  std::filesystem::remove(exported + "/config.json");
  refused = cluster.client().Submit(spec);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                exported + "/generation_config.json' exists already"))
      << refused.status();
  ASSERT_EQ(Cluster::RunCli(
                {"sample", model_path, "--prompt=The Program", "--tokens=20", "--temperature=0"},
                &output),
            0)
      << output;
  EXPECT_TRUE(absl::StartsWith(output, "The Program")) << output;
  EXPECT_GE(output.size(), 24u) << output;
}

}  // namespace
}  // namespace shardwise::testing
