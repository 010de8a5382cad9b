// libteller_cupti_injection.so: the CUDA injection `teller record` points
// CUDA_INJECTION64_PATH at. The CUDA driver calls InitializeInjection at cuInit; we
// claim CUPTI (cuptiSubscribe), enable the activity kinds teller uses and hand every
// completed buffer through RecordDecoder to the process's capture::Session. Buffers
// come from a pool with a memory cap (TELLER_CUPTI_MEMORY_MB, default 256); past it
// CUPTI drops records and we note how many. Clock pairs (cuptiGetTimestamp next to
// the host clocks) go to the process folder for meta.json.
//
// If another tool holds CUPTI (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: Nsight
// Systems, a profiler in the program), we say so once and leave CUPTI alone; NVTX,
// the Python hooks and the logs keep going, and the bundle says why.
#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "capture/capture_api.h"
#include "capture/cupti/record_decoder.h"
#include "capture/process_status.h"
#include "capture/session.h"

namespace teller::capture {
namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kBufferAlign = 8;

Session* g_session = nullptr;
std::atomic<size_t> g_outstanding_bytes{0};
size_t g_memory_cap_bytes = 256u << 20;
std::atomic<uint64_t> g_refused_buffers{0};
CUpti_SubscriberHandle g_subscriber = nullptr;

// Callback names, cached per (domain, cbid); CUPTI owns the strings.
const char* ApiName(bool driver, uint32_t cbid) {
  static std::mutex mutex;
  static std::vector<const char*> names[2];
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<const char*>& table = names[driver ? 1 : 0];
  if (cbid < table.size() && table[cbid]) return table[cbid];
  const char* name = nullptr;
  if (cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid,
                           &name) != CUPTI_SUCCESS) {
    return nullptr;
  }
  if (cbid < 65536) {
    if (table.size() <= cbid) table.resize(cbid + 1, nullptr);
    table[cbid] = name;
  }
  return name;
}

// Appends decoded records to the session's writer (writer mutex held by the caller).
class WriterSink : public wire::RecordVisitor {
 public:
  WriterSink(Session* session, wire::ProcessWriter* writer) : session_(session), writer_(writer) {}
  void OnApiCall(const wire::ApiCallRecord& r) override { Check(writer_->Append(r)); }
  void OnKernel(const wire::KernelRecord& r) override { Check(writer_->Append(r)); }
  void OnMemcpy(const wire::MemcpyRecord& r) override { Check(writer_->Append(r)); }
  void OnMemset(const wire::MemsetRecord& r) override { Check(writer_->Append(r)); }
  void OnSync(const wire::SyncRecord& r) override { Check(writer_->Append(r)); }
  void OnExternalCorrelation(const wire::ExternalCorrelationRecord& r) override {
    Check(writer_->Append(r));
  }

 private:
  void Check(const base::Status& status) { session_->CheckWrite(status); }
  Session* session_;
  wire::ProcessWriter* writer_;
};

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;
  if (g_outstanding_bytes.fetch_add(kBufferBytes) + kBufferBytes > g_memory_cap_bytes) {
    g_outstanding_bytes.fetch_sub(kBufferBytes);
    ++g_refused_buffers;  // CUPTI drops records until a buffer comes back
    *buffer = nullptr;
    *size = 0;
    return;
  }
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  if (!*buffer) g_outstanding_bytes.fetch_sub(kBufferBytes);
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                              size_t valid_size) {
  if (g_session && valid_size > 0) {
    static RecordDecoder decoder(ApiName);  // used under the writer mutex only
    Session::WriterLock lock(g_session);
    if (wire::ProcessWriter* writer = lock.writer()) {
      WriterSink sink(g_session, writer);
      CUpti_Activity* record = nullptr;
      while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
        decoder.Decode(*record, &sink);
      }
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS &&
      dropped > 0 && g_session) {
    g_session->AppendSideFile(kNotesFileName, "cupti_activity: " + std::to_string(dropped) +
                                                  " records dropped (buffer memory cap reached)");
  }
  std::free(buffer);
  if (buffer) g_outstanding_bytes.fetch_sub(kBufferBytes);
}

void SampleClocks(Session* session) {
  uint64_t gpu_ns = 0;
  wire::ClockPair before = wire::SampleHostClocks();
  if (cuptiGetTimestamp(&gpu_ns) != CUPTI_SUCCESS) return;
  wire::ClockPair after = wire::SampleHostClocks();
  // The midpoint of the host readings around the GPU reading.
  std::string line =
      std::to_string(before.realtime_ns + (after.realtime_ns - before.realtime_ns) / 2) + " " +
      std::to_string(before.monotonic_ns + (after.monotonic_ns - before.monotonic_ns) / 2) + " " +
      std::to_string(gpu_ns);
  session->AppendSideFile(kClockPairsFileName, line);
}

// Before every session flush (writer thread, every flush interval) and at shutdown.
void FlushHook(Session* session) {
  static std::atomic<int64_t> last_clock_ns{0};
  cuptiActivityFlushAll(0);
  int64_t now = MonotonicNs();
  if (now - last_clock_ns.load() >= 10'000'000'000) {
    last_clock_ns = now;
    SampleClocks(session);
  }
}

void CUPTIAPI IgnoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

std::string ResultText(CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return text ? text : "CUPTI error " + std::to_string(static_cast<int>(result));
}

// Returns "" on success, else why CUPTI capture is off.
std::string Start(Session* session) {
  if (const char* cap = std::getenv(kEnvCuptiMemoryMb); cap && *cap) {
    long mb = std::strtol(cap, nullptr, 10);
    if (mb >= 16) g_memory_cap_bytes = static_cast<size_t>(mb) << 20;
  }
  CUptiResult result = cuptiSubscribe(&g_subscriber, IgnoreCallback, nullptr);
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    return "another tool already holds CUPTI (Nsight Systems, a profiler in the program, ...); "
           "kernels and CUDA calls are not recorded";
  }
  if (result != CUPTI_SUCCESS) return "cuptiSubscribe: " + ResultText(result);
  result = cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  if (result != CUPTI_SUCCESS) return "cuptiActivityRegisterCallbacks: " + ResultText(result);
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME,
                                      CUPTI_ACTIVITY_KIND_DRIVER,
                                      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                      CUPTI_ACTIVITY_KIND_MEMCPY,
                                      CUPTI_ACTIVITY_KIND_MEMSET,
                                      CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                      CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
  for (CUpti_ActivityKind kind : kinds) {
    result = cuptiActivityEnable(kind);
    if (result != CUPTI_SUCCESS) {
      session->AppendSideFile(kNotesFileName, "cupti_activity: cannot enable kind " +
                                                  std::to_string(static_cast<int>(kind)) + ": " +
                                                  ResultText(result));
    }
  }
  SampleClocks(session);
  session->AddFlushHook(FlushHook);
  return "";
}

}  // namespace
}  // namespace teller::capture

// Called by the CUDA driver at cuInit. Never fails the host program: returns 1 always.
extern "C" TELLER_EXPORT int InitializeInjection(void) {
  using teller::capture::Session;
  static const bool started = [] {
    Session* session = Session::Get();  // logs once why it cannot trace
    if (!session) return false;
    teller::capture::g_session = session;
    std::string why = teller::capture::Start(session);
    if (!why.empty()) {
      std::fprintf(stderr, "teller: CUPTI capture disabled: %s\n", why.c_str());
      session->AppendSideFile(teller::capture::kNotesFileName, "cupti_activity: disabled: " + why);
      return false;
    }
    return true;
  }();
  (void)started;
  return 1;
}
