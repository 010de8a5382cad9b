#include "wire/example_bundle.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/file_util.h"
#include "base/testing.h"
#include "wire/bundle_reader.h"
#include "wire/wire_test_util.h"

namespace teller::wire {
namespace {

namespace fs = std::filesystem;

std::string FixtureDir() { return base::SourceDir() + "/tests/fixtures/bundle/two_ranks"; }

// Relative paths of every file under dir, sorted.
std::vector<std::string> ListFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(fs::relative(entry.path(), dir).string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ExampleBundleTest, CommittedFixtureIsExactlyWhatTheGeneratorWrites) {
  for (const ExampleRanks ranks : {ExampleRanks::kSaid, ExampleRanks::kUnsaid}) {
    const bool said = ranks == ExampleRanks::kSaid;
    const std::string fixture =
        base::SourceDir() + "/tests/fixtures/bundle/" + (said ? "two_ranks" : "two_unranked");
    SCOPED_TRACE(fixture);
    std::string dir = base::TempDir("wire_example");
    ASSERT_TRUE(WriteExampleBundle(dir, ranks).ok());
    std::vector<std::string> files = ListFiles(dir);
    ASSERT_EQ(ListFiles(fixture), files)
        << "regenerate with: teller_wire_example " << fixture << (said ? "" : " --unranked");
    for (const std::string& file : files) {
      auto want = base::ReadFile(fixture + "/" + file);
      auto got = base::ReadFile(dir + "/" + file);
      ASSERT_TRUE(want.ok() && got.ok());
      EXPECT_TRUE(*want == *got) << file << " differs from the generator's output";
    }
  }
}

TEST(ExampleBundleTest, FixtureReadsWithoutIssues) {
  auto reader = BundleReader::Open(FixtureDir());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_EQ(reader->processes().size(), 2u);
  EXPECT_EQ(reader->processes()[0].name, "proc-node0-1001");
  EXPECT_EQ(reader->processes()[1].name, "proc-node1-2002");
  EXPECT_TRUE(reader->labels_json().has_value());
  EXPECT_EQ(reader->meta().hosts.size(), 1u);
  std::vector<ReadIssue> issues;
  for (size_t i = 0; i < reader->processes().size(); ++i) {
    testing::DescribingVisitor visitor;
    auto stats = reader->ReadProcess(i, &visitor, &issues);
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(visitor.lines.size(), 16u);
    EXPECT_GT(stats->chunks, 2u);  // small chunks on purpose
  }
  int lines = 0;
  ASSERT_TRUE(
      reader->ReadLogs([&](const LogLineRecord&, const std::string&, int64_t) { ++lines; }, &issues)
          .ok());
  EXPECT_EQ(lines, 4);
  EXPECT_TRUE(issues.empty());
}

}  // namespace
}  // namespace teller::wire
