#include "model/trace.h"

#include <gtest/gtest.h>

namespace teller::model {
namespace {

TEST(TraceTest, EventsKeepTheirArgsContiguous) {
  Trace trace;
  ProcessIndex p = trace.processes.Append(42, trace.strings.Intern("node0"),
                                          trace.strings.Intern("python"), 0, StringId(0));
  ThreadIndex t = trace.threads.Append(p, 43, StringId(0), false, -1);
  StringId key_a = trace.strings.Intern("a"), key_b = trace.strings.Intern("b");
  EventRow e0 = trace.events.Append(Layer::kRt, EventPhase::kComplete,
                                    trace.strings.Intern("cudaLaunchKernel"), p, t, 100, 5,
                                    EventId::Invalid(), CorrelationId(7));
  trace.AddIntArg(e0, key_a, 11);
  trace.AddStringArg(e0, key_b, trace.strings.Intern("x"));
  EventRow e1 = trace.events.Append(Layer::kK, EventPhase::kComplete, trace.strings.Intern("k"), p,
                                    t, 110, 50);
  trace.AddIntArg(e1, key_a, 22);
  int64_t value = 0;
  ASSERT_TRUE(trace.FindIntArg(e0, key_a, &value));
  EXPECT_EQ(value, 11);
  ASSERT_TRUE(trace.FindIntArg(e1, key_a, &value));
  EXPECT_EQ(value, 22);
  StringId text;
  ASSERT_TRUE(trace.FindStringArg(e0, key_b, &text));
  EXPECT_EQ(trace.str(text), "x");
  EXPECT_FALSE(trace.FindStringArg(e1, key_b, &text));
  EXPECT_EQ(trace.events.end_ns(e1), 160);
}

// A field's key is found only when some event has the field: an interned name no event
// uses (an importer's key table) is not one.
TEST(TraceTest, FindArgKeyNamesOnlyFieldsSomeEventHas) {
  Trace trace;
  ProcessIndex p = trace.processes.Append(1, StringId(0), StringId(0), 0, StringId(0));
  ThreadIndex t = trace.threads.Append(p, 2, StringId(0), false, -1);
  const StringId result = trace.strings.Intern("result");
  trace.strings.Intern("stream");
  EventRow call = trace.events.Append(Layer::kRt, EventPhase::kComplete,
                                      trace.strings.Intern("cudaLaunchKernel"), p, t, 0, 5);
  EXPECT_FALSE(trace.FindArgKey("result").valid());
  trace.AddIntArg(call, result, 700);
  EXPECT_EQ(trace.FindArgKey("result"), result);
  EXPECT_FALSE(trace.FindArgKey("stream").valid());
  EXPECT_FALSE(trace.FindArgKey("never interned").valid());
}

TEST(TraceTest, LayerNamesRoundTrip) {
  for (int i = 0; i < kLayerCount; ++i) {
    auto layer = static_cast<Layer>(i);
    EXPECT_EQ(ParseLayer(LayerName(layer)), layer);
  }
  EXPECT_FALSE(ParseLayer("GPU").has_value());
}

TEST(TraceTest, StatsMergeAndKeepSeverity) {
  Stats a, b;
  a.Increment("kineto_event_missing_ts", 2);
  b.Increment("kineto_event_missing_ts", 3);
  b.Set("kernels_bound", 10);
  a.Merge(b);
  EXPECT_EQ(a.Get("kineto_event_missing_ts"), 5);
  EXPECT_EQ(a.Get("kernels_bound"), 10);
  EXPECT_EQ(a.entries().at("kernels_bound").severity, StatSeverity::kInfo);
  EXPECT_EQ(a.Get("absent"), 0);
}

}  // namespace
}  // namespace teller::model

namespace teller::model {
namespace {

TEST(TraceTest, InputFormatsMergeButLogsNeverMakeAMix) {
  TraceMeta meta;
  meta.AddInputFormat(TraceFormat::kLogs);
  EXPECT_EQ(meta.format, TraceFormat::kLogs);
  meta.AddInputFormat(TraceFormat::kKineto);
  EXPECT_EQ(meta.format, TraceFormat::kKineto);
  meta.AddInputFormat(TraceFormat::kLogs);
  meta.AddInputFormat(TraceFormat::kKineto);
  EXPECT_EQ(meta.format, TraceFormat::kKineto);
  meta.AddInputFormat(TraceFormat::kNsys);
  EXPECT_EQ(meta.format, TraceFormat::kMixed);
}

}  // namespace
}  // namespace teller::model
