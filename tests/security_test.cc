// The coordinator as an attacker on the network would meet it: TLS with worker
// certificates (mTLS), client tokens with roles, worker identities bound to
// certificates, rendezvous scoped to an attempt's ranks, and the path policy. Real
// processes, real certificates (tests/certificates.h, openssl), real TLS.

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/channel_credentials.h"
#include "common/metrics.h"
#include "common/testing/scratch.h"
#include "common/token_hash.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/job_service.grpc.pb.h"
#include "proto/rendezvous_service.grpc.pb.h"
#include "proto/worker_service.grpc.pb.h"
#include "tests/certificates.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A worker's registration as `name` over `channel`, with `token` if not empty, after
// `scheme` in its authorization metadata.
grpc::Status RegisterAs(const std::shared_ptr<grpc::Channel>& channel, const std::string& name,
                        const std::string& token, const std::string& scheme = "Bearer ") {
  v1::RegisterWorkerRequest request;
  request.set_name(name);
  request.set_device(v1::CPU);
  v1::RegisterWorkerResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) context.AddMetadata("authorization", scheme + token);
  return v1::WorkerService::NewStub(channel)->RegisterWorker(&context, request, &response);
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(testing::ScratchRoot(), "/security-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    for (const char* sub : {"pki", "in", "out", "out/carol", "secret"}) {
      fs::create_directories(dir_ + "/" + sub);
    }
    ca_ = std::make_unique<CertificateAuthority>(dir_ + "/pki", "ca");
    rogue_ = std::make_unique<CertificateAuthority>(dir_ + "/pki", "rogue");
    server_ = ca_->Issue("coordinator", "server");
    for (const char* worker : {"w0", "w1", "w2"})
      certificates_[worker] = ca_->Issue(worker, worker);
    std::ofstream tokens(dir_ + "/tokens.yaml");
    tokens << "tokens:\n";
    for (const auto& [principal, role] : std::vector<std::pair<std::string, std::string>>{
             {"root", "admin"}, {"alice", "submitter"}, {"bob", "submitter"}, {"vic", "viewer"}}) {
      tokens_[principal] = absl::StrCat("sw_test_", principal, "_", getpid());
      tokens << "  - principal: " << principal << "\n    role: " << role
             << "\n    sha256: " << TokenHash(tokens_[principal]) << "\n";
    }
    // carol's jobs write under out/carol only (and read where anyone's may): her token and
    // entry as the CLI makes them.
    std::string token;
    ASSERT_EQ(RunShell(absl::StrCat("(", Cluster::BinaryPath("client/shardwise"),
                                    " token create --principal=carol --output_paths=", dir_,
                                    "/out/carol 2>", dir_, "/carol.entry)"),
                       &token),
              0)
        << token;
    tokens_["carol"] = std::string(absl::StripTrailingAsciiWhitespace(token));
    const std::string made = ReadFile(dir_ + "/carol.entry");
    ASSERT_TRUE(absl::StrContains(made, "output_paths: [\"" + dir_ + "/out/carol\"]")) << made;
    tokens << made.substr(made.find("  - principal:"));
    tokens.close();
    ClusterOptions options;
    options.coordinator_flags = {
        "--tls_cert=" + server_.cert,    "--tls_key=" + server_.key,
        "--worker_ca=" + ca_->ca_file(), "--tokens_file=" + dir_ + "/tokens.yaml",
        "--tls_reload_seconds=1",        "--max_watches_per_principal=2"};
    options.worker_flags = {"--tls_ca=" + ca_->ca_file()};
    options.client.security.ca_file = ca_->ca_file();
    options.client.token = tokens_["root"];
    options.allowed_input_paths = {dir_ + "/in"};
    options.allowed_output_paths = {dir_ + "/out"};
    options.health_port = true;
    options.coordinator_metrics = true;
    cluster_ = std::make_unique<Cluster>(options);
    cluster_->StartCoordinator();
  }

  Process& AddWorker(const std::string& name) {
    const CertificateFiles& files = certificates_.at(name);
    return cluster_->AddWorker(name, {"--tls_cert=" + files.cert, "--tls_key=" + files.key});
  }

  Client As(const std::string& principal) {
    ClientOptions options;
    options.security.ca_file = ca_->ca_file();
    if (!principal.empty()) options.token = tokens_.at(principal);
    return Client(cluster_->address(), options);
  }

  // A TLS channel presenting `files` (none: no client certificate).
  std::shared_ptr<grpc::Channel> Channel(const CertificateFiles* files) {
    ChannelSecurity security;
    security.ca_file = ca_->ca_file();
    if (files != nullptr) {
      security.cert_file = files->cert;
      security.key_file = files->key;
    }
    return grpc::CreateChannel(cluster_->address(), *MakeChannelCredentials(security));
  }

  grpc::Status Register(const std::shared_ptr<grpc::Channel>& channel, const std::string& name) {
    return RegisterAs(channel, name, "");
  }

  // A one-rank job of `steps` steps, writing its model under out/.
  v1::JobSpec LongJob(const std::string& model, int64_t steps = 400) {
    v1::JobSpec spec = Cluster::Spec(1);
    spec.set_steps(steps);
    spec.mutable_output()->set_final_model_path(dir_ + "/out/" + model);
    return spec;
  }

  bool CoordinatorLogHas(const std::string& text) {
    for (const auto& entry : fs::directory_iterator(cluster_->dir())) {
      const std::string name = entry.path().filename().string();
      if (absl::StartsWith(name, "coordinator-") &&
          absl::StrContains(ReadFile(entry.path()), text)) {
        return true;
      }
    }
    return false;
  }

  std::string dir_;
  std::unique_ptr<CertificateAuthority> ca_;
  std::unique_ptr<CertificateAuthority> rogue_;
  CertificateFiles server_;
  std::map<std::string, CertificateFiles> certificates_;
  std::map<std::string, std::string> tokens_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(SecurityTest, ClientsNeedATokenAndTheRoleForEachCall) {
  auto anonymous = As("").ListJobs();
  EXPECT_EQ(anonymous.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(anonymous.status().message(), "needs a token"))
      << anonymous.status();
  ClientOptions guessing;
  guessing.security.ca_file = ca_->ca_file();
  guessing.token = "sw_guess";
  EXPECT_EQ(Client(cluster_->address(), guessing).ListJobs().status().code(),
            absl::StatusCode::kUnauthenticated);
  // Who calls is asked first for every call, before what it asks is looked at.
  for (const absl::Status& status : {As("").Cancel("").status(), As("").Scale("", 0).status(),
                                     As("").SetCommHook("", v1::CommHook()).status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << status;
  }
  auto viewer_submits = As("vic").Submit(Cluster::Spec(1));
  EXPECT_EQ(viewer_submits.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(viewer_submits.status().message(), "vic (viewer) may not submit"))
      << viewer_submits.status();

  auto job_id = As("alice").Submit(Cluster::Spec(1));  // no worker: it waits, PENDING
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  EXPECT_EQ(As("vic").Get(*job_id)->submitter(), "alice");
  EXPECT_EQ(As("vic").Cancel(*job_id).status().code(), absl::StatusCode::kPermissionDenied);
  auto other = As("bob").Cancel(*job_id);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(other.status().message(), "submitted by alice")) << other.status();
  EXPECT_EQ(As("root").Get(*job_id)->state(), v1::PENDING);
  auto mine = As("bob").ListJobs({.submitter = "alice"});
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].submitter(), "alice");
  EXPECT_EQ(As("alice").Cancel(*job_id)->state(), v1::CANCELLED);

  // The CLI takes the token from a file, and shows who submitted.
  const std::string token_file = dir_ + "/alice.token";
  std::ofstream(token_file) << tokens_["alice"] << "\n";
  std::string output;
  EXPECT_EQ(Cluster::RunCli({"--coordinator=" + cluster_->address(), "--tls_ca=" + ca_->ca_file(),
                             "--token_file=" + token_file, "get", "jobs"},
                            &output),
            0)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "alice")) << output;
  EXPECT_EQ(Cluster::RunCli({"--coordinator=" + cluster_->address(), "--tls_ca=" + ca_->ca_file(),
                             "describe", *job_id},
                            &output),
            2);
  EXPECT_TRUE(absl::StrContains(output, "UNAUTHENTICATED: ")) << output;
  EXPECT_TRUE(absl::StrContains(output, "needs a token")) << output;
  // No token reaches a log, an event or describe.
  EXPECT_EQ(Cluster::RunCli({"--coordinator=" + cluster_->address(), "--tls_ca=" + ca_->ca_file(),
                             "--token_file=" + token_file, "describe", *job_id},
                            &output),
            0);
  for (const auto& [principal, token] : tokens_) {
    EXPECT_FALSE(absl::StrContains(output, token)) << principal;
    EXPECT_FALSE(CoordinatorLogHas(token)) << principal;
  }
}

// A token revoked while its holder watches a job ends the watch (UNAUTHENTICATED), also
// a quiet job's, which sends no update to check it against.
TEST_F(SecurityTest, ARevokedTokensOpenWatchEnds) {
  auto job_id = As("alice").Submit(Cluster::Spec(1));  // no worker: it waits, PENDING
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + tokens_["vic"]);
  v1::WatchJobRequest request;
  request.set_job_id(*job_id);
  auto stub = v1::JobService::NewStub(Channel(nullptr));
  auto reader = stub->WatchJob(&context, request);
  v1::Job job;
  ASSERT_TRUE(reader->Read(&job));  // the job as it is now
  // vic's entry removed: the file written beside and renamed over, as an editor does.
  {
    std::ofstream tokens(dir_ + "/tokens.yaml.new");
    tokens << "tokens:\n";
    for (const char* principal : {"root", "alice", "bob"}) {
      tokens << "  - principal: " << principal
             << "\n    role: " << (std::string(principal) == "root" ? "admin" : "submitter")
             << "\n    sha256: " << TokenHash(tokens_[principal]) << "\n";
    }
  }
  fs::rename(dir_ + "/tokens.yaml.new", dir_ + "/tokens.yaml");
  absl::Notification ended;
  std::thread reading([&] {
    while (reader->Read(&job)) {
    }
    ended.Notify();
  });
  if (!ended.WaitForNotificationWithTimeout(absl::Seconds(20))) {
    ADD_FAILURE() << "the revoked token's watch went on";
    context.TryCancel();
  }
  reading.join();
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
}

// One principal may hold --max_watches_per_principal watches (2 here), so that no token
// takes every slot of --max_watches from the others; one that ends makes room.
TEST_F(SecurityTest, OnePrincipalHoldsABoundedNumberOfWatches) {
  auto job_id = As("alice").Submit(Cluster::Spec(1));  // no worker: it waits, PENDING
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  v1::WatchJobRequest request;
  request.set_job_id(*job_id);
  auto stub = v1::JobService::NewStub(Channel(nullptr));
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  auto watch = [&](const std::string& principal) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->AddMetadata("authorization", "Bearer " + tokens_[principal]);
    return stub->WatchJob(contexts.back().get(), request);
  };
  v1::Job job;
  auto first = watch("vic");
  auto second = watch("vic");
  ASSERT_TRUE(first->Read(&job));
  ASSERT_TRUE(second->Read(&job));
  auto third = watch("vic");
  EXPECT_FALSE(third->Read(&job));
  const grpc::Status refused = third->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(refused.error_message(),
                                "vic holds 2 watches, as many as one principal may "
                                "(--max_watches_per_principal)"))
      << refused.error_message();
  auto others = watch("alice");
  EXPECT_TRUE(others->Read(&job)) << "another principal's watch was refused";
  const auto end = [&](size_t i, grpc::ClientReader<v1::Job>& reader) {
    contexts[i]->TryCancel();
    while (reader.Read(&job)) {
    }
    reader.Finish();
  };
  end(0, *first);
  // The hub forgets the ended stream as gRPC finishes it: the next watch gets room.
  EXPECT_TRUE(Cluster::WaitFor([&] {
    auto again = watch("vic");
    const bool got = again->Read(&job);
    end(contexts.size() - 1, *again);
    return got;
  })) << "an ended watch did not make room";
  end(1, *second);
  end(3, *others);
}

TEST_F(SecurityTest, WorkersNeedACertificateOfTheWorkerCaAndWorkUnderItsName) {
  Process& w0 = AddWorker("w0");
  const grpc::Status no_certificate = Register(Channel(nullptr), "w9");
  EXPECT_EQ(no_certificate.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(absl::StrContains(no_certificate.error_message(), "--worker_ca"))
      << no_certificate.error_message();
  // Signed by another CA: the handshake itself fails.
  const CertificateFiles rogue = rogue_->Issue("w0", "rogue-w0");
  EXPECT_EQ(Register(Channel(&rogue), "w0").error_code(), grpc::StatusCode::UNAVAILABLE);
  // A genuine worker's certificate, claiming another's name.
  const grpc::Status taking_over = Register(Channel(&certificates_.at("w1")), "w0");
  EXPECT_EQ(taking_over.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(taking_over.error_message(),
                                "worker name 'w0' is not the name in its certificate ('w1')"))
      << taking_over.error_message();
  // A session under w0's name from w1's certificate is refused the same way.
  {
    grpc::ClientContext context;
    auto stream = v1::WorkerService::NewStub(Channel(&certificates_.at("w1")))->Session(&context);
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id("w0");
    stream->Write(hello);
    stream->WritesDone();
    v1::CoordinatorMessage ignored;
    while (stream->Read(&ignored)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  // Nothing changed for w0; and w0 restarting with its certificate is w0 again.
  EXPECT_EQ(cluster_->WorkerState("w0"), v1::IDLE);
  EXPECT_FALSE(CoordinatorLogHas("worker=w0: worker lost"));
  w0.Kill();
  // The coordinator sees the session end first; otherwise AddWorker would find the old w0.
  ASSERT_TRUE(Cluster::WaitFor([&] { return cluster_->WorkerState("w0") == v1::LOST; }));
  AddWorker("w0");
  EXPECT_EQ(cluster_->WorkerState("w0"), v1::IDLE);
}

TEST_F(SecurityTest, AForgedReportOrAForeignRendezvousCallChangesNothing) {
  AddWorker("w0");
  auto job_id = As("alice").Submit(LongJob("long.safetensors", /*steps=*/int64_t{1} << 30));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  cluster_->WaitForState(*job_id, v1::RUNNING);
  // w2, a genuine worker, reports job-1 done, for a rank it does not hold.
  auto channel = Channel(&certificates_.at("w2"));
  ASSERT_TRUE(Register(channel, "w2").ok());
  grpc::ClientContext context;
  auto session = v1::WorkerService::NewStub(channel)->Session(&context);
  v1::WorkerMessage message;
  message.mutable_hello()->set_worker_id("w2");
  ASSERT_TRUE(session->Write(message));
  message.Clear();
  v1::AttemptReport* report = message.mutable_report();
  report->set_job_id(*job_id);
  report->set_attempt(1);
  report->set_rank(0);
  report->set_phase(v1::COMPLETED);
  ASSERT_TRUE(session->Write(message));
  ASSERT_TRUE(Cluster::WaitFor([&] {
    return CoordinatorLogHas(absl::StrCat("job=", *job_id,
                                          " attempt=1 worker=w2: ignoring a "
                                          "report for rank 0, which the worker does not run now"));
  }));
  EXPECT_EQ(As("root").Get(*job_id)->state(), v1::RUNNING);
  // And it reads the attempt's rendezvous keys without a rank's token.
  for (const std::string& token : {std::string(), std::string("0123456789abcdef")}) {
    v1::RendezvousGetRequest get;
    get.mutable_scope()->set_job_id(*job_id);
    get.mutable_scope()->set_attempt(1);
    get.mutable_scope()->set_token(token);
    get.set_key("mesh/0");
    v1::RendezvousGetResponse value;
    grpc::ClientContext call;
    const grpc::Status refused = v1::RendezvousService::NewStub(channel)->Get(&call, get, &value);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.error_message();
    v1::RendezvousGetManyRequest get_many;
    *get_many.mutable_scope() = get.scope();
    get_many.add_reads()->set_key("mesh/0");
    v1::RendezvousGetManyResponse values;
    grpc::ClientContext many_call;
    const grpc::Status refused_many =
        v1::RendezvousService::NewStub(channel)->GetMany(&many_call, get_many, &values);
    EXPECT_EQ(refused_many.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << refused_many.error_message();
  }
  context.TryCancel();
  // The job ran on, untouched, until its owner stopped it. Its first progress report
  // may come after all of the above: waited for, not assumed.
  ASSERT_TRUE(Cluster::WaitFor([&] {
    const auto running = As("root").Get(*job_id);
    return running.ok() && running->progress().step() > 0;
  }));
  const v1::Job job = *As("root").Get(*job_id);
  EXPECT_EQ(job.state(), v1::RUNNING);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(As("alice").Cancel(*job_id)->state(), v1::CANCELLED);
}

TEST_F(SecurityTest, OutputsOutsideThePolicyAreRefusedAndNothingIsWritten) {
  AddWorker("w0");
  auto running = As("alice").Submit(LongJob("good.safetensors"));
  ASSERT_TRUE(running.ok()) << running.status();
  std::ofstream(dir_ + "/secret/precious") << "keep";
  std::ofstream(dir_ + "/out/existing.safetensors") << "mine";
  fs::create_directory_symlink(dir_ + "/secret", dir_ + "/out/escape");
  const std::vector<std::pair<std::string, absl::StatusCode>> refused = {
      {dir_ + "/out/../secret/m.safetensors", absl::StatusCode::kPermissionDenied},
      {dir_ + "/out/escape/m.safetensors", absl::StatusCode::kPermissionDenied},
      {dir_ + "/elsewhere/m.safetensors", absl::StatusCode::kPermissionDenied},
      {dir_ + "/out/existing.safetensors", absl::StatusCode::kAlreadyExists},
  };
  for (const auto& [path, code] : refused) {
    v1::JobSpec spec = Cluster::Spec(1);
    spec.mutable_output()->set_final_model_path(path);
    auto submitted = As("alice").Submit(spec);
    EXPECT_EQ(submitted.status().code(), code) << path << ": " << submitted.status();
    EXPECT_TRUE(absl::StrContains(submitted.status().message(),
                                  "job.output.final_model_path: '" + path + "'"))
        << submitted.status();
  }
  v1::JobSpec checkpoint_out = Cluster::Spec(1);
  checkpoint_out.mutable_output()->set_checkpoint_dir(dir_ + "/secret");
  EXPECT_EQ(As("alice").Submit(checkpoint_out).status().code(),
            absl::StatusCode::kPermissionDenied);
  v1::JobSpec reading = Cluster::Spec(1);
  reading.mutable_data()->set_safetensors_path(dir_ + "/in/../secret/precious");
  EXPECT_EQ(As("alice").Submit(reading).status().code(), absl::StatusCode::kPermissionDenied);
  // Nothing was written: the secret folder and the existing file are as they were.
  int secret_files = 0;
  for (const auto& entry : fs::directory_iterator(dir_ + "/secret"))
    secret_files += !entry.is_directory();
  EXPECT_EQ(secret_files, 1);
  EXPECT_EQ(ReadFile(dir_ + "/secret/precious"), "keep");
  EXPECT_EQ(ReadFile(dir_ + "/out/existing.safetensors"), "mine");
  EXPECT_FALSE(fs::exists(dir_ + "/elsewhere"));
  // Asked to overwrite, the existing file may be the output.
  v1::JobSpec overwriting = Cluster::Spec(1);
  overwriting.mutable_output()->set_final_model_path(dir_ + "/out/existing.safetensors");
  overwriting.mutable_output()->set_overwrite(true);
  EXPECT_TRUE(As("alice").Submit(overwriting).ok());
  // The job that was running went on and wrote where it was allowed to.
  cluster_->WaitForState(*running, v1::SUCCEEDED, absl::Seconds(60));
  EXPECT_TRUE(fs::exists(dir_ + "/out/good.safetensors"));
}

// An edit of the tokens file the coordinator refuses keeps the previous tokens, and says
// so on /metrics until a good version is written: an operator who meant to revoke a token
// or fence a principal in sees that it did not apply.
TEST_F(SecurityTest, ARefusedTokensEditIsShownUntilMended) {
  const auto stale = [&] {
    httplib::Client client("127.0.0.1", cluster_->coordinator_metrics_port());
    auto response = client.Get("/metrics");
    if (!response || response->status != 200) return -1.0;
    const auto samples = ParseExposition(response->body);
    auto it = samples.find("shardwise_coordinator_tokens_file_stale");
    return it == samples.end() ? -1.0 : it->second;
  };
  EXPECT_EQ(stale(), 0);
  const std::string path = dir_ + "/tokens.yaml";
  const std::string good = ReadFile(path);
  std::ofstream(path + ".tmp") << "tokens: [ {principal: alice, role: king} ]\n";
  fs::rename(path + ".tmp", path);
  EXPECT_TRUE(Cluster::WaitFor([&] { return stale() == 1; }, absl::Seconds(10)));
  EXPECT_TRUE(As("alice").ListJobs().ok());  // the previous tokens stay in force
  std::ofstream(path + ".tmp") << good;
  fs::rename(path + ".tmp", path);
  EXPECT_TRUE(Cluster::WaitFor([&] { return stale() == 0; }, absl::Seconds(10)));
}

// A principal whose tokens-file entry has output_paths writes under those only, though
// the coordinator's roots are wider: at submission, and again on the worker, which gets
// the job's roots with its assignment.
TEST_F(SecurityTest, APrincipalsOwnFoldersKeepItsJobsFromOthersFiles) {
  const std::string mine = dir_ + "/out/carol";
  auto refused = [&](const std::string& checkpoint_dir) {
    v1::JobSpec spec = Cluster::Spec(1);
    spec.mutable_output()->set_checkpoint_dir(checkpoint_dir);
    return As("carol").Submit(spec).status();
  };
  // bob's checkpoints, inside the coordinator's roots but outside carol's.
  const absl::Status others = refused(dir_ + "/out/bob-checkpoints");
  EXPECT_EQ(others.code(), absl::StatusCode::kPermissionDenied) << others;
  EXPECT_TRUE(absl::StrContains(others.message(), "output_paths of carol")) << others;
  EXPECT_TRUE(absl::StrContains(others.message(), "allowed: " + mine)) << others;
  fs::create_directory_symlink(dir_ + "/out", mine + "/up");
  EXPECT_EQ(refused(mine + "/up/bob-checkpoints").code(), absl::StatusCode::kPermissionDenied);
  // Others are not narrowed by carol's entry.
  v1::JobSpec bobs = Cluster::Spec(1);
  bobs.mutable_output()->set_checkpoint_dir(dir_ + "/out/bob-checkpoints");
  auto bob = As("bob").Submit(bobs);
  ASSERT_TRUE(bob.ok()) << bob.status();
  EXPECT_TRUE(As("root").Cancel(*bob).ok());

  // Accepted inside carol's folder; then, before any worker starts it, the folder it names
  // becomes a link to out/, allowed by the coordinator's roots, not by carol's.
  v1::JobSpec swapped = Cluster::Spec(1);
  swapped.mutable_output()->set_checkpoint_dir(mine + "/later");
  swapped.mutable_output()->set_checkpoint_interval_steps(1);  // a step followed would write
  auto pending = As("carol").Submit(swapped);
  ASSERT_TRUE(pending.ok()) << pending.status();
  const v1::Job job = *As("root").Get(*pending);
  ASSERT_EQ(job.submitter_roots().output_roots_size(), 1);
  EXPECT_EQ(job.submitter_roots().output_roots(0), mine);
  EXPECT_EQ(job.submitter_roots().input_roots(0), dir_ + "/in");  // the coordinator's
  fs::create_directory_symlink(dir_ + "/out", mine + "/later");
  AddWorker("w0");
  const v1::Job failed = cluster_->WaitForState(*pending, v1::FAILED, absl::Seconds(60));
  EXPECT_TRUE(absl::StrContains(failed.reason(), "output_paths of carol")) << failed.reason();
  // Nothing was written through the link: no step folder (step-00000003, ...) in out/.
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_ + "/out")) {
    EXPECT_FALSE(absl::StartsWith(entry.path().filename().string(), "step-")) << entry.path();
  }

  // An entry that lets a principal write nowhere; folders on a viewer's token refused.
  std::string entry;
  EXPECT_EQ(
      Cluster::RunCli({"token", "create", "--principal=reader", "--output_paths=none"}, &entry), 0);
  EXPECT_TRUE(absl::StrContains(entry, "    output_paths: []\n")) << entry;
  EXPECT_EQ(
      Cluster::RunCli({"token", "create", "--principal=v", "--role=viewer", "--input_paths=/data"},
                      &entry),
      2);

  // carol's own job runs and writes where her entry lets it.
  v1::JobSpec good = LongJob("unused", 20);
  good.mutable_output()->set_final_model_path(mine + "/model.safetensors");
  auto ran = As("carol").Submit(good);
  ASSERT_TRUE(ran.ok()) << ran.status();
  cluster_->WaitForState(*ran, v1::SUCCEEDED, absl::Seconds(60));
  EXPECT_TRUE(fs::exists(mine + "/model.safetensors"));
}

// A worker is known by its certificate's common name: another --name is refused at start,
// naming both, rather than by a registration the coordinator refuses every 5 s.
TEST_F(SecurityTest, AWorkerNamedOtherThanItsCertificateDoesNotStart) {
  const CertificateFiles& files = certificates_.at("w1");
  Process& worker = cluster_->AddWorker(
      "w2", {"--tls_cert=" + files.cert, "--tls_key=" + files.key}, {}, /*wait=*/false);
  EXPECT_EQ(worker.Wait(), 2);
  EXPECT_TRUE(absl::StrContains(ReadFile(worker.log_path()),
                                "--name: 'w2' differs from 'w1', the common name of --tls_cert"))
      << ReadFile(worker.log_path());
}

// A worker's own --allowed_output_paths bound what the coordinator lets jobs write: a
// job the coordinator admits fails on that worker, saying the worker's folders refused it.
TEST_F(SecurityTest, AWorkersOwnFoldersBoundWhatTheCoordinatorAllows) {
  const auto flags = [&](const std::string& name, const std::string& folder) {
    const CertificateFiles& files = certificates_.at(name);
    return std::vector<std::string>{"--tls_cert=" + files.cert, "--tls_key=" + files.key,
                                    "--allowed_output_paths=" + dir_ + folder};
  };
  // A folder that does not exist: the worker does not start.
  EXPECT_NE(cluster_->AddWorker("w1", flags("w1", "/out/nowhere"), {}, /*wait=*/false).Wait(), 0);
  // An empty entry neither: the coordinator would refuse its registration, after it had
  // started.
  std::vector<std::string> empty_entry = flags("w1", "/out");
  empty_entry.back() += ",";
  Process& refused = cluster_->AddWorker("w1", empty_entry, {}, /*wait=*/false);
  EXPECT_NE(refused.Wait(), 0);
  EXPECT_TRUE(absl::StrContains(
      ReadFile(refused.log_path()),
      "--allowed_output_paths: '" + dir_ + "/out,' holds an empty folder name (entry 2)"))
      << ReadFile(refused.log_path());
  cluster_->AddWorker("w0", flags("w0", "/out/carol"));
  auto workers = As("root").ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ(absl::StrJoin((*workers)[0].folders().output_roots(), ","), dir_ + "/out/carol");

  // Outside the only worker's folders: refused at submission (waiting, it would hold back
  // every job behind it), naming the path and the worker.
  auto outside = As("alice").Submit(LongJob("m.safetensors", 20));
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kFailedPrecondition) << outside.status();
  EXPECT_TRUE(absl::StrContains(outside.status().message(), "would take this job: on w0, "))
      << outside.status();
  EXPECT_TRUE(absl::StrContains(outside.status().message(),
                                "job.output.final_model_path '" + dir_ +
                                    "/out/m.safetensors' lies outside the worker's folders"))
      << outside.status();
  auto inside = As("alice").Submit(LongJob("carol/m.safetensors", 20));
  ASSERT_TRUE(inside.ok()) << inside.status();
  cluster_->WaitForState(*inside, v1::SUCCEEDED, absl::Seconds(60));
  EXPECT_TRUE(fs::exists(dir_ + "/out/carol/m.safetensors"));

  // With a worker that bounds nothing, the job is taken and placed there, not on w0
  // (idle, and first in order), whose folders would refuse it.
  AddWorker("w2");
  outside = As("alice").Submit(LongJob("m.safetensors", 20));
  ASSERT_TRUE(outside.ok()) << outside.status();
  const v1::Job done = cluster_->WaitForState(*outside, v1::SUCCEEDED, absl::Seconds(60));
  ASSERT_EQ(done.ranks_size(), 1);
  EXPECT_EQ(done.ranks(0).worker_id(), "w2");
  EXPECT_TRUE(fs::exists(dir_ + "/out/m.safetensors"));
}

// Kubernetes' gRPC probes cannot speak TLS: the health service alone is served in
// plaintext on its own port, and the TLS port refuses plaintext.
TEST_F(SecurityTest, ProbesReachTheHealthServiceWithoutTls) {
  const auto check = [](const std::string& address, const std::string& service = "") {
    auto health = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    const grpc::Status status = health->Check(&context, request, &response);
    return status.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  };
  EXPECT_FALSE(check(cluster_->address()));
  const int port = cluster_->health_port();
  ASSERT_GT(port, 0);
  EXPECT_TRUE(check(absl::StrCat("127.0.0.1:", port)));
  EXPECT_TRUE(check(absl::StrCat("127.0.0.1:", port), "liveness"));
  EXPECT_FALSE(check(absl::StrCat("127.0.0.1:", port), "shardwise.v1.NoSuchService"));
  // It serves nothing else.
  grpc::ClientContext context;
  v1::ListJobsRequest request;
  v1::ListJobsResponse response;
  EXPECT_EQ(v1::JobService::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                        grpc::InsecureChannelCredentials()))
                ->ListJobs(&context, request, &response)
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(SecurityTest, CertificatesReloadWithoutDroppingSessions) {
  AddWorker("w0");
  const std::string before = ServedSerial(cluster_->address(), ca_->ca_file());
  ASSERT_FALSE(before.empty());
  // Rotation: a new certificate and key take the old ones' place.
  const CertificateFiles renewed = ca_->Issue("coordinator", "server-renewed");
  fs::rename(renewed.key, server_.key);
  fs::rename(renewed.cert, server_.cert);
  ASSERT_TRUE(
      Cluster::WaitFor([&] { return ServedSerial(cluster_->address(), ca_->ca_file()) != before; },
                       absl::Seconds(15)));
  // The worker's session, opened before, goes on: it takes a job.
  auto job_id = As("alice").Submit(Cluster::Spec(1));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  cluster_->WaitForState(*job_id, v1::SUCCEEDED);
  EXPECT_FALSE(CoordinatorLogHas("worker=w0: worker lost"));
}

// A coordinator that cannot see the workers' files (--check_paths=false) sends paths as
// written: a worker makes them canonical on its own file system and trains on that form,
// which it reads and writes without following links. So a path through a link inside the
// roots works there too: a model written through one, then read back through it.
TEST(WorkerPaths, APathThroughALinkIsMadeCanonicalOnTheWorker) {
  const std::string dir = testing::ScratchPath("worker-paths");
  fs::remove_all(dir);
  fs::create_directories(dir + "/out/real");
  fs::create_directory_symlink(dir + "/out/real", dir + "/out/link");
  ClusterOptions options;
  options.coordinator_flags = {"--check_paths=false"};
  options.allowed_input_paths = {dir};
  options.allowed_output_paths = {dir + "/out"};
  Cluster cluster(options);
  cluster.StartCoordinator();
  cluster.AddWorker("w0");

  v1::JobSpec first = Cluster::Spec(1);
  first.mutable_output()->set_final_model_path(dir + "/out/link/m.safetensors");
  auto written = cluster.client().Submit(first);
  ASSERT_TRUE(written.ok()) << written.status();
  cluster.WaitForState(*written, v1::SUCCEEDED, absl::Seconds(60));
  EXPECT_TRUE(fs::exists(dir + "/out/real/m.safetensors"));

  v1::JobSpec second = Cluster::Spec(1);
  second.mutable_init()->set_safetensors_path(dir + "/out/link/m.safetensors");
  auto read = cluster.client().Submit(second);
  ASSERT_TRUE(read.ok()) << read.status();
  cluster.WaitForState(*read, v1::SUCCEEDED, absl::Seconds(60));
}

// A coordinator with a tokens file and no --worker_ca, one worker token in the file (and
// alice's, a submitter), the worker's token file beside it.
class WorkerTokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshScratchFolder("worker-tokens");
    WriteTokens({worker_token_});
    WriteWorkerTokenFile(worker_token_);
    ClusterOptions options;
    options.coordinator_flags = {"--tokens_file=" + dir_ + "/tokens.yaml"};
    options.client.token = alice_token_;
    cluster_ = std::make_unique<Cluster>(options);
    cluster_->StartCoordinator();
  }

  // Replaces the tokens file at once (a rename), as an operator's tool would: alice's
  // token, these workers' tokens and the `extra` entries.
  void WriteTokens(const std::vector<std::string>& worker_tokens, const std::string& extra = "") {
    {
      std::ofstream tokens(dir_ + "/tokens.yaml.new");
      tokens << "tokens:\n  - principal: alice\n    role: submitter\n    sha256: "
             << TokenHash(alice_token_) << "\n";
      for (size_t i = 0; i < worker_tokens.size(); ++i) {
        tokens << "  - principal: workers" << i
               << "\n    role: worker\n    sha256: " << TokenHash(worker_tokens[i]) << "\n";
      }
      tokens << extra;
    }
    fs::rename(dir_ + "/tokens.yaml.new", dir_ + "/tokens.yaml");
  }

  void WriteWorkerTokenFile(const std::string& token) {
    std::ofstream(dir_ + "/worker.token") << token << "\n";
  }

  void AddWorker() { cluster_->AddWorker("w0", {"--token_file=" + dir_ + "/worker.token"}); }

  grpc::Status RegisterWith(const std::string& token, const std::string& name,
                            const std::string& scheme = "Bearer ") {
    return RegisterAs(grpc::CreateChannel(cluster_->address(), grpc::InsecureChannelCredentials()),
                      name, token, scheme);
  }

  // A session whose hello names `name`, opened with `token`: how it ended.
  grpc::Status SessionWith(const std::string& token, const std::string& name) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    context.AddMetadata("authorization", "Bearer " + token);
    auto stream = v1::WorkerService::NewStub(
                      grpc::CreateChannel(cluster_->address(), grpc::InsecureChannelCredentials()))
                      ->Session(&context);
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id(name);
    stream->Write(hello);
    stream->WritesDone();
    v1::CoordinatorMessage ignored;
    while (stream->Read(&ignored)) {
    }
    return stream->Finish();
  }

  Client AsWorker() const {
    ClientOptions options;
    options.token = worker_token_;
    return Client(cluster_->address(), options);
  }

  std::string dir_;
  const std::string worker_token_ = absl::StrCat("sw_worker_", getpid());
  const std::string alice_token_ = absl::StrCat("sw_alice_", getpid());
  std::unique_ptr<Cluster> cluster_;
};

// Without --worker_ca, a coordinator with a tokens file asks workers for a token of the
// worker role: nobody who merely reaches its port can register as a worker (and take a
// real one's name, its jobs' specs and rendezvous tokens). A worker's token is for that
// alone: it reads no jobs. A worker's name holds no space or '=' (log fields).
TEST_F(WorkerTokensTest, WorkersWithoutCertificatesNeedAWorkerToken) {
  const grpc::Status anonymous = RegisterWith("", "w0");
  EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(absl::StrContains(anonymous.error_message(), "token of the worker role"))
      << anonymous.error_message();
  EXPECT_EQ(RegisterWith(alice_token_, "w0").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(RegisterWith(worker_token_, "x job=job-3").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // The scheme's case and padding are the client's (RFC 7235): other clients differ.
  const grpc::Status lower = RegisterWith(worker_token_, "w0", "bearer  ");
  EXPECT_TRUE(lower.ok()) << lower.error_message();

  AddWorker();
  auto job_id = cluster_->client().Submit(Cluster::Spec(1));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  cluster_->WaitForState(*job_id, v1::SUCCEEDED);
  EXPECT_EQ(AsWorker().ListJobs().status().code(), absl::StatusCode::kPermissionDenied);

  // Nor an admin's: a token handed to a tool may not take a worker's name (least
  // privilege; worker_names bind worker tokens alone).
  const std::string admin_token = absl::StrCat("sw_root_", getpid());
  WriteTokens({worker_token_}, absl::StrCat("  - principal: root\n    role: admin\n    sha256: ",
                                            TokenHash(admin_token), "\n"));
  grpc::Status admin;
  EXPECT_TRUE(Cluster::WaitFor([&] {
    admin = RegisterWith(admin_token, "w9");
    return admin.error_code() == grpc::StatusCode::PERMISSION_DENIED;
  })) << admin.error_message();
  EXPECT_TRUE(absl::StrContains(admin.error_message(),
                                "root (admin) may not register a worker: it takes a token of "
                                "the worker role"))
      << admin.error_message();
}

// A worker token whose entry gives worker_names (as `token create --worker_names` writes
// it) registers and opens sessions under those names alone: a node's token cannot take
// another node's workers' names. A real daemon under such a name runs a job.
TEST_F(WorkerTokensTest, AWorkerTokenWithNamesWorksUnderThoseAlone) {
  std::string token;
  ASSERT_EQ(RunShell(absl::StrCat("(", Cluster::BinaryPath("client/shardwise"),
                                  " token create --principal=node7 --role=worker "
                                  "--worker_names='node7-*' 2>",
                                  dir_, "/node7.entry)"),
                     &token),
            0)
      << token;
  token = std::string(absl::StripTrailingAsciiWhitespace(token));
  const std::string entry = ReadFile(dir_ + "/node7.entry");
  ASSERT_TRUE(absl::StrContains(entry, "    worker_names: [\"node7-*\"]\n")) << entry;
  WriteTokens({worker_token_}, entry.substr(entry.find("  - principal:")));
  // Read again within a second of the change: until then the token is unknown.
  ASSERT_TRUE(Cluster::WaitFor([&] { return RegisterWith(token, "node7-gpu0").ok(); }));

  const grpc::Status other = RegisterWith(token, "w0");
  EXPECT_EQ(other.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(other.error_message(),
                                "worker name 'w0' with the token of node7, whose entry in the "
                                "tokens file gives worker_names node7-*"))
      << other.error_message();
  const grpc::Status session = SessionWith(token, "w0");
  EXPECT_EQ(session.error_code(), grpc::StatusCode::PERMISSION_DENIED) << session.error_message();
  EXPECT_EQ(RegisterWith(worker_token_, "w0").error_code(), grpc::StatusCode::OK);  // the pool's

  WriteWorkerTokenFile(token);
  cluster_->AddWorker("node7-gpu1", {"--token_file=" + dir_ + "/worker.token"});
  auto job_id = cluster_->client().Submit(Cluster::Spec(1));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  EXPECT_EQ(cluster_->WaitForState(*job_id, v1::SUCCEEDED).ranks(0).worker_id(), "node7-gpu1");
}

// Rotation under a running job: the new token's entry added, the worker's file updated,
// the old entry removed. The open session runs on (the job too); the next one, after the
// coordinator restarts, is opened with the token the file holds now, and the job goes on
// in its attempt.
TEST_F(WorkerTokensTest, ARotatedWorkerTokenKeepsTheJobInItsAttempt) {
  AddWorker();
  v1::JobSpec long_job = Cluster::Spec(1);
  long_job.set_steps(100000000);  // trains until cancelled
  auto running = cluster_->client().Submit(long_job);
  ASSERT_TRUE(running.ok()) << running.status();
  cluster_->WaitForState(*running, v1::RUNNING);
  const std::string rotated = worker_token_ + "_rotated";
  WriteTokens({worker_token_, rotated});
  WriteWorkerTokenFile(rotated);
  WriteTokens({rotated});
  // The coordinator refuses the old token once it has read the file again (at most once a
  // second, as a call authenticates: a call the worker's role may not make, refused for its
  // role until then), while the session opened with it runs on: the job keeps stepping in
  // its attempt.
  EXPECT_TRUE(Cluster::WaitFor(
      [&] { return AsWorker().ListJobs().status().code() == absl::StatusCode::kUnauthenticated; }));
  const int64_t step = cluster_->client().Get(*running)->progress().step();
  EXPECT_TRUE(Cluster::WaitFor(
      [&] { return cluster_->client().Get(*running)->progress().step() > step + 3; }));
  const absl::StatusOr<v1::Job> revoked = cluster_->client().Get(*running);
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->state(), v1::RUNNING);
  EXPECT_EQ(revoked->attempt(), 1);
  cluster_->StopCoordinator();
  cluster_->StartCoordinator();
  const std::string log_path = cluster_->worker("w0").log_path();
  EXPECT_TRUE(Cluster::WaitFor([&] {
    return absl::StrContains(ReadFile(log_path), "it re-attached");
  })) << ReadFile(log_path);
  EXPECT_FALSE(absl::StrContains(ReadFile(log_path), "UNAUTHENTICATED"));
  const auto cancelled = cluster_->client().Cancel(*running);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->attempt(), 1);
}

// A token is never sent in plaintext off this machine: the client refuses before it
// connects, and so does a worker.
TEST(WorkerTokens, ATokenIsNotSentInPlaintextOffLoopback) {
  ClientOptions options;
  options.token = "sw_secret";
  const absl::Status refused = Client("192.0.2.1:7070", options).ListJobs().status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "refusing to send a token in plaintext"))
      << refused;
  EXPECT_TRUE(Client("127.0.0.1:7070", options).ListJobs().status().code() !=
              absl::StatusCode::kFailedPrecondition);

  // A worker given a token and an address off loopback without TLS exits at start.
  const std::string token_file = ::testing::TempDir() + "/plaintext.token";
  std::ofstream(token_file) << "sw_secret\n";
  std::string output;
  EXPECT_NE(
      RunShell(absl::StrCat("timeout 30 ", Cluster::BinaryPath("worker/shardwise-worker"),
                            " --coordinator=192.0.2.1:7070 --name=w0 --token_file=", token_file),
               &output),
      0);
  EXPECT_TRUE(absl::StrContains(output, "refusing to send a token in plaintext")) << output;
}

// Off loopback, the coordinator serves only with TLS and tokens, or with --insecure.
TEST(Exposure, PlaintextOrNoTokensOffLoopbackIsRefused) {
  const std::string dir = testing::ScratchPath("exposure");
  fs::create_directories(dir);
  CertificateAuthority ca(dir, "ca");
  const CertificateFiles server = ca.Issue("coordinator", "server");
  auto run = [&](const std::vector<std::string>& flags, const std::string& log) {
    std::vector<std::string> argv = {
        Cluster::BinaryPath("server/shardwise-coordinator"), "--address=0.0.0.0:0",
        "--state_file=" + dir + "/" + log + ".db", "--port_file=" + dir + "/" + log + ".port"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return std::make_unique<Process>(argv, dir + "/" + log + ".log");
  };
  auto plaintext = run({}, "plaintext");
  EXPECT_EQ(plaintext->Wait(), 1);
  EXPECT_TRUE(absl::StrContains(ReadFile(dir + "/plaintext.log"),
                                "refusing to serve 0.0.0.0:0 without TLS"))
      << ReadFile(dir + "/plaintext.log");
  auto untokened = run({"--tls_cert=" + server.cert, "--tls_key=" + server.key}, "untokened");
  EXPECT_EQ(untokened->Wait(), 1);
  EXPECT_TRUE(absl::StrContains(ReadFile(dir + "/untokened.log"), "without --tokens_file"));
  auto insecure = run({"--insecure"}, "insecure");
  EXPECT_TRUE(Cluster::WaitFor([&] { return fs::exists(dir + "/insecure.port"); }))
      << ReadFile(dir + "/insecure.log");
  EXPECT_TRUE(insecure->Running());
}

}  // namespace
}  // namespace shardwise::testing
