// RecordFaults (issue 8, item 6): strings taken from a trace or a log reach the
// Perfetto export and the diagnosis JSON (`teller diagnose --json`) escaped: a kernel
// named like a script-injection attempt and a log line with control characters and
// broken UTF-8 still give valid JSON that decodes to the same text (broken bytes as
// U+FFFD); the Perfetto export, which the HTML report may embed, holds no raw markup.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/testing.h"
#include "diagnose/diagnosis.h"
#include "explain/narrative.h"
#include "report/perfetto_export.h"
#include "report/report_test_trace.h"

namespace teller {
namespace {

constexpr std::string_view kNastyKernel = "quote\"</script><script>alert(1)</script>";
// ESC colour codes, a bell, a NUL, a tab, a CR, DEL, a valid "é" and a lone 0xFF byte.
constexpr char kNastyLogBytes[] =
    "\x1b[31mERROR\x1b[0m CUDA out of memory\x07 \0 tab\there\rcr \x7f caf\xC3\xA9 bad\xFF end";
const std::string kNastyLog(kNastyLogBytes, sizeof(kNastyLogBytes) - 1);

model::Trace NastyTrace() {
  model::Trace trace = report::MakeReportTestTrace();
  for (size_t i = 0; i < trace.events.size(); ++i) {
    if (trace.str(trace.events.name[i]) == "gemm_fp16") {
      trace.events.name[i] = trace.strings.Intern(kNastyKernel);
    }
  }
  const model::TimeNs t0 = 1700000000000000000;
  trace.AppendLog(t0 + 500000, model::ProcessIndex(0), 100, 0, model::LogLevel::kError,
                  model::LogStream::kStderr, trace.strings.Intern(""), model::TemplateId(0),
                  trace.strings.Intern(kNastyLog), trace.strings.Intern("console\"<b>.log"), 7);
  return trace;
}

void ExpectNoRawMarkup(const std::string& text) {
  EXPECT_EQ(text.find("</script>"), std::string::npos);
  EXPECT_EQ(text.find("<script>"), std::string::npos);
  for (char c : text) {
    // JSON text may hold no raw control character; pretty-printing adds only \n.
    if (c != '\n') {
      EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << int(c);
    }
  }
}

TEST(RecordFaults, PerfettoExportEscapesTraceStrings) {
  model::Trace trace = NastyTrace();
  const std::string path = base::TempDir("record_faults_perfetto") + "/trace.json";
  ASSERT_TRUE(report::ExportPerfetto(trace, path, {}).ok());
  const std::string text = *base::ReadFile(path);
  ExpectNoRawMarkup(text);
  nlohmann::json json = nlohmann::json::parse(text);  // throws (fails the test) if invalid
  int found = 0;
  for (const auto& event : json["traceEvents"]) {
    if (event["ph"] == "X" && event["name"] == kNastyKernel) ++found;
  }
  EXPECT_EQ(found, 1);  // the exact name, decoded
}

TEST(RecordFaults, DiagnosisJsonEscapesLogAndTraceStrings) {
  model::Trace trace = NastyTrace();
  auto diagnosis = diagnose::Diagnose(trace);
  ASSERT_TRUE(diagnosis.ok()) << diagnosis.status().ToString();
  ASSERT_EQ(diagnosis->logs.size(), 1u);  // the out-of-memory line is evidence
  // What `teller diagnose --json` writes.
  const std::string text = explain::DiagnosisJsonWithNarrative(trace, *diagnosis, {});
  // Valid JSON with no raw control character (markup may stay: this file is not HTML;
  // the HTML report escapes on its own, src/report/html_report_test.cc).
  for (char c : text) {
    if (c != '\n') {
      EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << int(c);
    }
  }
  nlohmann::json json = nlohmann::json::parse(text);
  ASSERT_EQ(json["log_evidence"].size(), 1u);
  const std::string decoded = json["log_evidence"][0]["text"];
  // Control characters survive as escapes; the broken byte becomes U+FFFD.
  std::string expected = kNastyLog;
  expected.replace(expected.find('\xFF'), 1, "\xEF\xBF\xBD");
  EXPECT_EQ(decoded, expected);
  EXPECT_EQ(json["log_evidence"][0]["source"], "console\"<b>.log");
}

}  // namespace
}  // namespace teller
