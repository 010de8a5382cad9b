// The fleet on MPI (docs/fleet.md has the protocol and its message sizes).
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "fleet/fleet_open.h"
#include "fleet/unit_assignment.h"
#include "import/import_inputs.h"
#include "import/input_format.h"
#include "reconstruct/call_chain_builder.h"
#include "store/store_set.h"
#include "store/trace_snapshot.h"
#include "store/trace_store.h"

namespace teller::fleet {
namespace {

namespace fs = std::filesystem;

constexpr int kRoot = 0;
constexpr int kUnitTag = 1;
constexpr uint64_t kChunkBytes = uint64_t{1} << 30;  // MPI counts are int

// The figures a process keeps of its own traffic.
struct Traffic {
  uint64_t sent = 0;
  uint64_t received = 0;
  double unit_wait_seconds = 0;  // blocked sending or receiving units
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

void SendBytes(const std::string& bytes, int to, Traffic* traffic) {
  for (uint64_t at = 0; at < bytes.size(); at += kChunkBytes) {
    const uint64_t size = std::min<uint64_t>(kChunkBytes, bytes.size() - at);
    MPI_Send(bytes.data() + at, static_cast<int>(size), MPI_BYTE, to, kUnitTag, MPI_COMM_WORLD);
  }
  traffic->sent += bytes.size();
}

std::string ReceiveBytes(uint64_t size, int from, Traffic* traffic) {
  std::string bytes(size, '\0');
  for (uint64_t at = 0; at < size; at += kChunkBytes) {
    const uint64_t chunk = std::min<uint64_t>(kChunkBytes, size - at);
    MPI_Recv(bytes.data() + at, static_cast<int>(chunk), MPI_BYTE, from, kUnitTag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
  }
  traffic->received += size;
  return bytes;
}

// Root's text to every process; returns it everywhere.
std::string Broadcast(const Session& session, std::string text, Traffic* traffic) {
  uint64_t size = text.size();
  MPI_Bcast(&size, 1, MPI_UINT64_T, kRoot, MPI_COMM_WORLD);
  text.resize(size);
  for (uint64_t at = 0; at < size; at += kChunkBytes) {
    const uint64_t chunk = std::min<uint64_t>(kChunkBytes, size - at);
    MPI_Bcast(text.data() + at, static_cast<int>(chunk), MPI_BYTE, kRoot, MPI_COMM_WORLD);
  }
  if (session.root()) {
    traffic->sent += size * static_cast<uint64_t>(session.processes() - 1);
  } else {
    traffic->received += size;
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
std::vector<std::string> GatherText(const Session& session, const std::string& text,
                                    Traffic* traffic) {
  const int size = static_cast<int>(text.size());
  const auto processes = static_cast<size_t>(session.processes());
  std::vector<int> sizes(session.root() ? processes : 0), offsets(sizes.size(), 0);
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, kRoot, MPI_COMM_WORLD);
  std::string all;
  for (size_t p = 0; p < sizes.size(); ++p) {
    offsets[p] = static_cast<int>(all.size());
    all.resize(all.size() + static_cast<size_t>(sizes[p]));
  }
  MPI_Gatherv(text.data(), size, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE,
              kRoot, MPI_COMM_WORLD);
  std::vector<std::string> texts;
  for (size_t p = 0; p < sizes.size(); ++p) {
    texts.push_back(all.substr(static_cast<size_t>(offsets[p]), static_cast<size_t>(sizes[p])));
  }
  if (session.root()) {
    traffic->received += all.size() - text.size();
  } else {
    traffic->sent += text.size();
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

// Every process resolves the inputs on its own disks (globs, directories); the first
// merges the views into the plan; every process gets it, or the error that stopped it.
base::StatusOr<import::ImportPlan> SharePlan(const Session& session,
                                             const std::vector<std::string>& inputs,
                                             Traffic* traffic) {
  const std::vector<std::string> views = GatherText(session, SeenHere(inputs), traffic);
  std::string message;
  if (session.root()) {
    auto plan = PlanFromViews(inputs, views);
    message = plan.ok() ? "P" + PlanToJson(*plan).dump() : "E" + plan.status().message();
  }
  message = Broadcast(session, std::move(message), traffic);
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

std::vector<int32_t> ShareOwners(const Session& session, const import::ImportPlan& plan,
                                 Traffic* traffic) {
  const size_t units = plan.units.size();
  const std::vector<uint8_t> mine = ReadableUnits(plan);
  std::vector<uint8_t> all(session.root() ? units * static_cast<size_t>(session.processes()) : 0);
  MPI_Gather(mine.data(), static_cast<int>(units), MPI_BYTE, all.data(), static_cast<int>(units),
             MPI_BYTE, kRoot, MPI_COMM_WORLD);
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
  MPI_Bcast(owners.data(), static_cast<int>(units), MPI_INT32_T, kRoot, MPI_COMM_WORLD);
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

// The unit as bytes: its snapshot, or why it did not import.
std::pair<bool, std::string> ImportToBytes(import::UnitImporter* importer, size_t unit,
                                           const import::ImportOptions& options,
                                           const std::string& store_dir) {
  model::Trace part;
  base::Status status = ImportUnit(importer, unit, options, store_dir, &part);
  if (!status.ok()) return {false, status.message()};
  return {true, store::SerializeTraceSnapshot(part)};
}

// A process other than the first: imports its units in order and sends each.
int64_t SendOwnUnits(const Session& session, const import::ImportPlan& plan,
                     const std::vector<int32_t>& owners, const import::ImportOptions& options,
                     const std::string& store_dir, Traffic* traffic) {
  int64_t count = 0;
  import::UnitImporter importer(plan);
  for (size_t unit = 0; unit < owners.size(); ++unit) {
    if (owners[unit] != session.process()) continue;
    auto [ok, bytes] = ImportToBytes(&importer, unit, options, store_dir);
    UnitHeader header{unit, ok ? 1u : 0u, bytes.size()};
    UnitWait wait(traffic);
    MPI_Send(&header, sizeof header, MPI_BYTE, kRoot, kUnitTag, MPI_COMM_WORLD);
    traffic->sent += sizeof header;
    SendBytes(bytes, kRoot, traffic);
    ++count;
  }
  return count;
}

// The first process: the unit's trace, imported here or received from its owner.
base::StatusOr<model::Trace> TakeUnit(import::UnitImporter* importer,
                                      const std::vector<int32_t>& owners, size_t unit,
                                      const import::ImportOptions& options,
                                      const std::string& store_dir, Traffic* traffic,
                                      int64_t* own_units) {
  const int owner = owners[unit];
  if (owner < 0) return base::NotFound("no process of the job can read it");
  if (owner == kRoot) {
    ++*own_units;
    model::Trace part;
    TELLER_RETURN_IF_ERROR(ImportUnit(importer, unit, options, store_dir, &part));
    return part;
  }
  UnitHeader header;
  std::string bytes;
  {
    UnitWait wait(traffic);
    MPI_Recv(&header, sizeof header, MPI_BYTE, owner, kUnitTag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    traffic->received += sizeof header;
    if (header.unit != unit) {
      return base::Internal("process {} sent unit {} where unit {} was due", owner, header.unit,
                            unit);
    }
    bytes = ReceiveBytes(header.bytes, owner, traffic);
  }
  if (header.ok == 0) return base::InvalidArgument("{}", bytes);
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
  return figures;
}

std::vector<ProcessFigures> GatherFigures(const Session& session, const ProcessFigures& mine) {
  std::vector<ProcessFigures> all(session.root() ? static_cast<size_t>(session.processes()) : 0);
  MPI_Gather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, kRoot,
             MPI_COMM_WORLD);
  return all;
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
                                                const std::string& store_dir) {
  Traffic traffic;
  std::error_code error;
  if (!store_dir.empty()) std::filesystem::create_directories(store_dir, error);
  TELLER_ASSIGN_OR_RETURN(import::ImportPlan plan, SharePlan(session, inputs, &traffic));
  const std::vector<int32_t> owners = ShareOwners(session, plan, &traffic);
  FleetTrace fleet;
  const auto start = std::chrono::steady_clock::now();
  int64_t own_units = 0;
  base::Status joined = base::OkStatus();
  if (session.root()) {
    std::vector<import::SkippedUnit> skipped;
    import::UnitImporter importer(plan);
    auto take = [&](size_t unit) {
      return TakeUnit(&importer, owners, unit, options.import, store_dir, &traffic, &own_units);
    };
    auto imported = import::ImportPlanned(plan, options.import, take, &fleet.trace, &skipped);
    joined = imported.status();
    if (joined.ok() && !store_dir.empty())
      joined = store::WriteStoreSetManifest(plan, skipped, store_dir);
    for (const import::SkippedUnit& skip : skipped) {
      const import::ImportUnit& unit = plan.units[skip.unit];
      fleet.missing.push_back({unit.path, unit.rank, skip.status.message()});
    }
  } else {
    import::ImportOptions quiet = options.import;
    quiet.progress = nullptr;
    own_units = SendOwnUnits(session, plan, owners, quiet, store_dir, &traffic);
  }
  // A first process that failed here has units unreceived: the caller aborts the job.
  TELLER_RETURN_IF_ERROR(joined);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  fleet.figures = GatherFigures(session, OwnFigures(session, own_units, took.count(), traffic));
  if (!session.root()) return fleet;
  import::ParseLogsOfTrace(options.import, &fleet.trace);
  if (options.reconstruct && !fleet.trace.reconstructed) {
    reconstruct::BuildOptions build;
    build.progress = options.import.progress;
    TELLER_RETURN_IF_ERROR(reconstruct::BuildCallChains(&fleet.trace, build));
  }
  return fleet;
}

}  // namespace teller::fleet
