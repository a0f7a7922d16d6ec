// A group's vote is yes only when every rank voted yes, and every rank reads the same
// answer whatever order they vote in (real threads over one in-memory store).

#include "worker/comm/group_vote.h"

#include <thread>
#include <vector>

#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

// Each rank of `ranks` votes `votes[i]` on its own thread; their answers.
std::vector<bool> Vote(const std::vector<int>& ranks, const std::vector<bool>& votes) {
  gloo::rendezvous::HashStore store;
  std::vector<bool> answers(ranks.size());
  std::vector<std::thread> voters;
  for (size_t i = 0; i < ranks.size(); ++i) {
    voters.emplace_back([&, i] {
      const absl::StatusOr<bool> answer =
          EveryRankVotesYes(store, "unshard0/two_threads", ranks, ranks[i], votes[i]);
      ASSERT_TRUE(answer.ok()) << answer.status();
      answers[i] = *answer;
    });
  }
  for (std::thread& voter : voters) voter.join();
  return answers;
}

TEST(GroupVote, YesOnlyWhenEveryRankSaysYes) {
  EXPECT_EQ(Vote({0, 1, 2}, {true, true, true}), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(Vote({0, 1, 2}, {true, false, true}), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(Vote({4, 6}, {false, false}), (std::vector<bool>{false, false}));
}

TEST(GroupVote, AGroupOfOneAnswersItsOwnVote) {
  EXPECT_EQ(Vote({3}, {true}), (std::vector<bool>{true}));
  EXPECT_EQ(Vote({3}, {false}), (std::vector<bool>{false}));
}

}  // namespace
}  // namespace shardwise
