#include "sim/log_emitter.h"

#include <fmt/format.h>

#include <algorithm>

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
      rng_(rng),
      pids_(std::move(pids)),
      realtime_offset_ns_(std::move(realtime_offset_ns)) {}

bool LogEmitter::v1() const {
  return config_.engine == EngineKind::kVllmV1Online ||
         config_.engine == EngineKind::kVllmV1Offline;
}

int64_t LogEmitter::Realtime(int32_t rank, int64_t t_ns) const {
  return realtime_offset_ns_[static_cast<size_t>(rank)] + t_ns;
}

void LogEmitter::Add(int32_t rank, int64_t t_ns, bool err, std::string text) {
  lines_.push_back({t_ns, rank, err, std::move(text)});
}

std::string LogEmitter::VllmPrefix(const char* level, int32_t rank, int64_t t_ns, const char* file,
                                   int line) const {
  const CivilTime c = ToCivil(Realtime(rank, t_ns));
  std::string worker;
  if (rank != 0) {
    worker =
        v1() ? fmt::format("(VllmWorker rank={} pid={}) ", rank, pids_[static_cast<size_t>(rank)])
             : fmt::format("(VllmWorkerProcess pid={}) ", pids_[static_cast<size_t>(rank)]);
  }
  if (v1()) {
    return fmt::format("{}{} {:02d}-{:02d} {:02d}:{:02d}:{:02d} [{}:{}] ", worker, level, c.month,
                       c.day, c.hour, c.minute, c.second, file, line);
  }
  return fmt::format("{}{} {:02d}-{:02d} {:02d}:{:02d}:{:02d} {}:{}] ", worker, level, c.month,
                     c.day, c.hour, c.minute, c.second, file, line);
}

std::string LogEmitter::SglangPrefix(int64_t t_ns, bool tp) const {
  const CivilTime c = ToCivil(Realtime(0, t_ns));
  return fmt::format("[{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}{}] ", c.year, c.month, c.day,
                     c.hour, c.minute, c.second, tp ? " TP0" : "");
}

std::string LogEmitter::PyLogPrefix(const char* level, int64_t t_ns, const char* file,
                                    int line) const {
  const CivilTime c = ToCivil(Realtime(0, t_ns));
  return fmt::format("{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d},{:03d} - {} - {}:{} - ", c.year,
                     c.month, c.day, c.hour, c.minute, c.second, c.nanos / 1000000, level, file,
                     line);
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
  switch (config_.engine) {
    case EngineKind::kVllmV1Online:
    case EngineKind::kVllmV1Offline:
      Add(0, t, false,
          VllmPrefix("INFO", 0, t, "__init__.py", 239) + "Automatically detected platform cuda.");
      if (config_.engine == EngineKind::kVllmV1Online) {
        Add(0, t + 2 * ms, false,
            VllmPrefix("INFO", 0, t + 2 * ms, "api_server.py", 1043) +
                "vLLM API server version 0.8.5");
      }
      Add(0, t + 5 * ms, false,
          VllmPrefix("WARNING", 0, t + 5 * ms, "config.py", 1240) +
              "Default sampling parameters have been overridden by the model's Hugging Face "
              "generation config recommended from the model creator. If this is not intended, "
              "please relaunch vLLM instance with `--generation-config vllm`.");
      break;
    case EngineKind::kVllmV0:
      Add(0, t, false,
          VllmPrefix("INFO", 0, t, "api_server.py", 712) + "vLLM API server version 0.6.6");
      Add(0, t + 3 * ms, false,
          VllmPrefix("WARNING", 0, t + 3 * ms, "config.py", 428) +
              "To see benefits of async output processing, enable CUDA graph. Since, enforce-eager "
              "is enabled, async output processor cannot be used");
      break;
    case EngineKind::kSglang:
      Add(0, t, false,
          SglangPrefix(t, false) +
              fmt::format("server_args=ServerArgs(model_path='{}', tp_size={}, "
                          "nnodes={}, chunked_prefill_size=8192, "
                          "disable_radix_cache=False, enable_torch_compile=False)",
                          config_.model.name, cl.tp, cl.nodes));
      break;
    case EngineKind::kTorchFsdp:
      Add(0, t, true,
          "/usr/local/lib/python3.10/dist-packages/torch/distributed/fsdp/_init_utils.py:444: "
          "UserWarning: FSDP is switching to use `NO_SHARD` instead of ShardingStrategy.FULL_SHARD "
          "since the world size is 1.");
      Add(0, t + 1 * ms, false,
          PyLogPrefix("INFO", t + 1 * ms, "serve_fsdp.py", 57) +
              fmt::format("loaded {} with FSDP on {} ranks", config_.model.name, world));
      break;
  }
  // NCCL bring-up on every rank, and vLLM's PCIe custom all-reduce warning.
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
    const int32_t group = config_.engine == EngineKind::kTorchFsdp ? world : cl.tp;
    Add(r, tr + 40 * ms, false,
        p + fmt::format("NCCL INFO comm 0x{:x} rank {} nranks {} cudaDev {} nvmlDev {} busId {}000 "
                        "commId 0x{:016x} - Init COMPLETE",
                        0x55d0c1a00000ull + static_cast<uint64_t>(r) * 0x1000, r % group, group,
                        LocalRankOf(cl, r), LocalRankOf(cl, r), 1 + LocalRankOf(cl, r),
                        MixSeed(config_.seed, 77)));
    if (config_.engine != EngineKind::kTorchFsdp && config_.engine != EngineKind::kSglang &&
        cl.tp > 2) {
      Add(r, tr + 45 * ms, false,
          VllmPrefix("WARNING", r, tr + 45 * ms, "custom_all_reduce.py", 137) +
              "Custom allreduce is disabled because it's not supported on more than two PCIe-only "
              "GPUs. To silence this warning, specify disable_custom_all_reduce=True explicitly.");
    }
  }
  if (v1()) {
    const int64_t tk = t + 200 * ms;
    Add(0, tk, false,
        VllmPrefix("INFO", 0, tk, "kv_cache_utils.py", 634) +
            fmt::format("GPU KV cache size: {:L} tokens",
                        config_.engine_spec.num_gpu_blocks * config_.engine_spec.block_size));
    Add(0, tk + ms, false,
        VllmPrefix("INFO", 0, tk + ms, "gpu_model_runner.py", 1686) +
            "Graph capturing finished in 9 secs, took 0.41 GiB");
  } else if (config_.engine == EngineKind::kVllmV0) {
    const int64_t tk = t + 200 * ms;
    Add(0, tk, false,
        VllmPrefix("INFO", 0, tk, "model_runner.py", 1505) +
            "Capturing cudagraphs for decoding. This may lead to unexpected "
            "consequences if the model is not static. To run the model in eager mode, "
            "set 'enforce_eager=True' or use '--enforce-eager' in the CLI.");
  }
  last_metrics_ns_ = t;
}

void LogEmitter::RequestArrived(const Request& r, int64_t t) {
  switch (config_.engine) {
    case EngineKind::kVllmV1Online:
      Add(0, t, false,
          VllmPrefix("INFO", 0, t, "logger.py", 39) +
              fmt::format(
                  "Received request {}: prompt: '', params: SamplingParams(n=1, "
                  "presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, "
                  "temperature=0.7, top_p=0.8, top_k=20, min_p=0.0, seed=None, stop=[], "
                  "max_tokens={}, min_tokens=0), prompt_token_ids: None, lora_request: None.",
                  r.id, r.output_tokens));
      Add(0, t + 150000, false,
          VllmPrefix("INFO", 0, t + 150000, "async_llm.py", 252) +
              fmt::format("Added request {}.", r.id));
      break;
    case EngineKind::kVllmV0:
      Add(0, t + 120000, false,
          VllmPrefix("INFO", 0, t + 120000, "async_llm_engine.py", 208) +
              fmt::format("Added request {}.", r.id));
      break;
    case EngineKind::kTorchFsdp:
      Add(0, t, false,
          PyLogPrefix("INFO", t, "serve_fsdp.py", 88) +
              fmt::format("queued {} on rank {} ({} prompt tokens)", r.id, r.dp_rank,
                          r.prompt_tokens));
      break;
    default:
      break;  // SGLang and offline vLLM print no per-request line by default
  }
}

void LogEmitter::RequestFinished(const Request& r, int64_t t) {
  ++finished_;
  const std::string access =
      fmt::format("INFO:     10.0.3.{}:{} - \"POST {} HTTP/1.1\" 200 OK", 20 + r.index % 7,
                  40000 + r.index * 37 % 20000,
                  config_.engine == EngineKind::kSglang ? "/generate" : "/v1/completions");
  switch (config_.engine) {
    case EngineKind::kVllmV1Online:
      Add(0, t + 300000, false, access);
      break;
    case EngineKind::kVllmV0:
      Add(0, t + 100000, false,
          VllmPrefix("INFO", 0, t + 100000, "async_llm_engine.py", 176) +
              fmt::format("Finished request {}.", r.id));
      Add(0, t + 300000, false, access);
      break;
    case EngineKind::kSglang:
      Add(0, t + 300000, false, SglangPrefix(t + 300000, false) + access);
      break;
    case EngineKind::kTorchFsdp:
      Add(0, t + 100000, false,
          PyLogPrefix("INFO", t + 100000, "serve_fsdp.py", 131) +
              fmt::format("finished {} in {:.3f} s ({} tokens)", r.id,
                          (r.finish_ns - r.arrival_ns) / 1e9, r.generated));
      break;
    case EngineKind::kVllmV1Offline: {
      const int32_t n = config_.workload.num_requests;
      if (finished_ % std::max(1, n / 4) == 0 || finished_ == n) {
        const int pct = static_cast<int>(100 * finished_ / n);
        const int bar = pct / 10;
        Add(0, t, true,
            fmt::format("Processed prompts: {:3d}%|{}{}| {}/{} [00:0{}<00:00, {:.2f}it/s, est. "
                        "speed input: {:.2f} toks/s, output: {:.2f} toks/s]",
                        pct, std::string(static_cast<size_t>(bar) * 3, '#'),
                        std::string(static_cast<size_t>(10 - bar), ' '), finished_, n,
                        std::min<int64_t>(9, t / 1000000000), 8.0 + rng_->Uniform(0, 4),
                        2400 + rng_->Uniform(0, 800), 60 + rng_->Uniform(0, 30)));
      }
      break;
    }
  }
}

void LogEmitter::RequestAborted(const Request& r, int64_t t) {
  if (config_.engine == EngineKind::kVllmV1Online) {
    Add(0, t, false,
        VllmPrefix("INFO", 0, t, "async_llm.py", 420) + fmt::format("Aborted request {}.", r.id));
  } else if (config_.engine == EngineKind::kVllmV0) {
    Add(0, t, false,
        VllmPrefix("INFO", 0, t, "async_llm_engine.py", 64) +
            fmt::format("Aborted request {}.", r.id));
  }
}

void LogEmitter::Preempted(const Request& r, int64_t t, int64_t total) {
  if (config_.engine == EngineKind::kVllmV0) {
    Add(0, t, false,
        VllmPrefix("WARNING", 0, t, "scheduler.py", 1560) +
            fmt::format("Sequence group {} is preempted by PreemptionMode.RECOMPUTE mode because "
                        "there is not enough KV cache space. This can affect the end-to-end "
                        "performance. Increase gpu_memory_utilization or tensor_parallel_size to "
                        "provide more KV cache memory. total_num_cumulative_preemption={}",
                        r.id, total));
  } else if (config_.engine == EngineKind::kSglang) {
    Add(0, t, false,
        SglangPrefix(t, true) + fmt::format("Decode out of memory happened. #retracted_reqs: 1, "
                                            "#new_token_ratio: {:.4f} -> {:.4f}",
                                            0.4 + rng_->Uniform(0, 0.2),
                                            0.7 + rng_->Uniform(0, 0.2)));
  }
}

void LogEmitter::StepDone(const StepPlan& plan, const EngineScheduler& s, int64_t end) {
  prompt_tokens_window_ += plan.prefill_tokens;
  gen_tokens_window_ += plan.decode_tokens;
  const double usage =
      plan.kv_blocks_total > 0 ? double(plan.kv_blocks_used) / plan.kv_blocks_total : 0;
  if (config_.engine == EngineKind::kSglang) {
    if (plan.phase != StepPhase::kDecode) {
      int64_t cached = 0;
      for (const StepEntry& e : plan.entries) cached += e.cached_tokens;
      Add(0, end, false,
          SglangPrefix(end, true) +
              fmt::format("Prefill batch. #new-seq: {}, #new-token: {}, #cached-token: {}, token "
                          "usage: {:.2f}, #running-req: {}, #queue-req: {}",
                          plan.added.size(), plan.prefill_tokens, cached, usage,
                          plan.running - static_cast<int32_t>(plan.added.size()), plan.waiting));
    } else if (++decode_batches_ % 40 == 0) {
      const double secs = std::max(1e-3, (end - last_metrics_ns_) / 1e9);
      Add(0, end, false,
          SglangPrefix(end, true) +
              fmt::format("Decode batch. #running-req: {}, #token: {}, token usage: {:.2f}, gen "
                          "throughput (token/s): {:.2f}, #queue-req: {}",
                          plan.running, plan.kv_blocks_used * config_.engine_spec.block_size, usage,
                          gen_tokens_window_ / secs, plan.waiting));
      last_metrics_ns_ = end;
      gen_tokens_window_ = 0;
    }
    return;
  }
  const double interval = config_.engine_spec.metrics_interval_s;
  if (interval <= 0 || end - last_metrics_ns_ < static_cast<int64_t>(interval * 1e9)) return;
  const double secs = (end - last_metrics_ns_) / 1e9;
  if (config_.engine == EngineKind::kVllmV1Online) {
    Add(0, end, false,
        VllmPrefix("INFO", 0, end, "loggers.py", 111) +
            fmt::format("Engine 000: Avg prompt throughput: {:.1f} tokens/s, Avg generation "
                        "throughput: {:.1f} tokens/s, Running: {} reqs, Waiting: {} reqs, GPU KV "
                        "cache usage: {:.1f}%, Prefix cache hit rate: {:.1f}%",
                        prompt_tokens_window_ / secs, gen_tokens_window_ / secs, plan.running,
                        plan.waiting, 100 * usage, 30.0 + rng_->Uniform(0, 10)));
    Add(0, end + 2000000, false,
        fmt::format("INFO:     10.0.3.2:{} - \"GET /metrics HTTP/1.1\" 200 OK",
                    50000 + rng_->UniformInt(0, 9999)));
  } else if (config_.engine == EngineKind::kVllmV0) {
    Add(0, end, false,
        VllmPrefix("INFO", 0, end, "metrics.py", 455) +
            fmt::format("Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} "
                        "tokens/s, Running: {} reqs, Swapped: 0 reqs, Pending: {} reqs, GPU KV "
                        "cache usage: {:.1f}%, CPU KV cache usage: 0.0%.",
                        prompt_tokens_window_ / secs, gen_tokens_window_ / secs, plan.running,
                        plan.waiting, 100 * usage));
  } else if (config_.engine == EngineKind::kTorchFsdp) {
    Add(0, end, false,
        PyLogPrefix("INFO", end, "serve_fsdp.py", 102) +
            fmt::format("{} running, {} queued, {:.1f} tok/s", plan.running, plan.waiting,
                        gen_tokens_window_ / secs));
  }
  prompt_tokens_window_ = 0;
  gen_tokens_window_ = 0;
  last_metrics_ns_ = end;
}

void LogEmitter::LinkRetry(int32_t rank, int64_t t) {
  Add(rank, t, false,
      NcclPrefix(rank) + fmt::format("NCCL INFO NET/IB : retrying on QP 0x{:x} after transport "
                                     "retry counter exceeded (wc status 12)",
                                     0x1a0 + rng_->UniformInt(0, 63)));
}

void LogEmitter::IllegalAccess(int32_t rank, int64_t t, const std::string& kernel) {
  std::vector<std::string> tb;
  const char* runner =
      v1() ? "vllm/v1/worker/gpu_model_runner.py"
           : (config_.engine == EngineKind::kSglang
                  ? "sglang/srt/model_executor/model_runner.py"
                  : (config_.engine == EngineKind::kTorchFsdp ? "transformers/generation/utils.py"
                                                              : "vllm/worker/model_runner.py"));
  if (v1()) {
    tb.push_back(VllmPrefix("ERROR", 0, t, "core.py", 400) +
                 "EngineCore encountered a fatal error.");
  } else if (config_.engine == EngineKind::kVllmV0) {
    tb.push_back(VllmPrefix("ERROR", 0, t, "engine.py", 135) +
                 "RuntimeError('CUDA error: an "
                 "illegal memory access was "
                 "encountered')");
  } else if (config_.engine == EngineKind::kSglang) {
    tb.push_back(SglangPrefix(t, true) +
                 "Scheduler hit an exception: Traceback (most recent call "
                 "last):");
  }
  tb.push_back("Traceback (most recent call last):");
  tb.push_back(
      fmt::format("  File \"/usr/local/lib/python3.12/dist-packages/{}\", line 1216, in "
                  "execute_model",
                  runner));
  tb.push_back("    valid_sampled_token_ids = sampled_token_ids.tolist()");
  tb.push_back("RuntimeError: CUDA error: an illegal memory access was encountered");
  tb.push_back(
      "CUDA kernel errors might be asynchronously reported at some other API call, so the "
      "stacktrace below might be incorrect.");
  tb.push_back("For debugging consider passing CUDA_LAUNCH_BLOCKING=1");
  tb.push_back("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.");
  for (size_t i = 0; i < tb.size(); ++i) Add(rank, t + static_cast<int64_t>(i) * 1000, true, tb[i]);
  if (v1() && rank != 0) {
    Add(0, t + 2000000, true,
        VllmPrefix("ERROR", 0, t + 2000000, "async_llm.py", 399) +
            "AsyncLLM output_handler failed.");
    Add(0, t + 2001000, true,
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
        "trace (above) for the root cause.");
  }
  (void)kernel;  // the faulting kernel is never named by the runtime's message
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

void LogEmitter::Finish(int64_t t) {
  if (config_.engine == EngineKind::kVllmV1Online || config_.engine == EngineKind::kVllmV0) {
    Add(0, t, false, "INFO:     Shutting down");
  }
}

std::vector<SimLogLine> LogEmitter::Drain() {
  std::stable_sort(lines_.begin(), lines_.end(),
                   [](const SimLogLine& a, const SimLogLine& b) { return a.true_ns < b.true_ns; });
  std::vector<SimLogLine> out;
  out.swap(lines_);
  return out;
}

}  // namespace teller::sim
