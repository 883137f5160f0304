#include "scheduler/workload_key.h"

#include "dsl/serialize.h"
#include "scheduler/scheduler.h"

namespace flow::sched {

namespace {

void put_i64(std::string& out, int64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xFF);
}

void put_ints(std::string& out, const std::vector<int64_t>& xs) {
  put_i64(out, static_cast<int64_t>(xs.size()));
  for (int64_t x : xs) put_i64(out, x);
}

}  // namespace

std::string workload_key(const KernelInstance& ki, dsl::Target t) {
  const Scheduler& s = scheduler_for(ki, t);
  // Default-constructed Params of the scheduler's kind: a canonical schedule.
  const Params canonical =
      std::visit([](const auto& p) -> Params { return std::decay_t<decltype(p)>{}; }, s.heuristics(ki, t));
  std::string bytes = kWorkloadKeySalt;
  bytes += '\0';
  bytes += s.name();
  bytes += '\0';
  dsl::serialize(s.schedule(ki, canonical, t).func, bytes);
  put_ints(bytes, ki.kept);
  put_ints(bytes, ki.reduced);
  put_i64(bytes, static_cast<int64_t>(ki.buffers.size()));
  for (const KernelBuffer& b : ki.buffers) {
    put_ints(bytes, b.strides);
    put_ints(bytes, b.own_strides);
  }
  return dsl::xxh3_128(bytes).hex();
}

}  // namespace flow::sched
