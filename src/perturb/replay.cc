#include "perturb/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

#include "model/classify.h"
#include "sim/rng.h"

namespace teller::perturb {
namespace {

using sim::Mechanism;

constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
constexpr uint64_t kFaultStream = 0xfa017;
constexpr uint64_t kRankStream = 0x4a4b0000;

bool HasWord(std::string_view text, std::string_view word) {
  return text.find(word) != std::string_view::npos;
}

bool IsHost(const TemplateEvent& e) {
  return e.kind == EventKind::kRange || e.kind == EventKind::kApi;
}

// A collective kernel of the template (layer COMM: NCCL, NVLS, custom all-reduce).
bool IsCollective(const TemplateEvent& e) {
  return e.kind == EventKind::kKernel && e.layer == model::Layer::kComm;
}

// Rank r's seed: rank 0 draws what a one-rank replay draws.
uint64_t RankSeed(uint64_t seed, int32_t rank) {
  return rank == 0 ? seed : sim::MixSeed(seed, kRankStream + static_cast<uint64_t>(rank));
}

// What the draws and the fault decide for one event before the replay.
struct EventPlan {
  double jitter = 1;   // log-normal, mean 1
  double factor = 1;   // the fault's slowdown of the event's own time
  int64_t extra = 0;   // time added after a waiting call's end (sync latency)
  int64_t insert = 0;  // a new allocator call of this length right after its start
  int64_t delay = 0;   // host time added right before its start (a straggler's launch)
  bool hit = false;
};

// Boundary phases, in the order they run at equal times.
enum Phase : uint8_t { kDeviceEnd = 0, kHostEnd = 1, kHostStart = 2, kDeviceStart = 3 };

// A start or end of an event, in source time. Phase orders equal times: device ends,
// host ends (inner first), host starts (outer first), device starts.
struct Boundary {
  int64_t t;
  uint8_t phase;
  int64_t order;
  int32_t event;
  bool operator<(const Boundary& o) const {
    return std::tie(t, phase, order, event) < std::tie(o.t, o.phase, o.order, o.event);
  }
};

wire::RangeLayer RangeLayerOf(model::Layer layer) {
  switch (layer) {
    case model::Layer::kBe:
      return wire::RangeLayer::kBe;
    case model::Layer::kComm:
      return wire::RangeLayer::kComm;
    case model::Layer::kOther:
      return wire::RangeLayer::kOther;
    default:
      return wire::RangeLayer::kFe;
  }
}

// Source-time boundaries of a template's events, in replay order.
std::vector<Boundary> BoundariesOf(const StepTemplate& t) {
  std::vector<Boundary> bounds;
  bounds.reserve(2 * t.events.size());
  for (size_t k = 0; k < t.events.size(); ++k) {
    const TemplateEvent& e = t.events[k];
    const int32_t i = static_cast<int32_t>(k);
    const int64_t end = e.start_ns + e.dur_ns;
    if (IsHost(e)) {
      bounds.push_back({e.start_ns, kHostStart, -e.dur_ns, i});
      bounds.push_back({end, kHostEnd, -e.start_ns, i});
    } else {
      bounds.push_back({e.start_ns, kDeviceStart, 0, i});
      if (e.dur_ns > 0) bounds.push_back({end, kDeviceEnd, 0, i});
    }
  }
  std::sort(bounds.begin(), bounds.end());
  return bounds;
}

// One rank's replay of one step. A fault whose rank is another rank's leaves it alone.
class Replayer {
 public:
  Replayer(const TraceTemplates& templates, const StepTemplate& t, const StepFault* fault,
           int32_t rank, int32_t ranks)
      : templates_(templates),
        t_(t),
        fault_(fault != nullptr && (fault->rank < 0 || fault->rank == rank) ? fault : nullptr),
        rank_(rank),
        ranks_(ranks) {}

  void Plan(uint64_t seed, int32_t step);
  void Begin(int64_t start_ns);
  void Process(const Boundary& b);
  // Device event k, placed by Process.
  int64_t StartOf(int32_t k) const { return start_[static_cast<size_t>(k)]; }
  int64_t DurationOf(int32_t k) const {
    return end_[static_cast<size_t>(k)] - start_[static_cast<size_t>(k)];
  }
  // Collective kernel k ends at end_ns (its peers' common end): it waited inside.
  void EndCollective(int32_t k, int64_t end_ns);
  void Emit(int64_t start_ns, uint64_t correlation_base, ReplayedStep* out) const;

 private:
  void PlanFault(const TemplateEvent& e, sim::Rng* rng, EventPlan* p) const;
  void PlanAllocator(sim::Rng* rng);
  void PlanStraggler();
  int64_t Map(int64_t tid, int64_t t) const;
  void HostStart(int32_t k);
  void HostEnd(int32_t k);
  void DeviceStart(int32_t k);

  struct ThreadState {
    int64_t anchor_orig = 0;
    int64_t anchor_new = 0;
    std::vector<int32_t> open;
  };
  struct StreamState {
    int64_t end_orig = 0;
    int64_t end_new = 0;
  };
  struct Inserted {
    int64_t tid;
    int64_t start;
    int64_t end;
    std::string_view name;
  };

  const TraceTemplates& templates_;
  const StepTemplate& t_;
  const StepFault* fault_;
  int32_t rank_;
  int32_t ranks_;
  std::vector<EventPlan> plan_;
  int64_t pause_ns_ = 0;
  int64_t step_start_ = 0;
  std::vector<int64_t> start_, end_;
  std::vector<uint8_t> done_;  // device events already placed
  std::map<int64_t, ThreadState> threads_;
  std::map<std::pair<int32_t, int64_t>, StreamState> streams_;
  int64_t device_end_orig_ = kNone;
  int64_t device_end_new_ = 0;
  std::vector<Inserted> inserted_;
};

void Replayer::PlanFault(const TemplateEvent& e, sim::Rng* rng, EventPlan* p) const {
  const double m = fault_->magnitude;
  // One draw per event whatever the mechanism, so the draws never depend on the fault.
  const double burst = rng->Exponential(1.0);
  const bool kernel = e.kind == EventKind::kKernel;
  const bool compute = kernel && model::ClassifyKernel(e.name) != model::Layer::kComm;
  auto slow = [&](bool acts, double factor) {
    if (!acts) return;
    p->factor = factor;
    p->hit = true;
  };
  switch (fault_->mechanism) {
    case Mechanism::kGpuThrottle:
      slow(compute, 1 + m);
      break;
    case Mechanism::kKernelSlowdown:
      slow(kernel && e.family == fault_->family, 1 + m);
      break;
    case Mechanism::kKernelContention:
      slow(compute, 1 + m * burst);
      break;
    case Mechanism::kLaunchLatency:
      slow(e.kind == EventKind::kApi && HasWord(e.name, "Launch"), 1 + m);
      break;
    case Mechanism::kMemcpyLatency:
      slow(
          e.kind == EventKind::kMemcpy || (e.kind == EventKind::kApi && HasWord(e.name, "Memcpy")),
          1 + m);
      break;
    case Mechanism::kSyncLatency:
      slow(e.kind == EventKind::kSync, 1 + m);
      if (e.kind == EventKind::kApi && HasWord(e.name, "Synchronize")) {
        p->extra = static_cast<int64_t>(m * static_cast<double>(e.dur_ns) * p->jitter);
        p->hit = true;
      }
      break;
    case Mechanism::kHostMemoryPressure:
      slow(IsHost(e) || e.kind == EventKind::kMemcpy, 1 + m);
      break;
    case Mechanism::kLinkDegradation:
      slow(IsCollective(e), 1 + m);
      break;
    default:
      break;
  }
}

// New cudaMalloc/cudaFree calls inside backend ops of the main thread (any host range
// when it has none): about magnitude x the step's length in all.
void Replayer::PlanAllocator(sim::Rng* rng) {
  std::vector<int32_t> candidates;
  for (int pass = 0; pass < 2 && candidates.empty(); ++pass) {
    for (size_t k = 0; k < t_.events.size(); ++k) {
      const TemplateEvent& e = t_.events[k];
      if (e.kind != EventKind::kRange || e.tid != t_.main_tid) continue;
      if (pass == 0 && e.layer != model::Layer::kBe) continue;
      candidates.push_back(static_cast<int32_t>(k));
    }
  }
  const double calls = static_cast<double>(std::min<size_t>(8, candidates.size()));
  const double total = fault_->magnitude * static_cast<double>(t_.duration_ns);
  if (total <= 0 || candidates.empty()) return;
  for (int32_t k : candidates) {
    const bool pick = rng->Bernoulli(calls / static_cast<double>(candidates.size()));
    const double length = total / calls * rng->Uniform(0.7, 1.3);
    if (!pick) continue;
    plan_[static_cast<size_t>(k)].insert = std::max<int64_t>(1000, static_cast<int64_t>(length));
    plan_[static_cast<size_t>(k)].hit = true;
  }
}

// The straggler's host reaches each collective late: the host time from the previous
// collective's launch (or the step start) to this one's is longer by the magnitude, as a
// delay right before the launch call. Collectives of one graph share their launch.
void Replayer::PlanStraggler() {
  std::vector<int32_t> launches;
  for (const TemplateEvent& e : t_.events) {
    if (IsCollective(e) && e.launch >= 0) launches.push_back(e.launch);
  }
  auto start = [&](int32_t k) { return t_.events[static_cast<size_t>(k)].start_ns; };
  std::sort(launches.begin(), launches.end(), [&](int32_t a, int32_t b) {
    return std::make_pair(start(a), a) < std::make_pair(start(b), b);
  });
  launches.erase(std::unique(launches.begin(), launches.end()), launches.end());
  int64_t previous = 0;
  for (int32_t k : launches) {
    EventPlan& p = plan_[static_cast<size_t>(k)];
    p.delay = std::llround(fault_->magnitude * static_cast<double>(start(k) - previous));
    p.hit = p.delay > 0;
    previous = start(k);
  }
}

void Replayer::Plan(uint64_t seed, int32_t step) {
  sim::Rng rng(sim::MixSeed(seed, static_cast<uint64_t>(step)));
  sim::Rng fault_rng(sim::MixSeed(seed ^ kFaultStream, static_cast<uint64_t>(step)));
  plan_.assign(t_.events.size(), {});
  for (size_t k = 0; k < t_.events.size(); ++k) {
    const TemplateEvent& e = t_.events[k];
    const double sigma = IsHost(e) ? templates_.host_sigma : templates_.device_sigma;
    plan_[k].jitter = std::exp(sigma * rng.Normal() - sigma * sigma / 2);
  }
  if (fault_ == nullptr) return;
  for (size_t k = 0; k < t_.events.size(); ++k) PlanFault(t_.events[k], &fault_rng, &plan_[k]);
  if (fault_->mechanism == Mechanism::kAllocatorSlowPath) PlanAllocator(&fault_rng);
  if (fault_->mechanism == Mechanism::kStragglerRank) PlanStraggler();
  if (fault_->mechanism == Mechanism::kEnginePause) {
    pause_ns_ = static_cast<int64_t>(fault_->magnitude * static_cast<double>(t_.duration_ns) *
                                     fault_rng.Uniform(0.7, 1.3));
  }
}

// The replayed time of source time t on a host thread.
int64_t Replayer::Map(int64_t tid, int64_t t) const {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return step_start_ + pause_ns_ + t;
  const ThreadState& s = it->second;
  double factor = 1;
  if (!s.open.empty()) {
    const EventPlan& p = plan_[static_cast<size_t>(s.open.back())];
    factor = p.jitter * p.factor;
  }
  return s.anchor_new +
         static_cast<int64_t>(std::llround(static_cast<double>(t - s.anchor_orig) * factor));
}

void Replayer::HostStart(int32_t k) {
  const TemplateEvent& e = t_.events[static_cast<size_t>(k)];
  const EventPlan& p = plan_[static_cast<size_t>(k)];
  const int64_t at = Map(e.tid, e.start_ns) + p.delay;
  ThreadState& s =
      threads_.try_emplace(e.tid, ThreadState{0, step_start_ + pause_ns_, {}}).first->second;
  s.anchor_orig = e.start_ns;
  s.anchor_new = at;
  start_[static_cast<size_t>(k)] = at;
  if (p.insert > 0) {
    const bool free_call = inserted_.size() % 2 == 1;
    inserted_.push_back({e.tid, at, at + p.insert, free_call ? "cudaFree" : "cudaMalloc"});
    s.anchor_new += p.insert;
  }
  if (e.dur_ns == 0) {
    end_[static_cast<size_t>(k)] = s.anchor_new;
    return;
  }
  s.open.push_back(k);
}

void Replayer::HostEnd(int32_t k) {
  const TemplateEvent& e = t_.events[static_cast<size_t>(k)];
  if (e.dur_ns == 0) return;
  const int64_t orig_end = e.start_ns + e.dur_ns;
  int64_t at = Map(e.tid, orig_end);
  const EventPlan& p = plan_[static_cast<size_t>(k)];
  if (e.waits && device_end_orig_ != kNone && device_end_orig_ >= e.start_ns) {
    at = std::max(at, device_end_new_ + (orig_end - device_end_orig_));
  }
  if (e.waits_for >= 0 && done_[static_cast<size_t>(e.waits_for)]) {
    const TemplateEvent& copy = t_.events[static_cast<size_t>(e.waits_for)];
    at = std::max(
        at, end_[static_cast<size_t>(e.waits_for)] + (orig_end - copy.start_ns - copy.dur_ns));
  }
  at += p.extra;
  ThreadState& s = threads_[e.tid];
  s.anchor_orig = orig_end;
  s.anchor_new = at;
  auto it = std::find(s.open.rbegin(), s.open.rend(), k);
  if (it != s.open.rend()) s.open.erase(std::next(it).base());
  end_[static_cast<size_t>(k)] = at;
}

void Replayer::DeviceStart(int32_t k) {
  const TemplateEvent& e = t_.events[static_cast<size_t>(k)];
  StreamState& s =
      streams_.try_emplace({e.device, e.stream}, StreamState{0, step_start_ + pause_ns_})
          .first->second;
  int64_t ready_orig = s.end_orig, ready_new = s.end_new;
  if (e.launch >= 0) {
    const int64_t launch_orig = t_.events[static_cast<size_t>(e.launch)].start_ns;
    const int64_t launch_new = start_[static_cast<size_t>(e.launch)];
    ready_orig = std::max(ready_orig, launch_orig);
    ready_new = std::max(ready_new, launch_new);
  }
  const int64_t gap = std::max<int64_t>(0, e.start_ns - ready_orig);
  const EventPlan& p = plan_[static_cast<size_t>(k)];
  const int64_t start = ready_new + gap;
  const int64_t dur = std::llround(static_cast<double>(e.dur_ns) * p.jitter * p.factor);
  start_[static_cast<size_t>(k)] = start;
  end_[static_cast<size_t>(k)] = start + dur;
  done_[static_cast<size_t>(k)] = 1;
  s.end_orig = std::max(s.end_orig, e.start_ns + e.dur_ns);
  s.end_new = start + dur;
  if (e.dur_ns == 0 && (device_end_orig_ == kNone || e.start_ns >= device_end_orig_)) {
    device_end_orig_ = e.start_ns;
    device_end_new_ = std::max(device_end_new_, start + dur);
  }
}

void Replayer::Begin(int64_t start_ns) {
  step_start_ = start_ns;
  const size_t n = t_.events.size();
  start_.assign(n, 0);
  end_.assign(n, 0);
  done_.assign(n, 0);
}

void Replayer::Process(const Boundary& b) {
  const size_t k = static_cast<size_t>(b.event);
  switch (b.phase) {
    case kDeviceEnd:
      if (device_end_orig_ == kNone || b.t >= device_end_orig_) {
        device_end_orig_ = b.t;
        device_end_new_ = std::max(device_end_new_, end_[k]);
      }
      break;
    case kHostEnd:
      HostEnd(b.event);
      break;
    case kHostStart:
      HostStart(b.event);
      break;
    default:
      DeviceStart(b.event);
      break;
  }
}

void Replayer::EndCollective(int32_t k, int64_t end_ns) {
  const TemplateEvent& e = t_.events[static_cast<size_t>(k)];
  end_[static_cast<size_t>(k)] = end_ns;
  streams_[{e.device, e.stream}].end_new = end_ns;
}

void Replayer::Emit(int64_t start_ns, uint64_t correlation_base, ReplayedStep* out) const {
  sim::RankBuffer& b = out->buffer;
  b.Clear();
  b.rank = rank_;
  out->memsets.clear();
  int64_t end = start_ns + pause_ns_;
  for (int64_t e : end_) end = std::max(end, e);
  for (const Inserted& c : inserted_) end = std::max(end, c.end);
  out->start_ns = start_ns;
  out->end_ns = end;
  wire::HostRangeRecord step;
  step.tid = t_.main_tid;
  step.start_ns = start_ns;
  step.end_ns = end;
  step.layer = wire::RangeLayer::kStep;
  step.name = "STEP";
  b.ranges.push_back(step);
  b.range_hit.push_back(pause_ns_ > 0);
  auto correlation = [&](uint64_t c) { return c == 0 ? 0 : c + correlation_base; };
  for (size_t k = 0; k < t_.events.size(); ++k) {
    const TemplateEvent& e = t_.events[k];
    const uint8_t hit = plan_[k].hit ? 1 : 0;
    const int32_t device = ranks_ > 1 ? rank_ : e.device;  // rank r runs on GPU r
    b.any_hit |= hit != 0;
    switch (e.kind) {
      case EventKind::kRange: {
        wire::HostRangeRecord r;
        r.tid = e.tid;
        r.start_ns = start_[k];
        r.end_ns = end_[k];
        r.layer = RangeLayerOf(e.layer);
        r.name = e.name;
        b.ranges.push_back(r);
        b.range_hit.push_back(hit);
        break;
      }
      case EventKind::kApi: {
        wire::ApiCallRecord a;
        a.tid = e.tid;
        a.start_ns = start_[k];
        a.end_ns = end_[k];
        a.correlation = correlation(e.correlation);
        a.api = e.driver ? wire::ApiKind::kDriver : wire::ApiKind::kRuntime;
        a.name = e.name;
        b.api_calls.push_back(a);
        b.api_hit.push_back(hit);
        break;
      }
      case EventKind::kKernel: {
        wire::KernelRecord r;
        r.start_ns = start_[k];
        r.end_ns = end_[k];
        r.device = device;
        r.stream = e.stream;
        r.correlation = correlation(e.correlation);
        r.graph_id = e.graph_node ? 1 : 0;
        r.grid = e.grid;
        r.block = e.block;
        r.name = e.name;
        b.kernels.push_back(r);
        b.kernel_hit.push_back(hit);
        b.kernel_family.push_back(e.family);
        break;
      }
      case EventKind::kMemcpy: {
        wire::MemcpyRecord r;
        r.start_ns = start_[k];
        r.end_ns = end_[k];
        r.device = device;
        r.stream = e.stream;
        r.correlation = correlation(e.correlation);
        r.copy_kind = e.copy_kind;
        r.graph_id = e.graph_node ? 1 : 0;
        b.memcpys.push_back(r);
        b.memcpy_hit.push_back(hit);
        break;
      }
      case EventKind::kMemset: {
        wire::MemsetRecord r;
        r.start_ns = start_[k];
        r.end_ns = end_[k];
        r.device = device;
        r.stream = e.stream;
        r.correlation = correlation(e.correlation);
        out->memsets.push_back(r);
        break;
      }
      case EventKind::kSync: {
        wire::SyncRecord r;
        r.start_ns = start_[k];
        r.end_ns = end_[k];
        r.type = e.sync_type;
        r.device = device;
        r.stream = e.stream;
        r.correlation = correlation(e.correlation);
        b.syncs.push_back(r);
        b.sync_hit.push_back(hit);
        break;
      }
    }
  }
  for (const Inserted& c : inserted_) {
    wire::ApiCallRecord a;
    a.tid = c.tid;
    a.start_ns = c.start;
    a.end_ns = c.end;
    a.name = c.name;
    b.api_calls.push_back(a);
    b.api_hit.push_back(1);
  }
  out->events = static_cast<int64_t>(b.EventCount() + out->memsets.size());
}

}  // namespace

bool PerturbSupports(sim::Mechanism mechanism) {
  switch (mechanism) {
    case Mechanism::kGpuThrottle:
    case Mechanism::kKernelSlowdown:
    case Mechanism::kKernelContention:
    case Mechanism::kLaunchLatency:
    case Mechanism::kMemcpyLatency:
    case Mechanism::kSyncLatency:
    case Mechanism::kHostMemoryPressure:
    case Mechanism::kAllocatorSlowPath:
    case Mechanism::kEnginePause:
    case Mechanism::kStragglerRank:
    case Mechanism::kLinkDegradation:
      return true;
    default:
      return false;
  }
}

bool NeedsSeveralRanks(sim::Mechanism mechanism) {
  return mechanism == Mechanism::kStragglerRank || mechanism == Mechanism::kLinkDegradation;
}

void ReplayRanks(const TraceTemplates& templates, const StepTemplate& t, const ReplayAt& at,
                 int32_t ranks, const StepFault* fault, std::vector<ReplayedStep>* out) {
  std::vector<Replayer> replayers;
  replayers.reserve(static_cast<size_t>(ranks));
  for (int32_t r = 0; r < ranks; ++r) {
    replayers.emplace_back(templates, t, fault, r, ranks);
    replayers.back().Plan(RankSeed(at.seed, r), at.step);
    replayers.back().Begin(at.start_ns);
  }
  for (const Boundary& b : BoundariesOf(t)) {
    for (Replayer& r : replayers) r.Process(b);
    const TemplateEvent& e = t.events[static_cast<size_t>(b.event)];
    if (ranks < 2 || b.phase != kDeviceStart || !IsCollective(e) || e.dur_ns <= 0) continue;
    // Every rank's instance ends when the last one to arrive has done its transfer.
    const Replayer* last = &replayers[0];
    for (const Replayer& r : replayers) {
      if (r.StartOf(b.event) > last->StartOf(b.event)) last = &r;
    }
    const int64_t end = last->StartOf(b.event) + last->DurationOf(b.event);
    for (Replayer& r : replayers) r.EndCollective(b.event, end);
  }
  out->resize(static_cast<size_t>(ranks));
  for (size_t r = 0; r < replayers.size(); ++r) {
    replayers[r].Emit(at.start_ns, at.correlation_base, &(*out)[r]);
  }
}

void ReplayStep(const TraceTemplates& templates, const StepTemplate& t, uint64_t seed, int32_t step,
                int64_t start_ns, uint64_t correlation_base, const StepFault* fault,
                ReplayedStep* out) {
  Replayer replayer(templates, t, fault, 0, 1);
  replayer.Plan(seed, step);
  replayer.Begin(start_ns);
  for (const Boundary& b : BoundariesOf(t)) replayer.Process(b);
  replayer.Emit(start_ns, correlation_base, out);
}

}  // namespace teller::perturb
