#include "signatures/signature_catalog.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "signatures/built_in_catalog.h"

namespace teller::signatures {
namespace {

using wire::SignatureEntry;
using wire::SignatureRole;

SignatureEntry Entry(std::string id, std::vector<std::string> patterns,
                     model::FaultCategory category) {
  SignatureEntry entry;
  entry.id = std::move(id);
  entry.patterns = std::move(patterns);
  entry.category = category;
  entry.meaning = "m";
  entry.next_action = "n";
  entry.source.url = "u";
  return entry;
}

TEST(SignatureCatalogTest, StarMatchesAnyRunAndCaseIsIgnored) {
  EXPECT_TRUE(PiecesOccurInOrder("xid (pci:0000:3b:00): 79, pid=1", {"xid (", "): 79,"}));
  EXPECT_FALSE(PiecesOccurInOrder("): 79, xid (", {"xid (", "): 79,"}));
  SignatureCatalog catalog;
  wire::SignatureCatalogFile file;
  file.entries.push_back(
      Entry("xid.79", {"NVRM: Xid (*): 79,"}, model::FaultCategory::kRuntimeDriver));
  ASSERT_TRUE(catalog.Add(file, "a.json").ok());
  EXPECT_TRUE(catalog.Match("[ 12.3] nvrm: XID (PCI:0000:3b:00): 79, pid=7, GPU has fallen off"));
  EXPECT_FALSE(catalog.Match("[ 12.3] NVRM: Xid (PCI:0000:3b:00): 13, pid=7"));
  EXPECT_FALSE(catalog.Match(""));
}

TEST(SignatureCatalogTest, TheMostSpecificPatternWinsAndUserFilesOverrideById) {
  wire::SignatureCatalogFile file;
  file.entries.push_back(
      Entry("nccl.generic", {"NCCL WARN"}, model::FaultCategory::kCommunicationNetwork));
  file.entries.push_back(Entry("nccl.shm", {"NCCL WARN Error while creating shared memory segment"},
                               model::FaultCategory::kMemoryResource));
  SignatureCatalog catalog;
  ASSERT_TRUE(catalog.Add(file, "built-in").ok());
  auto match =
      catalog.Match("host:1:2 [0] NCCL WARN Error while creating shared memory segment /dev/shm");
  ASSERT_TRUE(match);
  EXPECT_EQ(match.signature->entry.id, "nccl.shm");
  EXPECT_EQ(catalog.Match("host:1:2 [0] NCCL WARN NET/IB : x").signature->entry.id, "nccl.generic");

  wire::SignatureCatalogFile user;
  user.entries.push_back(
      Entry("nccl.generic", {"NCCL WARN"}, model::FaultCategory::kRuntimeDriver));
  ASSERT_TRUE(catalog.Add(user, "mine.json").ok());
  EXPECT_EQ(catalog.size(), 2u);
  match = catalog.Match("NCCL WARN something");
  EXPECT_EQ(match.signature->entry.category, model::FaultCategory::kRuntimeDriver);
  EXPECT_EQ(match.signature->origin, "mine.json");

  wire::SignatureCatalogFile twice;
  twice.entries.push_back(Entry("dup", {"abc"}, model::FaultCategory::kCudaKernel));
  twice.entries.push_back(Entry("dup", {"def"}, model::FaultCategory::kCudaKernel));
  EXPECT_FALSE(catalog.Add(twice, "bad.json").ok());
}

// A line as the program prints it: the pattern with its variable parts filled in.
std::string LineOf(const std::string& pattern) {
  std::string line = "prefix ";
  for (char c : pattern) line += (c == '*') ? std::string("7") : std::string(1, c);
  return line + " suffix";
}

TEST(BuiltInCatalogTest, EveryFileParsesAndEveryEntryCitesItsSource) {
  auto catalog = BuiltInCatalog();
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  ASSERT_GE(BuiltInCatalogFiles().size(), 5u);
  ASSERT_GE((*catalog)->size(), 200u);
  std::set<std::string> ids;
  for (const Signature& signature : (*catalog)->signatures()) {
    const SignatureEntry& entry = signature.entry;
    EXPECT_TRUE(ids.insert(entry.id).second) << "id twice across files: " << entry.id;
    const bool cites_line = !entry.source.repo.empty() && entry.source.line > 0;
    EXPECT_TRUE(cites_line || !entry.source.url.empty()) << entry.id;
    for (const std::string& pattern : entry.patterns) {
      size_t literal = 0;
      for (char c : pattern) literal += c != '*';
      EXPECT_GE(literal, 8u) << entry.id << ": pattern too short to be specific: " << pattern;
    }
  }
}

// Each pattern, filled in, is matched by an entry of the same category: no entry is
// shadowed by a more specific one that says something else.
TEST(BuiltInCatalogTest, EachPatternFilledInIsReadAsItsOwnCategory) {
  auto catalog = BuiltInCatalog();
  ASSERT_TRUE(catalog.ok());
  std::map<std::string, std::string> shadowed;
  for (const Signature& signature : (*catalog)->signatures()) {
    for (const std::string& pattern : signature.entry.patterns) {
      SignatureMatch match = (*catalog)->Match(LineOf(pattern));
      ASSERT_TRUE(match) << signature.entry.id << ": " << pattern;
      const SignatureEntry& got = match.signature->entry;
      const bool same =
          got.category == signature.entry.category &&
          (got.role == SignatureRole::kBenign) == (signature.entry.role == SignatureRole::kBenign);
      if (!same) shadowed[signature.entry.id + " (" + pattern + ")"] = got.id;
    }
  }
  for (const auto& [entry, by] : shadowed) ADD_FAILURE() << entry << " is read as " << by;
}

}  // namespace
}  // namespace teller::signatures
