// The trace snapshot (store/trace_snapshot.h) and the cache OpenTrace keeps with it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/import_inputs.h"
#include "store/open_trace.h"
#include "store/trace_snapshot.h"

namespace teller::store {
namespace {

namespace fs = std::filesystem;

const std::string kKineto = "tests/fixtures/kineto/small_modern.json";

// Stages reported to the progress sink, in order.
struct StageLog : base::ProgressSink {
  std::vector<std::string> stages;
  void Update(std::string_view stage, uint64_t, uint64_t) override {
    if (stages.empty() || stages.back() != stage) stages.emplace_back(stage);
  }
  bool Saw(std::string_view stage) const {
    return std::find(stages.begin(), stages.end(), stage) != stages.end();
  }
};

model::Trace Opened(const std::string& input) {
  auto trace = OpenTrace({input}, OpenOptions{});
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return std::move(trace).value();
}

// A reconstructed real-shaped trace survives byte for byte: every column, string,
// note and counter.
TEST(TraceSnapshotTest, RoundTripsByteForByte) {
  const model::Trace trace = Opened(kKineto);
  ASSERT_TRUE(trace.reconstructed);
  ASSERT_GT(trace.events.size(), 0u);
  const std::string bytes = SerializeTraceSnapshot(trace);
  auto read = ParseTraceSnapshot(bytes, "t.snapshot");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->events.size(), trace.events.size());
  EXPECT_EQ(read->nodes.size(), trace.nodes.size());
  EXPECT_EQ(read->meta.sources, trace.meta.sources);
  EXPECT_EQ(read->stats.entries().size(), trace.stats.entries().size());
  EXPECT_TRUE(SerializeTraceSnapshot(*read) == bytes);
}

TEST(TraceSnapshotTest, EveryTruncationAndDamageIsRefusedWithItsOffset) {
  const std::string bytes = SerializeTraceSnapshot(Opened(kKineto));
  for (size_t length = 0; length < bytes.size(); length += 1 + length / 64) {
    auto cut = ParseTraceSnapshot(std::string_view(bytes).substr(0, length), "t.snapshot");
    ASSERT_FALSE(cut.ok()) << length;
    EXPECT_NE(cut.status().message().find("t.snapshot: "), std::string::npos);
  }
  EXPECT_FALSE(ParseTraceSnapshot(bytes + "x", "t.snapshot").ok());
  std::string other_layout = bytes;
  other_layout[8] ^= 1;
  auto refused = ParseTraceSnapshot(other_layout, "t.snapshot");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("another teller build"), std::string::npos);
  // A reference out of its table (an event's thread) is caught by the trace check.
  model::Trace damaged = Opened(kKineto);
  damaged.events.thread[0] = model::ThreadIndex(1u << 30);
  auto checked = ParseTraceSnapshot(SerializeTraceSnapshot(damaged), "t.snapshot");
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.status().message().find("thread"), std::string::npos)
      << checked.status().message();
}

// The cache: a second open reads the snapshot and gives the same trace; a changed
// file, --rebuild or a damaged snapshot import again.
TEST(TraceSnapshotTest, OpenTraceReusesItsSnapshotUntilTheInputChanges) {
  const std::string dir = base::TempDir("snapshot_cache");
  const std::string input = dir + "/trace.json";
  fs::copy_file(kKineto, input);
  StageLog first, second, changed, rebuilt, damaged;
  OpenOptions options;
  options.cache_dir = dir + "/cache";
  options.cache_min_seconds = 0;
  auto open = [&](StageLog* log) {
    options.import.progress = log;
    auto trace = OpenTrace({input}, options);
    EXPECT_TRUE(trace.ok()) << trace.status().message();
    return SerializeTraceSnapshot(*trace);
  };
  const std::string imported = open(&first);
  EXPECT_TRUE(first.Saw("snapshot write"));
  EXPECT_FALSE(first.Saw("snapshot read"));
  EXPECT_EQ(open(&second), imported);
  EXPECT_TRUE(second.Saw("snapshot read"));
  EXPECT_FALSE(second.Saw("snapshot write"));
  std::vector<fs::path> snapshots;
  for (const auto& entry : fs::directory_iterator(options.cache_dir)) snapshots.push_back(entry);
  ASSERT_EQ(snapshots.size(), 1u);

  options.rebuild = true;
  open(&rebuilt);
  EXPECT_FALSE(rebuilt.Saw("snapshot read"));
  options.rebuild = false;

  { std::ofstream(snapshots[0], std::ios::trunc) << "TLSNAP01 damaged"; }
  EXPECT_EQ(open(&damaged), imported);
  EXPECT_TRUE(damaged.Saw("snapshot write"));

  fs::last_write_time(input, fs::last_write_time(input) + std::chrono::seconds(5));
  open(&changed);
  EXPECT_FALSE(changed.Saw("snapshot read"));
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(options.cache_dir)) ++count;
  EXPECT_EQ(count, 2u);
  // Past its size bound the cache keeps only what fits: here, nothing old.
  options.cache_max_bytes = 1;
  fs::last_write_time(input, fs::last_write_time(input) + std::chrono::seconds(5));
  open(&changed);
  count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(options.cache_dir)) ++count;
  EXPECT_LE(count, 1u);
}

// Trace files imported side by side and joined in file order give the trace one
// thread makes, byte for byte, with logs between them imported in order.
TEST(TraceSnapshotTest, ParallelImportJoinsTheTraceOneThreadMakes) {
  const std::string dir = base::TempDir("parallel_import");
  std::vector<std::string> sources = {"tests/fixtures/kineto/small_modern.json",
                                      "tests/fixtures/kineto/legacy_2021.json",
                                      "tests/fixtures/logs/vllm_v0.log"};
  for (const char* real :
       {"hta__sampled_128rank_rank0.json.gz", "hta__sampled_128rank_rank1.json.gz",
        "nvfuser__h200_cross_entropy_report1.sqlite"}) {
    const std::string path = base::RealTracesDir() + "/" + real;
    if (fs::exists(path)) sources.push_back(path);
  }
  int index = 0;
  for (const std::string& source : sources) {
    // Name order mixes the formats: logs land between trace files.
    const std::string name = fs::path(source).filename().string();
    fs::copy_file(source, fmt::format("{}/{:02d}_{}", dir, (index++ * 7) % 10, name));
  }
  std::string one_thread;
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    model::Trace trace;
    import::ImportOptions options;
    options.threads = threads;
    auto imported = import::ImportInputs({dir}, options, &trace);
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    EXPECT_EQ(imported->size(), sources.size());
    const std::string bytes = SerializeTraceSnapshot(trace);
    if (threads == 1) one_thread = bytes;
    EXPECT_TRUE(bytes == one_thread) << "the joined trace differs from the one-thread import";
  }
}

}  // namespace
}  // namespace teller::store
