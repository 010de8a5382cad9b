// The Kineto import in parts (ImportOptions::threads) gives the
// trace of the import on one thread, byte for byte: every table, string and counter,
// and the same error where there is one.
#include "import/kineto_parts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/kineto_importer.h"
#include "import/kineto_testing.h"
#include "model/trace_testing.h"

namespace teller::import {
namespace {

using model::Trace;

// How a reader's input ends: plainly, or with a data loss (a truncated gzip stream)
// given with the last bytes or after them.
enum class Ending { kPlain, kDataLossWithLastBytes, kDataLossAfter };

// A ChunkReader over a string that hands out at most step bytes per read.
class ChunkedStringReader : public base::ChunkReader {
 public:
  ChunkedStringReader(std::string_view text, size_t step, Ending ending = Ending::kPlain)
      : text_(text), step_(step), ending_(ending) {}
  base::StatusOr<size_t> Read(std::string* out, size_t max_bytes) override {
    size_t n = std::min({max_bytes, step_, text_.size() - offset_});
    out->append(text_.data() + offset_, n);
    offset_ += n;
    const bool last = offset_ == text_.size();
    if ((ending_ == Ending::kDataLossWithLastBytes && last) ||
        (ending_ == Ending::kDataLossAfter && last && n == 0)) {
      return base::DataLoss("memory.json.gz: gzip stream truncated");
    }
    return n;
  }
  uint64_t file_offset() const override { return offset_; }
  uint64_t file_size() const override { return text_.size(); }

 private:
  std::string_view text_;
  size_t step_;
  Ending ending_;
  size_t offset_ = 0;
};

struct Imported {
  base::Status status;
  Trace trace;
  int rewinds = 0;
};

// text imported on `threads` threads (1: the one-thread import) in chunks of `chunk`.
Imported ImportOn(std::string_view text, int threads, size_t chunk,
                  Ending ending = Ending::kPlain) {
  Imported imported;
  KinetoReadConfig config;
  config.chunk_bytes = chunk;
  config.rewinds = &imported.rewinds;
  ImportOptions options;
  options.threads = threads;
  ChunkedStringReader reader(text, chunk, ending);
  imported.status =
      ImportKinetoFromReader(&reader, "memory.json", options, config, &imported.trace);
  return imported;
}

// The import in parts on 2, 3 and 8 threads against the one on one thread; returns the
// times the scans went back to an element.
int ExpectSameAsOneThread(std::string_view text, size_t chunk, Ending ending = Ending::kPlain) {
  Imported one = ImportOn(text, 1, chunk, ending);
  EXPECT_EQ(one.rewinds, 0);
  int rewinds = 0;
  for (int threads : {2, 3, 8}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk << ", " << threads << " threads");
    Imported parts = ImportOn(text, threads, chunk, ending);
    EXPECT_EQ(parts.status.ToString(), one.status.ToString());
    EXPECT_EQ(model::testing::TraceDifference(parts.trace, one.trace), "");
    rewinds += parts.rewinds;
  }
  return rewinds;
}

std::string ReadFixtureText(const std::string& path) {
  base::StatusOr<std::string> text = base::ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

TEST(KinetoPartsTest, EveryFixtureGivesTheTraceOfOneThread) {
  const std::string fixtures = base::SourceDir() + "/tests/fixtures/";
  std::vector<std::string> files;
  for (const char* folder : {"kineto", "legacy_profiler", "fuzz/kineto_fuzzer"}) {
    for (const auto& entry : std::filesystem::directory_iterator(fixtures + folder)) {
      if (entry.path().extension() == ".json") files.push_back(entry.path().string());
    }
  }
  ASSERT_GE(files.size(), 7u);
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const std::string text = ReadFixtureText(file);
    for (size_t chunk : {1, 7, 64, 333, 4096, 1 << 20}) ExpectSameAsOneThread(text, chunk);
  }
}

TEST(KinetoPartsTest, EngineTraceGivesTheTraceOfOneThread) {
  testing::EngineTraceShape shape;
  shape.steps = 300;
  const std::string text = testing::MakeEngineTrace(shape).json;
  for (size_t chunk : {97, 1000, 4096, 65536}) {
    EXPECT_EQ(ExpectSameAsOneThread(text, chunk), 0) << "chunk " << chunk;
  }
}

// A batch ends at the last "}, {" or '}' before ']' in the buffer, found without
// reading strings: here that can be inside a name. The batch's elements then cross its
// end, and the scan goes back to that element.
TEST(KinetoPartsTest, CutsInsideStringsGoBackToTheElement) {
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < 200; ++i) {
    if (i) text += ",";
    text += R"({"ph": "X", "cat": "cpu_op", "name": "x}, {\"y\": [1]},\n]", "pid": 1, )"
            R"("tid": 1, "ts": )" +
            std::to_string(i) + R"(, "dur": 1, "args": {"External id": )" + std::to_string(i) +
            "}}";
  }
  text += R"(], "baseTimeNanoseconds": 1000})";
  int rewinds = 0;
  for (size_t chunk : {40, 97, 256, 1000, 3000}) rewinds += ExpectSameAsOneThread(text, chunk);
  EXPECT_GT(rewinds, 0);
}

// Damaged traces (cut short, bytes that open or close strings and brackets put in,
// deleted, a data loss at the end): the same trace, or the same error naming the same
// byte.
TEST(KinetoPartsTest, DamagedTracesGiveTheResultOfOneThread) {
  testing::EngineTraceShape shape;
  shape.steps = 12;
  const std::string clean = testing::MakeEngineTrace(shape).json;
  const std::string bytes = "{}[]\",:\\ x1";
  std::mt19937 random(4242);
  int rewinds = 0;
  for (int round = 0; round < 150; ++round) {
    std::string text = clean;
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = random() % text.size();
      switch (random() % 3) {
        case 0:
          text.insert(at, 1, bytes[random() % bytes.size()]);
          break;
        case 1:
          text.erase(at, 1 + random() % 3);
          break;
        default:
          text[at] = bytes[random() % bytes.size()];
          break;
      }
    }
    if (round % 5 == 0) text.resize(random() % text.size());
    SCOPED_TRACE(::testing::Message() << "round " << round);
    rewinds += ExpectSameAsOneThread(text, 32 + random() % 300, static_cast<Ending>(round % 3));
  }
  EXPECT_GT(rewinds, 0);
}

// Malformed elements found by kineto_fuzzer are malformed whether parsed within their
// batch (one thread) or alone (in parts), whatever bytes follow them in the buffer: a key
// without a value ('{"":}', reads of 5 bytes, chunks of 85) and a second colon
// ('{"":"":}', reads of 3, chunks of 24: the parser's verdict once followed the '}' after
// the element on one thread and the spaces after it in parts).
TEST(KinetoPartsTest, MalformedElementsAreMalformedInPartsAsOnOneThread) {
  struct Case {
    std::string text;
    size_t read_bytes;
    size_t chunk_bytes;
  };
  for (const Case& input : {Case{R"([{"":}})", 5, 85}, Case{R"([{"":"":}})", 3, 24}}) {
    for (int threads : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << input.text << ", " << threads << " threads");
      KinetoReadConfig config;
      config.chunk_bytes = input.chunk_bytes;
      ImportOptions options;
      options.threads = threads;
      ChunkedStringReader reader(input.text, input.read_bytes);
      Trace trace;
      ASSERT_TRUE(ImportKinetoFromReader(&reader, "memory.json", options, config, &trace).ok());
      EXPECT_EQ(trace.stats.Get("kineto_event_malformed"), 1);
      EXPECT_EQ(trace.stats.Get("kineto_event_missing_ph"), 0);
    }
  }
}

}  // namespace
}  // namespace teller::import
