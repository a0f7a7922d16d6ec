#include "common/printable_text.h"

#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(ShownValueTest, PrintableTextIsShownAsItIs) {
  EXPECT_EQ(ShownValue("job-1"), "job-1");
  EXPECT_EQ(ShownValue("caf\xC3\xA9 \xF0\x9F\x99\x82"), "caf\xC3\xA9 \xF0\x9F\x99\x82");
}

TEST(ShownValueTest, ControlCharactersAndBrokenUtf8AreEscaped) {
  EXPECT_EQ(ShownValue("m\n  role: admin"), "m\\u{000A}  role: admin");
  EXPECT_EQ(ShownValue("\x1b[2Jx"), "\\u{001B}[2Jx");
  EXPECT_EQ(ShownValue(std::string("a\0b", 3)), "a\\u{0000}b");
  EXPECT_EQ(ShownValue("\xFF\xC3"), "\\xFF\\xC3");
  EXPECT_EQ(ShownValue("\xE2\x80\xAE"), "\\u{202E}");  // a bidirectional override
}

TEST(ShownValueTest, ALongValueIsCutAndItsLengthSaid) {
  const std::string value(1 << 20, 'a');
  const std::string shown = ShownValue(value);
  EXPECT_EQ(shown, std::string(kShownValueBytes, 'a') + "... (1048576 bytes)");
  EXPECT_EQ(ShownValue("abcdef", 3), "abc... (6 bytes)");
}

TEST(CountPrintableCharactersTest, CountsCodePointsAndRefusesControls) {
  EXPECT_EQ(*CountPrintableCharacters("caf\xC3\xA9"), 4);
  EXPECT_FALSE(CountPrintableCharacters("a\tb").ok());
  EXPECT_FALSE(CountPrintableCharacters("\xC0\x80").ok());  // overlong
}

TEST(ShownNumberTest, SixDigitsOrAsManyMoreAsReadBackAsTheSameNumber) {
  EXPECT_EQ(ShownNumber(65536), "65536");
  EXPECT_EQ(ShownNumber(0.1), "0.1");
  EXPECT_EQ(ShownNumber(1e-46), "1e-46");
  EXPECT_EQ(ShownNumber(-2.5), "-2.5");
  // Six digits showed FP32's least normal as 1.17549e-38, which is below it.
  EXPECT_EQ(ShownNumber(std::numeric_limits<float>::min()), "1.1754943508222875e-38");
  EXPECT_EQ(ShownNumber(1 + 1e-9), "1.000000001");
  EXPECT_EQ(ShownNumber(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(ShownNumber(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(ShownNumber(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(ShownNumber(500000), "500000");
  EXPECT_EQ(ShownNumber(1e-5), "1e-05");  // as StrCat shows it where six digits suffice
  EXPECT_EQ(ShownNumber(std::numeric_limits<double>::denorm_min()), "4.94066e-324");
}

}  // namespace
}  // namespace shardwise
