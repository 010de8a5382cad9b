#include "capture/session.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <fmt/format.h>

#include "base/file_util.h"
#include "capture/launcher_ranks.h"
#include "capture/process_status.h"
#include "capture/redaction.h"
#include "capture/tsc_clock.h"

namespace teller::capture {

// One raw event in a thread's ring (16 bytes, no pointers the writer must follow).
// kEventDefine: the next ceil(domain / 16) units hold the name bytes of slot
// name_slot (domain is the byte count). kEventWrap: skip to the ring start.
struct RawEvent {
  uint64_t stamp;  // TSC ticks, or CLOCK_MONOTONIC ns without an invariant TSC
  uint8_t kind;
  uint8_t layer;
  uint16_t name_slot;
  uint32_t domain;
};
static_assert(sizeof(RawEvent) == 16);

enum : uint8_t { kEventPush = 1, kEventPop = 2, kEventMark = 3, kEventDefine = 4, kEventWrap = 5 };
static_assert(kEventPush == wire::kTscEntryPush && kEventPop == wire::kTscEntryPop &&
              kEventMark == wire::kTscEntryMark);
static_assert(TscClock::kMaxSamples <= wire::kMaxTscRangeBatchSamples);
constexpr size_t kMaxNameBytes = 4096;
constexpr uint32_t kNameSlots = 256;            // pointer-hashed cache of recent names
constexpr uint16_t kUncachedSlot = kNameSlots;  // names too long to cache
constexpr size_t kCachedNameBytes = 48;
constexpr uint64_t kMinRingUnits = 1024;  // > 2 defines of kMaxNameBytes
constexpr uint32_t kNoStringId = ~uint32_t{0};
constexpr size_t kBatchBytes = 32 << 10;  // TscRangeBatch entries per record, about
// The writer's chunk: small enough that the pending chunk, a thread's ring and the
// batch fit a core's L2 cache together (1 MiB chunks measured ~1 ns per push/pop pair
// slower, docs/capture.md), big enough that a write call carries ~100k events.
constexpr size_t kChunkBytes = 256 << 10;
// A thread wakes the writer when this many of its ring's units are filled since the
// last wake: a quarter ring stays free for the time the writer takes to start.
constexpr uint64_t WakeUnits(uint64_t capacity) { return capacity / 4 * 3; }
constexpr size_t kBatchSlackBytes =
    wire::kMaxTscRangeBatchEntryBytes + wire::kTscRangeBatchEntrySlackBytes;

struct NameCacheEntry {
  const char* data = nullptr;
  uint32_t size = 0;
  char text[kCachedNameBytes] = {};  // zero past size (SameText loads 32 bytes)
};

struct ThreadBuffer {
  int64_t tid = 0;
  std::atomic<bool> dead{false};  // its thread has exited: drain, then free
  std::unique_ptr<RawEvent[]> ring;
  uint64_t capacity = 0;  // units, a power of two
  // Producer (owning thread) only.
  uint64_t cached_tail = 0;
  uint64_t next_wake = 0;
  NameCacheEntry names[kNameSlots];
  alignas(64) std::atomic<uint64_t> head{0};  // published by the producer
  alignas(64) std::atomic<uint64_t> tail{0};  // released by the consumer (writer mutex)
  std::string slot_names[kNameSlots + 1];     // consumer's copy of each slot's name
  // Consumer only: the writer's string id of each slot's name (kNoStringId: not
  // interned under ids_epoch yet).
  uint32_t slot_ids[kNameSlots + 1];
  uint64_t ids_epoch = ~uint64_t{0};
  // Consumer only: the last stamp written and its time. Events of one thread happen in
  // ring order, but two drains convert with different clock samples, so a later event
  // could map a few ns before an earlier one; times are kept non-decreasing.
  uint64_t last_stamp = 0;
  int64_t last_ts_ns = INT64_MIN;
  // Consumer only, watch mode: the open push ranges (time, name slot) and how often
  // and how long each slot's name completed.
  std::vector<std::pair<int64_t, uint16_t>> open_ranges;
  uint32_t slot_completions[kNameSlots + 1] = {};
  int64_t slot_longest_ns[kNameSlots + 1] = {};

  void TrackRange(uint8_t kind, uint16_t slot, int64_t ts_ns) {
    if (kind == kEventPush) {
      if (open_ranges.size() < 256) open_ranges.emplace_back(ts_ns, slot);
    } else if (kind == kEventPop && !open_ranges.empty()) {
      const auto [start_ns, open_slot] = open_ranges.back();
      open_ranges.pop_back();
      ++slot_completions[open_slot];
      slot_longest_ns[open_slot] = std::max(slot_longest_ns[open_slot], ts_ns - start_ns);
    }
  }
};

namespace {

Session* g_session = nullptr;
struct sigaction g_old_actions[NSIG];
constexpr int kFatalSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};

struct TlsSlot {
  ThreadBuffer* buffer = nullptr;
  int64_t tid = 0;
  ~TlsSlot() {
    if (buffer) buffer->dead.store(true, std::memory_order_release);
  }
};
thread_local TlsSlot tls_slot;
// The hot path's copy of tls_slot.buffer: trivially destructible, so reading it needs
// no TLS-init guard.
thread_local ThreadBuffer* tls_buffer = nullptr;

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void FatalSignalHandler(int signal, siginfo_t*, void*) {
  static std::atomic<int> entered{0};
  int saved_errno = errno;
  if (entered.fetch_add(1) == 0 && g_session) g_session->EmergencyFlush(signal);
  // Hand the signal to whoever had it before (default: die with this signal). It is
  // blocked while we run, so it arrives when we return.
  sigaction(signal, &g_old_actions[signal], nullptr);
  raise(signal);
  errno = saved_errno;
}

void InstallFatalSignalHandlers() {
  for (int signal : kFatalSignals) {
    struct sigaction action {};
    action.sa_sigaction = FatalSignalHandler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(signal, &action, &g_old_actions[signal]);
  }
}

void AtExit() {
  if (g_session) g_session->Shutdown(-1);
}

void* WriterThreadMain(void* session) {
  static_cast<Session*>(session)->WriterLoop();
  return nullptr;
}

}  // namespace

int64_t MonotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

int64_t Session::CurrentTid() {
  if (tls_slot.tid == 0) tls_slot.tid = static_cast<int64_t>(syscall(SYS_gettid));
  return tls_slot.tid;
}

Session* Session::Get() {
  static Session* const session = []() -> Session* {
    base::StatusOr<Options> options = Options::FromEnvironment();
    if (!options.ok()) {
      std::fprintf(stderr, "teller: tracing disabled: %s\n", options.status().c_message());
      return nullptr;
    }
    g_session = new Session(*std::move(options));  // lives until the process ends
    pthread_atfork([] { g_session->BeforeFork(); }, [] { g_session->AfterForkInParent(); },
                   [] { g_session->AfterForkInChild(); });
    return g_session;
  }();
  return session;
}

namespace {
bool UseTsc() {
  const char* value = std::getenv("TELLER_TSC");  // "0": always clock_gettime
  return TscClock::TscIsInvariant() && !(value && std::strcmp(value, "0") == 0);
}
}  // namespace

Session::Session(Options options) : options_(std::move(options)), clock_(UseTsc()) {
  clock_.Sample();
  if (!options_.control_file.empty()) PollControlFile();
}

std::string Session::process_dir() const {
  pthread_mutex_lock(const_cast<pthread_mutex_t*>(&writer_mutex_));
  std::string dir = process_dir_;
  pthread_mutex_unlock(const_cast<pthread_mutex_t*>(&writer_mutex_));
  return dir;
}

void Session::Disable(const base::Status& why) {
  disabled_.store(true);
  active_.store(false);
  if (!log_once_.exchange(true)) {
    std::fprintf(stderr, "teller: tracing disabled: %s\n", why.c_message());
  }
}

void Session::CheckWrite(const base::Status& status) {
  if (status.ok()) return;
  if (!write_failed_.exchange(true)) {
    write_error_ = status.message();
    // Written now, so a process killed later still tells why its trace stops here.
    AppendSideFileLocked(
        kNotesFileName, fmt::format("capture: write failed, tracing stopped at monotonic {} ns: {}",
                                    MonotonicNs(), write_error_));
  }
  Disable(status);
}

bool Session::EnsureStartedLocked() {
  if (writer_) return !disabled_.load();
  if (disabled_.load() || shut_down_) return false;
  const int64_t pid = getpid();
  const std::string base =
      options_.output_dir + "/" + wire::ProcessDirectoryName(options_.host, pid);
  std::string dir = base;
  for (int attempt = 2;; ++attempt) {
    if (mkdir(dir.c_str(), 0755) == 0) break;
    if (errno != EEXIST || attempt > 1000) {
      Disable(base::IoError("{}: cannot create the process folder: {}", dir, std::strerror(errno)));
      return false;
    }
    dir = base + "." + std::to_string(attempt);  // pid reused within the run
  }
  process_dir_ = dir;
  std::string name = ReadSmallFile("/proc/self/comm");
  while (!name.empty() && name.back() == '\n') name.pop_back();
  // The command line without credentials (capture/redaction.h), arguments joined by ' '.
  std::vector<std::string> argv;
  std::string cmdline = ReadSmallFile("/proc/self/cmdline");
  for (size_t start = 0; start < cmdline.size();) {
    size_t end = cmdline.find('\0', start);
    if (end == std::string::npos) end = cmdline.size();
    argv.emplace_back(cmdline, start, end - start);
    start = end + 1;
  }
  std::string command;
  for (const std::string& arg : RedactCommandLine(std::move(argv))) {
    if (!command.empty()) command.push_back(' ');
    command += arg;
  }
  const LauncherRanks launcher =
      ResolveLauncherRanks([](const char* variable) { return std::getenv(variable); });
  wire::ProcessInfoRecord info;
  info.pid = pid;
  info.rank = launcher.rank;
  info.local_rank = launcher.local_rank;
  info.world_size = launcher.world_size;
  info.rank_source = launcher.rank_source;
  (void)ApplyProcessGroupLocked(&info);  // reported before the first event
  info.host = options_.host;
  info.name = name;
  info.command = command;
  wire::WriterOptions writer_options;
  writer_options.ring_ns = options_.ring_ms * 1'000'000;
  writer_options.ring_max_bytes = options_.ring_bytes;
  writer_options.chunk_bytes = kChunkBytes;
  writer_ = std::make_unique<wire::ProcessWriter>(dir, info, writer_options);
  // The process record on disk now: a process killed before the first timed flush
  // (SIGKILL, the OOM killer) is still known, with its rank (docs/capture.md).
  if (!options_.watching()) CheckWrite(writer_->Flush());
  domain_ids_.clear();  // ids of an earlier writer (the parent's, after fork)
  domain_ids_epoch_ = ~uint64_t{0};

  // The writer thread takes no signals of the host program.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_mutex_lock(&wake_mutex_);
  stop_ = false;
  pthread_mutex_unlock(&wake_mutex_);
  writer_thread_running_ = pthread_create(&writer_thread_, nullptr, WriterThreadMain, this) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!writer_thread_running_) {
    Disable(base::Internal("cannot start the writer thread"));
    return false;
  }
  static bool process_hooks_installed = false;  // survives fork, as do the hooks
  if (!process_hooks_installed) {
    process_hooks_installed = true;
    std::atexit(AtExit);
    if (options_.fatal_signal_handlers) InstallFatalSignalHandlers();
  }
  return true;
}

ThreadBuffer* Session::RegisterThread() {
  auto buffer = std::make_unique<ThreadBuffer>();
  buffer->tid = CurrentTid();
  uint64_t units = kMinRingUnits;
  while (units * 2 * sizeof(RawEvent) <= options_.thread_buffer_bytes) units *= 2;
  buffer->capacity = units;
  buffer->ring = std::make_unique<RawEvent[]>(units);  // zeroed: no page faults later
  buffer->next_wake = WakeUnits(units);
  char thread_name[32] = {};
  pthread_getname_np(pthread_self(), thread_name, sizeof(thread_name));
  pthread_mutex_lock(&writer_mutex_);
  if (!EnsureStartedLocked()) {
    pthread_mutex_unlock(&writer_mutex_);
    return nullptr;
  }
  buffers_.push_back(buffer.get());
  if (thread_name[0] != '\0' && !named_tids_.contains(buffer->tid)) {
    CheckWrite(writer_->Append(wire::ThreadInfoRecord{buffer->tid, thread_name}));
  }
  pthread_mutex_unlock(&writer_mutex_);
  tls_slot.buffer = buffer.release();
  tls_buffer = tls_slot.buffer;
  return tls_buffer;
}

__attribute__((always_inline)) inline ThreadBuffer* Session::CurrentBuffer() {
  ThreadBuffer* buffer = tls_buffer;
  return __builtin_expect(buffer != nullptr, 1) ? buffer : RegisterThread();
}

void Session::RequestDrain() {
  if (drain_requested_.exchange(true, std::memory_order_acq_rel)) return;
  // The empty critical section orders the request after a writer's check of it; the
  // signal comes after the unlock, so the woken writer does not block on the mutex
  // (on a shared core that would cost two more thread switches per wake).
  pthread_mutex_lock(&wake_mutex_);
  pthread_mutex_unlock(&wake_mutex_);
  pthread_cond_signal(&wake_);
}

bool Session::WaitForSpace(ThreadBuffer* buffer, uint64_t need) {
  const uint64_t head = buffer->head.load(std::memory_order_relaxed);
  auto has_space = [&] {
    buffer->cached_tail = buffer->tail.load(std::memory_order_acquire);
    return head + need - buffer->cached_tail <= buffer->capacity;
  };
  // The writer thread drains on the other core; give it up to 1 ms.
  const int64_t give_up_ns = MonotonicNs() + 1'000'000;
  while (writer_thread_running_ && active()) {
    RequestDrain();
    for (int i = 0; i < 64; ++i) {
      if (has_space()) return true;
      __builtin_ia32_pause();
    }
    sched_yield();
    if (has_space()) return true;
    if (MonotonicNs() > give_up_ns) break;
  }
  // No writer thread (or it is stuck): encode on this thread.
  pthread_mutex_lock(&writer_mutex_);
  if (writer_ && !disabled_.load() && !shut_down_) DrainLocked(buffer);
  pthread_mutex_unlock(&writer_mutex_);
  return has_space();
}

RawEvent* Session::ReserveSlow(ThreadBuffer* buffer, uint64_t units) {
  // Pending head: past what this thread reserved but did not publish yet.
  const uint64_t head = buffer->head.load(std::memory_order_relaxed);
  const uint64_t pos = head & (buffer->capacity - 1);
  const uint64_t to_end = buffer->capacity - pos;
  const uint64_t need = units <= to_end ? units : to_end + units;
  if (head + need - buffer->cached_tail > buffer->capacity) {
    buffer->cached_tail = buffer->tail.load(std::memory_order_acquire);
    if (head + need - buffer->cached_tail > buffer->capacity && !WaitForSpace(buffer, need)) {
      return nullptr;
    }
  }
  if (units > to_end) {
    buffer->ring[pos].kind = kEventWrap;
    buffer->head.store(head + to_end, std::memory_order_release);
    return &buffer->ring[0];
  }
  return &buffer->ring[pos];
}

// The common case inline: room before the ring end and under the cached tail.
__attribute__((always_inline)) inline RawEvent* Session::Reserve(ThreadBuffer* buffer,
                                                                 uint64_t units) {
  const uint64_t head = buffer->head.load(std::memory_order_relaxed);
  const uint64_t pos = head & (buffer->capacity - 1);
  if (__builtin_expect(
          pos + units <= buffer->capacity && head + units - buffer->cached_tail <= buffer->capacity,
          1)) {
    return &buffer->ring[pos];
  }
  return ReserveSlow(buffer, units);
}

namespace {

// name equals the cached bytes of entry (same size). Names of up to 32 bytes are
// compared with two 16-byte loads when they cannot cross into another page.
__attribute__((no_sanitize_address)) inline bool SameText(const NameCacheEntry& entry,
                                                          std::string_view name) {
#if defined(__x86_64__)
  const uintptr_t address = reinterpret_cast<uintptr_t>(name.data());
  if (name.size() <= 32 && (address & 4095) <= 4096 - 32) {
    const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(name.data()));
    const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(name.data() + 16));
    const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(entry.text));
    const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(entry.text + 16));
    const uint32_t equal = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(a0, b0))) |
                           (static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(a1, b1))) << 16);
    const uint32_t wanted = name.size() == 32 ? ~0u : (1u << name.size()) - 1;
    return (equal & wanted) == wanted;
  }
#endif
  return std::memcmp(entry.text, name.data(), name.size()) == 0;
}

}  // namespace

__attribute__((always_inline)) inline uint16_t Session::NameSlot(ThreadBuffer* buffer,
                                                                 std::string_view name) {
  if (__builtin_expect(name.size() <= kCachedNameBytes, 1)) {
    const uint16_t slot = static_cast<uint16_t>(
        (reinterpret_cast<uintptr_t>(name.data()) * 0x9E3779B97F4A7C15ull) >> 56);
    const NameCacheEntry& entry = buffer->names[slot];
    // Same pointer and same bytes: the slot already holds this name (a pointer reused
    // for other text fails the compare and redefines the slot).
    if (__builtin_expect(entry.data == name.data() && entry.size == name.size(), 1) &&
        SameText(entry, name)) {
      return slot;
    }
  }
  return DefineName(buffer, name);
}

uint16_t Session::DefineName(ThreadBuffer* buffer, std::string_view name) {
  if (name.size() > kMaxNameBytes) name = name.substr(0, kMaxNameBytes);
  uint16_t slot = kUncachedSlot;
  if (name.size() <= kCachedNameBytes) {
    slot = static_cast<uint16_t>(
        (reinterpret_cast<uintptr_t>(name.data()) * 0x9E3779B97F4A7C15ull) >> 56);
    buffer->names[slot].data = nullptr;  // set again once the define is in the ring
  }
  const uint64_t text_units = (name.size() + sizeof(RawEvent) - 1) / sizeof(RawEvent);
  RawEvent* out = Reserve(buffer, 1 + text_units);
  if (!out) return kUncachedSlot;
  *out = RawEvent{0, kEventDefine, 0, slot, static_cast<uint32_t>(name.size())};
  if (!name.empty()) std::memcpy(out + 1, name.data(), name.size());
  // Reserve published any wrap record, so the define starts at the head.
  buffer->head.store(buffer->head.load(std::memory_order_relaxed) + 1 + text_units,
                     std::memory_order_release);
  if (slot != kUncachedSlot) {
    NameCacheEntry& entry = buffer->names[slot];
    std::memset(entry.text, 0, sizeof(entry.text));
    std::memcpy(entry.text, name.data(), name.size());
    entry.size = static_cast<uint32_t>(name.size());
    entry.data = name.data();
  }
  return slot;
}

__attribute__((always_inline)) inline void Session::Append(ThreadBuffer* buffer, uint8_t kind,
                                                           wire::RangeLayer layer, DomainId domain,
                                                           std::string_view name) {
  const uint64_t stamp =
      clock_.use_tsc() ? TscClock::ReadTsc() : static_cast<uint64_t>(MonotonicNs());
  const uint16_t slot = kind == kEventPop ? 0 : NameSlot(buffer, name);
  RawEvent* out = Reserve(buffer, 1);
  if (!out) return;
  *out = RawEvent{stamp, kind, static_cast<uint8_t>(layer), slot, domain};
  const uint64_t head = buffer->head.load(std::memory_order_relaxed) + 1;
  buffer->head.store(head, std::memory_order_release);
  if (__builtin_expect(head >= buffer->next_wake, 0)) {  // 3/4 ring since the last request
    buffer->next_wake = head + WakeUnits(buffer->capacity);
    if (writer_thread_running_) RequestDrain();
  }
}

void Session::Push(wire::RangeLayer layer, DomainId domain, std::string_view name) {
  if (!ActiveOrReactivated()) {
    CountLost();
    return;
  }
  if (ThreadBuffer* buffer = CurrentBuffer()) Append(buffer, kEventPush, layer, domain, name);
}

void Session::Pop(DomainId domain) {
  if (!ActiveOrReactivated()) {
    CountLost();
    return;
  }
  if (ThreadBuffer* buffer = CurrentBuffer()) {
    Append(buffer, kEventPop, wire::RangeLayer::kUnspecified, domain, {});
  }
}

void Session::Mark(DomainId domain, std::string_view name) {
  if (!ActiveOrReactivated()) {
    CountLost();
    return;
  }
  if (ThreadBuffer* buffer = CurrentBuffer()) {
    Append(buffer, kEventMark, wire::RangeLayer::kUnspecified, domain, name);
  }
}

uint64_t Session::StartRange(wire::RangeLayer layer, DomainId domain, std::string_view name) {
  if (!ActiveOrReactivated()) {
    CountLost();
    return 0;
  }
  const uint64_t id = next_range_id_.fetch_add(1, std::memory_order_relaxed);
  wire::RangeStartRecord record;
  record.range_id = id;
  record.tid = CurrentTid();
  record.ts_ns = MonotonicNs();
  record.layer = layer;
  record.name = name;
  pthread_mutex_lock(&writer_mutex_);
  if (EnsureStartedLocked()) {
    record.domain = DomainNameLocked(domain);
    CheckWrite(writer_->Append(record));
  }
  pthread_mutex_unlock(&writer_mutex_);
  return id;
}

void Session::EndRange(uint64_t range_id, DomainId domain) {
  if (range_id == 0 || !ActiveOrReactivated()) {
    CountLost();
    return;
  }
  wire::RangeEndRecord record;
  record.range_id = range_id;
  record.tid = CurrentTid();
  record.ts_ns = MonotonicNs();
  pthread_mutex_lock(&writer_mutex_);
  if (EnsureStartedLocked()) {
    record.domain = DomainNameLocked(domain);
    CheckWrite(writer_->Append(record));
  }
  pthread_mutex_unlock(&writer_mutex_);
}

void Session::NameThread(int64_t tid, std::string_view name) {
  if (disabled_.load()) return;
  pthread_mutex_lock(&writer_mutex_);
  if (EnsureStartedLocked()) {
    named_tids_.insert(tid);
    CheckWrite(writer_->Append(wire::ThreadInfoRecord{tid, name}));
  }
  pthread_mutex_unlock(&writer_mutex_);
}

bool Session::ApplyProcessGroupLocked(wire::ProcessInfoRecord* info) const {
  const int32_t world_size = group_world_size_ > 0 ? group_world_size_ : info->world_size;
  if (group_rank_ < 0 || (info->rank == group_rank_ && info->world_size == world_size)) {
    return false;  // nothing reported, or the launcher said the same
  }
  info->rank = group_rank_;
  info->world_size = world_size;
  info->rank_source = kProcessGroupRankSource;
  return true;
}

void Session::SetProcessGroup(int32_t rank, int32_t world_size) {
  if (rank < 0 || disabled_.load()) return;
  pthread_mutex_lock(&writer_mutex_);
  group_rank_ = rank;
  group_world_size_ = world_size;
  // Not started yet: the first record will carry it. Started: restated when it differs.
  if (writer_ && !shut_down_) {
    wire::ProcessInfoRecord info = writer_->process_info();
    if (ApplyProcessGroupLocked(&info)) CheckWrite(writer_->Restate(info));
  }
  pthread_mutex_unlock(&writer_mutex_);
}

void Session::EmitHostRange(const wire::HostRangeRecord& record) {
  if (!ActiveOrReactivated()) {
    CountLost();
    return;
  }
  wire::HostRangeRecord copy = record;
  if (copy.tid == 0) copy.tid = CurrentTid();
  pthread_mutex_lock(&writer_mutex_);
  if (EnsureStartedLocked()) CheckWrite(writer_->Append(copy));
  if (options_.watching() && record.layer == wire::RangeLayer::kStep) {
    ++steps_completed_;
    longest_step_ns_ = std::max(longest_step_ns_, record.end_ns - record.start_ns);
    recent_step_ns_.push_back(record.end_ns - record.start_ns);
    if (recent_step_ns_.size() > 16) recent_step_ns_.pop_front();
    if (step_name_ != record.name) step_name_ = record.name;
    step_open_since_ns_.store(0, std::memory_order_relaxed);
  }
  pthread_mutex_unlock(&writer_mutex_);
}

void Session::StepBegin() {
  if (!options_.watching()) return;
  step_tid_.store(CurrentTid(), std::memory_order_relaxed);
  step_open_since_ns_.store(MonotonicNs(), std::memory_order_relaxed);
}

void Session::MarkOpenRangesLocked() {
  const int64_t now_ns = MonotonicNs();
  for (const ThreadBuffer* buffer : buffers_) {
    if (buffer->open_ranges.empty()) continue;
    CheckWrite(writer_->Append(wire::MarkRecord{wire::ClockDomain::kMonotonic, buffer->tid, now_ns,
                                                "teller", kRingWrittenMark}));
  }
}

void Session::AppendOpenStepLocked() {
  const int64_t since_ns = step_open_since_ns_.load(std::memory_order_relaxed);
  if (since_ns == 0) return;
  const wire::Arg open[] = {wire::Arg::Int("open", 1)};
  wire::HostRangeRecord record;
  record.tid = step_tid_.load(std::memory_order_relaxed);
  record.start_ns = since_ns;
  record.end_ns = MonotonicNs();
  record.layer = wire::RangeLayer::kStep;
  record.name = step_name_;
  record.args = open;
  CheckWrite(writer_->Append(record));
}

DomainId Session::CreateDomain(std::string_view name) {
  pthread_mutex_lock(&writer_mutex_);
  DomainId id = 0;
  for (size_t i = 0; i < domains_.size(); ++i) {
    if (domains_[i] == name) id = static_cast<DomainId>(i + 1);
  }
  if (id == 0) {
    domains_.emplace_back(name);
    id = static_cast<DomainId>(domains_.size());
  }
  pthread_mutex_unlock(&writer_mutex_);
  return id;
}

const char* Session::RegisterString(std::string_view text) {
  pthread_mutex_lock(&writer_mutex_);
  const char* stable = registered_strings_.emplace_back(text).c_str();
  pthread_mutex_unlock(&writer_mutex_);
  return stable;
}

std::string_view Session::DomainNameLocked(DomainId domain) const {
  if (domain == 0 || domain > domains_.size()) return {};
  return domains_[domain - 1];
}

void Session::AddFlushHook(void (*hook)(Session*)) {
  pthread_mutex_lock(&writer_mutex_);
  flush_hooks_.push_back(hook);
  pthread_mutex_unlock(&writer_mutex_);
}

Session::WriterLock::WriterLock(Session* session) : session_(session) {
  pthread_mutex_lock(&session_->writer_mutex_);
}
Session::WriterLock::~WriterLock() { pthread_mutex_unlock(&session_->writer_mutex_); }
wire::ProcessWriter* Session::WriterLock::writer() {
  return session_->EnsureStartedLocked() ? session_->writer_.get() : nullptr;
}

uint32_t Session::DomainStringIdLocked(DomainId domain) {
  if (domain == 0 || domain > domains_.size()) return 0;
  if (domain_ids_epoch_ != writer_->string_epoch()) {
    domain_ids_.clear();
    domain_ids_epoch_ = writer_->string_epoch();
  }
  if (domain >= domain_ids_.size()) domain_ids_.resize(domain + 1, kNoStringId);
  uint32_t& id = domain_ids_[domain];
  if (id == kNoStringId) id = writer_->InternString(domains_[domain - 1]);
  return id;
}

namespace {

bool IsMarker(const RawEvent& event) {
  return event.kind == kEventWrap || event.kind == kEventDefine;
}

// The ring unit after a marker at tail: a wrap skips to the ring's start, a define past the
// units of its name.
uint64_t TailAfterMarker(const ThreadBuffer* buffer, uint64_t tail, const RawEvent& marker) {
  if (marker.kind == kEventWrap) return tail + buffer->capacity - (tail & (buffer->capacity - 1));
  return tail + 1 + (marker.domain + sizeof(RawEvent) - 1) / sizeof(RawEvent);
}

// The stamp of the first push, pop or mark in [tail, head) (0: none).
uint64_t FirstStamp(const ThreadBuffer* buffer, uint64_t tail, uint64_t head) {
  const uint64_t mask = buffer->capacity - 1;
  while (tail < head) {
    const RawEvent& event = buffer->ring[tail & mask];
    if (!IsMarker(event)) return event.stamp;
    tail = TailAfterMarker(buffer, tail, event);
  }
  return 0;
}

// Where DrainLocked's plain-event loop stands.
struct EncodeCursor {
  uint64_t tail;   // next ring unit
  uint64_t stamp;  // of the last entry encoded
  char* out;       // end of the entries so far
};

// DrainLocked's common case, apart so that its state stays in registers: encodes the
// push, pop and mark events of the default domain whose names have string ids, from
// cursor->tail until end or until cursor->out reaches out_end, and stops at any other
// event (DrainLocked takes those one by one). Returns how many it encoded. Runs of
// events that cannot wrap the ring or overrun out_end go through a plain pointer loop.
uint64_t EncodePlainEvents(const RawEvent* ring, uint64_t mask, uint64_t end,
                           const uint32_t* slot_ids, const char* out_end, EncodeCursor* cursor) {
  uint64_t tail = cursor->tail;
  uint64_t stamp = cursor->stamp;
  char* out = cursor->out;
  const uint64_t start = tail;
  // The event's bytes 8-15 as one word: kind (byte 0), layer, name slot, domain (4-7).
  constexpr uint64_t kKindAndDomain = 0xFFFFFFFF000000FFull;
  while (tail < end && out < out_end) {
    const uint64_t room = static_cast<uint64_t>(out_end - out) / wire::kMaxTscRangeBatchEntryBytes;
    const uint64_t to_ring_end = mask + 1 - (tail & mask);
    const RawEvent* const first = &ring[tail & mask];
    const RawEvent* const stop = first + std::min({end - tail, room + 1, to_ring_end});
    const RawEvent* event = first;
    for (; event < stop; ++event) {
      uint64_t fields;
      std::memcpy(&fields, &event->kind, sizeof(fields));
      static_assert(offsetof(RawEvent, kind) == 8 && offsetof(RawEvent, domain) == 12);
      // A push, pop or mark (codes 1-3) of the default domain.
      if ((fields & kKindAndDomain) - kEventPush > kEventMark - kEventPush) break;
      const uint8_t kind = static_cast<uint8_t>(fields);
      uint32_t name_id = 0;
      if (kind != kEventPop) {
        name_id = slot_ids[std::min<uint32_t>((fields >> 16) & 0xFFFF, kUncachedSlot)];
        if (name_id == kNoStringId) break;
      }
      const uint64_t next = std::max(event->stamp, stamp);  // kept non-decreasing
      const uint64_t dt = next - stamp;
      stamp = next;
      out = wire::EncodeTscRangeBatchEntry(out, kind, dt, name_id,
                                           static_cast<uint8_t>(fields >> 8), 0);
    }
    tail += static_cast<uint64_t>(event - first);
    if (event < stop) break;
  }
  cursor->tail = tail;
  cursor->stamp = stamp;
  cursor->out = out;
  return tail - start;
}

}  // namespace

void Session::AppendDrainBatchLocked(ThreadBuffer* buffer, wire::TscRangeBatchHeader* header,
                                     std::string_view entries, uint64_t events,
                                     uint64_t last_stamp) {
  CheckWrite(
      writer_->AppendTscRangeBatch(*header, drain_samples_.data(), drain_samples_.size(), entries));
  if (disabled_.load(std::memory_order_relaxed)) CountLost(events);
  // What the reader computes for the last entry: the next record's floor.
  header->floor_ns = std::max(header->floor_ns, clock_.ToNs(last_stamp));
  header->base_tsc = last_stamp;
  // The chunk may have gone to a new file: the cached ids are no longer defined there.
  if (buffer->ids_epoch != writer_->string_epoch()) {
    std::fill(std::begin(buffer->slot_ids), std::end(buffer->slot_ids), kNoStringId);
    buffer->ids_epoch = writer_->string_epoch();
  }
}

// Encodes the events as TscRangeBatch entries, kBatchBytes of entries per record: raw
// stamps as tick deltas (kept non-decreasing), with the clock samples that convert
// them, and string ids cached per slot while the writer's string epoch lasts. The
// loop's state stays in locals (no lambda captures them): it runs once per event.
void Session::DrainLocked(ThreadBuffer* buffer) {
  const uint64_t head = buffer->head.load(std::memory_order_acquire);
  clock_.Sample();  // after the head load: every event below is older than the sample
  uint64_t tail = buffer->tail.load(std::memory_order_relaxed);
  if (tail == head) return;
  const uint64_t mask = buffer->capacity - 1;
  clock_.CopySamples(FirstStamp(buffer, tail, head), &drain_samples_);
  if (batch_.size() < kBatchBytes + kBatchSlackBytes) batch_.resize(kBatchBytes + kBatchSlackBytes);
  if (buffer->ids_epoch != writer_->string_epoch()) {
    std::fill(std::begin(buffer->slot_ids), std::end(buffer->slot_ids), kNoStringId);
    buffer->ids_epoch = writer_->string_epoch();
  }
  const RawEvent* const ring = buffer->ring.get();
  uint32_t* const slot_ids = buffer->slot_ids;
  char* const batch = batch_.data();
  char* out = batch;
  uint64_t stamp = buffer->last_stamp;  // of the last entry encoded
  wire::TscRangeBatchHeader header{buffer->tid, buffer->last_ts_ns, stamp};
  uint64_t batch_events = 0;
  uint64_t next_release = tail + 256;  // let a waiting producer go on early
  const bool watching = options_.watching();
  while (tail < head) {
    if (tail >= next_release) {
      buffer->tail.store(tail, std::memory_order_release);
      next_release = tail + 256;
    }
    if (!watching) {
      EncodeCursor cursor{tail, stamp, out};
      batch_events += EncodePlainEvents(ring, mask, std::min(head, next_release), slot_ids,
                                        batch + kBatchBytes, &cursor);
      tail = cursor.tail;
      stamp = cursor.stamp;
      out = cursor.out;
    }
    if (out - batch >= static_cast<ptrdiff_t>(kBatchBytes)) {
      AppendDrainBatchLocked(buffer, &header, std::string_view(batch, out - batch), batch_events,
                             stamp);
      out = batch;
      batch_events = 0;
      if (disabled_.load(std::memory_order_relaxed)) break;
    }
    if (tail >= head || tail >= next_release) continue;
    // One event the plain loop does not take: a wrap, a define, a name not interned yet,
    // a domain, or any event in watch mode.
    const RawEvent event = ring[tail & mask];
    if (event.kind - uint32_t{kEventPush} > kEventMark - kEventPush) {
      if (event.kind == kEventDefine) {
        const uint32_t slot = std::min<uint32_t>(event.name_slot, kUncachedSlot);
        const char* text = reinterpret_cast<const char*>(&ring[(tail + 1) & mask]);
        buffer->slot_names[slot].assign(text, event.domain);
        slot_ids[slot] = kNoStringId;
        buffer->slot_completions[slot] = 0;
        buffer->slot_longest_ns[slot] = 0;
      }
      if (IsMarker(event)) {
        tail = TailAfterMarker(buffer, tail, event);
      } else {
        ++tail;  // not written by this library
      }
      continue;
    }
    ++tail;
    const uint64_t dt = event.stamp > stamp ? event.stamp - stamp : 0;
    stamp += dt;
    const uint32_t slot = std::min<uint32_t>(event.name_slot, kUncachedSlot);
    uint32_t name_id = 0;
    if (event.kind != kEventPop) {
      name_id = slot_ids[slot];
      if (__builtin_expect(name_id == kNoStringId, 0)) {
        name_id = slot_ids[slot] = writer_->InternString(buffer->slot_names[slot]);
      }
    }
    const uint32_t domain_id = event.domain == 0 ? 0 : DomainStringIdLocked(event.domain);
    if (watching) {
      buffer->TrackRange(event.kind, static_cast<uint16_t>(slot),
                         std::max(clock_.ToNs(stamp), header.floor_ns));
    }
    // Push, pop and mark are the entry codes kTscEntryPush, kTscEntryPop, kTscEntryMark.
    out = wire::EncodeTscRangeBatchEntry(out, event.kind, dt, name_id, event.layer, domain_id);
    ++batch_events;
  }
  if (out != batch && !disabled_.load(std::memory_order_relaxed)) {
    AppendDrainBatchLocked(buffer, &header, std::string_view(batch, out - batch), batch_events,
                           stamp);
    batch_events = 0;
  }
  if (disabled_.load()) {  // dropped: the encoded rest of the batch and the ring's rest
    CountLost(batch_events + PendingEventsLocked(buffer, tail, head));
    tail = head;
  }
  buffer->last_stamp = stamp;
  buffer->last_ts_ns = header.floor_ns;
  buffer->tail.store(tail, std::memory_order_release);
}

void Session::DrainAllLocked(bool keep_dead) {
  if (!writer_ || disabled_.load()) return;
  for (size_t i = 0; i < buffers_.size();) {
    ThreadBuffer* buffer = buffers_[i];
    const bool dead = buffer->dead.load(std::memory_order_acquire);
    DrainLocked(buffer);
    if (dead && !keep_dead) {
      delete buffer;
      buffers_[i] = buffers_.back();
      buffers_.pop_back();
    } else {
      ++i;
    }
  }
}

void Session::Flush() {
  std::vector<void (*)(Session*)> hooks;
  pthread_mutex_lock(&writer_mutex_);
  hooks = flush_hooks_;
  pthread_mutex_unlock(&writer_mutex_);
  for (auto hook : hooks) hook(this);
  pthread_mutex_lock(&writer_mutex_);
  if (writer_ && !disabled_.load()) {
    DrainAllLocked(false);
    if (!disabled_.load()) CheckWrite(writer_->Flush());
  }
  pthread_mutex_unlock(&writer_mutex_);
}

void Session::AppendSideFile(const char* file_name, std::string_view line) {
  pthread_mutex_lock(&writer_mutex_);
  if (EnsureStartedLocked()) AppendSideFileLocked(file_name, line);
  pthread_mutex_unlock(&writer_mutex_);
}

void Session::AppendSideFileLocked(const char* file_name, std::string_view line) {
  if (process_dir_.empty()) return;
  std::string path = process_dir_ + "/" + file_name;
  if (FILE* file = std::fopen(path.c_str(), "a")) {
    std::fwrite(line.data(), 1, line.size(), file);
    std::fputc('\n', file);
    std::fclose(file);
  }
}

void Session::WriteSideFileLocked(const char* file_name, std::string_view text) {
  // Through a temporary and a rename: the launcher never reads half a file.
  if (!process_dir_.empty()) (void)base::WriteFileAtomic(process_dir_ + "/" + file_name, text);
}

void Session::PollWatchFile() {
  const std::string text = ReadSmallFile(options_.watch_file.c_str());
  const uint64_t request = std::strtoull(text.c_str(), nullptr, 10);
  pthread_mutex_lock(&writer_mutex_);
  if (writer_ && !disabled_.load()) {
    if (request > persisted_request_) {
      DrainAllLocked(false);
      AppendOpenStepLocked();
      MarkOpenRangesLocked();
      CheckWrite(writer_->Persist());
      persisted_request_ = request;
      WriteSideFileLocked(kPersistedFileName, fmt::format("{}\n", request));
    }
    WriteProgressLocked();
  }
  pthread_mutex_unlock(&writer_mutex_);
}

// The open step and each thread's innermost open range whose name completed before.
void Session::WriteProgressLocked() {
  ProcessProgress progress;
  progress.now_ns = MonotonicNs();
  const int64_t step_since = step_open_since_ns_.load(std::memory_order_relaxed);
  if (step_since > 0 && steps_completed_ > 0) {
    progress.open.push_back({true, step_since, steps_completed_, longest_step_ns_, 0, step_name_});
  }
  for (const ThreadBuffer* buffer : buffers_) {
    if (buffer->open_ranges.empty()) continue;
    const auto [since_ns, slot] = buffer->open_ranges.back();
    if (buffer->slot_completions[slot] == 0) continue;
    progress.open.push_back({false, since_ns, buffer->slot_completions[slot],
                             buffer->slot_longest_ns[slot], buffer->tid, buffer->slot_names[slot]});
  }
  progress.recent_step_ns.assign(recent_step_ns_.begin(), recent_step_ns_.end());
  progress.ring_bytes = writer_->ring_bytes();
  WriteSideFileLocked(kProgressFileName, FormatProgress(progress));
}

uint64_t Session::PendingEventsLocked(const ThreadBuffer* buffer, uint64_t tail,
                                      uint64_t head) const {
  const uint64_t mask = buffer->capacity - 1;
  uint64_t events = 0;
  while (tail < head) {
    const RawEvent& event = buffer->ring[tail & mask];
    if (IsMarker(event)) {
      tail = TailAfterMarker(buffer, tail, event);
    } else {
      ++events;
      ++tail;
    }
  }
  return events;
}

void Session::PollControlFile() {
  if (options_.control_file.empty()) return;
  std::string state = ReadSmallFile(options_.control_file.c_str());
  bool on = state.rfind("on", 0) == 0;
  capture_on_.store(on);
  active_.store(on && !disabled_.load());
}

bool Session::Reactivate() {
  if (disabled_.load() || shut_down_) return false;
  const int64_t now_ns = MonotonicNs();
  int64_t last_ns = last_control_poll_ns_.load(std::memory_order_relaxed);
  if (now_ns - last_ns < 100'000'000 ||
      !last_control_poll_ns_.compare_exchange_strong(last_ns, now_ns)) {
    return false;
  }
  PollControlFile();
  return active();
}

void Session::WriterLoop() {
  int64_t next_flush_ns = MonotonicNs() + int64_t{options_.flush_interval_ms} * 1000000;
  for (;;) {
    pthread_mutex_lock(&wake_mutex_);
    if (!stop_ && !drain_requested_.load()) {
      const int64_t wait_ns = std::max<int64_t>(0, next_flush_ns - MonotonicNs());
      timespec deadline;
      clock_gettime(CLOCK_REALTIME, &deadline);
      int64_t ns = deadline.tv_nsec + wait_ns;
      deadline.tv_sec += ns / 1000000000;
      deadline.tv_nsec = ns % 1000000000;
      pthread_cond_timedwait(&wake_, &wake_mutex_, &deadline);
    }
    const bool stop = stop_;
    pthread_mutex_unlock(&wake_mutex_);
    if (stop) return;
    drain_requested_.store(false);
    if (MonotonicNs() >= next_flush_ns) {
      PollControlFile();
      Flush();
      if (options_.watching()) PollWatchFile();
      next_flush_ns = MonotonicNs() + int64_t{options_.flush_interval_ms} * 1000000;
    } else {  // a ring is 3/4 full: encode it now, write the chunk on the timer or when full
      pthread_mutex_lock(&writer_mutex_);
      DrainAllLocked(false);
      pthread_mutex_unlock(&writer_mutex_);
    }
  }
}

void Session::StopWriterThread() {
  pthread_mutex_lock(&writer_mutex_);
  const bool running = writer_thread_running_;
  writer_thread_running_ = false;
  pthread_mutex_unlock(&writer_mutex_);
  if (!running) return;
  pthread_mutex_lock(&wake_mutex_);
  stop_ = true;
  pthread_cond_signal(&wake_);
  pthread_mutex_unlock(&wake_mutex_);
  pthread_join(writer_thread_, nullptr);
}

void Session::Shutdown(int exit_code) {
  pthread_mutex_lock(&writer_mutex_);
  const bool already = shut_down_;
  pthread_mutex_unlock(&writer_mutex_);
  if (already) return;
  StopWriterThread();
  Flush();  // runs the flush hooks (CUPTI) one last time
  pthread_mutex_lock(&writer_mutex_);
  shut_down_ = true;
  active_.store(false);
  if (writer_) {
    DrainAllLocked(false);
    if (!disabled_.load()) CheckWrite(writer_->Close());
    if (write_failed_.load()) {
      for (const ThreadBuffer* buffer : buffers_) {
        CountLost(PendingEventsLocked(buffer, buffer->tail.load(), buffer->head.load()));
      }
      const wire::WriterCounters& counters = writer_->counters();
      AppendSideFileLocked(
          kNotesFileName,
          fmt::format("capture: lost after a write error: {} records of the chunk that could "
                      "not be written and {} events recorded after it; {} chunks ({} bytes) "
                      "were written before it ({})",
                      counters.records_dropped, events_lost(), counters.chunks,
                      counters.bytes_written, write_error_));
    }
    WriteExitStatus(process_dir_.c_str(), ExitKind::kExit, exit_code);
  }
  pthread_mutex_unlock(&writer_mutex_);
}

void Session::BeforeFork() { pthread_mutex_lock(&writer_mutex_); }

void Session::AfterForkInParent() { pthread_mutex_unlock(&writer_mutex_); }

void Session::AfterForkInChild() {
  // Only the forking thread survives. The parent's writer, buffers and writer thread
  // stay the parent's: forget them (no destructor may flush the parent's data again).
  pthread_mutex_init(&writer_mutex_, nullptr);
  pthread_mutex_init(&wake_mutex_, nullptr);
  pthread_cond_init(&wake_, nullptr);
  (void)writer_.release();
  process_dir_.clear();
  buffers_.clear();
  named_tids_.clear();
  group_rank_ = group_world_size_ = -1;  // the child joins its own group, if any
  writer_thread_running_ = false;
  stop_ = false;
  drain_requested_.store(false);
  tls_slot.buffer = nullptr;  // leaked: its events are the parent's
  tls_buffer = nullptr;
  tls_slot.tid = 0;
}

void Session::EmergencyFlush(int signal) {
  if (process_dir_.empty()) return;
  WriteExitStatus(process_dir_.c_str(), ExitKind::kSignal, signal);
  alarm(2);  // if flushing deadlocks (crash inside malloc), die anyway
  // The writer thread may be in the middle of a timer flush: wait for it a little
  // (async-signal-safe sleeps), but not forever: the crash may be inside that flush.
  bool locked = false;
  for (int attempt = 0; attempt < 100 && !locked; ++attempt) {
    locked = pthread_mutex_trylock(&writer_mutex_) == 0;
    if (!locked) {
      const timespec pause{0, 5'000'000};
      nanosleep(&pause, nullptr);
    }
  }
  if (locked) {
    if (writer_ && !disabled_.load()) {
      DrainAllLocked(true);
      (void)writer_->Persist();  // in watch mode: the ring's last seconds before the crash
    }
    pthread_mutex_unlock(&writer_mutex_);
  }
  alarm(0);
}

}  // namespace teller::capture
