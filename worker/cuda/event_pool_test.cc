// The event pool (event_pool.h): lent events come back and are lent again, timing pools
// lend events that time, and events dropped after their pool still go back safely.

#include "worker/cuda/event_pool.h"

#include <memory>
#include <optional>

#include "gtest/gtest.h"
#include "worker/cuda/gpu_test_support.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {
namespace {

TEST(EventPool, LendsADroppedEventAgain) {
  SKIP_WITHOUT_GPU();
  EventPool pool;
  auto first = pool.Acquire();
  auto second = pool.Acquire();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(pool.created(), 2u);
  EXPECT_NE((*first)->get(), (*second)->get());
  const cudaEvent_t dropped = (*first)->get();
  first->reset();
  auto third = pool.Acquire();
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ((*third)->get(), dropped);
  EXPECT_EQ(pool.created(), 2u);
  // Held events are never lent twice: a fourth is made.
  auto fourth = pool.Acquire();
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  EXPECT_EQ(pool.created(), 3u);
}

TEST(EventPool, TimingEventsTimeAcrossReuse) {
  SKIP_WITHOUT_GPU();
  auto stream = Stream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  EventPool pool(/*timing=*/true);
  for (int round = 0; round < 3; ++round) {
    auto start = pool.Acquire();
    auto end = pool.Acquire();
    ASSERT_TRUE(start.ok() && end.ok());
    ASSERT_TRUE((*start)->Record(stream->get()).ok());
    ASSERT_TRUE((*end)->Record(stream->get()).ok());
    ASSERT_TRUE((*end)->Synchronize().ok());
    const absl::StatusOr<float> ms = Event::ElapsedMs(**start, **end);
    ASSERT_TRUE(ms.ok()) << ms.status();
    EXPECT_GE(*ms, 0.0f);
  }
  EXPECT_EQ(pool.created(), 2u);
}

TEST(EventPool, EventsMayOutliveThePool) {
  SKIP_WITHOUT_GPU();
  std::shared_ptr<Event> kept;
  {
    EventPool pool;
    auto event = pool.Acquire();
    ASSERT_TRUE(event.ok()) << event.status();
    kept = std::move(*event);
  }
  auto stream = Stream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(kept->Record(stream->get()).ok());
  EXPECT_TRUE(kept->Synchronize().ok());
  kept.reset();  // back to the free list the pool left behind, which goes with it
}

}  // namespace
}  // namespace shardwise::cuda
