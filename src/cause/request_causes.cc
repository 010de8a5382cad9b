#include "cause/request_causes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "base/median.h"
#include "cause/log_numbers.h"

namespace teller::cause {
namespace {

using model::TimeNs;

// Counts of values inserted so far at or below a position (a Fenwick tree).
class PrefixCounts {
 public:
  explicit PrefixCounts(size_t size) : tree_(size + 1, 0) {}
  void Add(size_t position) {
    for (size_t i = position + 1; i < tree_.size(); i += i & (~i + 1)) ++tree_[i];
  }
  int64_t CountBelow(size_t position) const {  // inserted positions < position
    int64_t count = 0;
    for (size_t i = position; i > 0; i -= i & (~i + 1)) count += tree_[i];
    return count;
  }

 private:
  std::vector<int64_t> tree_;
};

// Each request's earliest log line before its first step, or -1.
std::vector<TimeNs> ArrivalsFromLogs(const RequestCauseInput& in) {
  std::vector<TimeNs> arrival(in.scheduled(), -1);
  for (size_t i = 0; i < in.lines(); ++i) {
    const uint32_t q = in.line_request[i];
    if (q >= in.scheduled()) continue;  // no request, or one never scheduled
    const TimeNs ts = in.line_ts_ns[i];
    if (ts >= in.first_ns[q]) continue;  // logged once it ran: not its arrival
    if (arrival[q] < 0 || ts < arrival[q]) arrival[q] = ts;
  }
  return arrival;
}

// Lines of one request this far apart are more than its arrival (vLLM logs "Received" and
// "Added" 0.2 ms apart): a later one (an abort) ends its wait.
constexpr TimeNs kArrivalLinesApartNs = 10'000'000;

// A request the logs name but no step carries: when it was first logged, and last.
struct UnscheduledRequest {
  uint32_t request = 0;  // of RequestCauseInput::id
  TimeNs first_line_ns = 0;
  TimeNs last_line_ns = 0;
  int32_t rank = -1;  // of its first line
};

std::vector<UnscheduledRequest> UnscheduledRequests(const RequestCauseInput& in) {
  std::vector<size_t> index_of(in.id.size() - in.scheduled(), std::numeric_limits<size_t>::max());
  std::vector<UnscheduledRequest> out;
  for (size_t i = 0; i < in.lines(); ++i) {
    const uint32_t q = in.line_request[i];
    if (q == RequestCauseInput::kNoRequest || q < in.scheduled()) continue;
    size_t& index = index_of[q - in.scheduled()];
    const TimeNs ts = in.line_ts_ns[i];
    if (index == std::numeric_limits<size_t>::max()) {
      index = out.size();
      out.push_back({q, ts, ts, in.line_rank[i]});
    }
    UnscheduledRequest& r = out[index];
    if (ts < r.first_line_ns) {
      r.first_line_ns = ts;
      r.rank = in.line_rank[i];
    }
    r.last_line_ns = std::max(r.last_line_ns, ts);
  }
  return out;
}

// The engine (scheduler, queue) of each request and rank: the lowest rank whose steps
// carry the request; a rank's is its requests' (a data-parallel engine's tensor-parallel
// ranks share it). Requests of different engines wait in different queues.
struct EngineOfRequests {
  std::vector<int32_t> of_request;
  std::vector<int32_t> of_rank;  // -1: a rank that carried no request
};

EngineOfRequests EnginesOf(const RequestCauseInput& in) {
  EngineOfRequests out;
  out.of_request.assign(in.scheduled(), std::numeric_limits<int32_t>::max());
  int32_t ranks = 0;
  for (size_t s = 0; s < in.steps(); ++s) {
    ranks = std::max(ranks, in.rank[s] + 1);
    for (uint32_t i = 0; i < in.requests_count(s); ++i) {
      const size_t q = in.step_requests[in.requests_begin[s] + i];
      out.of_request[q] = std::min(out.of_request[q], in.rank[s]);
    }
  }
  out.of_rank.assign(static_cast<size_t>(ranks), -1);
  for (size_t s = 0; s < in.steps(); ++s) {
    if (in.rank[s] < 0) continue;
    int32_t& engine = out.of_rank[static_cast<size_t>(in.rank[s])];
    for (uint32_t i = 0; i < in.requests_count(s); ++i) {
      const size_t q = in.step_requests[in.requests_begin[s] + i];
      engine = engine < 0 ? out.of_request[q] : std::min(engine, out.of_request[q]);
    }
  }
  return out;
}

// vLLM's offline LLM numbers its requests 0, 1, 2, ... as it queues them, and logs no
// arrival. Each request's number, when every scheduled request has one.
std::optional<std::vector<int64_t>> OfflineRequestNumbers(const RequestCauseInput& in) {
  std::vector<int64_t> numbers(in.scheduled());
  for (size_t q = 0; q < numbers.size(); ++q) {
    const std::string_view id = in.id[q];
    if (id.empty() || id.size() > 18) return std::nullopt;
    int64_t number = 0;
    for (char c : id) {
      if (c < '0' || c > '9') return std::nullopt;
      number = number * 10 + (c - '0');
    }
    numbers[q] = number;
  }
  return numbers;
}

// An offline batch queues a request before every request numbered after it, each of which
// waited until its first step at most: the earliest first step of the request and those
// after it on its engine bounds its arrival (from above: the wait it gives is the least).
std::vector<TimeNs> ArrivalsOfOfflineBatch(const RequestCauseInput& in,
                                           const EngineOfRequests& engines,
                                           const std::vector<int64_t>& numbers) {
  std::vector<size_t> by_number(numbers.size());
  std::iota(by_number.begin(), by_number.end(), 0);
  std::sort(by_number.begin(), by_number.end(), [&](size_t a, size_t b) {
    return engines.of_request[a] != engines.of_request[b]
               ? engines.of_request[a] < engines.of_request[b]
               : numbers[a] < numbers[b];
  });
  std::vector<TimeNs> arrival(numbers.size(), -1);
  TimeNs bound = std::numeric_limits<TimeNs>::max();
  for (size_t i = by_number.size(); i-- > 0;) {
    const size_t q = by_number[i];
    if (i + 1 == by_number.size() ||
        engines.of_request[by_number[i + 1]] != engines.of_request[q]) {
      bound = std::numeric_limits<TimeNs>::max();
    }
    bound = std::min(bound, in.first_ns[q]);
    arrival[q] = bound;
  }
  return arrival;
}

// Requests still waiting when the capture ended, into their engines' queues: the rank that
// logged one names its engine, else the run must have only one. Their wait runs to the
// capture's last step, or to a later line of theirs (an abort) when that comes first.
void AddUnscheduled(const RequestCauseInput& in, const EngineOfRequests& engines,
                    std::map<int32_t, std::vector<RequestQueueing>>* by_engine) {
  if (by_engine->empty()) return;
  TimeNs last_step_ns = 0;
  for (size_t s = 0; s < in.steps(); ++s) {
    last_step_ns = std::max(last_step_ns, in.start_ns[s]);
  }
  for (const UnscheduledRequest& u : UnscheduledRequests(in)) {
    int32_t engine = by_engine->size() == 1 ? by_engine->begin()->first : -1;
    if (u.rank >= 0 && static_cast<size_t>(u.rank) < engines.of_rank.size() &&
        engines.of_rank[static_cast<size_t>(u.rank)] == u.rank) {
      engine = u.rank;
    }
    if (engine < 0 || !by_engine->count(engine) || u.first_line_ns >= last_step_ns) continue;
    RequestQueueing r;
    r.id = in.id[u.request];
    r.engine = engine;
    r.scheduled = false;
    r.arrival_ns = u.first_line_ns;
    r.first_scheduled_ns = last_step_ns;
    if (u.last_line_ns > u.first_line_ns + kArrivalLinesApartNs) {
      r.first_scheduled_ns = std::min(r.first_scheduled_ns, u.last_line_ns);
    }
    (*by_engine)[engine].push_back(r);
  }
}

// SGLang logs no line per request; it logs each prefill batch it forms with the requests
// it left waiting ("#queue-req: 1"), the batch's new tokens and its KV pool's "token usage".
// A request left waiting by a batch formed with room (the pool at most half used, the batch
// at most half the engine's largest, fewer running than the most it ran) was skipped, not
// queued for memory, the prefill budget or the running requests' cap; when the line that
// drains the queue admits one request, that request waited from the first line that left it.
struct QueueLine {
  TimeNs ts_ns = 0;
  int64_t waiting = 0;
  int64_t new_tokens = -1;  // a prefill batch's
  int64_t running = -1;
  double usage = -1.0;
  bool prefill = false;
  bool room = false;
  model::StepIndex step;
};

constexpr double kQueueRoomShare = 0.5;

// Each engine's batch lines (by rank) in time order.
std::map<int32_t, std::vector<QueueLine>> QueueLinesOf(const RequestCauseInput& in) {
  std::map<int32_t, std::vector<QueueLine>> out;
  for (size_t i = 0; i < in.lines(); ++i) {
    const std::string_view text = in.line_text[i];
    const int64_t waiting = NumberAfter(text, "#queue-req: ");
    if (waiting < 0) continue;
    QueueLine line;
    line.ts_ns = in.line_ts_ns[i];
    line.waiting = waiting;
    line.prefill = text.find("Prefill batch") != std::string_view::npos;
    line.new_tokens = NumberAfter(text, "#new-token: ");
    line.running = NumberAfter(text, "#running-req: ");
    line.usage = DecimalAfter(text, "token usage: ");
    line.step = in.line_step[i];
    out[in.line_rank[i]].push_back(line);
  }
  for (auto& [rank, lines] : out) {
    std::stable_sort(lines.begin(), lines.end(),
                     [](const QueueLine& a, const QueueLine& b) { return a.ts_ns < b.ts_ns; });
    int64_t largest = 0, most_running = -1;
    for (const QueueLine& line : lines) {
      largest = std::max(largest, line.new_tokens);
      most_running = std::max(most_running, line.running);
    }
    for (QueueLine& line : lines) {
      line.room = line.prefill && line.usage >= 0.0 && line.usage <= kQueueRoomShare &&
                  line.new_tokens >= 0 &&
                  static_cast<double>(line.new_tokens) <= kQueueRoomShare * largest &&
                  (line.running < 0 || line.running < most_running);
    }
  }
  return out;
}

// The requests (by index) a step carries that no earlier step of its rank did.
std::vector<uint32_t> AdmittedAt(const RequestCauseInput& in, model::StepIndex step) {
  const uint32_t s = step.value();
  std::set<uint32_t> earlier;
  for (uint32_t t = 0; t < in.steps(); ++t) {
    if (in.rank[t] != in.rank[s] || in.start_ns[t] >= in.start_ns[s]) {
      continue;
    }
    for (uint32_t i = in.requests_begin[t]; i < in.requests_begin[t + 1]; ++i) {
      earlier.insert(in.step_requests[i]);
    }
  }
  std::vector<uint32_t> admitted;
  for (uint32_t i = in.requests_begin[s]; i < in.requests_begin[s + 1]; ++i) {
    if (earlier.count(in.step_requests[i]) == 0) {
      admitted.push_back(in.step_requests[i]);
    }
  }
  return admitted;
}

struct CountedArrivals {
  std::vector<TimeNs> arrival;         // per request (by index)
  std::vector<uint8_t> shown_waiting;  // the counts show it waiting
};

// Per request: the time the queue counts show it waiting from; the others were scheduled
// as they came, as far as the counts tell. None when no request shows waiting.
std::optional<CountedArrivals> ArrivalsFromQueueCounts(const RequestCauseInput& in) {
  std::vector<TimeNs> arrival(in.scheduled(), -1);
  for (const auto& [rank, lines] : QueueLinesOf(in)) {
    size_t first = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].waiting > 0) continue;
      // lines [first, i) left requests waiting; line i drained the queue.
      int64_t most_waiting = 0, skipped_with_room = 0;
      for (size_t k = first; k < i; ++k) {
        most_waiting = std::max(most_waiting, lines[k].waiting);
        skipped_with_room += lines[k].room;
      }
      const size_t begin = first;
      first = i + 1;
      if (begin == i || most_waiting != 1 || skipped_with_room == 0) continue;
      if (!lines[i].prefill || !lines[i].step.valid()) continue;
      const std::vector<uint32_t> admitted = AdmittedAt(in, lines[i].step);
      if (admitted.size() != 1) continue;
      arrival[admitted[0]] = lines[begin].ts_ns;
    }
  }
  if (std::all_of(arrival.begin(), arrival.end(), [](TimeNs t) { return t < 0; })) {
    return std::nullopt;
  }
  CountedArrivals counted{arrival, std::vector<uint8_t>(arrival.size(), 0)};
  for (size_t q = 0; q < arrival.size(); ++q) {
    counted.shown_waiting[q] = arrival[q] >= 0;
    if (arrival[q] < 0) counted.arrival[q] = in.first_ns[q];
  }
  return counted;
}

// Later arrivals scheduled first, for each request in arrival order.
void CountServedFirst(std::vector<RequestQueueing>* requests) {
  std::vector<TimeNs> firsts;
  for (const RequestQueueing& r : *requests) firsts.push_back(r.first_scheduled_ns);
  std::sort(firsts.begin(), firsts.end());
  PrefixCounts later(firsts.size());
  for (size_t i = requests->size(); i-- > 0;) {
    RequestQueueing& r = (*requests)[i];
    const size_t position = static_cast<size_t>(
        std::lower_bound(firsts.begin(), firsts.end(), r.first_scheduled_ns) - firsts.begin());
    r.served_first = later.CountBelow(position);
    later.Add(position);
  }
}

// Each engine step (a group: one start across its ranks) in time order, and how many of
// those up to each had room in their batch (fewer requests than the run's fullest step).
class StepsWithRoom {
 public:
  // The steps of the ranks whose engine is `engine` (EngineOfRanks).
  StepsWithRoom(const RequestCauseInput& in, const std::vector<int32_t>& engine_of_rank,
                int32_t engine) {
    std::unordered_map<int64_t, std::pair<TimeNs, uint32_t>> groups;  // start, requests
    uint32_t fullest = 0;
    for (size_t s = 0; s < in.steps(); ++s) {
      const int32_t rank = in.rank[s];
      if (rank < 0 || static_cast<size_t>(rank) >= engine_of_rank.size() ||
          engine_of_rank[static_cast<size_t>(rank)] != engine) {
        continue;
      }
      auto [it, fresh] = groups.try_emplace(in.group[s], in.start_ns[s], 0);
      it->second.first = std::min(it->second.first, in.start_ns[s]);
      it->second.second = std::max(it->second.second, in.requests_count(s));
      fullest = std::max(fullest, in.requests_count(s));
    }
    std::vector<std::pair<TimeNs, bool>> ordered;
    for (const auto& [group, start_requests] : groups) {
      ordered.emplace_back(start_requests.first, start_requests.second < fullest);
    }
    std::sort(ordered.begin(), ordered.end());
    room_before_.push_back(0);
    for (const auto& [start, room] : ordered) {
      starts_.push_back(start);
      room_before_.push_back(room_before_.back() + (room ? 1 : 0));
    }
  }
  // Steps with room that started in (from, to).
  int64_t Count(TimeNs from, TimeNs to) const {
    if (to <= from) return 0;
    const auto first = std::upper_bound(starts_.begin(), starts_.end(), from) - starts_.begin();
    const auto last = std::lower_bound(starts_.begin(), starts_.end(), to) - starts_.begin();
    return room_before_[static_cast<size_t>(last)] - room_before_[static_cast<size_t>(first)];
  }

 private:
  std::vector<TimeNs> starts_;
  std::vector<int64_t> room_before_;
};

// For each request of one engine, in arrival order: when it was first in line (every
// earlier arrival scheduled, or a later one scheduled before it), and the steps with room
// from then.
void CountPassedOver(const StepsWithRoom& steps, std::vector<RequestQueueing>* requests) {
  const size_t count = requests->size();
  std::vector<TimeNs> later_first(count + 1, std::numeric_limits<TimeNs>::max());
  for (size_t i = count; i-- > 0;) {
    later_first[i] = std::min(later_first[i + 1], (*requests)[i].first_scheduled_ns);
  }
  TimeNs earlier_scheduled = 0;  // when every earlier arrival had been scheduled
  for (size_t i = 0; i < count; ++i) {
    RequestQueueing& r = (*requests)[i];
    r.first_in_line_ns = std::min(std::max(r.arrival_ns, earlier_scheduled),
                                  std::max(r.arrival_ns, later_first[i + 1]));
    r.first_in_line_ns = std::min(r.first_in_line_ns, r.first_scheduled_ns);
    r.passed_over = steps.Count(r.first_in_line_ns, r.first_scheduled_ns);
    earlier_scheduled = std::max(earlier_scheduled, r.first_scheduled_ns);
  }
}

struct RobustScale {
  double median = 0.0;
  double spread = 0.0;  // 1.4826 MAD: a standard deviation for normal data
};

RobustScale RobustScaleOf(std::vector<double> values) {
  RobustScale out;
  out.median = base::MedianInPlace(&values);
  for (double& v : values) v = std::abs(v - out.median);
  out.spread = 1.4826 * base::MedianInPlace(&values);
  return out;
}

double MedianStepNs(const RequestCauseInput& in) {
  std::vector<double> durations;
  durations.reserve(in.steps());
  for (size_t s = 0; s < in.steps(); ++s) {
    durations.push_back(static_cast<double>(in.end_ns[s] - in.start_ns[s]));
  }
  return base::MedianInPlace(&durations);
}

// The steps that started while the request waited (or its first, when none did).
void SetWindow(const RequestCauseInput& in, const RequestQueueing& r, Hypothesis* h) {
  int64_t first = std::numeric_limits<int64_t>::max(), last = -1;
  int64_t own_first = std::numeric_limits<int64_t>::max();
  for (size_t s = 0; s < in.steps(); ++s) {
    const TimeNs start = in.start_ns[s];
    const int64_t group = in.group[s];
    if (start == r.first_scheduled_ns) own_first = std::min(own_first, group);
    if (start <= r.arrival_ns || start >= r.first_scheduled_ns) continue;
    first = std::min(first, group);
    last = std::max(last, group);
  }
  if (last < 0) first = last = own_first;
  h->first_group = first;
  h->last_group = last;
  h->steps = last - first + 1;
  h->lists_abnormal_steps = true;  // the steps ran as they would have: only it waited
}

}  // namespace

std::vector<RequestQueueing> MeasureRequestQueueing(const RequestCauseInput& in) {
  const EngineOfRequests engines = EnginesOf(in);
  std::vector<TimeNs> arrival = ArrivalsFromLogs(in);
  std::vector<int64_t> queue_order(arrival.size());
  std::iota(queue_order.begin(), queue_order.end(), 0);
  std::vector<uint8_t> from_queue_counts(arrival.size(), 0);
  if (std::all_of(arrival.begin(), arrival.end(), [](TimeNs t) { return t < 0; })) {
    if (auto numbers = OfflineRequestNumbers(in)) {
      arrival = ArrivalsOfOfflineBatch(in, engines, *numbers);
      queue_order = std::move(*numbers);
    } else if (auto counted = ArrivalsFromQueueCounts(in)) {
      arrival = std::move(counted->arrival);
      from_queue_counts = std::move(counted->shown_waiting);
    }
  }
  std::map<int32_t, std::vector<RequestQueueing>> by_engine;
  for (size_t q = 0; q < arrival.size(); ++q) {
    if (arrival[q] < 0) continue;
    RequestQueueing r;
    r.request = model::RequestIndex(static_cast<uint32_t>(q));
    r.id = in.id[q];
    r.engine = engines.of_request[q];
    r.arrival_ns = arrival[q];
    r.first_scheduled_ns = in.first_ns[q];
    r.arrival_from_queue_counts = from_queue_counts[q] != 0;
    by_engine[r.engine].push_back(r);
  }
  AddUnscheduled(in, engines, &by_engine);
  const auto order_of = [&](const RequestQueueing& r) {
    return r.scheduled ? queue_order[r.request.value()] : std::numeric_limits<int64_t>::max();
  };
  std::vector<RequestQueueing> out;
  for (auto& [engine, requests] : by_engine) {
    std::sort(requests.begin(), requests.end(),
              [&](const RequestQueueing& a, const RequestQueueing& b) {
                return a.arrival_ns != b.arrival_ns
                           ? a.arrival_ns < b.arrival_ns
                           : order_of(a) < order_of(b);
              });
    CountServedFirst(&requests);
    CountPassedOver(StepsWithRoom(in, engines.of_rank, engine), &requests);
    out.insert(out.end(), requests.begin(), requests.end());
  }
  return out;
}

std::vector<Hypothesis> FindStarvedRequests(const RequestCauseInput& in, size_t max_hypotheses) {
  const std::vector<RequestQueueing> requests = MeasureRequestQueueing(in);
  if (requests.size() < kMinRequestsToCompare) return {};
  std::vector<double> waits, in_line, overtakes, passed_over;
  for (const RequestQueueing& r : requests) {
    waits.push_back(static_cast<double>(r.first_scheduled_ns - r.arrival_ns));
    in_line.push_back(static_cast<double>(r.first_scheduled_ns - r.first_in_line_ns));
    overtakes.push_back(static_cast<double>(r.served_first));
    passed_over.push_back(static_cast<double>(r.passed_over));
  }
  // A wait is told in steps: a request waits for whole steps, so half a step is the
  // smallest spread that means anything.
  const RobustScale wait = RobustScaleOf(waits);
  const RobustScale first_in_line = RobustScaleOf(in_line);
  const double in_line_spread = std::max(first_in_line.spread, 0.5 * MedianStepNs(in));
  const RobustScale overtaken = RobustScaleOf(overtakes);
  const RobustScale passed = RobustScaleOf(passed_over);
  std::vector<Hypothesis> out;
  for (size_t i = 0; i < requests.size(); ++i) {
    // Overtaken or passed over more than the run's requests are: its wait is not the queue's.
    const bool overtaken_more =
        overtakes[i] - overtaken.median >= std::max(1.0, 3.0 * overtaken.spread);
    const bool passed_over_more =
        passed_over[i] - passed.median >= std::max(2.0, 3.0 * passed.spread);
    if (!overtaken_more && !passed_over_more) continue;
    if (in_line_spread <= 0.0) continue;
    const double score = (in_line[i] - first_in_line.median) / in_line_spread;
    if (score <= 0.0) continue;
    Hypothesis h;
    h.kind = CauseKind::kRequestStarved;
    h.request = std::string(requests[i].id);
    h.request_never_scheduled = !requests[i].scheduled;
    h.wait_from_queue_counts = requests[i].arrival_from_queue_counts;
    h.requests_served_first = requests[i].served_first;
    h.steps_passed_over = requests[i].passed_over;
    h.typical_wait_ns = wait.median;
    h.effect = waits[i];
    h.additive = true;
    h.score = score;
    h.since_ns = requests[i].arrival_ns;
    SetWindow(in, requests[i], &h);
    out.push_back(std::move(h));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  if (out.size() > max_hypotheses) out.resize(max_hypotheses);
  return out;
}

namespace {

// A decode step that decoded some requests: every running request gets its token there
// unless it was preempted. Not a prefill or mixed step (a prefill-first policy pauses the
// decodes; a chunked one runs out of token budget for some), nor an idle batch (a
// data-parallel rank with nothing to run steps along with the others).
bool DecodesOthers(const RequestCauseInput& in, size_t row) {
  return in.phase[row] == model::StepPhase::kDecode && in.requests_count(row) > 0;
}

// Each engine's steps (rows of the input's steps) on its own (lowest) rank, in step order.
std::map<int32_t, std::vector<size_t>> StepsOfEngines(const RequestCauseInput& in,
                                                      const std::vector<int32_t>& engine_of_rank) {
  std::map<int32_t, std::vector<size_t>> out;
  for (size_t s = 0; s < in.steps(); ++s) {
    const int32_t rank = in.rank[s];
    if (rank < 0 || static_cast<size_t>(rank) >= engine_of_rank.size() ||
        engine_of_rank[static_cast<size_t>(rank)] != rank) {
      continue;  // another rank of a tensor-parallel engine: the same steps
    }
    out[rank].push_back(s);
  }
  for (auto& [engine, rows] : out) {
    std::sort(rows.begin(), rows.end(),
              [&](size_t a, size_t b) { return in.group[a] < in.group[b]; });
  }
  return out;
}

// Per request, the positions (in `rows`) of the steps that carry it, in step order.
std::map<uint32_t, std::vector<size_t>> PositionsOfRequests(const RequestCauseInput& in,
                                                            const std::vector<size_t>& rows) {
  std::map<uint32_t, std::vector<size_t>> positions;
  for (size_t at = 0; at < rows.size(); ++at) {
    const size_t row = rows[at];
    for (uint32_t i = 0; i < in.requests_count(row); ++i) {
      positions[in.step_requests[in.requests_begin[row] + i]].push_back(at);
    }
  }
  return positions;
}

// Whether the engine prefills its own requests: a prefill or mixed step among its steps (a
// disaggregated decode instance receives its requests prefilled and runs decode steps only).
bool PrefillsItsOwn(const RequestCauseInput& in, const std::vector<size_t>& rows) {
  return std::any_of(rows.begin(), rows.end(), [&](size_t row) {
    return in.phase[row] == model::StepPhase::kPrefill || in.phase[row] == model::StepPhase::kMixed;
  });
}

}  // namespace

std::optional<Hypothesis> FindMisroutedRequests(const RequestCauseInput& in) {
  const EngineOfRequests engines = EnginesOf(in);
  Hypothesis h;
  h.kind = CauseKind::kRequestMisrouted;
  h.additive = true;
  // The misrouted requests' steps, and the steps each arrived in undecoded: there the
  // engine decoded a request it never prefilled, in the others it ran as it would have.
  std::set<int64_t> groups, arrivals;
  for (const auto& [engine, rows] : StepsOfEngines(in, engines.of_rank)) {
    if (!PrefillsItsOwn(in, rows)) continue;
    for (const auto& [request, at] : PositionsOfRequests(in, rows)) {
      // In the engine's first step it may have been prefilled before the capture began.
      const size_t first = rows[at.front()];
      if (at.front() == 0 || in.phase[first] != model::StepPhase::kDecode) continue;
      if (h.requests_misrouted++ == 0) {
        h.request = std::string(in.id[request]);
      }
      h.effect += static_cast<double>(at.size());
      for (size_t p : at) groups.insert(in.group[rows[p]]);
      arrivals.insert(in.group[first]);
      const TimeNs start = in.start_ns[first];
      if (h.since_ns == 0 || start < h.since_ns) h.since_ns = start;
    }
  }
  if (h.requests_misrouted == 0) return std::nullopt;
  h.score = h.effect;
  h.first_group = *groups.begin();
  h.last_group = *groups.rbegin();
  h.steps = h.last_group - h.first_group + 1;
  h.lists_abnormal_steps = true;
  h.abnormal_groups.assign(arrivals.begin(), arrivals.end());
  return h;
}

std::optional<Hypothesis> FindPreemptedRequests(const RequestCauseInput& in) {
  const EngineOfRequests engines = EnginesOf(in);
  Hypothesis h;
  h.kind = CauseKind::kRequestPreempted;
  h.additive = true;
  // The decode steps they missed, and the steps they came back in: a preempted request's
  // KV cache was freed, so its return recomputes it (the step the schedule changed).
  std::set<int64_t> missed_groups, returns;
  for (const auto& [engine, rows] : StepsOfEngines(in, engines.of_rank)) {
    for (const auto& [request, at] : PositionsOfRequests(in, rows)) {
      int64_t missed = 0;
      // The decode steps between two of its own that ran without it.
      for (size_t k = 1; k < at.size(); ++k) {
        const int64_t missed_before = missed;
        for (size_t p = at[k - 1] + 1; p < at[k]; ++p) {
          if (!DecodesOthers(in, rows[p])) continue;
          ++missed;
          missed_groups.insert(in.group[rows[p]]);
          const TimeNs start = in.start_ns[rows[p]];
          if (h.since_ns == 0 || start < h.since_ns) h.since_ns = start;
        }
        if (missed > missed_before) returns.insert(in.group[rows[at[k]]]);
      }
      if (missed == 0) continue;
      if (h.requests_preempted++ == 0) h.request = std::string(in.id[request]);
      h.effect += static_cast<double>(missed);
    }
  }
  if (h.requests_preempted == 0) return std::nullopt;
  h.score = h.effect;
  h.first_group = *missed_groups.begin();
  h.last_group = std::max(*missed_groups.rbegin(), *returns.rbegin());
  h.steps = static_cast<int64_t>(missed_groups.size());
  h.lists_abnormal_steps = true;
  h.abnormal_groups.assign(returns.begin(), returns.end());
  return h;
}

void AbsorbBlockedRequests(std::vector<Hypothesis>* starved, Hypothesis* preempted) {
  std::erase_if(*starved, [&](const Hypothesis& h) {
    if (h.requests_served_first > 0) return false;
    if (preempted->requests_blocked++ == 0 || h.effect > preempted->blocked_wait_ns) {
      preempted->blocked_request = h.request;
      preempted->blocked_wait_ns = h.effect;
    }
    preempted->score = std::max(preempted->score, h.score);
    preempted->first_group = std::min(preempted->first_group, h.first_group);
    preempted->last_group = std::max(preempted->last_group, h.last_group);
    preempted->since_ns = std::min(preempted->since_ns, h.since_ns);
    return true;
  });
}

std::vector<Hypothesis> FindRequestCauses(const RequestCauseInput& in,
                                          const CauseOptions& options) {
  std::vector<Hypothesis> found = FindStarvedRequests(in, options.max_alternatives + 1);
  if (std::optional<Hypothesis> preempted = FindPreemptedRequests(in)) {
    AbsorbBlockedRequests(&found, &*preempted);
    found.push_back(std::move(*preempted));
  }
  if (std::optional<Hypothesis> misrouted = FindMisroutedRequests(in)) {
    found.push_back(std::move(*misrouted));
  }
  return found;
}

void AddRequestCauses(std::vector<Hypothesis> found, const CauseOptions& options,
                      CauseAnalysis* analysis) {
  if (found.empty()) return;
  std::vector<Hypothesis>& ranked = analysis->ranked;
  ranked.insert(ranked.end(), std::make_move_iterator(found.begin()),
                std::make_move_iterator(found.end()));
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  analysis->degraded = ranked[0].score >= options.min_score;
  // The second cause is what the map's first leaves: it goes with that first only.
  if (IsRequestCause(ranked[0].kind)) analysis->has_second = false;
}

namespace {

// Where two request causes differ, or "".
std::string RequestCauseDifference(const Hypothesis& a, const Hypothesis& b) {
  if (a.kind != b.kind || a.request != b.request || a.blocked_request != b.blocked_request) {
    return fmt::format("{} of request '{}' (blocked '{}') against {} of '{}' (blocked '{}')",
                       CauseKindName(a.kind), a.request, a.blocked_request, CauseKindName(b.kind),
                       b.request, b.blocked_request);
  }
  const auto as_double = [](auto value) { return static_cast<double>(value); };
  const std::pair<const char*, std::pair<double, double>> figures[] = {
      {"requests preempted", {as_double(a.requests_preempted), as_double(b.requests_preempted)}},
      {"requests blocked", {as_double(a.requests_blocked), as_double(b.requests_blocked)}},
      {"blocked wait", {as_double(a.blocked_wait_ns), as_double(b.blocked_wait_ns)}},
      {"requests misrouted", {as_double(a.requests_misrouted), as_double(b.requests_misrouted)}},
      {"never scheduled",
       {as_double(a.request_never_scheduled), as_double(b.request_never_scheduled)}},
      {"wait from queue counts",
       {as_double(a.wait_from_queue_counts), as_double(b.wait_from_queue_counts)}},
      {"requests served first",
       {as_double(a.requests_served_first), as_double(b.requests_served_first)}},
      {"steps passed over", {as_double(a.steps_passed_over), as_double(b.steps_passed_over)}},
      {"typical wait", {as_double(a.typical_wait_ns), as_double(b.typical_wait_ns)}},
      {"effect", {as_double(a.effect), as_double(b.effect)}},
      {"additive", {as_double(a.additive), as_double(b.additive)}},
      {"score", {as_double(a.score), as_double(b.score)}},
      {"since", {as_double(a.since_ns), as_double(b.since_ns)}},
      {"first group", {as_double(a.first_group), as_double(b.first_group)}},
      {"last group", {as_double(a.last_group), as_double(b.last_group)}},
      {"steps", {as_double(a.steps), as_double(b.steps)}},
      {"lists abnormal steps",
       {as_double(a.lists_abnormal_steps), as_double(b.lists_abnormal_steps)}}};
  for (const auto& [name, values] : figures) {
    if (values.first != values.second) {
      return fmt::format("{}: {} against {}", name, values.first, values.second);
    }
  }
  if (a.abnormal_groups != b.abnormal_groups) {
    return fmt::format("abnormal groups: {} against {}", a.abnormal_groups.size(),
                       b.abnormal_groups.size());
  }
  return "";
}

}  // namespace

std::string RequestCausesDifference(const std::vector<Hypothesis>& a,
                                    const std::vector<Hypothesis>& b) {
  if (a.size() != b.size()) return fmt::format("{} request causes against {}", a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string difference = RequestCauseDifference(a[i], b[i]);
    if (!difference.empty()) return fmt::format("request cause {}: {}", i, difference);
  }
  return "";
}

}  // namespace teller::cause
