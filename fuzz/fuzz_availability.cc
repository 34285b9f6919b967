// Availability traces (availability.trace). Input: the CSV file; the
// population is 64 clients.

#include "fedprof/sim/availability.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  const std::string text = fuzz::Bytes(data, size);
  return fuzz::Run([&] {
    const auto intervals = ParseAvailabilityTrace(text, "trace.csv", 64);
    FUZZ_CHECK(intervals.size() == 64, "one list per client");
    for (const auto& list : intervals) {
      for (size_t i = 0; i < list.size(); ++i) {
        // What parses is sorted, disjoint and in range.
        FUZZ_CHECK(list[i].start >= 0 && list[i].start < list[i].end && list[i].end <= 1e15, "range");
        FUZZ_CHECK(i == 0 || list[i - 1].end < list[i].start, "merged");
      }
    }
    TraceAvailability a(intervals);
    for (const auto& list : intervals) {
      for (const OnlineInterval& i : list) {
        const int client = static_cast<int>(&list - intervals.data());
        FUZZ_CHECK(a.OnlineUntil(client, i.start) == i.end, "start is online until its end");
        FUZZ_CHECK(a.OnlineUntil(client, i.end) < 0 || a.OnlineUntil(client, i.end) > i.end, "end is not");
      }
    }
  });
}
