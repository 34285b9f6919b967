#include "fedprof/core/text.h"

#include <gtest/gtest.h>

#include <string>

namespace fedprof {
namespace {

TEST(PrintableTest, NothingBeyondPrintableAsciiSurvives) {
  EXPECT_EQ(Printable("plain text 123"), "plain text 123");
  EXPECT_EQ(Printable("a\nwarning: forged"), "a\\x0awarning: forged");
  EXPECT_EQ(Printable("\x1b[2Jred\r\t\x7f"), "\\x1b[2Jred\\x0d\\x09\\x7f");
  // The bytes of a multi-byte character, and C1 controls in UTF-8 (CSI).
  EXPECT_EQ(Printable("\xc3\xa9\xc2\x9b"), "\\xc3\\xa9\\xc2\\x9b");
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\x00b");
}

TEST(PrintableTest, ACutSaysHowMuchWasLeftOut) {
  const std::string big(4 << 20, 'A');
  EXPECT_EQ(Printable(big, 8), "AAAAAAAA...[+4194296 bytes]");
  EXPECT_EQ(Printable("12345", 5), "12345");
  // Escapes grow the text at most fourfold: the bound holds on the output too.
  EXPECT_LE(Printable(std::string(1000, '\n'), 80).size(), 4u * 80 + 32);
}

TEST(ParseClientIdTest, OnlyCanonicalDecimalBelowTheLimit) {
  EXPECT_EQ(ParseClientId("0", 5), 0);
  EXPECT_EQ(ParseClientId("4", 5), 4);
  EXPECT_EQ(ParseClientId("123456789", 1000000000), 123456789);
  for (const char* no : {"5", "01", "00", "-1", "+1", " 1", "1 ", "1abc", "", "1234567890", "0x1"}) {
    EXPECT_EQ(ParseClientId(no, 5), -1) << no;
  }
}

TEST(PrintableTest, ItsOwnOutputPassesUnchanged) {
  const std::string once = Printable("x\n\x1b y");
  EXPECT_EQ(Printable(once), once);
}

TEST(FormatTest, UtcTimesInIso8601OrAnyStrftimeFormat) {
  EXPECT_EQ(FormatUtc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatUtc(1764581400), "2025-12-01T09:30:00Z");
  EXPECT_EQ(FormatUtc(1764581400, "%Y-%m-%d"), "2025-12-01");
}

}  // namespace
}  // namespace fedprof
