// The span tables one optimizer launch takes: every element of every non-empty span once,
// in order, with its span's decay; more spans than a table holds go to further tables.

#include "worker/compute/update_spans.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

// The elements a grid-stride loop over the tables visits, and their decay flags.
void Visit(const std::vector<SpanTable>& tables, std::vector<int64_t>* elements,
           std::vector<bool>* decays) {
  for (const SpanTable& table : tables) {
    for (int64_t k = 0; k < table.total(); ++k) {
      elements->push_back(ElementOf(table, k));
      decays->push_back(table.decay[SpanOf(table, k)]);
    }
  }
}

TEST(UpdateSpans, EveryElementOfEverySpanOnceInOrder) {
  // A GPT block's shard: LayerNorm (no decay), a weight, a bias, ..., an empty span.
  const std::vector<UpdateSpan> spans = {{0, 1536, false},          {1536, 1770000, true},
                                         {1770000, 1772304, false}, {1772304, 1772304, true},
                                         {1772304, 1772305, true},  {1772305, 1772400, false}};
  const std::vector<SpanTable> tables = SpanTables(spans);
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0].count, 5);  // the empty span left out
  std::vector<int64_t> elements;
  std::vector<bool> decays;
  Visit(tables, &elements, &decays);
  ASSERT_EQ(elements.size(), 1772400u);
  for (int64_t i = 0; i < 1772400; ++i) {
    ASSERT_EQ(elements[i], i);
    const bool decay = (i >= 1536 && i < 1770000) || i == 1772304;
    ASSERT_EQ(decays[i], decay) << i;
  }
}

TEST(UpdateSpans, SpansBeyondATableGoToTheNext) {
  std::vector<UpdateSpan> spans(2 * kMaxSpansPerTable + 3);
  for (size_t s = 0; s < spans.size(); ++s) {
    const auto begin = static_cast<int64_t>(10 * s);
    spans[s] = {begin, begin + 7, s % 2 == 0};
  }
  const std::vector<SpanTable> tables = SpanTables(spans);
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[2].count, 3);
  std::vector<int64_t> elements;
  std::vector<bool> decays;
  Visit(tables, &elements, &decays);
  ASSERT_EQ(elements.size(), spans.size() * 7);
  for (size_t s = 0; s < spans.size(); ++s) {
    for (int64_t e = 0; e < 7; ++e) {
      EXPECT_EQ(elements[s * 7 + e], spans[s].begin + e);
      EXPECT_EQ(decays[s * 7 + e], spans[s].decay);
    }
  }
}

TEST(UpdateSpans, NoSpansNoTables) {
  EXPECT_TRUE(SpanTables({}).empty());
  EXPECT_TRUE(SpanTables({{5, 5, true}}).empty());
}

}  // namespace
}  // namespace shardwise
