#include "wire/signature_catalog_file.h"

#include <gtest/gtest.h>

#include <string>

namespace teller::wire {
namespace {

constexpr std::string_view kCatalog = R"({
  "format": "teller-signatures/1",
  "description": "two entries",
  "entries": [
    {"id": "cuda.700", "patterns": ["an illegal memory access was encountered", "cudaErrorIllegalAddress"],
     "category": "cuda_kernel", "severity": "fatal", "role": "cause", "code": "700",
     "meaning": "A kernel read or wrote an invalid address.",
     "next_action": "Rerun with compute-sanitizer.",
     "source": {"repo": "o/r", "path": "a.cc", "line": 12, "commit": "abc"}},
    {"id": "torch.hint", "patterns": ["might be asynchronously reported"], "category": "none",
     "severity": "info", "role": "benign", "meaning": "A hint printed beside a CUDA error.",
     "source": {"url": "https://example.org/doc", "note": "closed source"}}
  ]
})";

TEST(SignatureCatalogFileTest, ReadsEveryField) {
  auto catalog = ParseSignatureCatalog(kCatalog, "cat.json");
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  ASSERT_EQ(catalog->entries.size(), 2u);
  const SignatureEntry& first = catalog->entries[0];
  EXPECT_EQ(first.id, "cuda.700");
  EXPECT_EQ(first.patterns.size(), 2u);
  EXPECT_EQ(first.category, model::FaultCategory::kCudaKernel);
  EXPECT_EQ(first.severity, SignatureSeverity::kFatal);
  EXPECT_EQ(first.role, SignatureRole::kCause);
  EXPECT_EQ(first.source.line, 12);
  EXPECT_EQ(catalog->entries[1].role, SignatureRole::kBenign);
  EXPECT_EQ(catalog->entries[1].source.url, "https://example.org/doc");
}

TEST(SignatureCatalogFileTest, WriteThenReadIsTheSameCatalog) {
  auto catalog = ParseSignatureCatalog(kCatalog, "cat.json");
  ASSERT_TRUE(catalog.ok());
  const std::string written = WriteSignatureCatalogJson(*catalog);
  auto again = ParseSignatureCatalog(written, "written.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *catalog);
  EXPECT_EQ(WriteSignatureCatalogJson(*again), written);
}

TEST(SignatureCatalogFileTest, BadEntriesNameTheFileThePathAndWhatWasExpected) {
  struct Case {
    std::string from, to, message;
  };
  const Case cases[] = {
      {R"("category": "cuda_kernel")", R"("category": "gpu")", "entries[0].category: expected"},
      {R"("severity": "fatal")", R"("severity": "bad")", "entries[0].severity: expected one of"},
      {R"("role": "cause")", R"("role": 3)", "entries[0].role: expected a string"},
      {R"("line": 12)", R"("line": 0)", "entries[0].source: expected repo, path"},
      {R"("patterns": ["an illegal)", R"("patterns": ["*", "an illegal)",
       "entries[0].patterns[0]: expected literal text"},
      {R"("meaning": "A kernel)", R"("meaning": "", "x": "A kernel)", "entries[0].meaning"},
      {R"("teller-signatures/1")", R"("teller-signatures/9")", "format: expected"},
      {R"("role": "benign")", R"("role": "cause")", "category none is only for role benign"},
  };
  for (const Case& c : cases) {
    std::string text(kCatalog);
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    auto catalog = ParseSignatureCatalog(text, "user.json");
    ASSERT_FALSE(catalog.ok()) << c.to;
    EXPECT_NE(catalog.status().message().find("user.json: "), std::string::npos)
        << catalog.status().message();
    EXPECT_NE(catalog.status().message().find(c.message), std::string::npos)
        << catalog.status().message();
  }
  EXPECT_FALSE(ParseSignatureCatalog("[1, 2]", "x.json").ok());
  EXPECT_FALSE(ParseSignatureCatalog("{", "x.json").ok());
}

}  // namespace
}  // namespace teller::wire
