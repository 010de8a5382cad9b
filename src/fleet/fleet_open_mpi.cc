// The fleet on MPI (docs/fleet.md has the protocol and its message sizes).
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "fleet/analysis_parts.h"
#include "fleet/fleet_open.h"
#include "fleet/unit_assignment.h"
#include "import/import_inputs.h"
#include "import/input_format.h"
#include "localize/step_features.h"
#include "reconstruct/call_chain_builder.h"
#include "store/store_set.h"
#include "store/trace_snapshot.h"
#include "store/trace_store.h"

namespace teller::fleet {
namespace {

namespace fs = std::filesystem;

using Clock = std::chrono::steady_clock;

constexpr int kRoot = 0;
constexpr int kUnitTag = 1;
constexpr int kFiguresTag = 2;
constexpr int kAnalysisTag = 3;
constexpr uint64_t kChunkBytes = uint64_t{1} << 30;  // MPI counts are int
constexpr double kNoLimit = -1;
// A wait for a message spins this long, then sleeps between tests, leaving the cores to
// the others (a worker importing on the same node).
constexpr auto kSpin = std::chrono::milliseconds(10);
constexpr useconds_t kPollSleepMicros = 200;
// Past this size a message is sent in pieces that MPI moves only inside its calls: its
// receive tests without sleeping (yielding the core), so the transfer is not slowed.
constexpr uint64_t kLargeMessageBytes = 64 * 1024;

// The figures a process keeps of its own traffic.
struct Traffic {
  uint64_t sent = 0;
  uint64_t received = 0;
  double unit_wait_seconds = 0;  // blocked sending or receiving units
  // Of sent and received: the analysis in parts' messages and answers.
  uint64_t summary_sent = 0;
  uint64_t summary_received = 0;
};

// What the steps of the protocol share: this process, the job's communicator (errors
// returned, not fatal), how long the first process waits for another, and the traffic.
struct Exchange {
  const Session& session;
  MPI_Comm comm;
  double timeout_seconds;
  Traffic traffic;

  // The first process waits within the timeout; the others on it without a limit.
  double wait_limit() const { return session.root() ? timeout_seconds : kNoLimit; }
};

enum class Waited { kDone, kTimedOut, kFailed };
enum class Idle { kSleep, kYield };  // between two tests of a long wait

struct WaitResult {
  Waited outcome = Waited::kDone;
  int error = MPI_SUCCESS;  // kFailed: MPI's error code
};

// Tests the request until it completes, fails, or limit_seconds pass (kNoLimit: none).
WaitResult WaitWithin(MPI_Request* request, double limit_seconds, Idle idle = Idle::kSleep) {
  const Clock::time_point start = Clock::now();
  while (true) {
    int done = 0;
    const int error = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (error != MPI_SUCCESS) return {Waited::kFailed, error};
    if (done) return {};
    const std::chrono::duration<double> waited = Clock::now() - start;
    if (limit_seconds != kNoLimit && waited.count() > limit_seconds) return {Waited::kTimedOut};
    if (waited <= kSpin) continue;
    if (idle == Idle::kSleep) {
      usleep(kPollSleepMicros);
    } else {
      std::this_thread::yield();
    }
  }
}

std::string MpiErrorText(int error) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(error, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

// Why the first process gave up on another: "did not answer within 600 s", "failed (...)".
std::string GaveUpWhy(const WaitResult& result, double timeout_seconds) {
  if (result.outcome == Waited::kTimedOut) {
    return fmt::format("did not answer within {:g} s", timeout_seconds);
  }
  return fmt::format("failed ({})", MpiErrorText(result.error));
}

// The first process's wait for a collective step of the plan: within the timeout, as
// MPI names no process of a collective that does not answer.
base::Status WaitForAll(const Exchange& exchange, MPI_Request* request, std::string_view step) {
  const WaitResult waited = WaitWithin(request, exchange.wait_limit());
  if (waited.outcome == Waited::kDone) return base::OkStatus();
  return base::Internal("a process of the job {} while {} (--fleet-timeout)",
                        GaveUpWhy(waited, exchange.timeout_seconds), step);
}

// Gives up a receive: cancelled; if MPI is already filling it (a transfer under way), its
// buffer is left to MPI for good: the job ends by MPI_Abort once the diagnosis is written.
void Abandon(MPI_Request* request, std::string* buffer) {
  MPI_Cancel(request);
  if (WaitWithin(request, 1.0).outcome == Waited::kDone) return;
  static_cast<void>(new std::string(std::move(*buffer)));  // never freed, on purpose
}

// One message (1 GiB at most) into bytes from offset `at`, waited on within the timeout.
WaitResult ReceivePiece(std::string* bytes, uint64_t at, uint64_t count, int from, int tag,
                        const Exchange& exchange) {
  MPI_Request request;
  const int error = MPI_Irecv(bytes->data() + at, static_cast<int>(count), MPI_BYTE, from, tag,
                              exchange.comm, &request);
  if (error != MPI_SUCCESS) return {Waited::kFailed, error};
  const Idle idle = count > kLargeMessageBytes ? Idle::kYield : Idle::kSleep;
  const WaitResult waited = WaitWithin(&request, exchange.wait_limit(), idle);
  if (waited.outcome == Waited::kTimedOut) Abandon(&request, bytes);
  return waited;
}

// One message (1 GiB at most) from offset `at` of bytes to process `to`, waited on within
// the timeout (the first process's sends: a process that stopped may never receive).
WaitResult SendPiece(std::string* bytes, uint64_t at, uint64_t count, int to, int tag,
                     const Exchange& exchange) {
  MPI_Request request;
  const int error = MPI_Isend(bytes->data() + at, static_cast<int>(count), MPI_BYTE, to, tag,
                              exchange.comm, &request);
  if (error != MPI_SUCCESS) return {Waited::kFailed, error};
  const Idle idle = count > kLargeMessageBytes ? Idle::kYield : Idle::kSleep;
  const WaitResult waited = WaitWithin(&request, exchange.wait_limit(), idle);
  if (waited.outcome == Waited::kTimedOut) Abandon(&request, bytes);
  return waited;
}

// The first process's side of the exchange: every wait on another process lasts at most
// the timeout; a process that does not answer in time, or that MPI reports failed, is
// lost, and it is not waited on again.
class Receiver {
 public:
  explicit Receiver(Exchange* exchange) : exchange_(exchange) {}

  // size bytes from process `from` (in messages of 1 GiB at most), or why it is lost.
  base::StatusOr<std::string> Receive(int from, int tag, uint64_t size) {
    if (lost_.count(from) > 0) return LostStatus(from);
    std::string bytes(size, '\0');
    for (uint64_t at = 0; at < size; at += kChunkBytes) {
      const uint64_t chunk = std::min<uint64_t>(kChunkBytes, size - at);
      const WaitResult waited = ReceivePiece(&bytes, at, chunk, from, tag, *exchange_);
      if (waited.outcome != Waited::kDone) {
        lost_[from] = GaveUpWhy(waited, exchange_->timeout_seconds);
        return LostStatus(from);
      }
    }
    exchange_->traffic.received += size;
    return bytes;
  }

  // Sends bytes to process `to` (in messages of 1 GiB at most), each within the timeout,
  // or says why it is lost.
  base::Status Send(int to, int tag, std::string bytes) {
    if (lost_.count(to) > 0) return LostStatus(to);
    for (uint64_t at = 0; at < bytes.size(); at += kChunkBytes) {
      const uint64_t chunk = std::min<uint64_t>(kChunkBytes, bytes.size() - at);
      const WaitResult waited = SendPiece(&bytes, at, chunk, to, tag, *exchange_);
      if (waited.outcome != Waited::kDone) {
        lost_[to] = GaveUpWhy(waited, exchange_->timeout_seconds);
        return LostStatus(to);
      }
    }
    exchange_->traffic.sent += bytes.size();
    return base::OkStatus();
  }

  // Each lost process and why.
  const std::map<int, std::string>& lost() const { return lost_; }

 private:
  base::Status LostStatus(int process) const {
    return base::Internal("process {} {}", process, lost_.at(process));
  }

  Exchange* exchange_;
  std::map<int, std::string> lost_;
};

// Adds the time of its scope to the traffic's unit wait.
class UnitWait {
 public:
  explicit UnitWait(Traffic* traffic)
      : traffic_(traffic), start_(std::chrono::steady_clock::now()) {}
  ~UnitWait() {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
    traffic_->unit_wait_seconds += took.count();
  }

 private:
  Traffic* traffic_;
  std::chrono::steady_clock::time_point start_;
};

// A header before each unit: which unit, whether it imported, how many bytes follow.
struct UnitHeader {
  uint64_t unit = 0;
  uint64_t ok = 0;
  uint64_t bytes = 0;
};

// A process other than the first: bytes to the first, in messages of 1 GiB at most.
base::Status SendBytes(const void* data, uint64_t size, int tag, Exchange* exchange) {
  const char* bytes = static_cast<const char*>(data);
  for (uint64_t at = 0; at < size; at += kChunkBytes) {
    const uint64_t chunk = std::min<uint64_t>(kChunkBytes, size - at);
    const int error =
        MPI_Send(bytes + at, static_cast<int>(chunk), MPI_BYTE, kRoot, tag, exchange->comm);
    if (error != MPI_SUCCESS) {
      return base::Internal("sending to the first process failed ({})", MpiErrorText(error));
    }
  }
  exchange->traffic.sent += size;
  return base::OkStatus();
}

// A broadcast of count items from the first process, waited on as WaitForAll says.
base::Status BroadcastWithin(void* data, int count, MPI_Datatype type, Exchange* exchange,
                             std::string_view step) {
  MPI_Request request;
  MPI_Ibcast(data, count, type, kRoot, exchange->comm, &request);
  return WaitForAll(*exchange, &request, step);
}

// Root's text to every process; returns it everywhere.
base::StatusOr<std::string> Broadcast(std::string text, Exchange* exchange) {
  constexpr std::string_view kStep = "the plan was sent";
  uint64_t size = text.size();
  TELLER_RETURN_IF_ERROR(BroadcastWithin(&size, 1, MPI_UINT64_T, exchange, kStep));
  text.resize(size);
  for (uint64_t at = 0; at < size; at += kChunkBytes) {
    const uint64_t chunk = std::min<uint64_t>(kChunkBytes, size - at);
    TELLER_RETURN_IF_ERROR(
        BroadcastWithin(text.data() + at, static_cast<int>(chunk), MPI_BYTE, exchange, kStep));
  }
  if (exchange->session.root()) {
    exchange->traffic.sent += size * static_cast<uint64_t>(exchange->session.processes() - 1);
  } else {
    exchange->traffic.received += size;
  }
  return text;
}

// Files and their formats (as their enum codes), as the messages carry them.
nlohmann::json FilesToJson(const std::vector<std::string>& files,
                           const std::vector<import::InputFormat>& formats) {
  std::vector<int> codes;
  for (import::InputFormat format : formats) codes.push_back(static_cast<int>(format));
  return nlohmann::json::array({files, codes});
}

teller::import::SeenFiles FilesFromJson(const nlohmann::json& json) {
  teller::import::SeenFiles seen;
  seen.files = json.at(0).get<std::vector<std::string>>();
  for (int code : json.at(1)) seen.formats.push_back(static_cast<import::InputFormat>(code));
  return seen;
}

nlohmann::json PlanToJson(const import::ImportPlan& plan) {
  nlohmann::json units = nlohmann::json::array();
  for (const import::ImportUnit& unit : plan.units) {
    units.push_back({unit.path, unit.file, unit.bundle_process, unit.rank});
  }
  return {{"files", FilesToJson(plan.files, plan.formats)}, {"units", units}};
}

// (teller:: keeps clang-format from reading a line that opens with `import` as C++20's.)
teller::import::ImportPlan PlanFromJson(const nlohmann::json& json) {
  teller::import::ImportPlan plan;
  teller::import::SeenFiles files = FilesFromJson(json.at("files"));
  plan.files = std::move(files.files);
  plan.formats = std::move(files.formats);
  for (const nlohmann::json& unit : json.at("units")) {
    plan.units.push_back({unit[0].get<std::string>(), unit[1].get<size_t>(), unit[2].get<int32_t>(),
                          unit[3].get<int32_t>()});
  }
  return plan;
}

// Every process's text, on the first (empty elsewhere).
base::StatusOr<std::vector<std::string>> GatherText(const std::string& text, Exchange* exchange) {
  constexpr std::string_view kStep = "the views of the inputs were gathered";
  const Session& session = exchange->session;
  const int size = static_cast<int>(text.size());
  const auto processes = static_cast<size_t>(session.processes());
  std::vector<int> sizes(session.root() ? processes : 0), offsets(sizes.size(), 0);
  MPI_Request request;
  MPI_Igather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, kRoot, exchange->comm, &request);
  TELLER_RETURN_IF_ERROR(WaitForAll(*exchange, &request, kStep));
  std::string all;
  for (size_t p = 0; p < sizes.size(); ++p) {
    offsets[p] = static_cast<int>(all.size());
    all.resize(all.size() + static_cast<size_t>(sizes[p]));
  }
  MPI_Igatherv(text.data(), size, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE,
               kRoot, exchange->comm, &request);
  TELLER_RETURN_IF_ERROR(WaitForAll(*exchange, &request, kStep));
  std::vector<std::string> texts;
  for (size_t p = 0; p < sizes.size(); ++p) {
    texts.push_back(all.substr(static_cast<size_t>(offsets[p]), static_cast<size_t>(sizes[p])));
  }
  if (session.root()) {
    exchange->traffic.received += all.size() - text.size();
  } else {
    exchange->traffic.sent += text.size();
  }
  return texts;
}

// This process's view of the inputs: "S" and per input its files and formats, or "E"
// and why it could not look.
std::string SeenHere(const std::vector<std::string>& inputs) {
  nlohmann::json seen = nlohmann::json::array();
  for (const std::string& input : inputs) {
    auto files = import::SeeInput(input);
    if (!files.ok()) return "E" + files.status().message();
    seen.push_back(FilesToJson(files->files, files->formats));
  }
  return "S" + seen.dump();
}

// The files a unit-less format names (logs, Flight Recorder dumps, bundles) are read by
// the first process: one only others see is an error that says so.
base::Status CheckRootSees(const import::SeenFiles& merged, const import::SeenFiles& own) {
  for (size_t i = 0; i < merged.files.size(); ++i) {
    const import::InputFormat format = merged.formats[i];
    if (import::ImportsAlone(format)) continue;
    if (std::find(own.files.begin(), own.files.end(), merged.files[i]) != own.files.end()) continue;
    return base::InvalidArgument(
        "{}: only other processes see this {} input; the first process reads the logs, "
        "Flight Recorder dumps and bundles (put them where it runs or on a shared disk)",
        merged.files[i], import::InputFormatName(format));
  }
  return base::OkStatus();
}

// The plan from the views of every process: each input's files wherever they lie.
base::StatusOr<import::ImportPlan> PlanFromViews(const std::vector<std::string>& inputs,
                                                 const std::vector<std::string>& views) {
  std::vector<std::vector<import::SeenFiles>> seen(views.size());
  for (size_t process = 0; process < views.size(); ++process) {
    const std::string& view = views[process];
    if (view.empty() || view[0] != 'S') {
      return base::InvalidArgument("process {}: {}", process,
                                   view.empty() ? "no view" : view.substr(1));
    }
    for (const nlohmann::json& input : nlohmann::json::parse(view.substr(1))) {
      seen[process].push_back(FilesFromJson(input));
    }
  }
  if (inputs.empty()) return base::InvalidArgument("no input given");
  std::vector<size_t> unseen;
  import::SeenFiles merged = MergeSeenInputs(seen, &unseen);
  if (!unseen.empty()) {
    return base::NotFound("{}: no process of the job sees it", inputs[unseen.front()]);
  }
  import::SeenFiles own;
  for (const import::SeenFiles& files : seen[kRoot]) {
    own.files.insert(own.files.end(), files.files.begin(), files.files.end());
  }
  TELLER_RETURN_IF_ERROR(CheckRootSees(merged, own));
  return import::PlanFiles(std::move(merged));
}

// Tests only (tests/fleet/distributed_test.py): TELLER_FLEET_TEST_STOP_PROCESS=N stops
// process N (SIGSTOP, as a debugger or a hung file system would) before it sends its
// first unit, N:plan before it sends its view of the inputs, and N:analysis after its
// units, before the analysis in parts: a process that never answers, at a moment a
// SIGSTOP from outside cannot be timed.
void StopIfATestSaysSo(const Session& session, std::string_view moment) {
  const char* value = std::getenv("TELLER_FLEET_TEST_STOP_PROCESS");
  if (value == nullptr || *value == '\0' || std::atoi(value) != session.process()) return;
  const char* colon = std::strchr(value, ':');
  const std::string_view wanted = colon != nullptr ? colon + 1 : "units";
  if (wanted == moment) std::raise(SIGSTOP);
}

// Every process resolves the inputs on its own disks (globs, directories); the first
// merges the views into the plan; every process gets it, or the error that stopped it.
base::StatusOr<import::ImportPlan> SharePlan(const std::vector<std::string>& inputs,
                                             Exchange* exchange) {
  StopIfATestSaysSo(exchange->session, "plan");
  TELLER_ASSIGN_OR_RETURN(const std::vector<std::string> views,
                          GatherText(SeenHere(inputs), exchange));
  std::string message;
  if (exchange->session.root()) {
    auto plan = PlanFromViews(inputs, views);
    message = plan.ok() ? "P" + PlanToJson(*plan).dump() : "E" + plan.status().message();
  }
  TELLER_ASSIGN_OR_RETURN(message, Broadcast(std::move(message), exchange));
  if (message.empty() || message[0] != 'P') {
    return base::InvalidArgument("{}", message.empty() ? "no plan" : message.substr(1));
  }
  return PlanFromJson(nlohmann::json::parse(message.substr(1)));
}

// Which units this process can read: their files are there.
std::vector<uint8_t> ReadableUnits(const import::ImportPlan& plan) {
  std::vector<uint8_t> readable;
  for (const import::ImportUnit& unit : plan.units) {
    std::error_code ec;
    readable.push_back(fs::exists(unit.path, ec) && fs::exists(plan.files[unit.file], ec));
  }
  return readable;
}

base::StatusOr<std::vector<int32_t>> ShareOwners(const import::ImportPlan& plan,
                                                 Exchange* exchange) {
  const Session& session = exchange->session;
  Traffic* traffic = &exchange->traffic;
  const size_t units = plan.units.size();
  const std::vector<uint8_t> mine = ReadableUnits(plan);
  std::vector<uint8_t> all(session.root() ? units * static_cast<size_t>(session.processes()) : 0);
  MPI_Request request;
  MPI_Igather(mine.data(), static_cast<int>(units), MPI_BYTE, all.data(), static_cast<int>(units),
              MPI_BYTE, kRoot, exchange->comm, &request);
  TELLER_RETURN_IF_ERROR(WaitForAll(*exchange, &request, "the readable units were gathered"));
  std::vector<int32_t> owners(units, -1);
  if (session.root()) {
    std::vector<std::vector<bool>> readable(static_cast<size_t>(session.processes()));
    for (size_t process = 0; process < readable.size(); ++process) {
      readable[process].assign(all.begin() + static_cast<ptrdiff_t>(process * units),
                               all.begin() + static_cast<ptrdiff_t>((process + 1) * units));
    }
    owners = AssignUnits(readable, units);
    traffic->received += all.size() - units;
    traffic->sent += owners.size() * sizeof(int32_t) * static_cast<size_t>(session.processes() - 1);
  } else {
    traffic->sent += units;
    traffic->received += owners.size() * sizeof(int32_t);
  }
  TELLER_RETURN_IF_ERROR(BroadcastWithin(owners.data(), static_cast<int>(units), MPI_INT32_T,
                                         exchange, "the units' owners were sent"));
  return owners;
}

// Imports a unit and, with a store folder, writes its store there (store/store_set.h).
base::Status ImportUnit(import::UnitImporter* importer, size_t unit,
                        const import::ImportOptions& options, const std::string& store_dir,
                        model::Trace* part) {
  TELLER_RETURN_IF_ERROR(importer->Import(unit, options, part));
  if (store_dir.empty()) return base::OkStatus();
  return store::SaveTrace(*part,
                          (std::filesystem::path(store_dir) / store::UnitStoreName(unit)).string());
}

// The units a process imported, kept for the analysis in parts (analysis_parts.h) when
// `keep` says so: their plan indexes, ascending, and their traces as imported.
struct KeptUnits {
  bool keep = false;
  std::vector<uint32_t> units;
  std::vector<model::Trace> parts;

  void Keep(size_t unit, model::Trace part) {
    if (!keep) return;
    units.push_back(static_cast<uint32_t>(unit));
    parts.push_back(std::move(part));
  }
};

// The unit as bytes: its snapshot (the trace kept), or why it did not import.
std::pair<bool, std::string> ImportToBytes(import::UnitImporter* importer, size_t unit,
                                           const import::ImportOptions& options,
                                           const std::string& store_dir, KeptUnits* kept) {
  model::Trace part;
  base::Status status = ImportUnit(importer, unit, options, store_dir, &part);
  if (!status.ok()) return {false, status.message()};
  std::string bytes = store::SerializeTraceSnapshot(part);
  kept->Keep(unit, std::move(part));
  return {true, std::move(bytes)};
}

// A process other than the first: imports its units in order and sends each.
base::StatusOr<int64_t> SendOwnUnits(const import::ImportPlan& plan,
                                     const std::vector<int32_t>& owners,
                                     const import::ImportOptions& options,
                                     const std::string& store_dir, Exchange* exchange,
                                     KeptUnits* kept) {
  StopIfATestSaysSo(exchange->session, "units");
  int64_t count = 0;
  import::UnitImporter importer(plan);
  for (size_t unit = 0; unit < owners.size(); ++unit) {
    if (owners[unit] != exchange->session.process()) continue;
    auto [ok, bytes] = ImportToBytes(&importer, unit, options, store_dir, kept);
    UnitHeader header{unit, ok ? 1u : 0u, bytes.size()};
    UnitWait wait(&exchange->traffic);
    TELLER_RETURN_IF_ERROR(SendBytes(&header, sizeof header, kUnitTag, exchange));
    TELLER_RETURN_IF_ERROR(SendBytes(bytes.data(), bytes.size(), kUnitTag, exchange));
    ++count;
  }
  return count;
}

// The first process: the snapshot of a unit its owner sends, or why it is not here.
base::StatusOr<std::string> ReceiveUnit(Receiver* receiver, int owner, size_t unit,
                                        Traffic* traffic) {
  UnitWait wait(traffic);
  TELLER_ASSIGN_OR_RETURN(const std::string head,
                          receiver->Receive(owner, kUnitTag, sizeof(UnitHeader)));
  UnitHeader header;
  std::memcpy(&header, head.data(), sizeof header);
  if (header.unit != unit) {
    return base::Internal("process {} sent unit {} where unit {} was due", owner, header.unit,
                          unit);
  }
  TELLER_ASSIGN_OR_RETURN(std::string bytes, receiver->Receive(owner, kUnitTag, header.bytes));
  if (header.ok == 0) return base::InvalidArgument("{}", bytes);
  return bytes;
}

// The first process: the unit's trace, imported here or received from its owner.
base::StatusOr<model::Trace> TakeUnit(import::UnitImporter* importer,
                                      const std::vector<int32_t>& owners, size_t unit,
                                      const import::ImportOptions& options,
                                      const std::string& store_dir, Receiver* receiver,
                                      Traffic* traffic, int64_t* own_units, KeptUnits* kept) {
  const int owner = owners[unit];
  if (owner < 0) return base::NotFound("no process of the job can read it");
  if (owner == kRoot) {
    ++*own_units;
    model::Trace part;
    TELLER_RETURN_IF_ERROR(ImportUnit(importer, unit, options, store_dir, &part));
    if (kept->keep) {
      // A trace does not copy: the kept part is its snapshot read back, as a worker's
      // unit reaches this process.
      TELLER_ASSIGN_OR_RETURN(model::Trace copy,
                              store::ParseTraceSnapshot(store::SerializeTraceSnapshot(part),
                                                        fmt::format("unit {}", unit)));
      kept->Keep(unit, std::move(copy));
    }
    return part;
  }
  TELLER_ASSIGN_OR_RETURN(const std::string bytes, ReceiveUnit(receiver, owner, unit, traffic));
  return store::ParseTraceSnapshot(bytes, fmt::format("unit {} from process {}", unit, owner));
}

ProcessFigures OwnFigures(const Session& session, int64_t units, double import_seconds,
                          const Traffic& traffic) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  ProcessFigures figures;
  figures.process = session.process();
  figures.units = units;
  figures.import_seconds = import_seconds;
  figures.cpu_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  figures.max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  figures.bytes_sent = traffic.sent;
  figures.bytes_received = traffic.received;
  figures.unit_wait_seconds = traffic.unit_wait_seconds;
  figures.summary_bytes_sent = traffic.summary_sent;
  figures.summary_bytes_received = traffic.summary_received;
  return figures;
}

// The first process: its own figures and those of every other process that answers
// (one that does not is lost).
std::vector<ProcessFigures> ReceiveFigures(const ProcessFigures& mine, Receiver* receiver,
                                           int processes) {
  std::vector<ProcessFigures> all = {mine};
  for (int process = 1; process < processes; ++process) {
    auto bytes = receiver->Receive(process, kFiguresTag, sizeof(ProcessFigures));
    if (!bytes.ok()) continue;
    all.emplace_back();
    std::memcpy(&all.back(), bytes->data(), sizeof(ProcessFigures));
  }
  return all;
}

// The first process: the units left out, each with its process when that one is lost.
void SortLeftOut(const import::ImportPlan& plan, const std::vector<int32_t>& owners,
                 const std::vector<import::SkippedUnit>& skipped,
                 const std::map<int, std::string>& lost, FleetTrace* fleet) {
  std::map<int, LostProcess> by_process;
  for (const auto& [process, why] : lost) by_process[process] = {process, why, {}};
  for (const import::SkippedUnit& skip : skipped) {
    const import::ImportUnit& unit = plan.units[skip.unit];
    MissingUnit missing{unit.path, unit.rank, skip.status.message()};
    auto owner = by_process.find(owners[skip.unit]);
    if (owner != by_process.end()) {
      owner->second.units.push_back(std::move(missing));
    } else {
      fleet->missing.push_back(std::move(missing));
    }
  }
  for (auto& [process, lost_process] : by_process) fleet->lost.push_back(std::move(lost_process));
}

// ---- The analysis in parts (analysis_parts.h) ----------------------------------------

// Whether the analysis in parts runs; every process decides the same from the plan. Not
// without reconstruction, nor with Flight Recorder dumps: they import on the joined trace
// only, and their collectives are matched with the units' there.
bool AnalyzesInParts(const import::ImportPlan& plan, const store::OpenOptions& options) {
  return options.reconstruct && std::none_of(plan.formats.begin(), plan.formats.end(),
                                             [](import::InputFormat format) {
                                               return format == import::InputFormat::kFlightRecorder;
                                             });
}

// A process other than the first: one message of the analysis, its size first.
base::Status SendSummary(const std::string& message, Exchange* exchange) {
  const uint64_t size = message.size();
  TELLER_RETURN_IF_ERROR(SendBytes(&size, sizeof size, kAnalysisTag, exchange));
  TELLER_RETURN_IF_ERROR(SendBytes(message.data(), size, kAnalysisTag, exchange));
  exchange->traffic.summary_sent += sizeof size + size;
  return base::OkStatus();
}

// A process other than the first: the first process's answer, waited on without a limit.
base::StatusOr<std::string> ReceiveAnswer(Exchange* exchange) {
  auto failed = [](const WaitResult& waited) {
    return base::Internal("receiving from the first process failed ({})",
                          MpiErrorText(waited.error));
  };
  std::string head(sizeof(uint64_t), '\0');
  WaitResult waited = ReceivePiece(&head, 0, head.size(), kRoot, kAnalysisTag, *exchange);
  if (waited.outcome != Waited::kDone) return failed(waited);
  uint64_t size = 0;
  std::memcpy(&size, head.data(), sizeof size);
  std::string bytes(size, '\0');
  for (uint64_t at = 0; at < size; at += kChunkBytes) {
    const uint64_t chunk = std::min<uint64_t>(kChunkBytes, size - at);
    waited = ReceivePiece(&bytes, at, chunk, kRoot, kAnalysisTag, *exchange);
    if (waited.outcome != Waited::kDone) return failed(waited);
  }
  exchange->traffic.received += sizeof size + size;
  exchange->traffic.summary_received += sizeof size + size;
  return bytes;
}

// A process other than the first: its parts through the phases, each message sent and the
// first process's answer awaited, until the last phase or a give-up.
base::Status TakePartInAnalysis(PartsOwner* owner, Exchange* exchange) {
  StopIfATestSaysSo(exchange->session, "analysis");
  std::string answer;
  for (AnalysisPhase phase : kAnalysisPhases) {
    TELLER_RETURN_IF_ERROR(SendSummary(owner->Message(phase, answer), exchange));
    if (!PhaseHasAnswer(phase)) break;
    TELLER_ASSIGN_OR_RETURN(answer, ReceiveAnswer(exchange));
    if (GiveUpReason(answer).has_value()) break;
  }
  return base::OkStatus();
}

// The first process: process `from`'s message of the analysis, within the timeout.
base::StatusOr<std::string> ReceiveSummary(Receiver* receiver, int from, Traffic* traffic) {
  TELLER_ASSIGN_OR_RETURN(const std::string head,
                          receiver->Receive(from, kAnalysisTag, sizeof(uint64_t)));
  uint64_t size = 0;
  std::memcpy(&size, head.data(), sizeof size);
  TELLER_ASSIGN_OR_RETURN(std::string bytes, receiver->Receive(from, kAnalysisTag, size));
  traffic->summary_received += sizeof size + size;
  return bytes;
}

// The first process: an answer to process `to`, its size first, within the timeout.
base::Status SendAnswer(Receiver* receiver, int to, std::string answer, Traffic* traffic) {
  const uint64_t size = answer.size();
  std::string head(reinterpret_cast<const char*>(&size), sizeof size);
  TELLER_RETURN_IF_ERROR(receiver->Send(to, kAnalysisTag, std::move(head)));
  TELLER_RETURN_IF_ERROR(receiver->Send(to, kAnalysisTag, std::move(answer)));
  traffic->summary_sent += sizeof size + size;
  return base::OkStatus();
}

// The first process: the phases over every process, its own parts' messages made here,
// the others' received within the timeout. A process lost (now or before) makes the
// merger give up, and every live process still gets an answer to each message it sends
// (a give-up ends its phases), so none waits for good.
void MergeAnalysis(PartsOwner* own, PartsMerger* merger, Receiver* receiver,
                   Exchange* exchange) {
  const int processes = exchange->session.processes();
  std::string own_answer;
  for (AnalysisPhase phase : kAnalysisPhases) {
    std::vector<std::string> messages(static_cast<size_t>(processes));
    if (!merger->gave_up()) messages[kRoot] = own->Message(phase, own_answer);
    for (int p = 1; p < processes; ++p) {
      auto message = ReceiveSummary(receiver, p, &exchange->traffic);
      if (message.ok()) {
        messages[static_cast<size_t>(p)] = std::move(*message);
      } else {
        merger->GiveUp(message.status().message());
      }
    }
    std::vector<std::string> answers = merger->Answer(phase, messages);
    if (!PhaseHasAnswer(phase)) return;
    const bool stop = GiveUpReason(answers[kRoot]).has_value();
    for (int p = 1; p < processes; ++p) {
      if (receiver->lost().count(p) > 0) continue;
      const base::Status sent = SendAnswer(receiver, p, std::move(answers[static_cast<size_t>(p)]),
                                           &exchange->traffic);
      if (!sent.ok()) merger->GiveUp(sent.message());
    }
    if (stop) return;
    own_answer = std::move(answers[kRoot]);
  }
}

// The first process: the out-of-memory report and the request causes of the log lines
// aligned on the parts' rows (`aligned`), and the lines compared with the joined trace's
// (why not, or "").
void FromLogsAligned(const PartsMerger& merger, const base::StatusOr<model::LogTable>& aligned,
                     const std::vector<uint32_t>& joined_units, const DistributedOptions& options,
                     FleetTrace* fleet) {
  const base::Status same =
      aligned.ok() ? CheckLogsAreTheJoinedTrace(*aligned, fleet->trace) : aligned.status();
  fleet->logs_note = same.ok() ? "" : same.message();
  auto oom = aligned.ok() ? OomFromParts(merger, *aligned, fleet->trace.strings, fleet->trace,
                                         joined_units, options.oom)
                          : base::StatusOr<cause::OomReport>(aligned.status());
  if (oom.ok()) {
    fleet->oom = std::move(*oom);
  } else {
    fleet->oom_note = oom.status().message();
  }
  auto causes = aligned.ok() ? RequestCausesFromParts(merger, *aligned, fleet->trace.strings,
                                                      fleet->trace, joined_units, options.causes)
                             : base::StatusOr<std::vector<cause::Hypothesis>>(aligned.status());
  if (causes.ok()) {
    fleet->request_causes = std::move(*causes);
  } else {
    fleet->request_causes_note = causes.status().message();
  }
}

// The run's counters from the plans compared with the joined trace's: why not, or "".
std::string RunCountersNote(const PartsMerger& merger, const model::Trace& joined) {
  const base::Status same = CheckRunCountersAreTheJoinedTrace(merger, joined);
  return same.ok() ? "" : same.message();
}

// The first process: the replay graph from the parts, or why the diagnosis replays on the
// joined trace (its features computed here for the check).
void ReplayFromParts(const PartsMerger& merger, const std::vector<uint32_t>& joined_units,
                     FleetTrace* fleet) {
  localize::StepFeatures features;
  if (merger.finished()) features = localize::ComputeStepFeatures(fleet->trace);
  auto graph = ReplayGraphFromParts(merger, fleet->trace, joined_units, features);
  if (graph.ok()) {
    fleet->replay_graph = std::move(*graph);
  } else {
    fleet->replay_graph_note = graph.status().message();
  }
}

// The first process: the map fitted from the parts' rows, the findings' rows, the request
// rows, the crash, the out-of-memory report and the request causes (from the log lines as
// imported, `imported`, aligned on the parts' rows) and the hang, or why the diagnosis makes them
// from the joined trace.
void FitFromParts(const import::ImportPlan& plan, const std::vector<import::SkippedUnit>& skipped,
                  const PartsMerger& merger, const DistributedOptions& options,
                  model::LogTable imported, int64_t log_window_ns, FleetTrace* fleet) {
  std::vector<bool> joined(plan.units.size(), true);
  for (const import::SkippedUnit& skip : skipped) joined[skip.unit] = false;
  std::vector<uint32_t> joined_units;
  for (size_t unit = 0; unit < joined.size(); ++unit) {
    if (joined[unit]) joined_units.push_back(static_cast<uint32_t>(unit));
  }
  auto map = MapFromParts(merger, fleet->trace, joined_units, options.deviation);
  if (map.ok()) {
    fleet->deviation_map = std::move(*map);
    const cause::CauseAnalysis* causes = merger.FittedCauses(options.deviation, options.causes);
    if (causes != nullptr) fleet->cause_analysis = *causes;
    if (causes != nullptr && merger.has_replay_graph()) {
      fleet->cause_operators = merger.cause_operators();
    }
  } else {
    fleet->deviation_map_note = map.status().message();
  }
  auto rows = FeatureRowsFromParts(merger, fleet->trace, joined_units);
  if (rows.ok()) {
    fleet->feature_rows = std::move(*rows);
  } else {
    fleet->feature_rows_note = rows.status().message();
  }
  auto requests = RequestRowsFromParts(merger, fleet->trace, joined_units);
  if (requests.ok()) {
    fleet->request_rows = std::move(*requests);
  } else {
    fleet->request_rows_note = requests.status().message();
  }
  auto crash = CrashFromParts(merger, fleet->trace, joined_units);
  if (crash.ok()) {
    fleet->crash = std::move(*crash);
  } else {
    fleet->crash_note = crash.status().message();
  }
  FromLogsAligned(
      merger, LogsAlignedOnParts(merger, std::move(imported), fleet->trace.strings, log_window_ns),
      joined_units, options, fleet);
  auto hang = HangFromParts(merger, fleet->trace, joined_units, options.hang);
  if (hang.ok()) {
    fleet->hang = std::move(*hang);
  } else {
    fleet->hang_note = hang.status().message();
  }
  ReplayFromParts(merger, joined_units, fleet);
  fleet->run_counters_note = RunCountersNote(merger, fleet->trace);
}

// The exchange's communicator: the job's processes, MPI errors returned, not fatal, so the
// first process can leave out a process that fails. It lives until MPI_Finalize.
base::StatusOr<MPI_Comm> JobCommunicator(const Session& session, double timeout_seconds) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request request;
  MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request);
  Exchange world{session, MPI_COMM_WORLD, timeout_seconds, {}};
  TELLER_RETURN_IF_ERROR(WaitForAll(world, &request, "the job started"));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return comm;
}

// A process other than the first: its units imported and sent, then, kept, through the
// analysis in parts, then its figures.
base::Status RunWorker(const import::ImportPlan& plan, const std::vector<int32_t>& owners,
                       const store::OpenOptions& options, const std::string& store_dir,
                       Exchange* exchange) {
  import::ImportOptions quiet = options.import;
  quiet.progress = nullptr;
  KeptUnits kept;
  kept.keep = AnalyzesInParts(plan, options);
  const auto start = Clock::now();
  TELLER_ASSIGN_OR_RETURN(const int64_t units,
                          SendOwnUnits(plan, owners, quiet, store_dir, exchange, &kept));
  const std::chrono::duration<double> took = Clock::now() - start;
  const auto analysis_start = Clock::now();
  int64_t steps = 0;
  if (kept.keep) {
    PartsOwner owner(std::move(kept.units), std::move(kept.parts));
    TELLER_RETURN_IF_ERROR(TakePartInAnalysis(&owner, exchange));
    steps = static_cast<int64_t>(owner.steps());
  }
  const std::chrono::duration<double> analysis = Clock::now() - analysis_start;
  ProcessFigures mine = OwnFigures(exchange->session, units, took.count(), exchange->traffic);
  mine.analysis_seconds = kept.keep ? analysis.count() : 0;
  mine.analysis_steps = steps;
  return SendBytes(&mine, sizeof mine, kFiguresTag, exchange);
}

// The first process: the units joined, the analysis in parts merged, every process's
// figures, then the logs and reconstruction of the joined trace and the map from the
// parts (or why not).
base::StatusOr<FleetTrace> RunRoot(const import::ImportPlan& plan,
                                   const std::vector<int32_t>& owners,
                                   const store::OpenOptions& options,
                                   const DistributedOptions& distributed, Exchange* exchange) {
  const Session& session = exchange->session;
  const std::string& store_dir = distributed.store_dir;
  FleetTrace fleet;
  const auto start = Clock::now();
  Receiver receiver(exchange);
  int64_t own_units = 0;
  std::vector<import::SkippedUnit> skipped;
  KeptUnits kept;
  kept.keep = AnalyzesInParts(plan, options);
  import::UnitImporter importer(plan);
  auto take = [&](size_t unit) {
    return TakeUnit(&importer, owners, unit, options.import, store_dir, &receiver,
                    &exchange->traffic, &own_units, &kept);
  };
  base::Status joined =
      import::ImportPlanned(plan, options.import, take, &fleet.trace, &skipped).status();
  if (joined.ok() && !store_dir.empty()) {
    joined = store::WriteStoreSetManifest(plan, skipped, store_dir);
  }
  // A first process that failed here has units unreceived: the caller aborts the job.
  TELLER_RETURN_IF_ERROR(joined);
  const std::chrono::duration<double> took = Clock::now() - start;
  // Before the analysis: its third phase sends the out-of-memory line's site.
  import::ParseLogsOfTrace(options.import, &fleet.trace);
  const auto analysis_start = Clock::now();
  PartsMerger merger(static_cast<size_t>(session.processes()), UnitBundles(plan));
  merger.SetHangOptions(distributed.hang);
  merger.SetCauseOptions(distributed.deviation, distributed.causes);
  merger.SetLogLines(&fleet.trace.logs, &fleet.trace.strings);
  int64_t steps = 0;
  if (kept.keep) {
    PartsOwner own(std::move(kept.units), std::move(kept.parts));
    MergeAnalysis(&own, &merger, &receiver, exchange);
    steps = static_cast<int64_t>(own.steps());
  } else {
    merger.GiveUp(options.reconstruct ? "Flight Recorder dumps join the trace on this process only"
                                      : "the trace is not reconstructed");
  }
  const std::chrono::duration<double> analysis = Clock::now() - analysis_start;
  ProcessFigures mine = OwnFigures(session, own_units, took.count(), exchange->traffic);
  mine.analysis_seconds = kept.keep ? analysis.count() : 0;
  mine.analysis_steps = steps;
  fleet.figures = ReceiveFigures(mine, &receiver, session.processes());
  SortLeftOut(plan, owners, skipped, receiver.lost(), &fleet);
  // The lines as imported, for their alignment on the parts' rows.
  model::LogTable imported_logs;
  if (merger.finished()) imported_logs = fleet.trace.logs;
  reconstruct::BuildOptions build;
  build.progress = options.import.progress;
  if (options.reconstruct && !fleet.trace.reconstructed) {
    TELLER_RETURN_IF_ERROR(reconstruct::BuildCallChains(&fleet.trace, build));
  }
  FitFromParts(plan, skipped, merger, distributed, std::move(imported_logs), build.log_window_ns,
               &fleet);
  return fleet;
}

}  // namespace

bool Available() { return true; }

base::StatusOr<std::unique_ptr<Session>> Session::Start() {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    return base::Internal("MPI_Init_thread failed: run teller under mpirun or srun");
  }
  int process = 0, processes = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  return std::unique_ptr<Session>(new Session(process, processes));
}

Session::~Session() {
  // Wait for the others without spinning (MPI's own waits poll the cores).
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  int done = 0;
  while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) usleep(2000);
  MPI_Finalize();
}

void Session::Abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

base::StatusOr<FleetTrace> OpenTraceDistributed(const Session& session,
                                                const std::vector<std::string>& inputs,
                                                const store::OpenOptions& options,
                                                const DistributedOptions& distributed) {
  const std::string& store_dir = distributed.store_dir;
  std::error_code error;
  if (!store_dir.empty()) std::filesystem::create_directories(store_dir, error);
  TELLER_ASSIGN_OR_RETURN(MPI_Comm comm,
                          JobCommunicator(session, distributed.answer_timeout_seconds));
  Exchange exchange{session, comm, distributed.answer_timeout_seconds, {}};
  TELLER_ASSIGN_OR_RETURN(import::ImportPlan plan, SharePlan(inputs, &exchange));
  TELLER_ASSIGN_OR_RETURN(const std::vector<int32_t> owners, ShareOwners(plan, &exchange));
  if (!session.root()) {
    TELLER_RETURN_IF_ERROR(RunWorker(plan, owners, options, store_dir, &exchange));
    return FleetTrace{};
  }
  return RunRoot(plan, owners, options, distributed, &exchange);
}

}  // namespace teller::fleet
