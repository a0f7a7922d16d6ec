// The coordinator's API as a client meets it: validation errors over real gRPC, unknown
// ids, a coordinator that is not there, and the `shardwise` CLI end to end.

#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/testing/scratch.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/job_service.grpc.pb.h"
#include "proto/rendezvous_service.grpc.pb.h"
#include "proto/worker_service.grpc.pb.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

// Devices may be named (inside the allowed roots) to show they are refused as data anyway.
ClusterOptions ApiClusterOptions() {
  ClusterOptions options;
  options.allowed_input_paths = {testing::ScratchRoot(), "/dev"};
  return options;
}

class ApiTest : public ::testing::Test {
 protected:
  ApiTest() : cluster_(ApiClusterOptions()) {}

  void SetUp() override {
    cluster_.StartCoordinator();
    stub_ = v1::JobService::NewStub(
        grpc::CreateChannel(cluster_.address(), grpc::InsecureChannelCredentials()));
  }

  // Submits without the client library's own checks, as any gRPC client could.
  grpc::Status RawSubmit(const v1::JobSpec& spec) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    return stub_->SubmitJob(&context, request, &response);
  }

  Cluster cluster_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

// A file inside the allowed roots that does not exist.
std::string MissingFile() { return testing::ScratchPath("no/such/data.safetensors"); }

struct Rejection {
  std::function<void(v1::JobSpec*)> mutate;
  std::string message;
};

TEST_F(ApiTest, EveryBadSpecIsInvalidArgumentNamingFieldAndValue) {
  const std::vector<Rejection> rejections = {
      {[](v1::JobSpec* s) { s->set_world_size(0); }, "job.world_size: must be positive, got 0"},
      {[](v1::JobSpec* s) { s->set_world_size(5000); },
       "job.world_size: 5000 exceeds this coordinator's limit of 1024"},
      {[](v1::JobSpec* s) { s->set_global_batch_size(7); },
       "job.global_batch_size: 7 is not divisible by job.world_size 2"},
      {[](v1::JobSpec* s) {
         s->mutable_fsdp()->set_sharding_strategy(static_cast<v1::ShardingStrategy::Value>(77));
       },
       "job.fsdp.sharding_strategy: unknown value 77"},
      {[](v1::JobSpec* s) {
         s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
         s->mutable_fsdp()->set_shard_group_size(3);
       },
       "job.fsdp.shard_group_size: 3 does not divide job.world_size 2"},
      {[](v1::JobSpec* s) { s->mutable_data()->set_safetensors_path(MissingFile()); },
       "job.data.safetensors_path: '" + MissingFile() + "': no readable file"},
      // A NUL would cut the file name short where a worker opens it.
      {[](v1::JobSpec* s) {
         s->mutable_output()->set_final_model_path(MissingFile() + std::string("\0x", 2));
       },
       "\\u{0000}x' contains the control character U+0000"},
      {[](v1::JobSpec* s) { s->mutable_model()->set_layer_widths(0, -3); },
       "job.model.layer_widths[0]: must be positive, got -3"},
      {[](v1::JobSpec* s) { s->set_steps(-1); }, "job.steps: must be positive, got -1"},
      {[](v1::JobSpec* s) { s->mutable_comm_hook()->set_hook(v1::CommHook::ALLREDUCE); },
       "job.comm_hook: ALLREDUCE with NO_WRAPPER reduces by all-reduce and needs "
       "fsdp.sharding_strategy NO_SHARD, got FULL_SHARD (the default)"},
  };
  for (const Rejection& r : rejections) {
    v1::JobSpec spec = Cluster::Spec(2);
    r.mutate(&spec);
    grpc::Status status = RawSubmit(spec);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << r.message;
    EXPECT_TRUE(absl::StrContains(status.error_message(), r.message))
        << "expected '" << r.message << "', got '" << status.error_message() << "'";
  }
  // Nothing was stored, and the coordinator is still serving.
  auto jobs = cluster_.client().ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_TRUE(jobs->empty());
}

TEST_F(ApiTest, GarbageRequestsDoNotCrashTheCoordinator) {
  v1::JobSpec spec;  // every field unset
  EXPECT_EQ(RawSubmit(spec).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  spec = Cluster::Spec(2);
  spec.set_name(std::string(100000, 'x'));
  EXPECT_EQ(RawSubmit(spec).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  for (int i = 0; i < 10000; ++i) spec.mutable_model()->add_layer_widths(1);
  spec.clear_name();
  EXPECT_EQ(RawSubmit(spec).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(cluster_.client().ListJobs().ok());
}

// A FIFO (which would block whoever opens it until a writer came) and a device (which
// never ends) named as data or tokens are refused at submission without being opened; the
// coordinator answers at once and serves on.
TEST_F(ApiTest, FifosAndDevicesAsDataAreRefusedWithoutHanging) {
  const std::string fifo = cluster_.dir() + "/data.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    v1::JobSpec mlp = Cluster::Spec(1);
    mlp.mutable_data()->set_safetensors_path(path);
    grpc::Status status = RawSubmit(mlp);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << path;
    EXPECT_TRUE(absl::StrContains(status.error_message(), "not a regular file"))
        << status.error_message();
    v1::JobSpec gpt = Cluster::Spec(1);
    gpt.mutable_model()->Clear();
    v1::GptConfig* config = gpt.mutable_model()->mutable_gpt();
    config->set_vocab_size(16);
    config->set_block_size(4);
    config->set_n_layer(1);
    config->set_n_head(1);
    config->set_n_embd(4);
    gpt.mutable_data()->Clear();
    gpt.mutable_data()->mutable_tokens()->set_train_path(path);
    status = RawSubmit(gpt);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << path;
    EXPECT_TRUE(absl::StrContains(
        status.error_message(), "job.data.tokens.train_path: '" + path + "' is not a regular file"))
        << status.error_message();
  }
  EXPECT_TRUE(RawSubmit(Cluster::Spec(1)).ok());
}

// A worker's name becomes a metric label and a line of `get workers` and of the logs: a
// control character in it (an escape sequence, a newline) is refused at registration.
TEST_F(ApiTest, AWorkerNameWithControlCharactersIsRefused) {
  auto stub = v1::WorkerService::NewStub(
      grpc::CreateChannel(cluster_.address(), grpc::InsecureChannelCredentials()));
  for (const std::string& name : {std::string("w\nfake-line"), std::string("w\x1b[2J")}) {
    v1::RegisterWorkerRequest request;
    request.set_name(name);
    request.set_device(v1::CPU);
    request.set_cpu_threads(1);
    request.set_memory_bytes(int64_t{1} << 30);
    v1::RegisterWorkerResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub->RegisterWorker(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_TRUE(absl::StartsWith(status.error_message(), "name: contains the control character"))
        << status.error_message();
  }
  auto workers = cluster_.client().ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  EXPECT_TRUE(workers->empty());
}

TEST_F(ApiTest, ANegativeDataPlaneVersionIsRefused) {
  auto stub = v1::WorkerService::NewStub(
      grpc::CreateChannel(cluster_.address(), grpc::InsecureChannelCredentials()));
  v1::RegisterWorkerRequest request;
  request.set_name("w0");
  request.set_device(v1::CPU);
  request.set_data_plane_version(-1);
  v1::RegisterWorkerResponse response;
  grpc::ClientContext context;
  grpc::Status status = stub->RegisterWorker(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "data_plane_version: -1; must be 0 or more");
}

// A registration whose fields would be copied, shown or counted is refused naming them.
TEST_F(ApiTest, MalformedRegistrationsAreRefusedNamingTheField) {
  auto stub = v1::WorkerService::NewStub(
      grpc::CreateChannel(cluster_.address(), grpc::InsecureChannelCredentials()));
  auto cuda = [](v1::RegisterWorkerRequest* request) {
    request->set_device(v1::CUDA);
    request->mutable_gpu()->set_name("NVIDIA H100");
  };
  const std::vector<std::pair<std::function<void(v1::RegisterWorkerRequest*)>, std::string>> cases =
      {
          // Every nameless worker would be the one worker "worker", each taking the last's place.
          {[](v1::RegisterWorkerRequest* r) { r->clear_name(); },
           "name: empty; a worker without a certificate names itself"},
          {[&](v1::RegisterWorkerRequest* r) {
             cuda(r);
             r->mutable_gpu()->set_name(std::string(300, 'x'));
           },
           "gpu.name: "},
          {[&](v1::RegisterWorkerRequest* r) {
             cuda(r);
             r->mutable_gpu()->set_nccl_version("2.28\x1b[2J");
           },
           "gpu.nccl_version: contains the control character U+001B"},
          {[](v1::RegisterWorkerRequest* r) { r->set_memory_bytes(-1); },
           "cpu_threads 0 and memory_bytes -1 may not be negative"},
      };
  for (const auto& [change, message] : cases) {
    v1::RegisterWorkerRequest request;
    request.set_name("w0");
    request.set_device(v1::CPU);
    change(&request);
    v1::RegisterWorkerResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub->RegisterWorker(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_TRUE(absl::StartsWith(status.error_message(), message)) << status.error_message();
  }
  auto workers = cluster_.client().ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  EXPECT_TRUE(workers->empty());
}

// Each job's test against a state filter runs under the jobs' lock: a filter of millions
// of states (a byte each) held every job read and write for seconds.
TEST_F(ApiTest, AStateFilterListsEachStateOnce) {
  auto stub = v1::JobService::NewStub(
      grpc::CreateChannel(cluster_.address(), grpc::InsecureChannelCredentials()));
  v1::ListJobsRequest request;
  for (int i = 0; i < 17; ++i) request.add_states(v1::RUNNING);
  v1::ListJobsResponse response;
  grpc::ClientContext context;
  grpc::Status status = stub->ListJobs(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "states: 17 values; at most 16 (each state once)");
}

// WatchUntil ends with the first version its condition takes, though the job goes on
// (waiting for workers here), and at its deadline when none does.
TEST_F(ApiTest, WatchUntilStopsAtTheVersionItWaitsForOrAtItsDeadline) {
  auto job_id = cluster_.client().Submit(Cluster::Spec(1));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  auto pending = cluster_.client().WatchUntil(
      *job_id, [](const v1::Job& job) { return job.state() == v1::PENDING; },
      absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(pending->id(), *job_id);
  EXPECT_EQ(pending->state(), v1::PENDING);
  auto never = cluster_.client().WatchUntil(
      *job_id, [](const v1::Job&) { return false; }, absl::Now() + absl::Milliseconds(300));
  EXPECT_EQ(never.status().code(), absl::StatusCode::kDeadlineExceeded) << never.status();
}

TEST_F(ApiTest, UnknownJobIdsAreNotFound) {
  EXPECT_EQ(cluster_.client().Get("job-404").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cluster_.client().Cancel("job-404").status().code(), absl::StatusCode::kNotFound);
  auto watched = cluster_.client().Watch("job-404", [](const v1::Job&) {});
  EXPECT_EQ(watched.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cluster_.client().Get("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ApiTest, ServesTheStandardHealthService) {
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(cluster_.address(), grpc::InsecureChannelCredentials()));
  grpc::health::v1::HealthCheckRequest request;  // "": the server as a whole
  grpc::health::v1::HealthCheckResponse response;
  grpc::ClientContext context;
  grpc::Status status = health->Check(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(ApiTest, RendezvousRefusesAttemptsThatAreNotRunning) {
  auto rendezvous = v1::RendezvousService::NewStub(
      grpc::CreateChannel(cluster_.address(), grpc::InsecureChannelCredentials()));
  v1::RendezvousSetRequest set;
  set.mutable_scope()->set_job_id("job-1");
  set.mutable_scope()->set_attempt(1);
  set.set_key("k");
  v1::RendezvousSetResponse set_response;
  grpc::ClientContext set_context;
  grpc::Status status = rendezvous->Set(&set_context, set, &set_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "attempt 1 of job 'job-1' is not running"))
      << status.error_message();

  v1::RendezvousWaitRequest wait;
  *wait.mutable_scope() = set.scope();
  wait.add_keys("k");
  wait.set_timeout_ms(-5);
  v1::RendezvousWaitResponse wait_response;
  grpc::ClientContext wait_context;
  status = rendezvous->Wait(&wait_context, wait, &wait_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "timeout_ms")) << status.error_message();
}

// A submission retried with its request id (after a timeout, or across a coordinator
// restart) returns the job the first one made; reusing an id for another spec is refused.
TEST_F(ApiTest, ASubmissionRetriedWithItsRequestIdMakesOneJob) {
  auto submit = [&](const v1::JobSpec& spec, const std::string& request_id, std::string* job_id) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    request.set_request_id(request_id);
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub_->SubmitJob(&context, request, &response);
    *job_id = response.job_id();
    return status.error_code();
  };
  const v1::JobSpec spec = Cluster::Spec(2);
  std::string first, again, other, after_restart;
  ASSERT_EQ(submit(spec, "retry-1", &first), grpc::StatusCode::OK);
  ASSERT_EQ(submit(spec, "retry-1", &again), grpc::StatusCode::OK);
  EXPECT_EQ(again, first);
  v1::JobSpec changed = spec;
  changed.set_steps(spec.steps() + 1);
  EXPECT_EQ(submit(changed, "retry-1", &other), grpc::StatusCode::ALREADY_EXISTS);
  ASSERT_EQ(submit(spec, "retry-2", &other), grpc::StatusCode::OK);
  EXPECT_NE(other, first);
  EXPECT_EQ(submit(spec, std::string("bad\nid"), &other), grpc::StatusCode::INVALID_ARGUMENT);

  cluster_.KillCoordinator();
  cluster_.StartCoordinator();
  stub_ = v1::JobService::NewStub(
      grpc::CreateChannel(cluster_.address(), grpc::InsecureChannelCredentials()));
  ASSERT_EQ(submit(spec, "retry-1", &after_restart), grpc::StatusCode::OK);
  EXPECT_EQ(after_restart, first);
  auto jobs = cluster_.client().ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), 2u);
}

// A retry whose first submission made its job (the reply lost) gets that job even when
// the checks would refuse the spec now: here the final model the job names was written
// since (by the job itself, say), which refuses a new submission without `overwrite`.
TEST_F(ApiTest, ARetryGetsItsJobWhateverChangedSinceTheFirstSubmission) {
  v1::JobSpec spec = Cluster::Spec(2);
  const std::string model = cluster_.dir() + "/retried-model.safetensors";
  spec.mutable_output()->set_final_model_path(model);
  auto submit = [&](const std::string& request_id, std::string* job_id) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    request.set_request_id(request_id);
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub_->SubmitJob(&context, request, &response);
    *job_id = response.job_id();
    return status;
  };
  std::string first, retried, fresh;
  ASSERT_TRUE(submit("once", &first).ok());
  std::ofstream(model) << "written since";
  const grpc::Status again = submit("once", &retried);
  ASSERT_TRUE(again.ok()) << again.error_message();
  EXPECT_EQ(retried, first);
  // The same spec under a new request id is a new submission, checked as such.
  const grpc::Status refused = submit("twice", &fresh);
  EXPECT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "final_model_path"))
      << refused.error_message();
}

// Submits from `clients` clients at once, each with its own connection; their results.
std::vector<absl::StatusOr<std::string>> SubmitAtOnce(const Cluster& cluster, int clients) {
  std::vector<absl::StatusOr<std::string>> ids(clients, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  threads.reserve(clients);
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      Client client(cluster.address());
      ids[i] = client.Submit(Cluster::Spec(2));
    });
  }
  for (std::thread& thread : threads) thread.join();
  return ids;
}

// 200 clients submit at once to a coordinator that lets 8 submissions wait for its one
// submission thread: it answers the overflow RESOURCE_EXHAUSTED, and the clients wait their
// turn (retries with jittered backoff) instead of failing; each submission makes exactly
// one job.
TEST(Flood, EveryConcurrentSubmissionSucceedsOnce) {
  ClusterOptions options;
  options.coordinator_flags = {"--submission_threads=1", "--max_queued_submissions=8"};
  options.coordinator_metrics = true;
  Cluster cluster(options);
  cluster.StartCoordinator();
  constexpr int kClients = 200;
  const std::vector<absl::StatusOr<std::string>> ids = SubmitAtOnce(cluster, kClients);
  std::set<std::string> distinct;
  for (const auto& id : ids) {
    ASSERT_TRUE(id.ok()) << id.status();
    distinct.insert(*id);
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kClients));
  auto jobs = cluster.client().ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), static_cast<size_t>(kClients));
  // The bound was reached: some submissions were answered RESOURCE_EXHAUSTED and retried.
  httplib::Client metrics("127.0.0.1", cluster.coordinator_metrics_port());
  auto scrape = metrics.Get("/metrics");
  ASSERT_TRUE(scrape && scrape->status == 200);
  bool refused = false;
  for (absl::string_view line : absl::StrSplit(scrape->body, '\n')) {
    refused |= absl::StrContains(line, "SubmitJob") &&
               absl::StrContains(line, "code=\"RESOURCE_EXHAUSTED\"") &&
               !absl::EndsWith(line, " 0");
  }
  EXPECT_TRUE(refused) << scrape->body;
}

TEST(Cli, ADeadCoordinatorGetsAClearMessage) {
  std::string output;
  // Port 1 on loopback: nothing listens there.
  // Exit 3, the outcome unknown (the same command may succeed later), the code named.
  const int code = Cluster::RunCli({"--coordinator=127.0.0.1:1", "get", "jobs"}, &output);
  EXPECT_EQ(code, 3);
  EXPECT_TRUE(absl::StrContains(
      output, "shardwise: UNAVAILABLE: cannot reach the coordinator at 127.0.0.1:1"))
      << output;
  EXPECT_EQ(Cluster::RunCli({"--coordinator=127.0.0.1:1", "describe", "job-1"}, &output), 3);
  Client client("127.0.0.1:1");
  EXPECT_EQ(client.ListJobs().status().code(), absl::StatusCode::kUnavailable);
  // A watch too, at once: exit 3, the job's end unknown.
  EXPECT_EQ(Cluster::RunCli({"--coordinator=127.0.0.1:1", "watch", "job-1"}, &output), 3);
  EXPECT_TRUE(absl::StrContains(output, "cannot reach the coordinator at 127.0.0.1:1")) << output;
  // A hook switch whose fate is unknown is 3 as well, never 1 (abandoned for good).
  EXPECT_EQ(
      Cluster::RunCli({"--coordinator=127.0.0.1:1", "set-hook", "job-1", "bf16_compress"}, &output),
      3);
  EXPECT_TRUE(absl::StrContains(output,
                                "whether it was proposed is unknown; `shardwise describe "
                                "job-1` shows it"))
      << output;
}

// Command lines with a usage mistake, each with what the CLI says of it.
std::vector<std::pair<std::vector<std::string>, std::string>> UsageMistakes() {
  return {
      {{"watch", "job-1", "--coordinatr=127.0.0.1:1"}, "--coordinatr: no such flag"},
      {{"scale", "job-1", "--replicas=two"}, "--replicas: Illegal value 'two'"},
      {{"--coordinator=127.0.0.1:1", "get", "jobs", "--limit=-5"}, "--limit: -5 is negative"},
      {{"--coordinator=127.0.0.1:1", "scale", "job-1"}, "scale needs --replicas=N"},
      // A flag its command ignores would look as if it applied: every worker listed.
      {{"get", "workers", "--submitter=alice"},
       "--submitter: `shardwise get workers` does not take it (it takes --state, --device, "
       "--limit)"},
      {{"describe", "job-1", "--watch"},
       "--watch: `shardwise describe` does not take it (it takes none of its own)"},
      {{"--coordinator=127.0.0.1:1", "sample", "--prompt=hi"},
       "`sample` comes first on the command line (`shardwise sample --flag=...`): its flags "
       "are its own"},
      {{"--coordinator", "127.0.0.1:1", "tokenize", "a.txt"},
       "`tokenize` comes first on the command line"},
      // A flag's value that reads as the command is the flag's.
      {{"--coordinator=127.0.0.1:1", "--submitter", "sample", "get", "workers"},
       "--submitter: `shardwise get workers` does not take it"},
      // Flags from a file would pass unchecked (this one listed every worker).
      {{"get", "workers", "--flagfile=/dev/null"},
       "--flagfile: not taken here; give each flag on the command line itself"},
      // The offline commands never connect: a connection's flag would be ignored.
      {{"token", "create", "--principal=alice", "--coordinator=127.0.0.1:1"},
       "--coordinator: `shardwise token create` does not take it"},
      // An empty bound (a shell variable that was empty) would bound nothing.
      {{"token", "create", "--principal=alice", "--input_paths="},
       "--input_paths: empty; give folders, or none for no folder"},
      {{"token", "create", "--principal=node7", "--role=worker", "--worker_names="},
       "--worker_names: empty; give names or patterns"},
      {{"estimate", "job.yaml", "--token_file=/dev/null"},
       "--token_file: `shardwise estimate` does not take it (it takes --fit)"},
      // gRPC would dial port 99999 - 65536 = 34463.
      {{"--coordinator=127.0.0.1:99999", "describe", "job-1"},
       "--coordinator: '127.0.0.1:99999' has port '99999', not one from 1 to 65535"},
      {{"--coordinator=127.0.0.1:1", "get", "jobs", "--state=job_state_unspecified"},
       "--state: unknown state 'job_state_unspecified'"},
      {{"--coordinator=127.0.0.1:1", "get", "workers", "--device=gpu"},
       "--device: unknown device 'gpu' (expected cpu or cuda)"},
      // A spec that cannot be read is refused (2), not "does not fit" (1).
      {{"estimate", "/no/such/job.yaml"},
       "cannot read job spec file '/no/such/job.yaml': no such file"},
      {{"--coordinator=127.0.0.1:1", "set-hook", "job-1", "bogus"},
       "set-hook's HOOK: unknown hook 'bogus' (expected none, allreduce"},
      {{"--coordinator=127.0.0.1:1", "set-hook", "job-1", "allreduce", "--wrapper=bogus"},
       "--wrapper: unknown wrapper 'bogus' (expected fp16_wrapper or bf16_wrapper)"},
      // The companion programs check their flags as the CLI does (absl exited 1).
      {{"sample", "model.safetensors", "--tokens=abc"},
       "shardwise sample: --tokens: Illegal value 'abc'"},
      {{"tokenize", "a.txt", "--outptu=dir"}, "shardwise tokenize: --outptu: no such flag"},
      // A flag of another tokenizer kind or verb would pass unread.
      {{"tokenize", "a.txt", "-o", "out", "--tokenizer=gpt2", "--vocab_size=300"},
       "--vocab_size: `shardwise tokenize --tokenizer=gpt2` does not take it (it takes --o, "
       "--output, --tokenizer, --val_fraction, --threads, --encoder_json, --vocab_bpe)"},
      {{"tokenize", "a.txt", "-o", "out", "--tiktoken=r50k_base.tiktoken"},
       "--tiktoken: `shardwise tokenize --tokenizer=bytes` does not take it"},
      {{"tokenize", "a.txt", "-o", "out", "--tokenizer=sentencepiece",
        "--sentencepiece_model=m.model", "--vocab_size=300"},
       "--vocab_size: `shardwise tokenize --tokenizer=sentencepiece --sentencepiece_model` does "
       "not take it"},
      {{"tokenize", "encode", "--tokenizer_dir=tokens/tokenizer", "--ids=1"},
       "--ids: `shardwise tokenize encode` does not take it (it takes --tokenizer_dir, --text, "
       "--texts_json, --check_round_trip)"},
      // A line break would start a YAML entry of its own in the tokens file.
      {{"token", "create", "--principal=alice", "--input_paths=/data\n    role: admin"},
       "--input_paths: '/data\\u{000A}    role: admin' contains the control character U+000A"},
  };
}

// A usage mistake exits 2 naming it, before any call: never 1, which `watch` gives a job
// that ended other than SUCCEEDED, nor 3, which a script may retry.
TEST(Cli, UsageMistakesExit2NamingThem) {
  for (const auto& [args, message] : UsageMistakes()) {
    std::string output;
    EXPECT_EQ(Cluster::RunCli(args, &output), 2) << output;
    EXPECT_TRUE(absl::StrContains(output, message)) << output;
  }
  // --help, anywhere before "--": the usage and every flag with its help, exit 0.
  for (const std::vector<std::string>& line :
       std::vector<std::vector<std::string>>{{"--help"}, {"watch", "job-1", "--helpfull"}}) {
    std::string output;
    EXPECT_EQ(Cluster::RunCli(line, &output), 0) << output;
    EXPECT_TRUE(absl::StrContains(output, "shardwise submit JOB.yaml")) << output;
    EXPECT_TRUE(absl::StrContains(output, "  --wrapper\n      with set-hook:")) << output;
    EXPECT_TRUE(absl::StrContains(output, "  --role (default submitter)\n")) << output;
  }
  for (const char* companion : {"sample", "tokenize"}) {
    std::string output;
    EXPECT_EQ(Cluster::RunCli({companion, "--help"}, &output), 0) << output;
    EXPECT_TRUE(absl::StrContains(output, "Every flag:\n  --")) << output;
  }
}

// The client's own setup: a token it will not send in plaintext off loopback, or at all
// when a header cannot carry it.
TEST(Cli, ATokenIsCheckedBeforeAnyCall) {
  std::string output;
  EXPECT_EQ(RunShell(absl::StrCat("SHARDWISE_TOKEN=sw_x ", Cluster::BinaryPath("client/shardwise"),
                                  " --coordinator=192.0.2.1:7070 watch job-1"),
                     &output),
            2)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "refusing to send a token in plaintext")) << output;
  // A token a header cannot carry is refused, without being shown.
  output.clear();
  EXPECT_EQ(RunShell(absl::StrCat("SHARDWISE_TOKEN=\"$(printf 'sw_x\\nforged: header')\" ",
                                  Cluster::BinaryPath("client/shardwise"), " workers"),
                     &output),
            2)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "$SHARDWISE_TOKEN: the token holds a space")) << output;
  EXPECT_FALSE(absl::StrContains(output, "forged")) << output;
}

// A CA that is no certificate, and a token file with no end, are refused before any call
// (exit 2), naming where they came from: a handshake that fails on every call would be
// told as a coordinator not reached.
TEST(Cli, ConnectionFilesAreCheckedBeforeAnyCall) {
  const std::string dir = testing::FreshScratchFolder("connection-files");
  std::ofstream(dir + "/not-a-ca.pem") << "hello\n";
  const std::string cli = Cluster::BinaryPath("client/shardwise");
  std::string output;
  EXPECT_EQ(RunShell(absl::StrCat("SHARDWISE_TLS_CA=", dir, " ", cli,
                                  " --coordinator=127.0.0.1:1 get jobs"),
                     &output),
            2)
      << output;
  EXPECT_TRUE(absl::StrContains(output, absl::StrCat("$SHARDWISE_TLS_CA: '", dir,
                                                     "' is a folder, not a CA certificate file")))
      << output;
  output.clear();
  EXPECT_EQ(RunShell(absl::StrCat(cli, " --coordinator=127.0.0.1:1 --tls_ca=", dir,
                                  "/not-a-ca.pem watch job-1"),
                     &output),
            2)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "--tls_ca: '" + dir + "/not-a-ca.pem' holds no PEM "))
      << output;
  output.clear();
  EXPECT_EQ(
      RunShell(absl::StrCat(cli, " --coordinator=127.0.0.1:1 --token_file=/dev/zero get jobs"),
               &output),
      2)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "--token_file: '/dev/zero' holds more than 65536 bytes"))
      << output;
}

// Refusals exit 2 (the caller's to mend), their code named: never 1, which says a job
// ended otherwise than SUCCEEDED, nor 3, which a script may retry. job-1 has SUCCEEDED.
void ExpectRefusalsExit2(const std::string& coordinator) {
  std::string output;
  EXPECT_EQ(Cluster::RunCli({coordinator, "cancel", "job-1"}, &output), 2);  // its state's
  EXPECT_TRUE(absl::StrContains(output, "shardwise: FAILED_PRECONDITION: ")) << output;
  EXPECT_TRUE(absl::StrContains(output, "already ended as SUCCEEDED")) << output;
  EXPECT_EQ(Cluster::RunCli({coordinator, "describe", "job-404"}, &output), 2);
  EXPECT_TRUE(absl::StrContains(output, "shardwise: NOT_FOUND: ")) << output;
  EXPECT_EQ(Cluster::RunCli({coordinator, "watch", "job-404"}, &output), 2) << output;
  EXPECT_EQ(Cluster::RunCli({coordinator, "frobnicate"}, &output), 2);
  EXPECT_TRUE(absl::StrContains(output, "unknown command 'frobnicate'")) << output;
}

// The command that submits again quotes a request id the shell would split or expand:
// pasted, it uses that id, and makes no second job.
TEST(Cli, TheCommandThatSubmitsAgainQuotesTheRequestId) {
  const std::string spec_path = testing::ScratchPath("quoted-id.yaml");
  std::ofstream(spec_path) << "model: {layer_widths: [4, 8, 2]}\n"
                              "optimizer: {sgd: {lr: 0.1}}\n"
                              "data: {synthetic: {seed: 3}}\n"
                              "steps: 3\nglobal_batch_size: 4\nworld_size: 1\n";
  std::string output;
  EXPECT_EQ(
      Cluster::RunCli({"--coordinator=127.0.0.1:1", "submit", spec_path, "--request_id=nightly $7"},
                      &output),
      3);
  EXPECT_TRUE(absl::StrContains(output, " --request_id='nightly $7' --coordinator=")) << output;
}

TEST(Cli, SubmitWatchDescribeAndCancel) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  const std::string spec_path = cluster.dir() + "/job.yaml";
  // A three-step MLP job of `world_size` ranks, four samples each.
  auto write_spec = [&](const std::string& name, int world_size) {
    std::ofstream(spec_path) << "name: " << name << R"(
model: {layer_widths: [4, 8, 2]}
optimizer: {sgd: {lr: 0.1}}
data: {synthetic: {seed: 3}}
steps: 3
)"
                             << "global_batch_size: " << 4 * world_size
                             << "\nworld_size: " << world_size << "\n";
  };
  write_spec("cli-job", 2);
  const std::string coordinator = "--coordinator=" + cluster.address();
  std::string output;
  EXPECT_EQ(Cluster::RunCli({coordinator, "submit", spec_path, "--watch"}, &output), 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "job-1")) << output;
  EXPECT_TRUE(absl::StrContains(output, "job-1 SUCCEEDED")) << output;
  EXPECT_TRUE(absl::StrContains(output, "trained 3 steps")) << output;
  EXPECT_TRUE(absl::StrContains(output, "3/3 steps")) << output;

  EXPECT_EQ(Cluster::RunCli({coordinator, "describe", "job-1"}, &output), 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "rank 1  worker w1")) << output;
  EXPECT_TRUE(absl::StrContains(output, "\"sharding_strategy\": \"FULL_SHARD\"")) << output;

  EXPECT_EQ(Cluster::RunCli({coordinator, "get", "jobs"}, &output), 0);
  EXPECT_TRUE(absl::StrContains(output, "cli-job")) << output;

  ExpectRefusalsExit2(coordinator);
  // Cancelling is idempotent: asked again (a client retrying), a cancelled job is returned.
  write_spec("waits", 5);  // more ranks than workers: it waits
  ASSERT_EQ(Cluster::RunCli({coordinator, "submit", spec_path}, &output), 0) << output;
  EXPECT_EQ(Cluster::RunCli({coordinator, "cancel", "job-2"}, &output), 0) << output;
  EXPECT_EQ(Cluster::RunCli({coordinator, "cancel", "job-2"}, &output), 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "CANCELLED")) << output;

  // A submission made again with its request id (a script retrying one whose outcome it
  // did not learn) returns the job the first made; a coordinator not reached exits 3,
  // "unknown", with the command that submits it again at most once.
  write_spec("retried", 5);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(
        Cluster::RunCli({coordinator, "submit", spec_path, "--request_id=nightly-7"}, &output), 0)
        << output;
    EXPECT_EQ(output, "job-3\n");
  }
  // The command names the coordinator asked and the flags given (the id makes one job on
  // that coordinator only).
  const std::string token_file = cluster.dir() + "/token";
  std::ofstream(token_file) << "sw_cli_test\n";
  EXPECT_EQ(Cluster::RunCli({"--coordinator=127.0.0.1:1", "submit", spec_path, "--watch",
                             "--token_file=" + token_file},
                            &output),
            3);
  EXPECT_TRUE(absl::StrContains(output,
                                "the job may have been made; submit again with "
                                "`shardwise submit " +
                                    spec_path + " --request_id="))
      << output;
  EXPECT_TRUE(absl::StrContains(
      output, " --coordinator=127.0.0.1:1 --token_file=" + token_file + " --watch`, which makes"))
      << output;

  std::ofstream(spec_path) << "world_size: 2\nsharding: FULL_SHARD\n";
  EXPECT_EQ(Cluster::RunCli({coordinator, "submit", spec_path, "--watch"}, &output), 2);
  EXPECT_TRUE(absl::StrContains(output, "sharding")) << output;

  // A cancelled job's watch is 1: it ended otherwise than SUCCEEDED.
  EXPECT_EQ(Cluster::RunCli({coordinator, "watch", "job-2"}, &output), 1) << output;
}

// Watches are bounded (--max_watches): past the bound one is RESOURCE_EXHAUSTED, which
// clients retry, and a watch that ends makes room. Watchers of one job share its copy.
TEST(Flood, WatchesPastTheBoundAreRefusedUntilOneEnds) {
  ClusterOptions options;
  options.coordinator_flags = {"--max_watches=2"};
  Cluster cluster(options);
  cluster.StartCoordinator();
  auto job_id = cluster.client().Submit(Cluster::Spec(1));  // no worker: it waits
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  auto stub = v1::JobService::NewStub(
      grpc::CreateChannel(cluster.address(), grpc::InsecureChannelCredentials()));
  v1::WatchJobRequest request;
  request.set_job_id(*job_id);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::Job>>> readers;
  v1::Job job;
  for (int i = 0; i < 3; ++i) {  // one at a time: the third is the one past the bound
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(stub->WatchJob(contexts.back().get(), request));
    if (i < 2) {
      ASSERT_TRUE(readers[i]->Read(&job)) << i;
      EXPECT_EQ(job.id(), *job_id);
    }
  }
  EXPECT_FALSE(readers[2]->Read(&job));
  const grpc::Status refused = readers[2]->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "--max_watches"))
      << refused.error_message();
  // The client retries until its deadline (past gRPC's own retries of a call, 1.5 s at
  // most), then says why it never watched, not that the job never got where it waited.
  auto waited = cluster.client().WatchUntil(
      *job_id, [](const v1::Job&) { return true; }, absl::Now() + absl::Seconds(4));
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kResourceExhausted) << waited.status();
  EXPECT_TRUE(absl::StrContains(waited.status().message(), "--max_watches")) << waited.status();
  contexts[0]->TryCancel();
  while (readers[0]->Read(&job)) {
  }
  readers[0]->Finish();
  // The hub forgets the cancelled stream as gRPC finishes it: the next watch gets room.
  ASSERT_TRUE(Cluster::WaitFor([&] {
    grpc::ClientContext again;
    auto reader = stub->WatchJob(&again, request);
    const bool got = reader->Read(&job);
    again.TryCancel();
    while (reader->Read(&job)) {
    }
    reader->Finish();
    return got;
  }));
}

// A bound on ended jobs below zero would compact, or forget, every job that ended: refused.
TEST(CoordinatorFlags, NegativeEndedJobBoundsAreRefusedNamingTheFlag) {
  const std::string state = ::testing::TempDir() + "/negative-bounds.db";
  for (const std::string flag : {"--job_retention_hours", "--forget_jobs_after_hours"}) {
    std::string output;
    EXPECT_EQ(
        RunShell(absl::StrCat("timeout 30 ", Cluster::BinaryPath("server/shardwise-coordinator"),
                              " --address=127.0.0.1:0 --state_file=", state, " ", flag, "=-1"),
                 &output),
        2)
        << output;
    EXPECT_TRUE(absl::StrContains(output, flag + ": -1 is negative")) << output;
  }
}

}  // namespace
}  // namespace shardwise::testing
