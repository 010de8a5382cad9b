// Every trace in ../shared/real-traces imports and reconstructs through the same path
// the CLI uses, with its kernel count matching MANIFEST.md and nothing lost.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/kineto_importer.h"
#include "model/trace_testing.h"
#include "store/open_trace.h"
#include "store/trace_snapshot.h"

namespace teller {
namespace {

namespace fs = std::filesystem;

// file name -> kernels, from the manifest's summary table.
std::map<std::string, int64_t> ManifestKernels(const std::string& dir) {
  std::ifstream in(dir + "/MANIFEST.md");
  std::map<std::string, int64_t> kernels;
  static const std::regex kRow(R"(^\| \d+ \| ([^ |]+) \|[^|]*\|[^|]*\|[^|]*\| ([\d,]+) \|)");
  for (std::string line; std::getline(in, line);) {
    std::smatch match;
    if (!std::regex_search(line, match, kRow)) continue;
    std::string count = match[2].str();
    count.erase(std::remove(count.begin(), count.end(), ','), count.end());
    kernels[match[1].str()] = std::stoll(count);
  }
  return kernels;
}

// Device work whose correlation id has no runtime/driver call in the file (the launch
// fell outside the capture window), counted with Python's json module; all other
// device work must bind to its launch.
const std::map<std::string, int64_t> kUnboundInInput = {
    {"hta__a100-80gb_16rank_rank0.json.gz", 872},
    {"kineto__resnet50_worker0_legacy_schema.pt.trace.json.gz", 765},
};

TEST(RealTracesTest, EveryTraceImportsAndReconstructs) {
  std::string dir = base::RealTracesDir();
  if (dir.empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  std::map<std::string, int64_t> kernels = ManifestKernels(dir);
  ASSERT_EQ(kernels.size(), 12u) << "MANIFEST.md summary table changed";
  for (const auto& [name, expected_kernels] : kernels) {
    SCOPED_TRACE(name);
    store::OpenOptions options;
    auto trace = store::OpenTrace({dir + "/" + name}, options);
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    int64_t device_kernels = 0;
    for (size_t i = 0; i < trace->events.size(); ++i) {
      model::Layer layer = trace->events.layer[i];
      bool on_device = trace->threads.is_device[trace->events.thread[i].value()];
      if (on_device && (layer == model::Layer::kK || layer == model::Layer::kComm)) {
        ++device_kernels;
      }
    }
    EXPECT_EQ(device_kernels, expected_kernels);
    EXPECT_GE(trace->steps.size(), 1u);
    EXPECT_GT(trace->nodes.size(), 0u);
    auto unbound = kUnboundInInput.find(name);
    EXPECT_EQ(trace->stats.Get("reconstruct_kernels_unbound"),
              unbound == kUnboundInInput.end() ? 0 : unbound->second);
    for (const auto& [counter, entry] : trace->stats.entries()) {
      EXPECT_NE(entry.severity, model::StatSeverity::kDataLoss) << counter << " = " << entry.value;
    }
  }
}

// One Kineto file imported on `threads` threads in chunks of chunk_bytes; *rewinds
// counts the scans that went back to an element.
base::Status ImportKinetoOn(const std::string& path, int threads, size_t chunk_bytes,
                            model::Trace* trace, int* rewinds) {
  TELLER_ASSIGN_OR_RETURN(std::unique_ptr<base::ChunkReader> reader,
                          base::ChunkReader::Open(path, /*read_ahead=*/true));
  import::ImportOptions options;
  options.threads = threads;
  import::KinetoReadConfig config;
  config.chunk_bytes = chunk_bytes;
  config.rewinds = rewinds;
  return import::ImportKinetoFromReader(reader.get(), path, options, config, trace);
}

// traceEvents parsed in parts on several threads (issue 44) gives the trace one thread
// makes: every table, string and counter, and the same snapshot bytes.
TEST(RealTracesTest, KinetoParsedInPartsIsTheTraceOfOneThread) {
  std::string dir = base::RealTracesDir();
  if (dir.empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  int files = 0;
  int rewinds = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string path = entry.path().string();
    if (!path.ends_with(".json.gz") && !path.ends_with(".json")) continue;
    ++files;
    for (size_t chunk_bytes : {size_t{1} << 20, size_t{1} << 16}) {
      SCOPED_TRACE(path + ", chunks of " + std::to_string(chunk_bytes));
      model::Trace one;
      ASSERT_TRUE(ImportKinetoOn(path, 1, chunk_bytes, &one, nullptr).ok());
      const std::string one_bytes = store::SerializeTraceSnapshot(one);
      for (int threads : {2, 4}) {
        SCOPED_TRACE(std::to_string(threads) + " threads");
        model::Trace parts;
        base::Status status = ImportKinetoOn(path, threads, chunk_bytes, &parts, &rewinds);
        ASSERT_TRUE(status.ok()) << status.ToString();
        EXPECT_EQ(model::testing::TraceDifference(parts, one), "");
        EXPECT_TRUE(store::SerializeTraceSnapshot(parts) == one_bytes);
      }
    }
  }
  EXPECT_EQ(files, 11);
  RecordProperty("rewinds", rewinds);
}

}  // namespace
}  // namespace teller
