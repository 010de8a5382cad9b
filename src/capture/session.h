// Session: the per-process state of the injected collector (one per process, shared
// by the NVTX injection, the CUPTI injection and the Python hooks, which all link the
// one core library libteller_capture.so).
//
// Hot path (NVTX push/pop/mark): a 16-byte raw event (kind, layer, name slot, domain,
// TSC stamp) goes into a lock-free single-producer ring of the calling thread; names
// are cached per thread by pointer and content and sent once per slot. The writer
// thread drains the rings (when one is 3/4 full, and on the flush timer) into the
// process's wire::ProcessWriter (one mutex) as TscRangeBatch records (raw stamps as
// tick deltas with the clock samples that convert them at read time, string ids
// cached per name slot). A
// full ring blocks its thread (waits for the writer up to 1 ms, then drains itself):
// events are never dropped while tracing. Start/end ranges, thread names, host ranges
// and CUPTI records take the writer mutex directly, so their file order is call order.
//
// Never crashes or exits the host: any failure logs one line ("teller: tracing
// disabled: ...") and the session becomes a no-op. The process folder is created at
// the first event, so a process that only forks and execs leaves nothing behind.
// After fork() the child starts its own folder at its first event.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "capture/capture_options.h"
#include "capture/tsc_clock.h"
#include "wire/bundle_writer.h"
#include "wire/records.h"

namespace teller::capture {

using DomainId = uint32_t;  // 0: the default domain

struct ThreadBuffer;
struct RawEvent;

// CLOCK_MONOTONIC in ns (the clock of every host-side record).
int64_t MonotonicNs();

// ProcessInfo's rank_source when the rank came from the process group.
inline constexpr std::string_view kProcessGroupRankSource = "torch.distributed";

class Session {
 public:
  // The process's session, created from the environment on first call; nullptr when
  // tracing is off (no TELLER_OUTPUT_DIR) or was disabled by an error.
  static Session* Get();

  bool active() const { return active_.load(std::memory_order_relaxed); }
  bool disabled() const { return disabled_.load(std::memory_order_relaxed); }
  // active(), or, under a capture range that is off, a throttled look at the control
  // file (the writer thread is not running before the first event).
  bool ActiveOrReactivated() {
    return active() || (!options_.control_file.empty() && Reactivate());
  }

  // Buffered, per thread.
  void Push(wire::RangeLayer layer, DomainId domain, std::string_view name);
  void Pop(DomainId domain);
  void Mark(DomainId domain, std::string_view name);

  // Direct (writer mutex).
  uint64_t StartRange(wire::RangeLayer layer, DomainId domain, std::string_view name);
  void EndRange(uint64_t range_id, DomainId domain);
  void NameThread(int64_t tid, std::string_view name);
  void EmitHostRange(const wire::HostRangeRecord& record);  // record.tid 0: calling thread
  // An engine step starts (watch mode: the `progress` side file reports it while open).
  void StepBegin();
  // The process group's rank and size (torch.distributed), learned after start-up: the
  // process's record is restated with them (rank_source "torch.distributed") when they
  // differ from what it says, or the first record carries them. rank < 0: ignored.
  void SetProcessGroup(int32_t rank, int32_t world_size);

  DomainId CreateDomain(std::string_view name);
  // A copy that lives as long as the process (NVTX registered strings).
  const char* RegisterString(std::string_view text);

  // Called before every flush and at shutdown, without the writer mutex (a hook may
  // make CUPTI deliver buffers, which then take the writer mutex).
  void AddFlushHook(void (*hook)(Session* session));

  // Holds the writer mutex; writer() is nullptr when tracing is off.
  class WriterLock {
   public:
    explicit WriterLock(Session* session);
    ~WriterLock();
    WriterLock(const WriterLock&) = delete;
    WriterLock& operator=(const WriterLock&) = delete;
    wire::ProcessWriter* writer();

   private:
    Session* session_;
  };
  // Turns a failed append into "tracing disabled" (call with the writer mutex held).
  // A write error (disk full, file size limit) also leaves a note in the process
  // folder at once, and at shutdown one with what was lost: the unwritten chunk's
  // records and every event recorded after the error (docs/capture.md).
  void CheckWrite(const base::Status& status);
  // Events not recorded because an earlier write failed.
  uint64_t events_lost() const { return events_lost_.load(std::memory_order_relaxed); }

  // Appends one line to a side file of the process folder that `teller record` folds
  // into meta.json at the end: kNotesFileName (a note) or kClockPairsFileName
  // ("realtime_ns monotonic_ns gpu_ns").
  void AppendSideFile(const char* file_name, std::string_view line);

  // Drains every thread buffer and writes a chunk.
  void Flush();
  // Final flush and exit record; later events are dropped. exit_code < 0: unknown.
  void Shutdown(int exit_code);
  // Logs "teller: tracing disabled: <why>" once and turns every call into a no-op.
  void Disable(const base::Status& why);

  // The calling thread's OS tid (cached per thread).
  static int64_t CurrentTid();
  // "" until the first event created it.
  std::string process_dir() const;
  const Options& options() const { return options_; }

  // Internal, used by the fork and signal handlers.
  void BeforeFork();
  void AfterForkInParent();
  void AfterForkInChild();
  void EmergencyFlush(int signal);
  // Internal: the writer thread body.
  void WriterLoop();

 private:
  explicit Session(Options options);
  ThreadBuffer* CurrentBuffer();
  ThreadBuffer* RegisterThread();
  void Append(ThreadBuffer* buffer, uint8_t kind, wire::RangeLayer layer, DomainId domain,
              std::string_view name);
  uint16_t NameSlot(ThreadBuffer* buffer, std::string_view name);
  uint16_t DefineName(ThreadBuffer* buffer, std::string_view name);  // NameSlot's miss
  // Producer side: `units` contiguous free units (16 bytes each) at the pending head,
  // or nullptr (tracing off, ring still full).
  RawEvent* Reserve(ThreadBuffer* buffer, uint64_t units);
  RawEvent* ReserveSlow(ThreadBuffer* buffer, uint64_t units);
  bool WaitForSpace(ThreadBuffer* buffer, uint64_t need);
  void RequestDrain();
  // Writer mutex held for all *Locked functions.
  bool EnsureStartedLocked();
  void DrainLocked(ThreadBuffer* buffer);
  // DrainLocked's record of entries; updates header for the next record of the drain.
  void AppendDrainBatchLocked(ThreadBuffer* buffer, wire::TscRangeBatchHeader* header,
                              std::string_view entries, uint64_t events, uint64_t last_stamp);
  void DrainAllLocked(bool keep_dead);  // keep_dead: in a signal handler
  std::string_view DomainNameLocked(DomainId domain) const;
  uint32_t DomainStringIdLocked(DomainId domain);  // the writer's string id of its name
  void AppendSideFileLocked(const char* file_name, std::string_view line);
  // The process group's rank and size over the launcher's, once reported; false when
  // that changes nothing.
  bool ApplyProcessGroupLocked(wire::ProcessInfoRecord* info) const;
  // An event that arrives after a write error: count it.
  void CountLost(uint64_t events = 1) {
    if (write_failed_.load(std::memory_order_relaxed)) {
      events_lost_.fetch_add(events, std::memory_order_relaxed);
    }
  }
  uint64_t PendingEventsLocked(const ThreadBuffer* buffer, uint64_t tail, uint64_t head) const;
  void PollControlFile();
  bool Reactivate();
  // Watch mode: writes the ring out when the watch file's number grew.
  void PollWatchFile();
  // Watch mode: the `progress` side file (docs/capture.md).
  void WriteProgressLocked();
  // The step still open when the ring is written, as a STEP range up to now with the
  // arg open=1 (docs/format.md): a hang's step is in the bundle.
  void AppendOpenStepLocked();
  // A mark "teller.ring_written" now on each thread with NVTX ranges open: the ranges
  // reconstruction closes at their thread's last event then end when the ring was written.
  void MarkOpenRangesLocked();
  void WriteSideFileLocked(const char* file_name, std::string_view text);
  void StopWriterThread();

  Options options_;
  std::atomic<bool> active_{true};  // capture on (not disabled, capture range open)
  std::atomic<bool> disabled_{false};
  std::atomic<bool> capture_on_{true};
  std::atomic<uint64_t> next_range_id_{1};
  std::atomic<bool> log_once_{false};
  std::atomic<int64_t> last_control_poll_ns_{0};
  std::atomic<bool> write_failed_{false};
  std::atomic<uint64_t> events_lost_{0};
  std::string write_error_;  // guarded by writer_mutex_

  pthread_mutex_t writer_mutex_ = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t wake_mutex_ = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t wake_ = PTHREAD_COND_INITIALIZER;
  bool stop_ = false;  // guarded by wake_mutex_
  std::atomic<bool> drain_requested_{false};
  TscClock clock_;  // guarded by writer_mutex_ (samples)
  std::atomic<bool> writer_thread_running_{false};
  pthread_t writer_thread_{};
  bool shut_down_ = false;

  // Guarded by writer_mutex_.
  std::unique_ptr<wire::ProcessWriter> writer_;
  std::string process_dir_;
  std::vector<ThreadBuffer*> buffers_;
  std::unordered_set<int64_t> named_tids_;  // named through NVTX: keep that name
  std::deque<std::string> domains_;         // DomainId - 1
  std::deque<std::string> registered_strings_;
  std::vector<void (*)(Session*)> flush_hooks_;
  std::vector<std::string_view> scratch_names_;
  std::vector<uint32_t> domain_ids_;  // DomainStringIdLocked's cache, by DomainId
  uint64_t domain_ids_epoch_ = ~uint64_t{0};
  std::string batch_;                           // TscRangeBatch entries being encoded
  std::vector<wire::TscSample> drain_samples_;  // the clock samples of those entries
  int32_t group_rank_ = -1;                     // SetProcessGroup's, -1 until reported
  int32_t group_world_size_ = -1;

  // Watch mode: the open engine step (0: none) and the steps before it.
  std::atomic<int64_t> step_open_since_ns_{0};
  std::atomic<int64_t> step_tid_{0};
  uint64_t steps_completed_ = 0;  // guarded by writer_mutex_, as are the two below
  int64_t longest_step_ns_ = 0;
  std::string step_name_;
  std::deque<int64_t> recent_step_ns_;
  uint64_t persisted_request_ = 0;  // writer thread only
};

}  // namespace teller::capture
