// Kineto / PyTorch profiler chrome-trace JSON (src/import/kineto_importer,
// kineto_json_scanner, kineto_parts). The input is imported three times from memory:
// in one chunk, and in small chunks handed out a few bytes at a time, on one thread and
// in parts on three. Besides never crashing or hanging: every element read is accounted
// for by a counter, the trace passes store::CheckTrace, the imports in one chunk and in
// small ones agree (the importer promises chunk boundaries do not change the result),
// and the import in parts gives the trace and status of the one on one thread, exactly.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/file_util.h"
#include "fuzz_util.h"
#include "import/kineto_importer.h"
#include "model/trace_testing.h"

namespace {

using namespace teller;

class MemoryReader : public base::ChunkReader {
 public:
  MemoryReader(std::string_view text, size_t step) : text_(text), step_(step) {}
  base::StatusOr<size_t> Read(std::string* out, size_t max_bytes) override {
    size_t n = std::min({max_bytes, step_, text_.size() - offset_});
    out->append(text_.data() + offset_, n);
    offset_ += n;
    return n;
  }
  uint64_t file_offset() const override { return offset_; }
  uint64_t file_size() const override { return text_.size(); }

 private:
  std::string_view text_;
  size_t step_;
  size_t offset_ = 0;
};

base::Status Import(std::string_view text, size_t step, size_t chunk_bytes, int threads,
                    model::Trace* trace) {
  MemoryReader reader(text, step);
  import::KinetoReadConfig config;
  config.chunk_bytes = chunk_bytes;
  import::ImportOptions options;
  options.threads = threads;
  return import::ImportKinetoFromReader(&reader, "fuzz.json", options, config, trace);
}

// Counters that each take one element of traceEvents: imported, or named why not
// (the list of kineto_importer_test.cc's AccountedEvents).
int64_t Accounted(const model::Stats& stats) {
  int64_t total = 0;
  for (std::string_view name :
       {"kineto_events_imported", "kineto_metadata_events", "kineto_flow_events",
        "kineto_counter_events_skipped", "kineto_async_events_skipped",
        "kineto_profiler_span_skipped", "kineto_overhead_skipped", "kineto_global_instant_skipped",
        "kineto_event_not_object", "kineto_event_malformed", "kineto_event_missing_ph",
        "kineto_event_unknown_phase", "kineto_event_missing_name", "kineto_event_missing_ts",
        "kineto_event_bad_ts", "kineto_event_bad_dur", "kineto_event_bad_pid",
        "kineto_event_missing_tid"}) {
    total += stats.Get(name);
  }
  return total;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  model::Trace whole;
  // One chunk as large as the input (the importer's 1 MB default would make every run
  // pay for a 2 MB buffer under ASan).
  base::Status whole_status = Import(text, SIZE_MAX, std::max<size_t>(size, 1), 1, &whole);
  fuzz::CheckImportedTrace(whole, whole_status);

  // Small reads and chunks, varied with the input so boundaries fall everywhere.
  size_t chunk = 1 + (size * 2654435761u) % 97;
  size_t step = 1 + (size * 40503u) % 13;
  model::Trace pieces;
  base::Status pieces_status = Import(text, step, chunk, 1, &pieces);
  fuzz::CheckImportedTrace(pieces, pieces_status);

  // In parts on three threads: what one thread makes, to the byte and the message.
  model::Trace parts;
  base::Status parts_status = Import(text, step, chunk, 3, &parts);
  FUZZ_CHECK(parts_status.ToString() == pieces_status.ToString(),
             "chunk %zu step %zu: on one thread \"%s\", in parts \"%s\"", chunk, step,
             pieces_status.ToString().c_str(), parts_status.ToString().c_str());
  const std::string difference = model::testing::TraceDifference(parts, pieces);
  FUZZ_CHECK(difference.empty(), "chunk %zu step %zu: in parts, %s", chunk, step,
             difference.c_str());

  // Every element read is accounted for by a counter, however the input was cut.
  for (const model::Trace* trace : {&whole, &pieces}) {
    if (trace == &whole ? !whole_status.ok() : !pieces_status.ok()) continue;
    FUZZ_CHECK(Accounted(trace->stats) == trace->stats.Get("kineto_events_read"),
               "%lld elements read, %lld accounted for",
               static_cast<long long>(trace->stats.Get("kineto_events_read")),
               static_cast<long long>(Accounted(trace->stats)));
  }
  // Both cut elements the same way, brackets closed by the other kind included
  // (docs/fuzzing.md: the batch path once let '[1, 2}}' swallow the next event).
  FUZZ_CHECK(whole_status.code() == pieces_status.code(),
             "chunk %zu step %zu: whole \"%s\", in pieces \"%s\"", chunk, step,
             whole_status.ToString().c_str(), pieces_status.ToString().c_str());
  if (!whole_status.ok()) return 0;
  FUZZ_CHECK(whole.events.size() == pieces.events.size(),
             "chunk %zu: %zu events whole, %zu in pieces", chunk, whole.events.size(),
             pieces.events.size());
  FUZZ_CHECK(whole.events.start_ns == pieces.events.start_ns, "chunk %zu: start times differ",
             chunk);
  FUZZ_CHECK(whole.events.dur_ns == pieces.events.dur_ns, "chunk %zu: durations differ", chunk);
  FUZZ_CHECK(whole.events.name == pieces.events.name, "chunk %zu: names differ", chunk);
  FUZZ_CHECK(whole.events.correlation == pieces.events.correlation,
             "chunk %zu: correlations differ", chunk);
  FUZZ_CHECK(whole.args.size() == pieces.args.size(), "chunk %zu: %zu args whole, %zu in pieces",
             chunk, whole.args.size(), pieces.args.size());
  for (const auto& [name, entry] : whole.stats.entries()) {
    FUZZ_CHECK(pieces.stats.Get(name) == entry.value,
               "chunk %zu: counter %s is %lld whole, %lld in pieces", chunk, name.c_str(),
               static_cast<long long>(entry.value), static_cast<long long>(pieces.stats.Get(name)));
  }
  FUZZ_CHECK(whole.stats.entries().size() == pieces.stats.entries().size(),
             "chunk %zu: %zu counters whole, %zu in pieces", chunk, whole.stats.entries().size(),
             pieces.stats.entries().size());
  return 0;
}
