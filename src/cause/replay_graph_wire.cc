#include "cause/replay_graph_wire.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "base/byte_io.h"

namespace teller::cause {
namespace {

constexpr std::string_view kGraphMagic = "TLRG";
constexpr std::string_view kGroupsMagic = "TLRW";
// The fewest bytes a step and a node take: what their counts are checked against.
constexpr size_t kMinStepBytes = 12;
constexpr size_t kMinNodeBytes = 5;
constexpr uint32_t kNone = ReplayNodes::kNone;

// Wrapping difference and sum: every pair of values survives the round trip.
int64_t Minus(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t Plus(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t Times(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
uint64_t Magnitude(int64_t value) {
  return value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
}

uint32_t CellKey(NodeCell cell) {
  return static_cast<uint32_t>(cell.channel) << 8 | static_cast<uint32_t>(cell.family);
}

// Writes a graph step by step (replay_graph_wire.h): each value as a varint, most as the
// difference from the one before.
class GraphWriter {
 public:
  explicit GraphWriter(const ReplayGraph& graph)
      : graph_(graph), out_(kGraphMagic, kReplayGraphWireVersion) {}

  std::string Take() {
    Groups();
    Threads();
    Cells();
    SizeSlots();
    TimeUnit();
    out_.Varint(graph_.steps.size());
    for (uint32_t s = 0; s < graph_.steps.size(); ++s) Step(s);
    return out_.Take();
  }

 private:
  void Groups() {
    out_.Varint(graph_.groups.size());
    int64_t previous = 0;
    for (int64_t group : graph_.groups) out_.SignedVarint(Minus(group, std::exchange(previous, group)));
    out_.Varint(graph_.processes);
  }

  // Each thread's process and whether it is a device stream, in one varint.
  void Threads() {
    out_.Varint(graph_.threads.size());
    for (size_t t = 0; t < graph_.threads.size(); ++t) {
      out_.Varint(uint64_t{graph_.threads.process[t]} << 1 | (graph_.threads.is_device[t] & 1));
    }
  }

  // The (channel, family) pairs the nodes use, in order of first sight.
  void Cells() {
    cell_index_.assign(1 << 16, kNone);
    std::vector<NodeCell> cells;
    for (const NodeCell& cell : graph_.nodes.cell) {
      uint32_t& index = cell_index_[CellKey(cell)];
      if (index != kNone) continue;
      index = static_cast<uint32_t>(cells.size());
      cells.push_back(cell);
    }
    out_.Varint(cells.size());
    for (const NodeCell& cell : cells) {
      out_.Value(static_cast<uint8_t>(cell.channel));
      out_.Value(static_cast<uint8_t>(cell.family));
    }
  }

  void SizeSlots() {
    uint32_t threads = 0;
    for (uint32_t thread : graph_.nodes.thread) threads = std::max(threads, thread + 1);
    slot_of_.assign(threads, kNone);
    thread_start_.assign(threads, 0);
  }

  // Each node's start as the difference from the last start on its thread in its step (the
  // step's start first): fn(n, difference).
  template <typename Fn>
  void StartDifferences(uint32_t s, Fn fn) {
    const auto [begin, end] = NodesOf(s);
    for (uint32_t n = begin; n < end; ++n) thread_start_[graph_.nodes.thread[n]] = graph_.steps.start_ns[s];
    for (uint32_t n = begin; n < end; ++n) {
      int64_t& previous = thread_start_[graph_.nodes.thread[n]];
      fn(n, Minus(graph_.nodes.start_ns[n], std::exchange(previous, graph_.nodes.start_ns[n])));
    }
  }

  // The nodes' times in units of the largest divisor of every start difference and duration
  // (1000 when the trace's clock counts microseconds).
  void TimeUnit() {
    uint64_t unit = 0;
    for (uint32_t s = 0; s < graph_.steps.size() && unit != 1; ++s) {
      StartDifferences(s, [&](uint32_t n, int64_t difference) {
        unit = std::gcd(unit, std::gcd(Magnitude(difference), Magnitude(graph_.nodes.dur_ns[n])));
      });
    }
    unit_ = unit == 0 || unit > static_cast<uint64_t>(INT64_MAX) ? 1 : static_cast<int64_t>(unit);
    out_.Varint(static_cast<uint64_t>(unit_));
  }

  // The step's nodes [begin, end) (none when its offsets are not ascending).
  std::pair<uint32_t, uint32_t> NodesOf(uint32_t s) const {
    const auto size = static_cast<uint32_t>(graph_.nodes.size());
    const uint32_t begin = std::min(graph_.steps.nodes_begin[s], size);
    return {begin, std::clamp(graph_.steps.nodes_begin[s + 1], begin, size)};
  }

  void Step(uint32_t s) {
    const ReplaySteps& steps = graph_.steps;
    const int64_t start = steps.start_ns[s];
    out_.SignedVarint(Minus(steps.step[s], std::exchange(previous_step_, steps.step[s])));
    out_.SignedVarint(
        Minus(steps.first_node[s], std::exchange(previous_first_node_, steps.first_node[s])));
    out_.SignedVarint(Minus(steps.group[s], std::exchange(previous_group_, steps.group[s])));
    out_.SignedVarint(Minus(steps.rank[s], std::exchange(previous_rank_, steps.rank[s])));
    out_.SignedVarint(Minus(start, std::exchange(previous_start_, start)));
    out_.SignedVarint(Minus(steps.end_ns[s], start));
    out_.SignedVarint(Minus(steps.stall_begin_ns[s], start));
    out_.SignedVarint(Minus(steps.stall_end_ns[s], steps.stall_begin_ns[s]));
    // Its count as the offsets say (a count past the nodes when they are not ascending).
    out_.Varint(static_cast<uint32_t>(steps.nodes_begin[s + 1] - steps.nodes_begin[s]));
    const auto [begin, end] = NodesOf(s);
    StepThreads(begin, end);
    StartDifferences(s, [&](uint32_t n, int64_t difference) {
      out_.SignedVarint(difference / unit_);
      out_.SignedVarint(graph_.nodes.dur_ns[n] / unit_);
      out_.Varint(slot_of_[graph_.nodes.thread[n]]);
      out_.Varint(graph_.nodes.depth[n]);
      out_.Varint(cell_index_[CellKey(graph_.nodes.cell[n])]);
    });
    Matches(begin, end);
    Launches(begin, end);
    for (uint32_t n = begin; n < end; ++n) slot_of_[graph_.nodes.thread[n]] = kNone;
  }

  // The step's threads in order of first sight; its nodes name them by their place here.
  void StepThreads(uint32_t begin, uint32_t end) {
    std::vector<uint32_t> threads;
    for (uint32_t n = begin; n < end; ++n) {
      uint32_t& slot = slot_of_[graph_.nodes.thread[n]];
      if (slot != kNone) continue;
      slot = static_cast<uint32_t>(threads.size());
      threads.push_back(graph_.nodes.thread[n]);
    }
    out_.Varint(threads.size());
    for (uint32_t thread : threads) out_.Varint(thread);
  }

  // The nodes of [begin, end) for which has(n), as their count and each one's gap after
  // the one before, each followed by value(n).
  template <typename Has, typename Value>
  void Sparse(uint32_t begin, uint32_t end, Has has, Value value) {
    uint64_t count = 0;
    for (uint32_t n = begin; n < end; ++n) count += has(n);
    out_.Varint(count);
    uint32_t next = begin;
    for (uint32_t n = begin; n < end; ++n) {
      if (!has(n)) continue;
      out_.Varint(n - next);
      out_.SignedVarint(value(n));
      next = n + 1;
    }
  }

  // Collective matches, each after the one before (in the graph).
  void Matches(uint32_t begin, uint32_t end) {
    const std::vector<int32_t>& match = graph_.nodes.match;
    Sparse(begin, end, [&](uint32_t n) { return match[n] != -1; },
           [&](uint32_t n) { return Minus(match[n], std::exchange(previous_match_, match[n])); });
  }

  // Launch calls, each as how many nodes before its kernel it lies.
  void Launches(uint32_t begin, uint32_t end) {
    const std::vector<uint32_t>& launch = graph_.nodes.launch;
    Sparse(begin, end, [&](uint32_t n) { return launch[n] != kNone; },
           [&](uint32_t n) { return Minus(n, launch[n]); });
  }

  const ReplayGraph& graph_;
  base::WireWriter out_;
  std::vector<uint32_t> cell_index_;  // by CellKey
  std::vector<uint32_t> slot_of_;     // per thread: its place in the step's threads
  std::vector<int64_t> thread_start_;  // per thread: its last node's start in the step
  int64_t unit_ = 1;                   // of the nodes' times (TimeUnit)
  int64_t previous_step_ = 0, previous_first_node_ = 0, previous_group_ = 0, previous_rank_ = 0;
  int64_t previous_start_ = 0, previous_match_ = 0;
};

// Reads what GraphWriter writes, checking every count against the bytes left and every
// index against what it indexes.
class GraphReader {
 public:
  GraphReader(std::string_view bytes, const std::string& what) : in_(bytes, what) {}

  base::StatusOr<ReplayGraph> Read() {
    TELLER_RETURN_IF_ERROR(in_.Header(kGraphMagic, kReplayGraphWireVersion));
    TELLER_RETURN_IF_ERROR(Groups());
    TELLER_RETURN_IF_ERROR(Threads());
    TELLER_RETURN_IF_ERROR(Cells());
    TELLER_RETURN_IF_ERROR(in_.VarintAtMost(&unit_, INT64_MAX, "the time unit"));
    if (unit_ == 0) return in_.Bad("the time unit is 0");
    uint64_t steps = 0;
    TELLER_RETURN_IF_ERROR(Count(kMinStepBytes, "the steps", &steps));
    for (uint64_t s = 0; s < steps; ++s) TELLER_RETURN_IF_ERROR(Step(static_cast<uint32_t>(s)));
    TELLER_RETURN_IF_ERROR(in_.End());
    const base::Status whole = CheckReplayGraph(graph_);
    if (!whole.ok()) return in_.Bad(whole.message());
    return std::move(graph_);
  }

 private:
  // A count of items of at least `item_bytes` bytes each, checked against the bytes left.
  base::Status Count(size_t item_bytes, std::string_view what, uint64_t* count) {
    return in_.VarintAtMost(count, in_.left() / item_bytes, what);
  }

  // The value as a T, an error when out of its range.
  template <typename T>
  base::Status Narrow(int64_t value, std::string_view what, T* out) {
    if constexpr (sizeof(T) < sizeof(int64_t)) {
      if (value < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          value > static_cast<int64_t>(std::numeric_limits<T>::max())) {
        return in_.Bad(fmt::format("{} {} out of range", what, value));
      }
    }
    *out = static_cast<T>(value);
    return base::OkStatus();
  }

  // A value that was sent as the difference from *previous, which it becomes.
  template <typename T>
  base::Status Delta(int64_t* previous, std::string_view what, T* value) {
    int64_t delta = 0;
    TELLER_RETURN_IF_ERROR(in_.SignedVarint(&delta, what));
    *previous = Plus(*previous, delta);
    return Narrow(*previous, what, value);
  }

  base::Status Groups() {
    uint64_t count = 0;
    TELLER_RETURN_IF_ERROR(Count(1, "the groups", &count));
    graph_.groups.resize(count);
    int64_t previous = 0;
    for (int64_t& group : graph_.groups) TELLER_RETURN_IF_ERROR(Delta(&previous, "a group", &group));
    return in_.VarintAtMost(&graph_.processes, kNone, "the process count");
  }

  base::Status Threads() {
    uint64_t count = 0;
    TELLER_RETURN_IF_ERROR(Count(1, "the threads", &count));
    for (uint64_t t = 0; t < count; ++t) {
      uint64_t packed = 0;
      TELLER_RETURN_IF_ERROR(in_.VarintAtMost(&packed, uint64_t{kNone} << 1 | 1, "a thread"));
      graph_.threads.process.push_back(static_cast<uint32_t>(packed >> 1));
      graph_.threads.is_device.push_back(static_cast<uint8_t>(packed & 1));
    }
    return base::OkStatus();
  }

  base::Status Cells() {
    uint64_t count = 0;
    TELLER_RETURN_IF_ERROR(Count(2, "the cells", &count));
    cells_.resize(count);
    for (NodeCell& cell : cells_) {
      uint8_t channel = 0, family = 0;
      TELLER_RETURN_IF_ERROR(in_.Value(&channel, "a cell's channel"));
      TELLER_RETURN_IF_ERROR(in_.Value(&family, "a cell's family"));
      cell = {static_cast<Channel>(channel), static_cast<localize::OperatorFamily>(family)};
    }
    return base::OkStatus();
  }

  // An index below `size`.
  base::Status Index(uint64_t size, std::string_view what, uint32_t* index) {
    if (size == 0) return in_.Bad(fmt::format("{} of none", what));
    return in_.VarintAtMost(index, size - 1, what);
  }

  base::Status Step(uint32_t s) {
    ReplaySteps& steps = graph_.steps;
    steps.step.emplace_back();
    steps.first_node.emplace_back();
    steps.group.emplace_back();
    steps.rank.emplace_back();
    steps.start_ns.emplace_back();
    TELLER_RETURN_IF_ERROR(Delta(&previous_step_, "a step's number", &steps.step[s]));
    TELLER_RETURN_IF_ERROR(Delta(&previous_first_node_, "a step's first node", &steps.first_node[s]));
    TELLER_RETURN_IF_ERROR(Delta(&previous_group_, "a step's group", &steps.group[s]));
    TELLER_RETURN_IF_ERROR(Delta(&previous_rank_, "a step's rank", &steps.rank[s]));
    TELLER_RETURN_IF_ERROR(Delta(&previous_start_, "a step's start", &steps.start_ns[s]));
    for (auto* column : {&steps.end_ns, &steps.stall_begin_ns, &steps.stall_end_ns}) {
      int64_t from = column == &steps.stall_end_ns ? steps.stall_begin_ns[s] : steps.start_ns[s];
      column->emplace_back();
      TELLER_RETURN_IF_ERROR(Delta(&from, "a step's end or stall", &column->back()));
    }
    return StepNodes(s);
  }

  base::Status StepNodes(uint32_t s) {
    uint64_t count = 0;
    TELLER_RETURN_IF_ERROR(Count(kMinNodeBytes, "a step's nodes", &count));
    const auto begin = static_cast<uint32_t>(graph_.nodes.size());
    if (count >= kNone - begin) return in_.Bad(fmt::format("step {}: {} nodes more", s, count));
    TELLER_RETURN_IF_ERROR(StepThreads());
    thread_start_.assign(step_threads_.size(), graph_.steps.start_ns[s]);
    for (uint64_t i = 0; i < count; ++i) TELLER_RETURN_IF_ERROR(Node());
    graph_.nodes.match.resize(graph_.nodes.size(), -1);
    graph_.nodes.launch.resize(graph_.nodes.size(), kNone);
    graph_.nodes.step.resize(graph_.nodes.size(), s);
    graph_.steps.nodes_begin.push_back(static_cast<uint32_t>(graph_.nodes.size()));
    TELLER_RETURN_IF_ERROR(Matches(begin));
    return Launches(begin);
  }

  base::Status StepThreads() {
    uint64_t count = 0;
    TELLER_RETURN_IF_ERROR(Count(1, "a step's threads", &count));
    step_threads_.resize(count);
    for (uint32_t& thread : step_threads_) {
      TELLER_RETURN_IF_ERROR(in_.VarintAtMost(&thread, kNone, "a step's thread"));
    }
    return base::OkStatus();
  }

  base::Status Node() {
    ReplayNodes& nodes = graph_.nodes;
    int64_t start = 0, dur = 0;
    uint32_t slot = 0, cell = 0;
    uint16_t depth = 0;
    TELLER_RETURN_IF_ERROR(in_.SignedVarint(&start, "a node's start"));
    TELLER_RETURN_IF_ERROR(in_.SignedVarint(&dur, "a node's duration"));
    TELLER_RETURN_IF_ERROR(Index(step_threads_.size(), "a node's thread", &slot));
    thread_start_[slot] = start = Plus(thread_start_[slot], Times(start, static_cast<int64_t>(unit_)));
    dur = Times(dur, static_cast<int64_t>(unit_));
    TELLER_RETURN_IF_ERROR(in_.VarintAtMost(&depth, UINT16_MAX, "a node's depth"));
    TELLER_RETURN_IF_ERROR(Index(cells_.size(), "a node's cell", &cell));
    nodes.start_ns.push_back(start);
    nodes.dur_ns.push_back(dur);
    nodes.thread.push_back(step_threads_[slot]);
    nodes.depth.push_back(depth);
    nodes.cell.push_back(cells_[cell]);
    return base::OkStatus();
  }

  // The sparse entries of the nodes from `begin` (GraphWriter::Sparse): set(n, value) each.
  template <typename Set>
  base::Status Sparse(uint32_t begin, std::string_view what, Set set) {
    const auto end = static_cast<uint32_t>(graph_.nodes.size());
    uint64_t count = 0;
    TELLER_RETURN_IF_ERROR(in_.VarintAtMost(&count, end - begin, what));
    uint32_t next = begin;
    for (uint64_t i = 0; i < count; ++i) {
      uint32_t gap = 0;
      int64_t value = 0;
      TELLER_RETURN_IF_ERROR(Index(end - next, what, &gap));
      TELLER_RETURN_IF_ERROR(in_.SignedVarint(&value, what));
      TELLER_RETURN_IF_ERROR(set(next + gap, value));
      next += gap + 1;
    }
    return base::OkStatus();
  }

  base::Status Matches(uint32_t begin) {
    return Sparse(begin, "a node's match", [&](uint32_t n, int64_t delta) {
      previous_match_ = Plus(previous_match_, delta);
      return Narrow(previous_match_, "a node's match", &graph_.nodes.match[n]);
    });
  }

  base::Status Launches(uint32_t begin) {
    return Sparse(begin, "a node's launch", [&](uint32_t n, int64_t back) {
      const int64_t launch = Minus(n, back);
      if (launch < 0 || launch >= kNone) {
        return in_.Bad(fmt::format("node {} launched by node {}", n, launch));
      }
      graph_.nodes.launch[n] = static_cast<uint32_t>(launch);
      return base::OkStatus();
    });
  }

  base::WireReader in_;
  ReplayGraph graph_;
  std::vector<NodeCell> cells_;         // the cells the nodes index
  std::vector<uint32_t> step_threads_;  // the threads the step's nodes index
  std::vector<int64_t> thread_start_;   // per step thread: its last node's start
  uint64_t unit_ = 1;                   // of the nodes' times
  int64_t previous_step_ = 0, previous_first_node_ = 0, previous_group_ = 0, previous_rank_ = 0;
  int64_t previous_start_ = 0, previous_match_ = 0;
};

}  // namespace

std::string EncodeReplayGraph(const ReplayGraph& graph) { return GraphWriter(graph).Take(); }

base::StatusOr<ReplayGraph> DecodeReplayGraph(std::string_view bytes) {
  static const std::string kWhat = "replay graph";
  return GraphReader(bytes, kWhat).Read();
}

std::string EncodeReplayGroups(const std::vector<int64_t>& groups) {
  base::WireWriter out(kGroupsMagic, kReplayGraphWireVersion);
  out.Column(groups);
  return out.Take();
}

base::StatusOr<std::vector<int64_t>> DecodeReplayGroups(std::string_view bytes) {
  static const std::string kWhat = "replay groups";
  base::WireReader in(bytes, kWhat);
  std::vector<int64_t> groups;
  TELLER_RETURN_IF_ERROR(in.Header(kGroupsMagic, kReplayGraphWireVersion));
  TELLER_RETURN_IF_ERROR(in.Column("groups", &groups));
  TELLER_RETURN_IF_ERROR(in.End());
  if (std::adjacent_find(groups.begin(), groups.end(), std::greater_equal<int64_t>()) !=
      groups.end()) {
    return in.Bad("groups not distinct and ascending");
  }
  return groups;
}

}  // namespace teller::cause
