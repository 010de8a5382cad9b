#include <gtest/gtest.h>
#include <sqlite3.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/status_testing.h"
#include "base/testing.h"
#include "store/store_schema.h"
#include "store/trace_check.h"
#include "store/trace_store.h"

namespace teller::store {
namespace {

using namespace teller::model;  // NOLINT: test brevity
using base::StringId;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------------------
// Column-by-column comparison.

template <typename T>
void ExpectColumnEq(const std::vector<T>& a, const std::vector<T>& b, const char* name) {
  ASSERT_EQ(a.size(), b.size()) << name;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] == b[i])) {
      ADD_FAILURE() << name << " differs at row " << i;
      return;
    }
  }
}

void ExpectTracesEqual(const Trace& a, const Trace& b) {
  ASSERT_EQ(a.strings.size(), b.strings.size());
  for (uint32_t i = 0; i < a.strings.size(); ++i) {
    ASSERT_EQ(a.strings.Get(StringId(i)), b.strings.Get(StringId(i))) << "string " << i;
    ASSERT_EQ(b.strings.Find(a.strings.Get(StringId(i))), StringId(i)) << "string " << i;
  }
  EXPECT_EQ(a.meta.format, b.meta.format);
  EXPECT_EQ(a.meta.sources, b.meta.sources);
  EXPECT_EQ(a.meta.notes, b.meta.notes);
  EXPECT_EQ(a.meta.labels_json, b.meta.labels_json);
  EXPECT_EQ(a.meta.meta_json, b.meta.meta_json);
  EXPECT_EQ(a.reconstructed, b.reconstructed);

  // Every column of every column table (model/trace_columns.h), so a new column is
  // compared without touching this test.
#define TELLER_EXPECT_COLUMN(sql_name, field, Type, Kind, Target, Base) \
  ExpectColumnEq(a_table.field, b_table.field, (table_name + std::string(#field)).c_str());
#define TELLER_EXPECT_TABLE(sql_table, member, Model, row_column, row_base, COLUMNS) \
  {                                                                                  \
    const auto& a_table = a.member;                                                  \
    const auto& b_table = b.member;                                                  \
    const char* table_name = #member ".";                                            \
    COLUMNS(TELLER_EXPECT_COLUMN, TELLER_MODEL_DERIVED)                              \
  }
  TELLER_SHARED_TRACE_TABLES(TELLER_EXPECT_TABLE)
  TELLER_ROW_TRACE_TABLES(TELLER_EXPECT_TABLE)
#undef TELLER_EXPECT_TABLE
#undef TELLER_EXPECT_COLUMN
  ASSERT_EQ(a.stats.entries().size(), b.stats.entries().size());
  for (const auto& [name, entry] : a.stats.entries()) {
    auto it = b.stats.entries().find(name);
    ASSERT_NE(it, b.stats.entries().end()) << name;
    EXPECT_EQ(entry.value, it->second.value) << name;
    EXPECT_EQ(entry.severity, it->second.severity) << name;
  }
  ExpectColumnEq(a.step_requests, b.step_requests, "step_requests");
}

// ---------------------------------------------------------------------------
// Traces.

int64_t DoubleBits(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// Every table populated, with the awkward values: extremes, invalid ids, unicode,
// embedded NUL and invalid UTF-8, NaN payloads and -0.0.
Trace MakeFullTrace() {
  Trace t;
  auto s = [&](std::string_view text) { return t.strings.Intern(text); };
  t.meta.format = TraceFormat::kMixed;
  t.meta.sources = {"/data/rank0.json.gz", "quote\" back\\slash\nnew\tline", "ünï 内核 🚀",
                    std::string("\xff\xfe bad utf8 \x01", 13), ""};
  t.meta.notes = {"steps derived from ProfilerStep#N"};
  t.meta.labels_json = R"({"fault":"oom","ranks":[1]})";
  t.meta.meta_json = R"({"host":"n0","clock":{"realtime_ns":1}})";
  t.reconstructed = true;

  ProcessIndex p0 = t.processes.Append(4242, s("node0"), s("python3 -m vllm"), 0, s("a.json"));
  ProcessIndex p1 = t.processes.Append(-1, StringId::Invalid(), s("στρώμα"), -1, StringId(0));
  t.processes.node[1] = 3;
  t.processes.clock_offset_ns[1] = kMin;
  t.processes.clock_uncertainty_ns[1] = kMax;
  ThreadIndex t0 = t.threads.Append(p0, 4243, s("MainThread"), false, -1);
  ThreadIndex t1 = t.threads.Append(p0, 7, s("stream 7"), true, 0);
  ThreadIndex t2 = t.threads.Append(p1, kMin, StringId::Invalid(), false, -1);
  t.threads.process.push_back(ProcessIndex::Invalid());
  t.threads.os_tid.push_back(kMax);
  t.threads.name.push_back(s(std::string("nul\0inside", 10)));
  t.threads.is_device.push_back(1);
  t.threads.device.push_back(std::numeric_limits<int32_t>::max());

  EventRow step = t.events.Append(Layer::kStep, EventPhase::kComplete, s("decode"), p0, t0, 1000,
                                  9000, EventId(1), CorrelationId::Invalid());
  t.AddStringArg(step, s("request_ids"), s("req-7,req-8"));
  t.AddIntArg(step, s("batch"), kMin);
  t.AddDoubleArg(step, s("nan"), std::bit_cast<double>(int64_t{0x7ff8dead'beef0001}));
  t.AddDoubleArg(step, s("neg_zero"), -0.0);
  t.AddDoubleArg(step, s("inf"), -std::numeric_limits<double>::infinity());
  t.AddDoubleArg(step, s("denormal"), 4.9e-324);
  EventRow launch = t.events.Append(Layer::kRt, EventPhase::kComplete, s("cudaLaunchKernel"), p0,
                                    t0, 2000, 500, EventId(-5), CorrelationId(0));
  EventRow kernel =
      t.events.Append(Layer::kK, EventPhase::kComplete, s("gemm_fp16 内核"), p0, t1, 2600, 4000,
                      EventId::Invalid(), CorrelationId(0), kFlagGraphNode | kFlagTruncated);
  t.AddIntArg(kernel, s("grid"), kMax);
  t.AddStringArg(kernel, s("🚀"), StringId::Invalid());
  EventRow comm = t.events.Append(Layer::kComm, EventPhase::kInstant, StringId::Invalid(), p1, t2,
                                  kMin, kMax, EventId(kMin), CorrelationId(kMax - 1), 0xff);
  t.events.Append(Layer::kOther, EventPhase::kBegin, s("range"), ProcessIndex::Invalid(),
                  ThreadIndex::Invalid(), -1, 0);
  for (int i = 0; i < kLayerCount; ++i) {
    t.events.Append(static_cast<Layer>(i), EventPhase::kEnd, s(LayerName(static_cast<Layer>(i))),
                    p1, t2, -1000000000000000000, i);
  }

  t.collectives.event.push_back(comm);
  t.collectives.communicator.push_back(s("pg:0"));
  t.collectives.sequence.push_back(-1);
  t.collectives.op.push_back(s("all_reduce"));
  t.collectives.size_bytes.push_back(kMax);
  t.collectives.dtype.push_back(StringId::Invalid());
  t.collectives.group_size.push_back(8);
  t.collectives.group_rank.push_back(-1);

  t.templates.pattern.push_back(s("Allocated <*> blocks"));
  t.templates.count.push_back(3);
  t.templates.pattern.push_back(StringId::Invalid());
  t.templates.count.push_back(kMin);

  t.AppendLog(kMin, ProcessIndex::Invalid(), -1, -1, LogLevel::kUnknown, LogStream::kUnknown,
              base::StringPool::kEmpty, TemplateId::Invalid(), s("no timestamp"), s("x.log"), 1);
  size_t log = t.AppendLog(5000, p0, 4242, 0, LogLevel::kCritical, LogStream::kStderr, s("req-7"),
                           TemplateId(0), s("CUDA out of memory ⚠"), s("x.log"), kMax);
  t.logs.step[log] = StepIndex(0);
  t.logs.alignment[log] = LogAlignment::kTimeWindow;
  for (int level = 0; level < 6; ++level) {
    size_t row = t.AppendLog(level, p1, 1, 1, static_cast<LogLevel>(level),
                             static_cast<LogStream>(level % 4), StringId::Invalid(), TemplateId(1),
                             StringId(0), StringId::Invalid(), -level);
    t.logs.alignment[row] = static_cast<LogAlignment>(level % 3);
  }

  t.stats.Increment("kineto_event_missing_ts", 3);
  t.stats.Set("reconstruct_ranges_truncated", kMin, StatSeverity::kDataLoss);
  t.stats.Set("info ünï", kMax, StatSeverity::kInfo);

  t.nodes.event = {step, launch, kernel, comm};
  t.nodes.parent = {NodeIndex::Invalid(), NodeIndex(0), NodeIndex(1), NodeIndex::Invalid()};
  t.nodes.depth = {0, 1, 2, UINT16_MAX};
  t.nodes.step = {StepIndex(0), StepIndex(0), StepIndex(0), StepIndex::Invalid()};

  for (int i = 0; i < 4; ++i) {
    t.steps.event.push_back(i == 0 ? step : EventRow::Invalid());
    t.steps.process.push_back(i == 0 ? p0 : ProcessIndex::Invalid());
    t.steps.thread.push_back(i == 0 ? t0 : ThreadIndex::Invalid());
    t.steps.rank.push_back(i - 1);
    t.steps.number.push_back(i == 3 ? kMin : i);
    t.steps.name.push_back(i == 0 ? s("decode") : StringId::Invalid());
    t.steps.phase.push_back(static_cast<StepPhase>(i));
    t.steps.source.push_back(static_cast<StepSource>(i));
    t.steps.start_ns.push_back(i == 3 ? kMin : 1000);
    t.steps.end_ns.push_back(i == 3 ? kMax : 10000);
    t.steps.node_begin.push_back(i == 0 ? NodeIndex(0) : NodeIndex::Invalid());
    t.steps.node_end.push_back(i == 0 ? NodeIndex(3) : NodeIndex(4));
    t.steps.requests_begin.push_back(i == 0 ? 0 : 2);
    t.steps.requests_count.push_back(i == 0 ? 2 : 0);
    t.steps.global_step.push_back(i == 0 ? 17 : -1);
  }
  t.step_requests = {RequestIndex(0), RequestIndex(1), RequestIndex::Invalid()};
  t.requests.id = {s("req-7"), s("req-8")};
  t.requests.first_ns = {1000, kMin};
  t.requests.last_ns = {10000, kMax};
  t.requests.step_count = {1, UINT32_MAX};

  t.collective_matches.match = {CollectiveMatchId(0), CollectiveMatchId::Invalid()};
  t.collective_matches.event = {comm, EventRow::Invalid()};
  t.collective_matches.rank = {0, -1};
  return t;
}

// A random but consistent trace: every reference is invalid or inside its table.
Trace MakeRandomTrace(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  auto chance = [&](int percent) { return static_cast<int>(uniform(100)) < percent; };
  auto any_int = [&]() -> int64_t {
    static constexpr int64_t kSpecial[] = {0, -1, 1, kMin, kMax, kMin + 1, kMax - 1};
    if (chance(30)) return kSpecial[uniform(std::size(kSpecial))];
    return static_cast<int64_t>(rng()) >> uniform(64);
  };
  auto any_int32 = [&]() { return static_cast<int32_t>(any_int()); };
  Trace t;
  size_t string_count = 1 + uniform(60);
  for (size_t i = 0; i < string_count; ++i) {
    std::string text(uniform(24), '\0');
    for (char& c : text) c = static_cast<char>(chance(70) ? 'a' + uniform(26) : rng());
    t.strings.Intern(text);
  }
  auto str = [&]() {
    return chance(10) ? StringId::Invalid() : StringId(uniform(t.strings.size()));
  };
  auto ref = [&]<typename Id>(Id, size_t n) {
    return n == 0 || chance(10) ? Id::Invalid()
                                : Id(static_cast<typename Id::rep_type>(uniform(n)));
  };
  auto text = [&]() { return std::string(t.strings.Get(StringId(uniform(t.strings.size())))); };

  t.meta.format = static_cast<TraceFormat>(uniform(6));
  for (size_t i = uniform(4); i > 0; --i) t.meta.sources.push_back(text());
  for (size_t i = uniform(4); i > 0; --i) t.meta.notes.push_back(text());
  t.meta.labels_json = text();
  t.meta.meta_json = text();
  t.reconstructed = chance(50);

  for (size_t i = uniform(5); i > 0; --i) {
    t.processes.Append(any_int(), str(), str(), any_int32(), str());
    t.processes.node.back() = any_int32();
    t.processes.clock_offset_ns.back() = any_int();
    t.processes.clock_uncertainty_ns.back() = any_int();
  }
  for (size_t i = uniform(8); i > 0; --i) {
    t.threads.Append(ref(ProcessIndex(), t.processes.size()), any_int(), str(), chance(50),
                     any_int32());
  }
  size_t events = uniform(300);
  for (size_t i = 0; i < events; ++i) {
    EventRow row = t.events.Append(
        static_cast<Layer>(uniform(kLayerCount)), static_cast<EventPhase>(uniform(4)), str(),
        ref(ProcessIndex(), t.processes.size()), ref(ThreadIndex(), t.threads.size()), any_int(),
        any_int(), chance(20) ? EventId::Invalid() : EventId(any_int()),
        chance(20) ? CorrelationId::Invalid() : CorrelationId(any_int()),
        static_cast<uint8_t>(rng()));
    for (size_t a = uniform(4); a > 0; --a) {
      switch (uniform(3)) {
        case 0:
          t.AddIntArg(row, str(), any_int());
          break;
        case 1:
          t.AddStringArg(row, str(), str());
          break;
        default:
          t.AddDoubleArg(row, str(), std::bit_cast<double>(any_int()));
          break;
      }
    }
  }
  for (size_t i = uniform(10); i > 0; --i) {
    t.collectives.event.push_back(ref(EventRow(), events));
    t.collectives.communicator.push_back(str());
    t.collectives.sequence.push_back(any_int());
    t.collectives.op.push_back(str());
    t.collectives.size_bytes.push_back(any_int());
    t.collectives.dtype.push_back(str());
    t.collectives.group_size.push_back(any_int32());
    t.collectives.group_rank.push_back(any_int32());
  }
  for (size_t i = uniform(6); i > 0; --i) {
    t.templates.pattern.push_back(str());
    t.templates.count.push_back(any_int());
  }
  size_t steps = uniform(12);
  size_t nodes = uniform(200);
  for (size_t i = 0; i < nodes; ++i) {
    t.nodes.event.push_back(ref(EventRow(), events));
    t.nodes.parent.push_back(ref(NodeIndex(), nodes));
    t.nodes.depth.push_back(static_cast<uint16_t>(rng()));
    t.nodes.step.push_back(ref(StepIndex(), steps));
  }
  size_t requests = uniform(20);
  for (size_t i = 0; i < requests; ++i) {
    t.requests.id.push_back(str());
    t.requests.first_ns.push_back(any_int());
    t.requests.last_ns.push_back(any_int());
    t.requests.step_count.push_back(static_cast<uint32_t>(rng()));
  }
  for (size_t i = uniform(40); i > 0; --i) {
    t.step_requests.push_back(ref(RequestIndex(), requests));
  }
  for (size_t i = 0; i < steps; ++i) {
    t.steps.event.push_back(ref(EventRow(), events));
    t.steps.process.push_back(ref(ProcessIndex(), t.processes.size()));
    t.steps.thread.push_back(ref(ThreadIndex(), t.threads.size()));
    t.steps.rank.push_back(any_int32());
    t.steps.number.push_back(any_int());
    t.steps.name.push_back(str());
    t.steps.phase.push_back(static_cast<StepPhase>(uniform(4)));
    t.steps.source.push_back(static_cast<StepSource>(uniform(4)));
    t.steps.start_ns.push_back(any_int());
    t.steps.end_ns.push_back(any_int());
    t.steps.node_begin.push_back(ref(NodeIndex(), nodes + 1));
    t.steps.node_end.push_back(ref(NodeIndex(), nodes + 1));
    uint32_t begin = static_cast<uint32_t>(uniform(t.step_requests.size() + 1));
    t.steps.requests_begin.push_back(begin);
    t.steps.requests_count.push_back(
        static_cast<uint32_t>(uniform(t.step_requests.size() - begin + 1)));
    t.steps.global_step.push_back(any_int());
  }
  for (size_t i = uniform(30); i > 0; --i) {
    size_t row =
        t.AppendLog(any_int(), ref(ProcessIndex(), t.processes.size()), any_int(), any_int32(),
                    static_cast<LogLevel>(uniform(6)), static_cast<LogStream>(uniform(4)), str(),
                    ref(TemplateId(), t.templates.size()), str(), str(), any_int());
    t.logs.step[row] = ref(StepIndex(), steps);
    t.logs.alignment[row] = static_cast<LogAlignment>(uniform(3));
  }
  for (size_t i = uniform(6); i > 0; --i) {
    t.stats.Set(text() + std::to_string(i), any_int(), static_cast<StatSeverity>(uniform(3)));
  }
  for (size_t i = uniform(10); i > 0; --i) {
    t.collective_matches.match.push_back(chance(10) ? CollectiveMatchId::Invalid()
                                                    : CollectiveMatchId(uniform(1000)));
    t.collective_matches.event.push_back(ref(EventRow(), events));
    t.collective_matches.rank.push_back(any_int32());
  }
  return t;
}

// A small serving trace for the documented queries: one rank, two decode steps,
// STEP -> BE -> RT -> K chains, two requests, an OOM log line.
Trace MakeServingTrace() {
  Trace t;
  auto s = [&](std::string_view text) { return t.strings.Intern(text); };
  ProcessIndex p = t.processes.Append(100, s("node0"), s("vllm"), 0, s("rank0.json"));
  ThreadIndex host = t.threads.Append(p, 100, s("MainThread"), false, -1);
  ThreadIndex stream = t.threads.Append(p, 7, s("stream 7"), true, 0);
  struct Kernel {
    const char* op;
    const char* kernel;
    int64_t dur_ns;
  };
  const std::vector<std::vector<Kernel>> steps = {
      {{"aten::mm", "gemm_fp16", 300}, {"aten::softmax", "softmax_kernel", 50}},
      {{"aten::mm", "gemm_fp16", 320}},
  };
  const std::vector<std::vector<uint32_t>> step_requests = {{0, 1}, {0}};
  t.requests.id = {s("req-7"), s("req-8")};
  t.requests.first_ns = {0, 0};
  t.requests.last_ns = {2000, 1000};
  t.requests.step_count = {2, 1};
  int64_t correlation = 1;
  for (size_t i = 0; i < steps.size(); ++i) {
    int64_t start = static_cast<int64_t>(i) * 1000;
    EventRow step_event =
        t.events.Append(Layer::kStep, EventPhase::kComplete, s("decode"), p, host, start, 900);
    StepIndex step(static_cast<uint32_t>(i));
    NodeIndex root(static_cast<uint32_t>(t.nodes.size()));
    t.steps.event.push_back(step_event);
    t.steps.process.push_back(p);
    t.steps.thread.push_back(host);
    t.steps.rank.push_back(0);
    t.steps.number.push_back(static_cast<int64_t>(i));
    t.steps.name.push_back(s("decode"));
    t.steps.phase.push_back(StepPhase::kDecode);
    t.steps.source.push_back(StepSource::kEngineStep);
    t.steps.start_ns.push_back(start);
    t.steps.end_ns.push_back(start + 900);
    t.steps.node_begin.push_back(root);
    t.steps.requests_begin.push_back(static_cast<uint32_t>(t.step_requests.size()));
    t.steps.requests_count.push_back(static_cast<uint32_t>(step_requests[i].size()));
    t.steps.global_step.push_back(static_cast<int64_t>(i));
    for (uint32_t r : step_requests[i]) t.step_requests.push_back(RequestIndex(r));
    auto add_node = [&](EventRow event, NodeIndex parent, uint16_t depth) {
      NodeIndex node(static_cast<uint32_t>(t.nodes.size()));
      t.nodes.event.push_back(event);
      t.nodes.parent.push_back(parent);
      t.nodes.depth.push_back(depth);
      t.nodes.step.push_back(step);
      return node;
    };
    add_node(step_event, NodeIndex::Invalid(), 0);
    int64_t at = start + 10;
    for (const Kernel& k : steps[i]) {
      EventRow op = t.events.Append(Layer::kBe, EventPhase::kComplete, s(k.op), p, host, at, 100);
      NodeIndex op_node = add_node(op, root, 1);
      EventRow launch =
          t.events.Append(Layer::kRt, EventPhase::kComplete, s("cudaLaunchKernel"), p, host,
                          at + 10, 20, EventId::Invalid(), CorrelationId(correlation));
      NodeIndex launch_node = add_node(launch, op_node, 2);
      EventRow kernel =
          t.events.Append(Layer::kK, EventPhase::kComplete, s(k.kernel), p, stream, at + 40,
                          k.dur_ns, EventId::Invalid(), CorrelationId(correlation));
      add_node(kernel, launch_node, 3);
      ++correlation;
      at += 400;
    }
    t.steps.node_end.push_back(NodeIndex(static_cast<uint32_t>(t.nodes.size())));
  }
  t.AppendLog(500, p, 100, 0, LogLevel::kInfo, LogStream::kStdout, s("req-7"),
              TemplateId::Invalid(), s("Added request req-7"), s("vllm.log"), 1);
  size_t oom =
      t.AppendLog(1500, p, 100, 0, LogLevel::kError, LogStream::kStderr, base::StringPool::kEmpty,
                  TemplateId::Invalid(), s("CUDA out of memory"), s("vllm.log"), 2);
  t.logs.step[oom] = StepIndex(1);
  t.logs.alignment[oom] = LogAlignment::kTimeWindow;
  t.stats.Increment("kineto_event_missing_ts", 2);
  t.stats.Set("kineto_events", 9, StatSeverity::kInfo);
  t.reconstructed = true;
  return t;
}

std::string StorePath(const std::string& test, const std::string& name = "trace.teller.db") {
  return base::TempDir("store_" + test) + "/" + name;
}

// ---------------------------------------------------------------------------
// Round trips.

TEST(StoreTest, FullTraceRoundTripsEveryColumn) {
  Trace trace = MakeFullTrace();
  ASSERT_TRUE(CheckTrace(trace).ok());
  std::string path = StorePath("full");
  ASSERT_OK(SaveTrace(trace, path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto loaded = LoadTrace(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectTracesEqual(trace, *loaded);
  // The double args keep their exact bits (NaN payload, -0.0).
  EXPECT_EQ(loaded->args.int_value[2], int64_t{0x7ff8dead'beef0001});
  EXPECT_EQ(loaded->args.int_value[3], DoubleBits(-0.0));
  EXPECT_EQ(loaded->str(loaded->threads.name[3]), std::string_view("nul\0inside", 10));
}

// The CREATE TABLE text of schema_version 1, as it was written by hand before the
// column lists generated it. The store file and docs/store.md show this text, so the
// lists must keep generating it byte for byte (until the schema version changes).
constexpr char kSchemaVersion1Tables[] = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
CREATE TABLE strings(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE processes(process INTEGER PRIMARY KEY, os_pid INTEGER NOT NULL, host INTEGER,
  name INTEGER, rank INTEGER NOT NULL, node INTEGER NOT NULL, source INTEGER,
  clock_offset_ns INTEGER NOT NULL, clock_uncertainty_ns INTEGER NOT NULL);
CREATE TABLE threads(thread INTEGER PRIMARY KEY, process INTEGER, os_tid INTEGER NOT NULL,
  name INTEGER, is_device INTEGER NOT NULL, device INTEGER NOT NULL);
CREATE TABLE events(event INTEGER PRIMARY KEY, layer TEXT NOT NULL, phase TEXT NOT NULL,
  flags INTEGER NOT NULL, name INTEGER, process INTEGER, thread INTEGER,
  start_ns INTEGER NOT NULL, dur_ns INTEGER NOT NULL, id INTEGER, correlation INTEGER,
  args_begin INTEGER NOT NULL, args_count INTEGER NOT NULL);
CREATE TABLE args(arg INTEGER PRIMARY KEY, event INTEGER, key INTEGER, type TEXT NOT NULL,
  int_value INTEGER NOT NULL, string_value INTEGER, double_value REAL);
CREATE TABLE collectives(collective INTEGER PRIMARY KEY, event INTEGER, communicator INTEGER,
  sequence INTEGER NOT NULL, op INTEGER, size_bytes INTEGER NOT NULL, dtype INTEGER,
  group_size INTEGER NOT NULL, group_rank INTEGER NOT NULL);
CREATE TABLE templates(template INTEGER PRIMARY KEY, pattern INTEGER, count INTEGER NOT NULL);
CREATE TABLE logs(log INTEGER PRIMARY KEY, ts_ns INTEGER NOT NULL, process INTEGER,
  os_pid INTEGER NOT NULL, rank INTEGER NOT NULL, level TEXT NOT NULL, stream TEXT NOT NULL,
  request INTEGER, template INTEGER, text INTEGER, source INTEGER,
  line_number INTEGER NOT NULL, step INTEGER, alignment TEXT NOT NULL);
CREATE TABLE stats(name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL,
  severity TEXT NOT NULL);
CREATE TABLE nodes(node INTEGER PRIMARY KEY, event INTEGER, parent INTEGER,
  depth INTEGER NOT NULL, step INTEGER);
CREATE TABLE steps(step INTEGER PRIMARY KEY, event INTEGER, process INTEGER, thread INTEGER,
  rank INTEGER NOT NULL, number INTEGER NOT NULL, name INTEGER, phase TEXT NOT NULL,
  source TEXT NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  node_begin INTEGER, node_end INTEGER, requests_begin INTEGER NOT NULL,
  requests_count INTEGER NOT NULL, global_step INTEGER NOT NULL);
CREATE TABLE step_requests(slot INTEGER PRIMARY KEY, step INTEGER, request INTEGER);
CREATE TABLE requests(request INTEGER PRIMARY KEY, id INTEGER, first_ns INTEGER NOT NULL,
  last_ns INTEGER NOT NULL, step_count INTEGER NOT NULL);
CREATE TABLE collective_matches(collective_match INTEGER PRIMARY KEY, match_id INTEGER,
  event INTEGER, rank INTEGER NOT NULL);
)sql";

TEST(StoreTest, GeneratedCreateTablesEqualSchemaVersion1) {
  EXPECT_EQ(CreateTablesSql(), kSchemaVersion1Tables);
}

TEST(StoreTest, StoreFileHoldsTheGeneratedSchema) {
  Trace trace = MakeFullTrace();
  std::string path = StorePath("schema_text");
  ASSERT_OK(SaveTrace(trace, path));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  const char* query = "SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid";
  ASSERT_EQ(sqlite3_prepare_v2(db, query, -1, &stmt, nullptr), SQLITE_OK);
  std::string tables = "\n";
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    tables += reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    tables += ";\n";
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  EXPECT_EQ(tables, kSchemaVersion1Tables);
}

TEST(StoreTest, EmptyTraceRoundTrips) {
  Trace trace;
  std::string path = StorePath("empty");
  ASSERT_OK(SaveTrace(trace, path));
  auto loaded = LoadTrace(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectTracesEqual(trace, *loaded);
}

TEST(StoreTest, RandomTracesRoundTrip) {
  std::string dir = base::TempDir("store_random");
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Trace trace = MakeRandomTrace(seed);
    std::string path = dir + "/trace.db";
    base::Status saved = SaveTrace(trace, path);
    ASSERT_TRUE(saved.ok()) << saved.ToString();
    auto loaded = LoadTrace(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    ExpectTracesEqual(trace, *loaded);
    if (HasFatalFailure()) return;
  }
}

TEST(StoreTest, SavingAgainReplacesTheStore) {
  std::string path = StorePath("replace");
  ASSERT_OK(SaveTrace(MakeFullTrace(), path));
  Trace second = MakeServingTrace();
  ASSERT_OK(SaveTrace(second, path));
  auto loaded = LoadTrace(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectTracesEqual(second, *loaded);
}

TEST(StoreTest, JsonStringArraysRoundTripAnyBytes) {
  std::vector<std::string> values = {"", "a\"b\\c", "\n\t\r\x01\x1f", "\xc3\xa9 \xff"};
  std::string json = EncodeJsonStringArray(values);
  EXPECT_EQ(json.substr(0, 8), R"(["","a\")");
  auto decoded = DecodeJsonStringArray(json);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, values);
  auto escaped = DecodeJsonStringArray(R"([ "\u00e9\ud83d\ude80\/" ])");
  ASSERT_TRUE(escaped.ok());
  EXPECT_EQ(escaped->at(0), "\xc3\xa9\xf0\x9f\x9a\x80/");
  EXPECT_FALSE(DecodeJsonStringArray(R"(["a",])").ok());
  EXPECT_FALSE(DecodeJsonStringArray(R"(["a")").ok());
}

// ---------------------------------------------------------------------------
// Errors.

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void Sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

TEST(StoreTest, MissingFileIsNotFound) {
  std::string path = StorePath("missing", "absent.db");
  auto loaded = LoadTrace(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), base::StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find(path), std::string::npos);
}

TEST(StoreTest, GarbageIsNotAStore) {
  std::string path = StorePath("garbage", "garbage.db");
  std::string bytes(8192, '\0');
  std::mt19937 rng(7);
  for (char& c : bytes) c = static_cast<char>(rng());
  WriteBytes(path, bytes);
  auto loaded = LoadTrace(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), base::StatusCode::kDataLoss);
  EXPECT_NE(loaded.status().message().find(path), std::string::npos);
  EXPECT_NE(loaded.status().message().find("expected a teller store"), std::string::npos)
      << loaded.status().message();
}

TEST(StoreTest, EmptyFileAndOtherSqliteAreNotAStore) {
  std::string path = StorePath("other", "empty.db");
  WriteBytes(path, "");
  auto empty = LoadTrace(path);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("not a teller store"), std::string::npos)
      << empty.status().message();

  std::string other = StorePath("other2", "nsys.sqlite");
  Sql(other, "CREATE TABLE StringIds(id INTEGER, value TEXT); INSERT INTO StringIds VALUES(1,'x')");
  auto loaded = LoadTrace(other);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), base::StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find(other), std::string::npos);
  EXPECT_NE(loaded.status().message().find("not a teller store"), std::string::npos)
      << loaded.status().message();
}

// Many events, so the store spans many pages.
Trace MakeBigTrace(size_t events) {
  Trace t = MakeServingTrace();
  for (size_t i = 0; i < events; ++i) {
    t.events.Append(Layer::kK, EventPhase::kComplete, StringId(1 + i % 5), ProcessIndex(0),
                    ThreadIndex(1), static_cast<int64_t>(i) * 1000, 700, EventId::Invalid(),
                    CorrelationId(static_cast<int64_t>(i)));
  }
  return t;
}

TEST(StoreTest, TruncatedStoreIsDataLoss) {
  std::string path = StorePath("truncated");
  ASSERT_OK(SaveTrace(MakeBigTrace(50000), path));
  auto size = std::filesystem::file_size(path);
  for (uint64_t keep : {size / 2, size - 1, uint64_t{100}}) {
    SCOPED_TRACE("keep " + std::to_string(keep));
    std::string cut = StorePath("truncated_cut");
    std::filesystem::copy_file(path, cut, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(cut, keep);
    auto loaded = LoadTrace(cut);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), base::StatusCode::kDataLoss);
    EXPECT_NE(loaded.status().message().find(cut), std::string::npos) << loaded.status().message();
  }
}

TEST(StoreTest, OtherSchemaVersionIsRefused) {
  std::string path = StorePath("version");
  ASSERT_OK(SaveTrace(MakeServingTrace(), path));
  Sql(path, "UPDATE meta SET value = '999' WHERE key = 'schema_version'");
  auto loaded = LoadTrace(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), base::StatusCode::kInvalidArgument);
  const std::string& message = loaded.status().message();
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("schema_version 999"), std::string::npos) << message;
  EXPECT_NE(message.find("schema_version " + std::to_string(kSchemaVersion)), std::string::npos)
      << message;
}

TEST(StoreTest, BadRowsNameTableRowAndColumn) {
  struct Case {
    const char* sql;
    const char* expected;
  };
  const Case cases[] = {
      {"UPDATE events SET layer = 'GPU' WHERE event = 3", "table events row 3 column layer"},
      {"UPDATE events SET start_ns = 'soon' WHERE event = 2", "table events row 2 column start_ns"},
      {"UPDATE nodes SET depth = 70000 WHERE node = 1", "table nodes row 1 column depth"},
      {"DELETE FROM events WHERE event = 4", "table events row 4 column event"},
      {"UPDATE events SET name = 99999 WHERE event = 1", "events row 1 column name"},
      {"UPDATE nodes SET parent = 999 WHERE node = 2", "nodes row 2 column parent"},
      {"DELETE FROM strings WHERE id = 0", "table strings row 0"},
      {"DROP VIEW nodes_v; DROP TABLE nodes", "no such table: nodes"},
      {"DELETE FROM meta WHERE key = 'format'", "no key 'format'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.sql);
    std::string path = StorePath("bad_rows");
    ASSERT_OK(SaveTrace(MakeServingTrace(), path));
    Sql(path, c.sql);
    auto loaded = LoadTrace(path);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), base::StatusCode::kDataLoss);
    EXPECT_NE(loaded.status().message().find(c.expected), std::string::npos)
        << loaded.status().message();
    EXPECT_NE(loaded.status().message().find(path), std::string::npos);
  }
}

TEST(StoreTest, InconsistentTraceIsNotSavedAndKeepsTheOldStore) {
  std::string path = StorePath("inconsistent");
  ASSERT_OK(SaveTrace(MakeServingTrace(), path));
  Trace bad = MakeServingTrace();
  bad.events.name[2] = StringId(123456);
  base::Status status = SaveTrace(bad, path);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), base::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("table events row 2 column name"), std::string::npos)
      << status.message();
  Trace ragged = MakeServingTrace();
  ragged.nodes.depth.pop_back();
  EXPECT_FALSE(SaveTrace(ragged, path).ok());
  auto loaded = LoadTrace(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectTracesEqual(MakeServingTrace(), *loaded);
}

TEST(StoreTest, FailedWriteKeepsTheOldStore) {
  std::string path = StorePath("failed_write");
  ASSERT_OK(SaveTrace(MakeServingTrace(), path));
  // A directory where the temporary file would go makes the write fail.
  std::filesystem::create_directories(path + ".tmp/blocker");
  base::Status status = SaveTrace(MakeFullTrace(), path);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path + ".tmp"), std::string::npos) << status.message();
  auto loaded = LoadTrace(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectTracesEqual(MakeServingTrace(), *loaded);

  base::Status no_dir = SaveTrace(MakeServingTrace(), StorePath("failed_write2") + "/no/such/x.db");
  EXPECT_EQ(no_dir.code(), base::StatusCode::kIoError) << no_dir.ToString();
}

// ---------------------------------------------------------------------------
// The documented queries, run with the sqlite3 C API.

using Rows = std::vector<std::vector<std::string>>;

Rows Query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  Rows rows;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
  EXPECT_EQ(rc, SQLITE_OK) << sqlite3_errmsg(db) << " in " << sql;
  while (rc == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, i));
      row.push_back(text ? text : "NULL");
    }
    rows.push_back(std::move(row));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return rows;
}

// The queries docs/store.md shows; the test checks the page still contains each verbatim.
constexpr const char* kTopKernels =
    "SELECT name, count(*) AS calls, sum(dur_ns) AS total_ns FROM kernels_v "
    "GROUP BY name ORDER BY total_ns DESC LIMIT 10;";
constexpr const char* kStepTree =
    "SELECT indented, layer, dur_ns FROM nodes_v WHERE step = 0 ORDER BY node;";
constexpr const char* kRequestSteps =
    "SELECT step, rank, number, phase FROM step_requests_v WHERE request_id = 'req-7' "
    "ORDER BY step;";
constexpr const char* kErrorLogs =
    "SELECT ts_ns, rank, step, alignment, text FROM logs_v WHERE level IN ('ERROR', 'CRITICAL') "
    "ORDER BY ts_ns;";
constexpr const char* kErrorCounters =
    "SELECT name, value FROM stats WHERE severity != 'info' ORDER BY name;";

TEST(StoreTest, DocumentedQueriesReturnTheExpectedRows) {
  std::string path = StorePath("queries");
  ASSERT_OK(SaveTrace(MakeServingTrace(), path));
  EXPECT_EQ(Query(path, kTopKernels),
            (Rows{{"gemm_fp16", "2", "620"}, {"softmax_kernel", "1", "50"}}));
  EXPECT_EQ(Query(path, kStepTree), (Rows{{"decode", "STEP", "900"},
                                          {"  aten::mm", "BE", "100"},
                                          {"    cudaLaunchKernel", "RT", "20"},
                                          {"      gemm_fp16", "K", "300"},
                                          {"  aten::softmax", "BE", "100"},
                                          {"    cudaLaunchKernel", "RT", "20"},
                                          {"      softmax_kernel", "K", "50"}}));
  EXPECT_EQ(Query(path, kRequestSteps),
            (Rows{{"0", "0", "0", "decode"}, {"1", "0", "1", "decode"}}));
  EXPECT_EQ(Query(path, kErrorLogs),
            (Rows{{"1500", "0", "1", "time_window", "CUDA out of memory"}}));
  EXPECT_EQ(Query(path, kErrorCounters), (Rows{{"kineto_event_missing_ts", "2"}}));
  EXPECT_EQ(Query(path, "SELECT key, type, value FROM args_v"), Rows{});
  EXPECT_EQ(Query(path, "SELECT value FROM meta WHERE key = 'schema_version'"),
            (Rows{{std::to_string(kSchemaVersion)}}));

  auto doc = base::ReadFile(base::SourceDir() + "/docs/store.md");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  for (const char* query : {kTopKernels, kStepTree, kRequestSteps, kErrorLogs, kErrorCounters}) {
    // The page wraps long queries; compare with whitespace collapsed.
    auto collapse = [](std::string_view text) {
      std::string out;
      for (char c : text) {
        bool space = c == ' ' || c == '\n';
        if (space && (out.empty() || out.back() == ' ')) continue;
        out += space ? ' ' : c;
      }
      return out;
    };
    EXPECT_NE(collapse(*doc).find(collapse(query)), std::string::npos)
        << "docs/store.md lacks: " << query;
  }
}

TEST(StoreTest, ArgsViewShowsTypedValues) {
  std::string path = StorePath("args_view");
  ASSERT_OK(SaveTrace(MakeFullTrace(), path));
  Rows rows = Query(path,
                    "SELECT event, key, type, value FROM args_v WHERE key IN "
                    "('request_ids', 'batch', 'neg_zero', 'grid') ORDER BY arg");
  EXPECT_EQ(rows, (Rows{{"0", "request_ids", "string", "req-7,req-8"},
                        {"0", "batch", "int", std::to_string(kMin)},
                        {"0", "neg_zero", "double", "0.0"},
                        {"2", "grid", "int", std::to_string(kMax)}}));
}

TEST(StoreTest, IndexesServeStepAndTimeLookups) {
  std::string path = StorePath("indexes");
  ASSERT_OK(SaveTrace(MakeServingTrace(), path));
  auto plan = [&](const std::string& sql) {
    std::string text;
    for (const auto& row : Query(path, "EXPLAIN QUERY PLAN " + sql)) text += row.back() + "\n";
    return text;
  };
  EXPECT_NE(plan("SELECT * FROM nodes WHERE step = 1").find("nodes_by_step"), std::string::npos);
  EXPECT_NE(plan("SELECT * FROM events WHERE start_ns BETWEEN 0 AND 10").find("events_by_start"),
            std::string::npos);
  EXPECT_NE(plan("SELECT * FROM logs WHERE step = 1").find("logs_by_step"), std::string::npos);
  EXPECT_NE(plan("SELECT * FROM requests WHERE id = 3").find("requests_by_id"), std::string::npos);
}

}  // namespace
}  // namespace teller::store
