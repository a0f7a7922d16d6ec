#include "contracts/validation_loss_text.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(ValidationLossText, TwoEvaluationsReadAsAChange) {
  EXPECT_EQ(ValidationLossText(5.5, 0, 2.25, 40), "5.5000 -> 2.2500");
}

TEST(ValidationLossText, OneEvaluationReadsAsOneLossWithItsStep) {
  EXPECT_EQ(ValidationLossText(1.87189, 1000, 1.87189, 1000), "1.8719 after step 1000");
}

TEST(ValidationLossText, TwoEvaluationsThatAgreeStillReadAsAChange) {
  EXPECT_EQ(ValidationLossText(3.0, 10, 3.0, 20), "3.0000 -> 3.0000");
}

}  // namespace
}  // namespace shardwise
