// Plain captures carry no request ids: their step records are engine steps, labelled by
// the step. A real-structure fixture is replayed with a throttled GPU (teller synth
// perturb) and its records read back through import, reconstruction and records.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "base/file_util.h"
#include "base/testing.h"
#include "perturb/perturb.h"
#include "sim/fault_spec.h"
#include "step_records/step_records.h"
#include "store/open_trace.h"

namespace teller {
namespace {

TEST(PlainCaptureRecords, EngineStepsAreRecordsLabelledByTheirStep) {
  auto templates =
      perturb::LoadTemplates({base::SourceDir() + "/tests/fixtures/kineto/small_modern.json"});
  ASSERT_TRUE(templates.ok()) << templates.status().ToString();
  auto faults = sim::ParseFaults("gpu_throttle:magnitude=0.3,onset=5,duration=4");
  ASSERT_TRUE(faults.ok());
  perturb::PerturbOptions options;
  options.fault = faults->front();
  options.steps = 12;
  const std::string dir = base::TempDir("plain_capture_records") + "/run.teller";
  auto summary = perturb::RunPerturb(*templates, options, dir);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  auto trace = store::OpenTrace({dir}, {});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->requests.size(), 0u);

  step_records::RecordSet set;
  step_records::RecordOptions record_options;
  record_options.bundle = "run";
  const std::unordered_set<std::string> keys{"run/"};
  record_options.keys = &keys;
  ASSERT_TRUE(step_records::AddTraceRecords(*trace, record_options, &set).ok());
  ASSERT_GE(set.records.size(), 10u);
  const std::set<int32_t> window(summary->abnormal_steps.begin(), summary->abnormal_steps.end());
  ASSERT_FALSE(window.empty());
  size_t abnormal = 0;
  for (const step_records::StepRecord& record : set.records) {
    EXPECT_EQ(record.key(), "run/");
    EXPECT_TRUE(record.has_labels);
    EXPECT_EQ(record.is_anomaly, window.count(static_cast<int32_t>(record.step)) > 0)
        << "step " << record.step;
    if (!record.is_anomaly) continue;
    ++abnormal;
    EXPECT_EQ(record.fault_type, diagnose::FaultCategory::kCudaKernel);
    EXPECT_EQ(record.mechanism, "gpu_throttle");
    EXPECT_FALSE(record.AffectedOperators(set.symbols).empty());
  }
  EXPECT_EQ(abnormal, window.size());
  EXPECT_EQ(set.matched_instances, set.label_instances);

  // Another key leaves the capture out.
  step_records::RecordSet none;
  const std::unordered_set<std::string> other{"other/"};
  record_options.keys = &other;
  ASSERT_TRUE(step_records::AddTraceRecords(*trace, record_options, &none).ok());
  EXPECT_TRUE(none.records.empty());
}

}  // namespace
}  // namespace teller
