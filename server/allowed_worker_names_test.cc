#include "server/allowed_worker_names.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

using Call = AllowedWorkerNames::Call;

TEST(AllowedWorkerNames, AnyNameWhereNothingBindsOne) {
  EXPECT_TRUE(AllowedWorkerNames::Any().Check(Call::kRegistration, "w0").ok());
  EXPECT_TRUE(AllowedWorkerNames::Any().Check(Call::kSession, "w1").ok());
  EXPECT_EQ(AllowedWorkerNames::Any().certificate_name(), std::nullopt);
}

TEST(AllowedWorkerNames, ACertificatesCommonNameAlone) {
  const AllowedWorkerNames names = AllowedWorkerNames::Certificate("w1");
  EXPECT_EQ(names.certificate_name(), "w1");
  EXPECT_TRUE(names.Check(Call::kSession, "w1").ok());
  const absl::Status registration = names.Check(Call::kRegistration, "w0");
  EXPECT_EQ(registration.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(registration.message(),
            "worker name 'w0' is not the name in its certificate ('w1'): a worker works under "
            "its certificate's name");
  EXPECT_EQ(names.Check(Call::kSession, "w0").message(),
            "a session for worker 'w0' from a certificate of 'w1': a worker opens sessions under "
            "its certificate's name only");
}

TEST(AllowedWorkerNames, AWorkerTokensEntryItsNamesAndPrefixes) {
  const AllowedWorkerNames names =
      AllowedWorkerNames::TokenEntry("node7", {"node7-*", "spare-gpu0"});
  EXPECT_EQ(names.certificate_name(), std::nullopt);
  for (const char* name : {"node7-gpu0", "node7-gpu7", "spare-gpu0"}) {
    EXPECT_TRUE(names.Check(Call::kRegistration, name).ok()) << name;
    EXPECT_TRUE(names.Check(Call::kSession, name).ok()) << name;
  }
  const absl::Status other = names.Check(Call::kRegistration, "node8-gpu0");
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(other.message(),
            "worker name 'node8-gpu0' with the token of node7, whose entry in the tokens file "
            "gives worker_names node7-*, spare-gpu0: a worker token registers and opens sessions "
            "under those names only");
  EXPECT_EQ(names.Check(Call::kSession, "spare-gpu1").code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace shardwise
