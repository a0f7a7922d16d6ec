// Hosts without loopback: the coordinator and each worker in a network namespace of its
// own ("host"), joined by a bridge, every daemon bound to its namespace's address, Gloo
// between the hosts' addresses. A job trained across them equals the same job on
// loopback bit for bit; a host whose link is cut mid-training is detected, its attempt
// fails naming its rank, and the job resumes from its checkpoint on the hosts left; a
// host whose firewall drops its data-plane connections is blamed and quarantined.
// Needs root (ip netns, veth, a bridge); reported as skipped otherwise.

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

bool Sh(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// A bridge on this machine and one namespace per host, each with a veth whose far end is
// the host's eth0 at 10.77.N.K/24.
class Network {
 public:
  // Names and subnet unique to this process and instance: a deleted namespace's veth
  // goes away asynchronously, so names are never reused.
  Network()
      : id_(absl::StrCat(getpid() % 10000, "x", instances_)),
        subnet_(FreeSubnet(getpid() + 37 * instances_++)) {
    bridge_ = absl::StrCat("swb", id_);
    ok_ = Sh(absl::StrCat("ip link add ", bridge_, " type bridge")) &&
          Sh(absl::StrCat("ip addr add ", subnet_, ".254/24 dev ", bridge_)) &&
          Sh(absl::StrCat("ip link set ", bridge_, " up"));
  }
  ~Network() {
    for (const auto& [name, host] : hosts_) Sh("ip netns del " + host.ns);
    Sh("ip link del " + bridge_);
  }
  bool ok() const { return ok_; }

  // A 10.77.N subnet no interface of this machine routes yet, trying N from `start`: the
  // bridge of a run that was killed before its teardown keeps its subnet, and a host of
  // that network would answer for this one's (a refused connection, not this test's).
  static std::string FreeSubnet(int start) {
    for (int k = 0; k < 200; ++k) {
      std::string subnet = absl::StrCat("10.77.", (start + k) % 200 + 20);
      if (!Sh(absl::StrCat("ip route show ", subnet, ".0/24 | grep -q ."))) return subnet;
    }
    return absl::StrCat("10.77.", start % 200 + 20);  // 200 left behind: share one
  }

  // Adds host `name`; returns its address.
  std::string AddHost(const std::string& name) {
    const bool was_ok = ok_;
    const int index = static_cast<int>(hosts_.size()) + 1;
    Host host{absl::StrCat("sw", id_, "-", name), absl::StrCat("swv", id_, "-", index),
              absl::StrCat(subnet_, ".", index)};
    ok_ =
        ok_ && Sh("ip netns add " + host.ns) &&
        Sh(absl::StrCat("ip link add ", host.veth, " type veth peer name eth0 netns ", host.ns)) &&
        Sh(absl::StrCat("ip link set ", host.veth, " master ", bridge_, " up")) &&
        Sh(absl::StrCat("ip netns exec ", host.ns, " ip addr add ", host.address,
                        "/24 dev eth0")) &&
        Sh(absl::StrCat("ip netns exec ", host.ns, " ip link set eth0 up")) &&
        Sh(absl::StrCat("ip netns exec ", host.ns, " ip link set lo up"));
    EXPECT_TRUE(!was_ok || ok_) << "could not make host " << name;
    hosts_[name] = host;
    return host.address;
  }
  // The command prefix that runs a program on host `name`.
  std::vector<std::string> On(const std::string& name) const {
    return {"/usr/sbin/ip", "netns", "exec", hosts_.at(name).ns};
  }
  // Cuts host `name` off the network (its side of the link goes down).
  bool Cut(const std::string& name) { return Sh("ip link set " + hosts_.at(name).veth + " down"); }
  // Runs `command` on host `name`.
  bool Exec(const std::string& name, const std::string& command) {
    return Sh(absl::StrCat("ip netns exec ", hosts_.at(name).ns, " ", command));
  }

 private:
  struct Host {
    std::string ns, veth, address;
  };
  static inline int instances_ = 0;
  const std::string id_;
  const std::string subnet_;
  std::string bridge_;
  std::map<std::string, Host> hosts_;
  bool ok_ = false;
};

// A coordinator on one host and workers on others.
class HostCluster {
 public:
  explicit HostCluster(Network* network) : network_(network) {
    std::string pattern = testing::ScratchPath("hosts-XXXXXX");
    dir_ = mkdtemp(pattern.data());
    const std::string address = network->AddHost("coordinator");
    std::vector<std::string> argv = network->On("coordinator");
    for (const std::string& flag :
         {Cluster::BinaryPath("server/shardwise-coordinator"),
          absl::StrCat("--address=", address, ":0"),
          // A test network no one else reaches.
          std::string("--insecure"), absl::StrCat("--port_file=", dir_, "/port"),
          absl::StrCat("--state_file=", dir_, "/state.db"),
          std::string("--heartbeat_interval_ms=200"), std::string("--heartbeat_timeout_ms=4000"),
          std::string("--collective_timeout_ms=30000"),
          absl::StrCat("--allowed_input_paths=", dir_),
          absl::StrCat("--allowed_output_paths=", dir_)}) {
      argv.push_back(flag);
    }
    processes_.push_back(std::make_unique<Process>(argv, dir_ + "/coordinator.log"));
    int port = 0;
    EXPECT_TRUE(Cluster::WaitFor([&] {
      std::ifstream in(dir_ + "/port");
      return static_cast<bool>(in >> port) && port > 0;
    })) << "see "
        << dir_ << "/coordinator.log";
    address_ = absl::StrCat(address, ":", port);
    client_ = std::make_unique<Client>(address_);
  }

  void AddWorker(const std::string& name) {
    const std::string address = network_->AddHost(name);
    std::vector<std::string> argv = network_->On(name);
    for (const std::string& flag :
         {Cluster::BinaryPath("worker/shardwise-worker"), absl::StrCat("--coordinator=", address_),
          "--name=" + name, "--data_address=" + address}) {
      argv.push_back(flag);
    }
    processes_.push_back(std::make_unique<Process>(argv, dir_ + "/" + name + ".log"));
    EXPECT_TRUE(Cluster::WaitFor([&] {
      auto workers = client_->ListWorkers({.states = {v1::IDLE}});
      if (!workers.ok()) return false;
      for (const auto& w : *workers) {
        if (w.id() == name) return true;
      }
      return false;
    })) << name
        << " did not register; see " << dir_ << "/" << name << ".log";
  }

  v1::Job WaitFor(const std::string& job_id, v1::JobState state, absl::Duration timeout) {
    v1::Job last;
    EXPECT_TRUE(Cluster::WaitFor(
        [&] {
          auto job = client_->Get(job_id);
          if (job.ok()) last = *job;
          return job.ok() && job->state() == state;
        },
        timeout))
        << job_id << " is " << v1::JobState_Name(last.state()) << ": " << last.reason()
        << "; workers: " << WorkerStates() << "; logs in " << dir_;
    return last;
  }

  // "w0 IDLE, w1 LOST, ...": what the coordinator thinks of each worker, for failures.
  std::string WorkerStates() {
    auto workers = client_->ListWorkers({});
    if (!workers.ok()) return std::string(workers.status().message());
    std::string out;
    for (const auto& w : *workers) {
      absl::StrAppend(&out, out.empty() ? "" : ", ", w.id(), " ", v1::WorkerState_Name(w.state()));
    }
    return out;
  }

  Client& client() { return *client_; }
  const std::string& dir() const { return dir_; }
  const std::string& address() const { return address_; }

 private:
  Network* const network_;
  std::string dir_;
  std::string address_;
  std::vector<std::unique_ptr<Process>> processes_;
  std::unique_ptr<Client> client_;
};

v1::JobSpec TwoRankJob(const std::string& dir, const std::string& model, int64_t steps) {
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_steps(steps);
  spec.mutable_output()->set_final_model_path(dir + "/" + model);
  return spec;
}

class MultiHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for network namespaces";
    network_ = std::make_unique<Network>();
    if (!network_->ok()) GTEST_SKIP() << "this kernel cannot make a bridge and namespaces";
  }
  std::unique_ptr<Network> network_;
};

TEST_F(MultiHostTest, AJobAcrossHostsEqualsTheSameJobOnLoopback) {
  HostCluster hosts(network_.get());
  hosts.AddWorker("w0");
  hosts.AddWorker("w1");
  auto job_id = hosts.client().Submit(TwoRankJob(hosts.dir(), "hosts.safetensors", 60));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  const v1::Job across = hosts.WaitFor(*job_id, v1::SUCCEEDED, absl::Seconds(60));
  // Each daemon sees only its namespace: the job could only run over the hosts' links.
  // Each worker registered the data-plane address of its own host (its --data_address, on
  // the hosts' subnet), which its peers dial: not loopback, and not its peer's.
  const std::string subnet = hosts.address().substr(0, hosts.address().rfind('.') + 1);
  auto workers = hosts.client().ListWorkers({});
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 2u);
  std::set<std::string> data_hosts;
  for (const v1::WorkerInfo& worker : *workers) {
    const std::string& data = worker.data_probe_address();
    EXPECT_TRUE(absl::StartsWith(data, subnet)) << worker.id() << ": " << data;
    data_hosts.insert(data.substr(0, data.rfind(':')));
  }
  EXPECT_EQ(data_hosts.size(), 2u);

  Cluster loopback;
  loopback.StartCoordinator();
  loopback.AddWorker("w0");
  loopback.AddWorker("w1");
  auto local_id = loopback.client().Submit(TwoRankJob(loopback.dir(), "loopback.safetensors", 60));
  ASSERT_TRUE(local_id.ok()) << local_id.status();
  loopback.WaitForState(*local_id, v1::SUCCEEDED, absl::Seconds(60));
  auto a = ReadSafetensors(across.spec().output().final_model_path());
  auto b = ReadSafetensors(loopback.dir() + "/loopback.safetensors");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  ASSERT_EQ(a->size(), b->size());
  for (const auto& [name, tensor] : *b) {
    const auto same = a->find(name);
    ASSERT_NE(same, a->end()) << name << " is missing from the run across hosts";
    EXPECT_EQ(same->second.bytes, tensor.bytes) << name << " differs from the loopback run";
  }
}

TEST_F(MultiHostTest, AHostCutOffIsDetectedAndTheJobResumesOnTheHostsLeft) {
  HostCluster hosts(network_.get());
  for (const char* worker : {"w0", "w1", "w2"}) hosts.AddWorker(worker);
  v1::JobSpec spec = TwoRankJob(hosts.dir(), "resumed.safetensors", 3000);
  spec.mutable_output()->set_checkpoint_dir(hosts.dir() + "/checkpoints");
  spec.mutable_output()->set_checkpoint_interval_steps(100);
  spec.mutable_restart_policy()->set_max_restarts(1);
  auto job_id = hosts.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  const v1::Job running = hosts.WaitFor(*job_id, v1::RUNNING, absl::Seconds(30));
  ASSERT_TRUE(Cluster::WaitFor(
      [&] {
        const absl::StatusOr<v1::Job> job = hosts.client().Get(*job_id);
        return job.ok() && job->progress().step() > 250;
      },
      absl::Seconds(60)));
  // The rank on w1 (ranks go to the idle workers in id order: w0, w1).
  ASSERT_EQ(running.ranks(1).worker_id(), "w1");
  ASSERT_TRUE(network_->Cut("w1"));
  const v1::Job done = hosts.WaitFor(*job_id, v1::SUCCEEDED, absl::Seconds(120));
  EXPECT_EQ(done.attempt(), 2);
  EXPECT_EQ(done.restarts(), 1);
  EXPECT_TRUE(HasEvent(done, "rank 1 (worker w1) was lost: no heartbeat")) << JobEventLog(done);
  EXPECT_TRUE(absl::StrContains(done.result(), "resumed from the checkpoint of step"))
      << done.result();
  std::vector<std::string> workers;
  for (const auto& rank : done.ranks()) workers.push_back(rank.worker_id());
  EXPECT_EQ(workers, (std::vector<std::string>{"w0", "w2"}));
}

// A host whose firewall drops every connection made to it (its data-plane ports among
// them) while its own connections, to the coordinator too, go out: its rank reaches the
// rendezvous, but the ranks that must connect to it cannot. At the join deadline the
// coordinator has each worker probe its peers over the data plane, blames the host no
// one reaches, quarantines it, and the job runs on the others without a restart counted.
TEST_F(MultiHostTest, AHostWhoseDataPlaneIsBlockedIsBlamedAndTheJobRunsElsewhere) {
  HostCluster hosts(network_.get());
  for (const char* worker : {"w0", "w1", "w2", "w3"}) hosts.AddWorker(worker);
  ASSERT_TRUE(network_->Exec("w1", "/usr/sbin/iptables -A INPUT -p tcp --syn -j DROP"))
      << "iptables in a network namespace";
  v1::JobSpec spec = Cluster::Spec(3);
  spec.set_steps(40);
  spec.mutable_rendezvous()->set_join_timeout_seconds(10);
  spec.mutable_output()->set_final_model_path(hosts.dir() + "/elsewhere.safetensors");
  auto job_id = hosts.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  const v1::Job done = hosts.WaitFor(*job_id, v1::SUCCEEDED, absl::Seconds(120));
  EXPECT_EQ(done.restarts(), 0);
  EXPECT_EQ(done.attempt(), 2);
  const std::string events = JobEventLog(done);
  EXPECT_TRUE(absl::StrContains(events, "probing the data plane between the ranks' workers"))
      << events;
  EXPECT_TRUE(absl::StrContains(
      events, "rank 1 (worker w1) could not be reached over the data plane by any other rank"))
      << events;
  std::vector<std::string> workers;
  for (const auto& rank : done.ranks()) workers.push_back(rank.worker_id());
  EXPECT_EQ(workers, (std::vector<std::string>{"w0", "w2", "w3"}));
  auto listed = hosts.client().ListWorkers({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const v1::WorkerInfo& worker : *listed) {
    EXPECT_EQ(worker.quarantine_reason().empty(), worker.id() != "w1") << worker.DebugString();
  }
}

}  // namespace
}  // namespace shardwise::testing
