#include "sim/log_emitter.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/engine_profile.h"

namespace teller::sim {

CivilTime ToCivil(int64_t epoch_ns) {
  int64_t secs = epoch_ns / 1000000000;
  int64_t nanos = epoch_ns % 1000000000;
  if (nanos < 0) {
    nanos += 1000000000;
    --secs;
  }
  int64_t days = secs / 86400;
  int64_t rem = secs % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  // civil_from_days (proleptic Gregorian).
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  const int64_t y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  return {static_cast<int>(y),
          static_cast<int>(m),
          static_cast<int>(d),
          static_cast<int>(rem / 3600),
          static_cast<int>(rem % 3600 / 60),
          static_cast<int>(rem % 60),
          nanos};
}

LogEmitter::LogEmitter(const SimConfig& config, Rng* rng, std::vector<int64_t> pids,
                       std::vector<int64_t> realtime_offset_ns)
    : config_(config),
      profile_(ProfileFor(config.engine)),
      rng_(rng),
      pids_(std::move(pids)),
      realtime_offset_ns_(std::move(realtime_offset_ns)) {}

int64_t LogEmitter::Realtime(int32_t rank, int64_t t_ns) const {
  return realtime_offset_ns_[static_cast<size_t>(rank)] + t_ns;
}

void LogEmitter::Add(int32_t rank, int64_t t_ns, bool err, std::string text) {
  lines_.push_back({t_ns, rank, err, std::move(text)});
}

std::string LogEmitter::AccessLine(const Request& r, std::string_view route) {
  return fmt::format("INFO:     10.0.3.{}:{} - \"POST {} HTTP/1.1\" 200 OK", 20 + r.index % 7,
                     40000 + r.index * 37 % 20000, route);
}

std::string LogEmitter::NcclPrefix(int32_t rank) const {
  const int64_t pid = pids_[static_cast<size_t>(rank)];
  return fmt::format("node{}:{}:{} [{}] ", NodeOfRank(config_.cluster, rank), pid, pid,
                     LocalRankOf(config_.cluster, rank));
}

void LogEmitter::Startup(int64_t t) {
  const ClusterSpec& cl = config_.cluster;
  const int32_t world = cl.world();
  const int64_t ms = 1000000;
  profile_.LogBanner(*this, t);
  // NCCL bring-up on every rank.
  const int32_t group = profile_.CollectiveGroupSize(cl);
  for (int32_t r = 0; r < world; ++r) {
    const int64_t tr = t + (20 + r) * ms;
    const std::string p = NcclPrefix(r);
    Add(r, tr, false,
        p + fmt::format("NCCL INFO Bootstrap : Using eth0:10.0.{}.{}<0>", NodeOfRank(cl, r),
                        10 + LocalRankOf(cl, r)));
    Add(r, tr + 1000, false,
        p + "NCCL INFO NET/Plugin: No plugin found (libnccl-net.so), using "
            "internal implementation");
    Add(r, tr + 2000, false, p + "NCCL INFO cudaDriverVersion 12040");
    Add(r, tr + 3000, false, p + "NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0");
    Add(r, tr + 40 * ms, false,
        p + fmt::format("NCCL INFO comm 0x{:x} rank {} nranks {} cudaDev {} nvmlDev {} busId {}000 "
                        "commId 0x{:016x} - Init COMPLETE",
                        0x55d0c1a00000ull + static_cast<uint64_t>(r) * 0x1000, r % group, group,
                        LocalRankOf(cl, r), LocalRankOf(cl, r), 1 + LocalRankOf(cl, r),
                        MixSeed(config_.seed, 77)));
    profile_.LogRankStartup(*this, r, tr);
  }
  profile_.LogEngineReady(*this, t);
  window_.last_metrics_ns = t;
}

void LogEmitter::RequestArrived(const Request& r, int64_t t) {
  profile_.LogRequestArrived(*this, r, t);
}

void LogEmitter::RequestFinished(const Request& r, int64_t t) {
  ++window_.finished;
  profile_.LogRequestFinished(*this, r, t);
}

void LogEmitter::RequestAborted(const Request& r, int64_t t) {
  profile_.LogRequestAborted(*this, r, t);
}

void LogEmitter::Preempted(const Request& r, int64_t t, int64_t total) {
  profile_.LogPreempted(*this, r, t, total);
}

void LogEmitter::StepDone(const StepPlan& plan, const EngineScheduler&, int64_t end) {
  window_.prompt_tokens += plan.prefill_tokens;
  window_.gen_tokens += plan.decode_tokens;
  const double usage =
      plan.kv_blocks_total > 0 ? double(plan.kv_blocks_used) / plan.kv_blocks_total : 0;
  profile_.LogStepDone(*this, plan, usage, end);
}

void LogEmitter::LinkRetry(int32_t rank, int64_t t) {
  Add(rank, t, false,
      NcclPrefix(rank) + fmt::format("NCCL INFO NET/IB : retrying on QP 0x{:x} after transport "
                                     "retry counter exceeded (wc status 12)",
                                     0x1a0 + rng_->UniformInt(0, 63)));
}

namespace {

constexpr std::string_view kAsyncErrorNotes[] = {
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."};

}  // namespace

int LogEmitter::IllegalAccess(int32_t rank, int64_t t, std::string_view call, int32_t group_rank) {
  std::vector<std::string> lines;
  if (call == "cudaEventQuery") {
    // ProcessGroupNCCL's watchdog (PyTorch >= 2.2) logs what its event query raised, then
    // rethrows it as a DistBackendError, which terminates the process.
    const CivilTime c = ToCivil(Realtime(rank, t));
    lines.push_back(fmt::format(
        "[rank{}]:[E{}{:02d} {:02d}:{:02d}:{:02d}.{:09d} ProcessGroupNCCL.cpp:2057] [PG ID 2 PG "
        "GUID 3 Rank {}] Process group watchdog thread terminated with exception: CUDA error: "
        "an illegal memory access was encountered",
        rank, c.month, c.day, c.hour, c.minute, c.second, c.nanos, group_rank));
    for (std::string_view note : kAsyncErrorNotes) lines.emplace_back(note);
    lines.push_back("terminate called after throwing an instance of 'c10::DistBackendError'");
  } else {
    std::string header = profile_.FatalErrorHeader(
        *this, t, "RuntimeError('CUDA error: an illegal memory access was encountered')");
    if (!header.empty()) lines.push_back(std::move(header));
    lines.push_back("Traceback (most recent call last):");
    // A launch fails in the forward pass; a copy or the synchronization where the worker
    // fetches the sampled tokens (.tolist(): cudaMemcpyAsync, cudaStreamSynchronize).
    const bool forward = call.find("Launch") != std::string_view::npos;
    lines.push_back(
        fmt::format("  File \"/usr/local/lib/python3.12/dist-packages/{}\", line {}, in "
                    "execute_model",
                    profile_.traceback_runner(), forward ? 1187 : 1216));
    lines.push_back(forward ? "    hidden_states = self.model(input_ids, positions, "
                              "intermediate_tensors)"
                            : "    valid_sampled_token_ids = sampled_token_ids.tolist()");
    lines.push_back("RuntimeError: CUDA error: an illegal memory access was encountered");
    for (std::string_view note : kAsyncErrorNotes) lines.emplace_back(note);
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    Add(rank, t + static_cast<int64_t>(i) * 1000, true, lines[i]);
  }
  profile_.LogWorkerDied(*this, rank, t);
  return static_cast<int>(lines.size());
}

namespace {

// PyTorch's format_size: MiB below a GiB, else GiB, two decimals.
std::string AllocatorSize(double gib) {
  return gib < 1.0 ? fmt::format("{:.2f} MiB", gib * 1024.0) : fmt::format("{:.2f} GiB", gib);
}

}  // namespace

int LogEmitter::OutOfMemory(int32_t rank, int64_t t, double requested_gib, int32_t device,
                            AllocationSite site) {
  constexpr double kCapacityGib = 79.19;  // an 80 GB H100 as CUDA reports it
  const double free_gib = rng_->Uniform(0.15, 0.9);
  const double in_use_gib = kCapacityGib - free_gib;
  const double outside_gib = rng_->Uniform(0.5, 1.2);  // CUDA context, NCCL buffers
  const double unallocated_gib = std::min(rng_->Uniform(0.2, 1.4), 0.6 * requested_gib);
  const double allocated_gib = in_use_gib - outside_gib - unallocated_gib;
  std::vector<std::string> tb;
  const std::string message = fmt::format(
      "CUDA out of memory. Tried to allocate {}. GPU {} has a total "
      "capacity of {:.2f} GiB of which {} is free. Including non-PyTorch memory, this process "
      "has {} memory in use. Of the allocated memory {} is allocated by PyTorch, and {} is "
      "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
      "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
      "documentation for Memory Management  "
      "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
      AllocatorSize(requested_gib), device, kCapacityGib, AllocatorSize(free_gib),
      AllocatorSize(in_use_gib), AllocatorSize(allocated_gib), AllocatorSize(unallocated_gib));
  // The engine's fatal-error line (vLLM v0: the exception's repr).
  std::string header = profile_.FatalErrorHeader(*this, t, "OutOfMemoryError('" + message + "')");
  if (!header.empty()) tb.push_back(std::move(header));
  tb.push_back("Traceback (most recent call last):");
  // The call that allocated: the forward pass (eager attention), the logits after a graph
  // replay, or the step's input tensors.
  const std::string_view runner = profile_.traceback_runner();
  switch (site) {
    case AllocationSite::kLogits:
      tb.push_back(fmt::format(
          "  File \"/usr/local/lib/python3.12/dist-packages/{}\", line 1203, in execute_model",
          runner));
      tb.push_back("    logits = self.model.compute_logits(hidden_states, sampling_metadata)");
      break;
    case AllocationSite::kInputs:
      tb.push_back(
          fmt::format("  File \"/usr/local/lib/python3.12/dist-packages/{}\", line 1064, in "
                      "prepare_model_input",
                      runner));
      tb.push_back("    model_input = self._prepare_model_input_tensors(seq_group_metadata_list)");
      break;
    default:
      tb.push_back(fmt::format(
          "  File \"/usr/local/lib/python3.12/dist-packages/{}\", line 1187, in execute_model",
          runner));
      tb.push_back("    hidden_states = self.model(input_ids, positions, intermediate_tensors)");
  }
  tb.push_back("torch.OutOfMemoryError: " + message);
  for (size_t i = 0; i < tb.size(); ++i) Add(rank, t + static_cast<int64_t>(i) * 1000, true, tb[i]);
  profile_.LogWorkerDied(*this, rank, t);
  return static_cast<int>(tb.size());
}

void LogEmitter::NcclTimeout(int32_t hung_rank, int64_t t, const std::string& op, int64_t seq,
                             int64_t numel, int32_t group_size, int32_t first_rank) {
  std::string op_type = op == "all_reduce"        ? "ALLREDUCE"
                        : op == "all_gather"      ? "ALLGATHER"
                        : op == "_allgather_base" ? "_ALLGATHER_BASE"
                                                  : "SEND";
  for (int32_t g = 0; g < group_size; ++g) {
    const int32_t rank = first_rank + g;
    if (rank == hung_rank) continue;
    const CivilTime c = ToCivil(Realtime(rank, t));
    const std::string stamp = fmt::format("[rank{}]:[E{}{:02d} {:02d}:{:02d}:{:02d}.{:09d} ", rank,
                                          c.month, c.day, c.hour, c.minute, c.second, c.nanos);
    Add(rank, t, true,
        stamp + fmt::format("ProcessGroupNCCL.cpp:616] [Rank {}] Watchdog caught collective "
                            "operation timeout: WorkNCCL(SeqNum={}, OpType={}, NumelIn={}, "
                            "NumelOut={}, Timeout(ms)=600000) ran for {} milliseconds before "
                            "timing out.",
                            g, seq + 1, op_type, numel, numel, 600000 + rng_->UniformInt(5, 90)));
    Add(rank, t + 300000, true,
        stamp + fmt::format("ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID 3 Rank {}] Exception "
                            "(either an error or timeout) detected by watchdog at work: {}, last "
                            "enqueued NCCL work: {}, last completed NCCL work: {}.",
                            g, seq + 1, seq + 1, seq));
    Add(rank, t + 600000, true,
        "terminate called after throwing an instance of "
        "'c10::DistBackendError'");
  }
}

void LogEmitter::Finish(int64_t t) { profile_.LogShutdown(*this, t); }

std::vector<SimLogLine> LogEmitter::Drain() {
  std::stable_sort(lines_.begin(), lines_.end(),
                   [](const SimLogLine& a, const SimLogLine& b) { return a.true_ns < b.true_ns; });
  std::vector<SimLogLine> out;
  out.swap(lines_);
  return out;
}

}  // namespace teller::sim
