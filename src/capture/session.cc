#include "capture/session.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "capture/process_status.h"

namespace teller::capture {

// One buffered event: this header, then name_bytes of name.
struct EventHeader {
  uint8_t kind;
  uint8_t layer;
  uint16_t name_bytes;
  uint32_t domain;
  int64_t ts_ns;
};
static_assert(sizeof(EventHeader) == 16);

enum : uint8_t { kEventPush = 1, kEventPop = 2, kEventMark = 3 };
constexpr size_t kMaxNameBytes = 4096;

struct ThreadBuffer {
  int64_t tid = 0;
  std::atomic<bool> locked{false};
  std::atomic<bool> dead{false};  // its thread has exited: drain, then free
  std::unique_ptr<char[]> data;
  std::unique_ptr<char[]> spare;
  size_t used = 0;
  size_t capacity = 0;

  void Lock() {
    while (locked.exchange(true, std::memory_order_acquire)) __builtin_ia32_pause();
  }
  bool TryLock() { return !locked.exchange(true, std::memory_order_acquire); }
  void Unlock() { locked.store(false, std::memory_order_release); }
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

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int32_t EnvInt(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return -1;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  return *end == '\0' && parsed >= 0 && parsed < (1 << 30) ? static_cast<int32_t>(parsed) : -1;
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

Session::Session(Options options) : options_(std::move(options)) {
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
  if (!status.ok()) Disable(status);
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
  std::string command = ReadSmallFile("/proc/self/cmdline");
  while (!command.empty() && command.back() == '\0') command.pop_back();
  std::replace(command.begin(), command.end(), '\0', ' ');
  wire::ProcessInfoRecord info;
  info.pid = pid;
  info.rank = EnvInt("RANK");
  info.local_rank = EnvInt("LOCAL_RANK");
  info.world_size = EnvInt("WORLD_SIZE");
  info.host = options_.host;
  info.name = name;
  info.command = command;
  writer_ = std::make_unique<wire::ProcessWriter>(dir, info, wire::WriterOptions{});

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
  buffer->capacity = options_.thread_buffer_bytes;
  buffer->data = std::make_unique<char[]>(buffer->capacity);
  buffer->spare = std::make_unique<char[]>(buffer->capacity);
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
  return tls_slot.buffer;
}

ThreadBuffer* Session::CurrentBuffer() {
  ThreadBuffer* buffer = tls_slot.buffer;
  return buffer ? buffer : RegisterThread();
}

void Session::Append(ThreadBuffer* buffer, uint8_t kind, wire::RangeLayer layer,
                     DomainId domain, std::string_view name) {
  const int64_t ts_ns = MonotonicNs();
  const size_t name_bytes = std::min(name.size(), kMaxNameBytes);
  const size_t need = sizeof(EventHeader) + name_bytes;
  buffer->Lock();
  if (buffer->used + need > buffer->capacity) {
    buffer->Unlock();
    pthread_mutex_lock(&writer_mutex_);
    if (writer_ && !disabled_.load()) DrainLocked(buffer);
    pthread_mutex_unlock(&writer_mutex_);
    buffer->Lock();
    if (buffer->used + need > buffer->capacity) {
      buffer->Unlock();
      return;
    }
  }
  EventHeader header{kind, static_cast<uint8_t>(layer), static_cast<uint16_t>(name_bytes), domain,
                     ts_ns};
  char* out = buffer->data.get() + buffer->used;
  std::memcpy(out, &header, sizeof(header));
  if (name_bytes > 0) std::memcpy(out + sizeof(header), name.data(), name_bytes);
  buffer->used += need;
  buffer->Unlock();
}

void Session::Push(wire::RangeLayer layer, DomainId domain, std::string_view name) {
  if (!ActiveOrReactivated()) return;
  if (ThreadBuffer* buffer = CurrentBuffer()) Append(buffer, kEventPush, layer, domain, name);
}

void Session::Pop(DomainId domain) {
  if (!ActiveOrReactivated()) return;
  if (ThreadBuffer* buffer = CurrentBuffer()) {
    Append(buffer, kEventPop, wire::RangeLayer::kUnspecified, domain, {});
  }
}

void Session::Mark(DomainId domain, std::string_view name) {
  if (!ActiveOrReactivated()) return;
  if (ThreadBuffer* buffer = CurrentBuffer()) {
    Append(buffer, kEventMark, wire::RangeLayer::kUnspecified, domain, name);
  }
}

uint64_t Session::StartRange(wire::RangeLayer layer, DomainId domain, std::string_view name) {
  if (!ActiveOrReactivated()) return 0;
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
  if (range_id == 0 || !ActiveOrReactivated()) return;
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

void Session::EmitHostRange(const wire::HostRangeRecord& record) {
  if (!ActiveOrReactivated()) return;
  wire::HostRangeRecord copy = record;
  if (copy.tid == 0) copy.tid = CurrentTid();
  pthread_mutex_lock(&writer_mutex_);
  if (EnsureStartedLocked()) CheckWrite(writer_->Append(copy));
  pthread_mutex_unlock(&writer_mutex_);
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

void Session::DrainLocked(ThreadBuffer* buffer) {
  buffer->Lock();
  std::swap(buffer->data, buffer->spare);
  const size_t size = buffer->used;
  buffer->used = 0;
  buffer->Unlock();
  const char* data = buffer->spare.get();
  for (size_t offset = 0; offset + sizeof(EventHeader) <= size && !disabled_.load();) {
    EventHeader header;
    std::memcpy(&header, data + offset, sizeof(header));
    std::string_view name(data + offset + sizeof(header), header.name_bytes);
    offset += sizeof(header) + header.name_bytes;
    std::string_view domain = DomainNameLocked(header.domain);
    switch (header.kind) {
      case kEventPush: {
        wire::RangePushRecord record;
        record.tid = buffer->tid;
        record.ts_ns = header.ts_ns;
        record.layer = static_cast<wire::RangeLayer>(header.layer);
        record.domain = domain;
        record.name = name;
        CheckWrite(writer_->Append(record));
        break;
      }
      case kEventPop: {
        wire::RangePopRecord record;
        record.tid = buffer->tid;
        record.ts_ns = header.ts_ns;
        record.domain = domain;
        CheckWrite(writer_->Append(record));
        break;
      }
      case kEventMark: {
        wire::MarkRecord record;
        record.tid = buffer->tid;
        record.ts_ns = header.ts_ns;
        record.domain = domain;
        record.name = name;
        CheckWrite(writer_->Append(record));
        break;
      }
      default: break;
    }
  }
}

void Session::DrainAllLocked(bool try_only) {
  if (!writer_ || disabled_.load()) return;
  for (size_t i = 0; i < buffers_.size();) {
    ThreadBuffer* buffer = buffers_[i];
    const bool dead = buffer->dead.load(std::memory_order_acquire);
    if (try_only) {
      if (buffer->TryLock()) {
        buffer->Unlock();
        DrainLocked(buffer);
      }
      ++i;
      continue;
    }
    DrainLocked(buffer);
    if (dead) {
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
  if (EnsureStartedLocked()) {
    std::string path = process_dir_ + "/" + file_name;
    if (FILE* file = std::fopen(path.c_str(), "a")) {
      std::fwrite(line.data(), 1, line.size(), file);
      std::fputc('\n', file);
      std::fclose(file);
    }
  }
  pthread_mutex_unlock(&writer_mutex_);
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
  for (;;) {
    pthread_mutex_lock(&wake_mutex_);
    if (!stop_) {
      timespec deadline;
      clock_gettime(CLOCK_REALTIME, &deadline);
      int64_t ns = deadline.tv_nsec + int64_t{options_.flush_interval_ms} * 1000000;
      deadline.tv_sec += ns / 1000000000;
      deadline.tv_nsec = ns % 1000000000;
      pthread_cond_timedwait(&wake_, &wake_mutex_, &deadline);
    }
    const bool stop = stop_;
    pthread_mutex_unlock(&wake_mutex_);
    if (stop) return;
    PollControlFile();
    Flush();
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
  writer_thread_running_ = false;
  stop_ = false;
  tls_slot.buffer = nullptr;  // leaked: its events are the parent's
  tls_slot.tid = 0;
}

void Session::EmergencyFlush(int signal) {
  if (process_dir_.empty()) return;
  WriteExitStatus(process_dir_.c_str(), ExitKind::kSignal, signal);
  alarm(2);  // if flushing deadlocks (crash inside malloc), die anyway
  if (pthread_mutex_trylock(&writer_mutex_) == 0) {
    if (writer_ && !disabled_.load()) {
      DrainAllLocked(true);
      (void)writer_->Flush();
    }
    pthread_mutex_unlock(&writer_mutex_);
  }
  alarm(0);
}

}  // namespace teller::capture
