#include "sim/interpreter.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace teller::sim {
namespace {

class Interpreter {
 public:
  Interpreter(const SimConfig& config, Rng* rng, Rng* fault_rng, EmitterState* state,
              const StageRun& run, StepResult* result)
      : e_(state),
        ops_(*run.ops),
        group_(run.group),
        ctx_(run.ctx),
        mode_(run.mode),
        result_(result),
        cfg_(config),
        rng_(*rng),
        fault_rng_(*fault_rng),
        link_factor_(run.link_factor),
        link_loss_p_(run.link_loss_p),
        pp_in_(run.pp_in),
        pp_out_(run.pp_out),
        communicator_(run.communicator) {
    for (const Op& op : ops_) has_logits_ |= op.work == Work::kLmHead;
  }

  void Run() {
    for (size_t i = 0; i < ops_.size(); ++i) {
      const Op& op = ops_[i];
      if (op.kind == OpKind::kCollective) {
        if (op.comm == Comm::kTp && cfg_.cluster.dp > 1) {
          ReplicaCollectives(i);
        } else {
          Collective(i);
        }
        continue;
      }
      for (size_t g = 0; g < group_.size(); ++g) Exec(i, g);
    }
    for (size_t g = 0; g < group_.size(); ++g) EndGraph(*group_[g]);
    for (RankState* r : group_) {
      if (r->device_fault_ns >= 0 && !r->stopped) WatchdogSurfaces(*r);
    }
  }

 private:
  bool Graphable(const Op& op) const {
    if (mode_ == ForwardMode::kEager) return false;
    return mode_ == ForwardMode::kFullGraph ? op.graph_full : op.graph_piece;
  }

  double Noise() {
    double f = rng_.LogNormal(0.0, kDeviceNoiseSigma);
    if (rng_.Bernoulli(0.004)) f *= std::min(2.5, rng_.Pareto(1.15, 2.2));
    return f;
  }

  int64_t HostNs(RankState& r, double mean_us, double sigma = kHostNoiseSigma) {
    return HostNs(rng_, r, mean_us, sigma);
  }
  static int64_t HostNs(Rng& rng, RankState& r, double mean_us, double sigma = kHostNoiseSigma) {
    return static_cast<int64_t>(rng.LogNormal(std::log(mean_us * 1000.0), sigma) * r.host_factor);
  }

  // Data-parallel replicas in lock step: a TP collective runs in each replica's group, on
  // the replica's own communicator.
  void ReplicaCollectives(size_t i) {
    const ClusterSpec& cl = cfg_.cluster;
    const std::vector<RankState*> all = group_;
    const std::vector<const StepContext*> all_ctx = ctx_;
    const int32_t stage_communicator = communicator_;
    const size_t tp = static_cast<size_t>(cl.tp);
    for (size_t first = 0; first + tp <= all.size(); first += tp) {
      group_.assign(all.begin() + first, all.begin() + first + tp);
      ctx_.assign(all_ctx.begin() + first, all_ctx.begin() + first + tp);
      communicator_ = cl.pp + cl.pp * cl.tp + static_cast<int32_t>(first / tp);
      Collective(i);
    }
    group_ = all;
    ctx_ = all_ctx;
    communicator_ = stage_communicator;
  }

  // The modern preset's kernels: FP8 GEMMs (half the weight bytes, twice the peak), grouped
  // expert GEMMs over the tokens routed to this rank's experts, routing kernels.
  int64_t ModernKernelNs(const Op& op, const StepContext& c) const {
    const ModelSpec& m = cfg_.model;
    const ClusterSpec& cl = cfg_.cluster;
    const double wbytes = m.fp8 ? 1.0 : 2.0;
    const double peak = cl.gpu_bf16_tflops * 1e12 * 0.6 * (m.fp8 ? 2.0 : 1.0);
    const double bw = cl.gpu_mem_bw_gbps * 1e9 * 0.8;
    const double M = std::max<int64_t>(1, c.tokens);
    double seconds = 3e-6;
    if (op.work == Work::kGemm) {
      const double eff = M / (M + 48.0);
      seconds += std::max(2.0 * M * op.n * op.k / (peak * eff),
                          (op.n * op.k * wbytes + M * (op.n + op.k) * 2) / bw);
    } else if (op.work == Work::kMoeGemm) {
      const bool ep = cl.expert_parallel;
      const double rows = std::max(1.0, M * m.experts_per_token / (ep ? cl.tp : 1));
      const double local = ep ? std::max(1, m.experts / (cl.dp * cl.tp)) : m.experts;
      // The rows pick experts as the router does, about at random: the distinct experts
      // they reach (and whose weights are loaded) grow smoothly toward all of them.
      const double active = local * (1.0 - std::pow(1.0 - 1.0 / local, rows));
      // Grouped GEMMs reach about half a dense GEMM's throughput (each expert's rows padded
      // to the block size, uneven experts).
      const double eff = 0.5 * (rows / active) / (rows / active + 48.0);
      const double ebytes = m.fp4_experts ? 0.5 : wbytes;
      seconds += 1e-6 + std::max(2.0 * rows * op.n * op.k / (peak * eff),
                                 (active * op.n * op.k * ebytes + rows * (op.n + op.k) * 2) / bw);
    } else if (op.work == Work::kMoeRoute) {
      seconds += M * std::max<int64_t>(64, op.n) * 4.0 / bw;
    }
    return static_cast<int64_t>(seconds * 1e9);
  }

  int64_t KernelNs(const Op& op, const StepContext& c) {
    if (op.work == Work::kMoeGemm || op.work == Work::kMoeRoute ||
        (cfg_.model.fp8 && op.work == Work::kGemm)) {
      return ModernKernelNs(op, c);
    }
    const ModelSpec& m = cfg_.model;
    const ClusterSpec& cl = cfg_.cluster;
    const double peak = cl.gpu_bf16_tflops * 1e12 * 0.6;
    const double bw = cl.gpu_mem_bw_gbps * 1e9 * 0.8;
    const double tp = cl.tp;
    const double heads = std::max(1.0, m.heads / tp), kv = std::max(1.0, m.kv_heads / tp);
    double seconds = 0;
    const double M = std::max<int64_t>(1, c.tokens);
    switch (op.work) {
      case Work::kGemm:
      case Work::kLmHead: {
        const double mm = op.work == Work::kLmHead ? std::max<int64_t>(1, c.seqs) : M;
        const double flops = 2.0 * mm * op.n * op.k;
        const double eff = mm / (mm + 48.0);
        seconds =
            std::max(flops / (peak * eff), (op.n * op.k * 2.0 + mm * (op.n + op.k) * 2) / bw) +
            3e-6;
        break;
      }
      case Work::kAttention: {
        double s = 4e-6;
        if (op.n & 1) s += 4.0 * heads * m.head_dim * c.prefill_attn / (peak * 0.45);
        if (op.n & 2) s += 4.0 * kv * m.head_dim * c.decode_ctx / bw + 2e-6;
        seconds = s;
        break;
      }
      case Work::kAttnCombine:
        seconds = 3e-6 + c.decode_seqs * heads * m.head_dim * 16.0 / bw;
        break;
      case Work::kElem:
        seconds = 2.5e-6 + M * op.n * 2.0 * 3 / bw;
        break;
      case Work::kCache:
        seconds = 2e-6 + M * kv * m.head_dim * 2.0 * 2 * 2 / bw;
        break;
      case Work::kSsmScan:
        seconds = 6e-6 + c.prefill_tokens * (2.0 * m.hidden / tp) * 2 * 8 / bw;
        break;
      case Work::kSsmUpdate:
        seconds = 4e-6 + c.decode_seqs * (2.0 * m.hidden / tp) * 128 * 4 / bw;
        break;
      case Work::kConv:
        seconds = 3e-6 + M * (2.0 * m.hidden / tp) * 2 * 4 / bw;
        break;
      case Work::kEmbed:
        seconds = 2.5e-6 + M * m.hidden * 2.0 * 2 / bw;
        break;
      case Work::kSample:
        seconds = 3e-6 + std::max<int64_t>(1, c.seqs) * double(m.vocab) * 4 * 3 / bw;
        break;
      default:
        seconds = 3e-6;
    }
    return static_cast<int64_t>(seconds * 1e9);
  }

  int64_t CommNs(const Op& op, const StepContext& c, int32_t group_size, bool crosses_nodes) {
    const ModelSpec& m = cfg_.model;
    const ClusterSpec& cl = cfg_.cluster;
    const double bw = (crosses_nodes ? cl.inter_node_gbps : cl.intra_node_gbps) * 1e9;
    const double n = std::max(1, group_size);
    const double M = std::max<int64_t>(1, c.tokens);
    double seconds = 0;
    switch (op.work) {
      case Work::kAllReduce:
        seconds = 2 * (n - 1) / n * M * m.hidden * 2 / bw + 14e-6;
        break;
      case Work::kAllGather:
        seconds = (n - 1) * std::max<int64_t>(1, c.seqs) * (m.vocab / n) * 4.0 / bw + 14e-6;
        break;
      case Work::kParamGather: {
        const double layer_params =
            4.0 * m.hidden * m.hidden * 0.75 + 3.0 * m.hidden * m.intermediate;
        seconds = (n - 1) / n * layer_params * 2 / bw + 30e-6;
        break;
      }
      case Work::kSendRecv:
        seconds = M * m.hidden * 2.0 / bw + 22e-6;
        break;
      case Work::kNvlsAllReduce:  // one-shot multimem: one read of every peer's shard
        seconds = (n - 1) / n * M * m.hidden * 2 / bw + 4e-6;
        break;
      case Work::kAllToAll: {
        // This rank's share of the tokens, one copy per remote node its experts sit on
        // (node-deduplicated, as DeepEP sends them over InfiniBand), FP8 out, BF16 back.
        const double copies = std::min(m.experts_per_token, std::max(1, cl.dp - 1));
        seconds = M / cl.tp * copies * m.hidden * 1.5 / bw + 6e-6;
        break;
      }
      default:
        seconds = 10e-6;
    }
    return static_cast<int64_t>(seconds * 1e9);
  }

  std::string_view ApiName(Api api) const {
    switch (api) {
      case Api::kLaunch:
        return "cudaLaunchKernel";
      case Api::kLaunchEx:
        return "cudaLaunchKernelExC";
      case Api::kDriverEx:
        return "cuLaunchKernelEx";
      case Api::kNone:
        return "";
    }
    return "cudaLaunchKernel";
  }

  uint32_t Cbid(std::string_view api) const {
    if (api == "cudaLaunchKernel") return 211;
    if (api == "cudaLaunchKernelExC") return 430;
    if (api == "cuLaunchKernelEx") return 652;
    if (api == "cudaMemcpyAsync") return 41;
    if (api == "cudaStreamSynchronize") return 131;
    if (api == "cudaGraphLaunch") return 311;
    if (api == "cudaMalloc") return 20;
    if (api == "cudaFree") return 22;
    if (api == "cudaDeviceSynchronize") return 165;
    if (api == "cudaEventRecord") return 135;
    if (api == "cudaEventQuery") return 138;
    return 0;
  }

  // Appends an API call on rank r starting at host time; returns its correlation.
  uint64_t AddApi(RankState& r, std::string_view name, int64_t start, int64_t dur, bool hit,
                  int32_t result = 0) {
    const uint64_t corr = e_->correlation[static_cast<size_t>(r.rank)]++;
    wire::ApiCallRecord a;
    a.clock = wire::ClockDomain::kGpu;
    a.tid = 0;  // filled by the writer with the process's main thread
    a.start_ns = start;
    a.end_ns = start + dur;
    a.correlation = corr;
    a.api = name.starts_with("cu") && !name.starts_with("cuda") ? wire::ApiKind::kDriver
                                                                : wire::ApiKind::kRuntime;
    a.cbid = Cbid(name);
    a.result = result;
    a.name = name;
    r.buf->api_calls.push_back(a);
    r.buf->api_hit.push_back(hit);
    if (hit) r.buf->any_hit = true;
    return corr;
  }

  void AddKernel(RankState& r, const Op& op, int64_t start, int64_t end, uint64_t corr,
                 int64_t stream, bool hit) {
    wire::KernelRecord k;
    k.clock = wire::ClockDomain::kGpu;
    k.start_ns = start;
    k.end_ns = end;
    k.device = LocalRankOf(cfg_.cluster, r.rank);
    k.context = 1;
    k.stream = stream;
    k.correlation = corr;
    const int64_t tokens = std::max<int64_t>(1, ctx_.empty() ? 1 : ctx_[0]->tokens);
    switch (op.work) {
      case Work::kGemm:
      case Work::kLmHead:
      case Work::kMoeGemm:
        k.grid = {static_cast<int32_t>(std::max<int64_t>(1, op.n / 128)),
                  static_cast<int32_t>(std::max<int64_t>(1, (tokens + 127) / 128)), 1};
        k.block = {256, 1, 1};
        k.registers_per_thread = 232;
        k.dynamic_smem_bytes = 73728;
        break;
      case Work::kAttention:
        k.grid = {static_cast<int32_t>(std::max<int64_t>(1, (tokens + 63) / 64)),
                  std::max(1, cfg_.model.heads / cfg_.cluster.tp), 1};
        k.block = {128, 1, 1};
        k.registers_per_thread = 255;
        k.dynamic_smem_bytes = 49152;
        break;
      case Work::kAllReduce:
      case Work::kAllGather:
      case Work::kParamGather:
      case Work::kSendRecv:
      case Work::kNvlsAllReduce:
      case Work::kAllToAll:
        k.grid = {2, 1, 1};
        k.block = {512, 1, 1};
        k.registers_per_thread = 96;
        break;
      default:
        k.grid = {static_cast<int32_t>(std::min<int64_t>(65535, tokens)), 1, 1};
        k.block = {256, 1, 1};
        k.registers_per_thread = 32;
    }
    if (r.in_graph) {
      k.graph_id = r.graph_id;
      k.graph_node_id = (static_cast<uint64_t>(r.graph_id) << 32) | ++r.graph_node;
    }
    k.name = op.name;
    r.buf->kernels.push_back(k);
    r.buf->kernel_hit.push_back(hit);
    r.buf->kernel_family.push_back(op.family);
    if (hit) r.buf->any_hit = true;
  }

  void EndGraph(RankState& r) { r.in_graph = false; }

  // Opens a graph run at op i on rank r: one cudaGraphLaunch for the run.
  void BeginGraph(RankState& r, size_t i) {
    int64_t kernels = 0;
    for (size_t j = i; j < ops_.size(); ++j) {
      const Op& op = ops_[j];
      if (op.kind == OpKind::kKernel || op.kind == OpKind::kCollective) {
        if (!Graphable(op)) break;
        ++kernels;
      } else if (!Graphable(op)) {
        break;
      }
    }
    int64_t dur = HostNs(r, 9.0 + 0.12 * kernels, 0.2);
    // A graph launch goes through the driver's launch path and lock like any launch.
    if (r.launch_factor > 1.0) dur = static_cast<int64_t>(dur * r.launch_factor);
    r.host += HostNs(r, 4.0);
    if (r.retry_p > 0 && fault_rng_.Bernoulli(r.retry_p)) {
      const int64_t d = HostNs(fault_rng_, r, 8.0);
      AddApi(r, "cuGraphLaunch", r.host, d, true, 701);
      r.host += d + static_cast<int64_t>(fault_rng_.Uniform(15, 60) * kUs);
      ++result_->retries;
    }
    r.graph_corr = AddApi(r, "cudaGraphLaunch", r.host, dur, r.launch_factor > 1.0);
    if (r.launch_factor > 1.0) MarkOpenHit(r);
    r.graph_id = e_->next_graph_id++;
    r.graph_node = 0;
    r.graph_gpu = std::max(r.stream, r.host + dur / 2 + 3 * kUs);
    r.host += dur;
    r.in_graph = true;
  }

  void OpenRange(RankState& r, const Op& op) {
    r.host += HostNs(r, op.layer == wire::RangeLayer::kFe ? 2.0 : 5.0);
    r.open.emplace_back(&op, r.host);
    r.open_hit.push_back(false);
    r.host += 300;
  }

  void CloseRange(RankState& r) {
    if (r.open.empty()) return;
    auto [op, start] = r.open.back();
    const bool hit = r.open_hit.back();
    r.open.pop_back();
    r.open_hit.pop_back();
    r.host += HostNs(r, 1.2, 0.3) + 300;
    wire::HostRangeRecord h;
    h.clock = wire::ClockDomain::kMonotonic;
    h.start_ns = start;
    h.end_ns = r.host;
    h.layer = op->layer;
    h.name = op->name;
    r.buf->ranges.push_back(h);
    r.buf->range_hit.push_back(hit);
    if (hit) r.buf->any_hit = true;
  }

  void MarkOpenHit(RankState& r) {
    if (!r.open_hit.empty()) r.open_hit.back() = true;
  }

  // Allocator faults: cudaMalloc / cudaFree (and a device sync) inside the op.
  void AllocatorCalls(RankState& r, int64_t step_scale_ns) {
    if (r.fragmentation) {
      const int64_t sync_start = r.host;
      const int64_t wait = std::max<int64_t>(r.stream - sync_start, 0) + HostNs(fault_rng_, r, 6.0);
      AddApi(r, "cudaDeviceSynchronize", sync_start, wait, r.alloc_hit);
      AddSync(r, sync_start, sync_start + wait, wire::SyncType::kContextSynchronize, r.alloc_hit);
      r.host = sync_start + wait + 500;
      const int frees = static_cast<int>(fault_rng_.UniformInt(2, 5));
      for (int f = 0; f < frees; ++f) {
        const int64_t d = static_cast<int64_t>(r.alloc_fraction * step_scale_ns / (2 * frees) *
                                               fault_rng_.LogNormal(0, 0.3));
        AddApi(r, "cudaFree", r.host, d, r.alloc_hit);
        r.host += d + 2 * kUs;
      }
    }
    const int mallocs = static_cast<int>(fault_rng_.UniformInt(1, 3));
    for (int a = 0; a < mallocs; ++a) {
      const int64_t d = static_cast<int64_t>(r.alloc_fraction * step_scale_ns /
                                             (r.fragmentation ? 2 * mallocs : mallocs) *
                                             fault_rng_.LogNormal(0, 0.3));
      AddApi(r, "cudaMalloc", r.host, d, r.alloc_hit);
      r.host += d + 2 * kUs;
    }
  }

  // The caching allocator cannot serve an allocation: cudaMalloc fails, the allocator
  // waits for the device, frees its cached blocks and retries; the retry fails too and
  // OutOfMemoryError ends the step (PyTorch's CUDACachingAllocator).
  void OutOfMemory(RankState& r, AllocationSite site) {
    const int64_t first = HostNs(fault_rng_, r, 40.0);
    AddApi(r, "cudaMalloc", r.host, first, true, 2);  // cudaErrorMemoryAllocation
    r.host += first + 2 * kUs;
    const int64_t wait = std::max<int64_t>(r.stream - r.host, 0) + HostNs(fault_rng_, r, 6.0);
    AddApi(r, "cudaDeviceSynchronize", r.host, wait, true);
    AddSync(r, r.host, r.host + wait, wire::SyncType::kContextSynchronize, true);
    r.host += wait + 500;
    const int frees = static_cast<int>(fault_rng_.UniformInt(3, 8));
    for (int f = 0; f < frees; ++f) {
      const int64_t d = HostNs(fault_rng_, r, 60.0);
      AddApi(r, "cudaFree", r.host, d, true);
      r.host += d + 2 * kUs;
    }
    const int64_t retry = HostNs(fault_rng_, r, 40.0);
    AddApi(r, "cudaMalloc", r.host, retry, true, 2);
    r.host += retry;
    result_->crashed = true;
    result_->crash_rank = r.rank;
    result_->oom_site = site;
    Stop(r, r.host + 300 * kUs);
  }

  // The sticky error of a fault (700, illegal address) came back from `call` on rank r: the
  // engine's worker raises and dies.
  void Crash(RankState& r, std::string_view call) {
    result_->crashed = true;
    result_->crash_rank = r.rank;
    result_->crash_call = std::string(call);
    Stop(r, r.host + 200 * kUs);
  }

  // After a kernel of a graph replay faulted, every CUDA call made after the fault returns
  // its error; a call made before it returns success (the host runs ahead of the device)
  // and the work it queues never runs. Returns true when the call `api` at r.host is the
  // first to fail: it is written with the error and the rank stops.
  bool ErrorSurfaces(RankState& r, std::string_view api) {
    if (r.device_fault_ns < 0 || r.host < r.device_fault_ns) return false;
    const int64_t d = HostNs(r, 5.0);
    AddApi(r, api, r.host, d, true, 700);
    r.host += d;
    Crash(r, api);
    return true;
  }

  // A call of the host after the device faulted: the error, or success for work queued
  // behind the faulted graph (no kernel or copy record: it never runs).
  void QueuedCall(RankState& r, std::string_view api, double mean_us) {
    if (ErrorSurfaces(r, api)) return;
    const int64_t call = HostNs(r, mean_us, 0.3);
    AddApi(r, api, r.host, call, false);
    r.host += call;
  }

  // No call of the rank's main thread came after the fault (a pipeline stage ends its step
  // with its send): ProcessGroupNCCL's watchdog thread, which polls the events of its pending
  // collectives (every 100 ms), gets the error from cudaEventQuery and aborts the process.
  void WatchdogSurfaces(RankState& r) {
    const int64_t t =
        r.device_fault_ns + static_cast<int64_t>(fault_rng_.Uniform(1.0, 100.0) * kMs);
    const int64_t d = HostNs(fault_rng_, r, 3.0);
    AddApi(r, "cudaEventQuery", t, d, true, 700);
    r.buf->api_calls.back().tid = kNcclWatchdogThread;
    r.host = std::max(r.host, t + d);
    Crash(r, "cudaEventQuery");
  }

  void AddSync(RankState& r, int64_t start, int64_t end, wire::SyncType type, bool hit) {
    wire::SyncRecord s;
    s.clock = wire::ClockDomain::kGpu;
    s.start_ns = start;
    s.end_ns = end;
    s.type = type;
    s.device = LocalRankOf(cfg_.cluster, r.rank);
    s.context = 1;
    s.stream = type == wire::SyncType::kStreamSynchronize ? kComputeStream : -1;
    s.correlation = 0;  // nested in its API call by time; a shared id reads as a duplicate
    r.buf->syncs.push_back(s);
    r.buf->sync_hit.push_back(hit);
    if (hit) r.buf->any_hit = true;
  }

  int64_t KernelDuration(RankState& r, const Op& op, const StepContext& c, bool* hit) {
    double f = e_->gpu_speed[static_cast<size_t>(r.rank)] * Noise() * r.kernel_factor;
    *hit = r.kernel_hit && r.kernel_factor > 1.0;
    if (r.family_factor > 1.0 && op.family == r.slow_family) {
      f *= r.family_factor;
      *hit = true;
    }
    if (r.contention > 0 && fault_rng_.Bernoulli(0.65)) {
      f *= 1.0 + r.contention * fault_rng_.Uniform(0.6, 2.2);
      *hit = true;
    }
    return std::max<int64_t>(1500, static_cast<int64_t>(KernelNs(op, c) * f));
  }

  // A kernel: replayed inside the rank's current graph, or launched eagerly (the call,
  // then the kernel once the stream is free), where an illegal-access fault crashes it.
  void Kernel(RankState& r, size_t i, const Op& op, const StepContext& c, bool graph) {
    bool hit = false;
    int64_t dur = KernelDuration(r, op, c, &hit);
    if (op.reordered || (op.decode_path && c.has_misroute)) hit = true;
    const bool crash_here =
        r.crash_layer >= 0 && op.layer_index == r.crash_layer && op.family == Family::kAttention;
    if (graph) {
      if (!r.in_graph) {
        if (ErrorSurfaces(r, "cudaGraphLaunch")) return;
        BeginGraph(r, i);
      }
      if (r.device_fault_ns >= 0) return;  // the device stopped: later nodes never run
      const int64_t start = r.graph_gpu + static_cast<int64_t>(rng_.Uniform(600, 1800));
      if (crash_here) {
        // A node of the replay faults a few microseconds in. Its cudaGraphLaunch returned
        // long before: the error comes back at the host's first CUDA call after the fault,
        // usually the synchronization that waits for the step's output.
        AddKernel(r, op, start, start + 6 * kUs, r.graph_corr, kComputeStream, true);
        r.device_fault_ns = start + 6 * kUs;
        r.graph_gpu = r.device_fault_ns;
        r.stream = r.device_fault_ns;
        result_->crash_kernel = std::string(op.name);
        result_->crash_in_graph = true;
        return;
      }
      AddKernel(r, op, start, start + dur, r.graph_corr, kComputeStream, hit);
      r.graph_gpu = start + dur;
      r.stream = r.graph_gpu;
      return;
    }
    std::string_view api = ApiName(op.api);
    if (r.device_fault_ns >= 0) {
      QueuedCall(r, api, op.api == Api::kDriverEx ? 6.0 : 5.0);
      return;
    }
    // Eager launch: the call, then the kernel once the stream is free.
    // Attention runs eagerly beside piecewise CUDA graphs: its workspace is what fails. A
    // full-graph replay allocates nothing (its memory came from the graph's pool at
    // capture): the first eager allocation after it is the logits'.
    if (r.oom_layer >= 0 && op.layer_index == r.oom_layer && op.family == Family::kAttention) {
      OutOfMemory(r, AllocationSite::kAttention);
      return;
    }
    if (r.oom_layer >= 0 && mode_ == ForwardMode::kFullGraph && op.work == Work::kLmHead) {
      OutOfMemory(r, AllocationSite::kLogits);
      return;
    }
    if (r.retry_p > 0 && fault_rng_.Bernoulli(r.retry_p)) {
      const int64_t d = HostNs(fault_rng_, r, 7.0);
      AddApi(r, "cuLaunchKernelEx", r.host, d, true, 701);  // LAUNCH_OUT_OF_RESOURCES
      MarkOpenHit(r);
      r.host += d + static_cast<int64_t>(fault_rng_.Uniform(15, 60) * kUs);
      ++result_->retries;
    }
    int64_t call = HostNs(r, op.api == Api::kDriverEx ? 6.0 : 5.0, 0.3);
    if (r.launch_factor > 1.0) call = static_cast<int64_t>(call * r.launch_factor);
    const int64_t call_start = r.host;
    const uint64_t corr = AddApi(r, api, call_start, call, r.launch_factor > 1.0);
    if (r.launch_factor > 1.0) MarkOpenHit(r);
    const int64_t ready = call_start + std::min<int64_t>(call, 2500) +
                          static_cast<int64_t>(rng_.LogNormal(std::log(2500.0), 0.4));
    const int64_t start = std::max(r.stream, ready);
    if (crash_here) {
      // The kernel faults a few microseconds in; the error surfaces at the first call
      // after the fault (an asynchronous error cannot come back before it happened: the
      // host's launches in between returned success, their kernels never ran).
      AddKernel(r, op, start, start + 6 * kUs, corr, kComputeStream, true);
      r.host = std::max(call_start + call + 4 * kUs, start + 6 * kUs + 3 * kUs);
      const int64_t d = HostNs(r, 5.0);
      AddApi(r, "cudaLaunchKernel", r.host, d, true, 700);
      r.host += d;
      result_->crash_kernel = std::string(op.name);
      Crash(r, "cudaLaunchKernel");
      return;
    }
    AddKernel(r, op, start, start + dur, corr, kComputeStream, hit);
    r.stream = start + dur;
    r.host = call_start + call;
  }

  void Exec(size_t i, size_t g) {
    RankState& r = *group_[g];
    if (r.stopped) return;
    const Op& op = ops_[i];
    const StepContext& c = *ctx_[g];
    const bool graph = Graphable(op);
    if (!graph && r.in_graph && op.kind != OpKind::kClose) EndGraph(r);
    switch (op.kind) {
      case OpKind::kOpen:
        if (graph) return;
        OpenRange(r, op);
        if (op.layer == wire::RangeLayer::kBe && (r.allocator_slow || r.fragmentation) &&
            ((op.name == "aten::copy_" && r.alloc_bursts == 0) ||
             ((op.name == "aten::mm" || op.name == "aten::copy_") && fault_rng_.Bernoulli(0.08)))) {
          ++r.alloc_bursts;
          AllocatorCalls(r, e_->last_step_ns > 0 ? e_->last_step_ns / 8 : 2 * kMs);
          if (r.alloc_hit) MarkOpenHit(r);
        }
        return;
      case OpKind::kClose:
        if (graph) return;
        CloseRange(r);
        return;
      case OpKind::kKernel:
        Kernel(r, i, op, c, graph);
        return;
      case OpKind::kCopyIn: {
        if (graph) return;
        // A full-graph stage with no logits: the step's input tensors are its one eager
        // allocation.
        if (r.oom_layer >= 0 && mode_ == ForwardMode::kFullGraph && !has_logits_) {
          OutOfMemory(r, AllocationSite::kInputs);
          return;
        }
        if (r.device_fault_ns >= 0) {
          QueuedCall(r, "cudaMemcpyAsync", 9.0);
          return;
        }
        int64_t call = HostNs(r, 9.0);
        const double slow = r.copy_factor * (r.host_pressure ? 1.0 + (r.host_factor - 1) * 2 : 1.0);
        call = static_cast<int64_t>(call * r.copy_factor);
        const uint64_t corr = AddApi(r, "cudaMemcpyAsync", r.host, call, r.copy_hit);
        const int64_t bytes = std::max<int64_t>(64, c.tokens * op.n);
        const int64_t start = std::max(r.stream, r.host + 3 * kUs);
        const int64_t dur = static_cast<int64_t>((1.8 * kUs + bytes / 11.0) * slow * Noise());
        AddMemcpy(r, start, start + dur, corr, bytes, wire::CopyKind::kHtoD, r.copy_hit);
        if (r.copy_hit) MarkOpenHit(r);
        r.stream = start + dur;
        r.host += call;
        return;
      }
      case OpKind::kCopyOut: {
        if (r.device_fault_ns >= 0) {
          QueuedCall(r, "cudaMemcpyAsync", 10.0);
          return;
        }
        int64_t call = static_cast<int64_t>(HostNs(r, 10.0) * r.copy_factor);
        const uint64_t corr = AddApi(r, "cudaMemcpyAsync", r.host, call, r.copy_hit);
        const int64_t bytes = std::max<int64_t>(8, c.seqs * 8);
        const int64_t start = std::max(r.stream, r.host + 3 * kUs);
        const int64_t dur =
            static_cast<int64_t>((2.0 * kUs + bytes / 9.0) * r.copy_factor * Noise());
        AddMemcpy(r, start, start + dur, corr, bytes, wire::CopyKind::kDtoH, r.copy_hit);
        if (r.copy_hit) MarkOpenHit(r);
        r.stream = start + dur;
        r.host += call;
        return;
      }
      case OpKind::kSyncOut: {
        const int64_t start = r.host + HostNs(r, 2.0);
        if (r.device_fault_ns >= 0) {
          // The synchronization waits for the faulted replay and returns its error.
          const int64_t end = std::max(start + 2 * kUs, r.device_fault_ns + HostNs(r, 4.0));
          AddApi(r, "cudaStreamSynchronize", start, end - start, true, 700);
          r.host = end;
          Crash(r, "cudaStreamSynchronize");
          return;
        }
        int64_t end = std::max(start + 2 * kUs, r.stream + 4 * kUs);
        if (r.sync_extra > 0) {
          end += static_cast<int64_t>(r.sync_extra * std::max<int64_t>(end - start, 300 * kUs) *
                                      fault_rng_.Uniform(0.7, 1.3));
        }
        AddApi(r, "cudaStreamSynchronize", start, end - start, r.sync_hit);
        AddSync(r, start, end, wire::SyncType::kStreamSynchronize, r.sync_hit);
        if (r.sync_hit) MarkOpenHit(r);
        r.host = end + 1 * kUs;
        return;
      }
      case OpKind::kCollective:
        return;  // handled by Collective()
      case OpKind::kSend:
      case OpKind::kRecv:
        PointToPoint(r, g, op, c);
        return;
    }
  }

  void AddMemcpy(RankState& r, int64_t start, int64_t end, uint64_t corr, int64_t bytes,
                 wire::CopyKind kind, bool hit) {
    wire::MemcpyRecord m;
    m.clock = wire::ClockDomain::kGpu;
    m.start_ns = start;
    m.end_ns = end;
    m.device = LocalRankOf(cfg_.cluster, r.rank);
    m.context = 1;
    m.stream = kComputeStream;
    m.correlation = corr;
    m.size_bytes = static_cast<uint64_t>(bytes);
    m.copy_kind = kind;
    m.src_kind = kind == wire::CopyKind::kHtoD ? 2 : 3;  // pinned / device
    m.dst_kind = kind == wire::CopyKind::kHtoD ? 3 : 2;
    r.buf->memcpys.push_back(m);
    r.buf->memcpy_hit.push_back(hit);
    if (hit) r.buf->any_hit = true;
  }

  // Closes every open range at t and stops the rank for the rest of the step.
  void Stop(RankState& r, int64_t t) {
    r.host = std::max(r.host, t);
    while (!r.open.empty()) CloseRange(r);
    r.stopped = true;
    r.in_graph = false;
  }

  void Collective(size_t i) {
    const Op& op = ops_[i];
    const size_t n = group_.size();
    std::vector<int64_t> ready(n, -1);
    std::vector<uint64_t> corr(n, 0);
    std::vector<int64_t> stream(n, kComputeStream);
    bool any_missing = false;
    for (size_t g = 0; g < n; ++g) {
      RankState& r = *group_[g];
      if (r.stopped) {
        any_missing = true;
        continue;
      }
      const bool hang = r.hang_layer >= 0 && op.layer_index == r.hang_layer;
      if (hang) {
        // The rank never reaches this collective: its host is stuck.
        any_missing = true;
        result_->crashed = true;
        result_->crash_rank = r.rank;
        result_->crash_collective = std::string(op.coll_op);
        r.host += 5 * kUs;
        r.stopped = true;  // ranges are closed when the run is killed
        continue;
      }
      const bool graph = Graphable(op);
      if (!graph && r.in_graph) EndGraph(r);
      const int64_t s = op.comm == Comm::kDp ? kNcclStream : kComputeStream;
      stream[g] = s;
      int64_t& lane = s == kNcclStream ? r.comm_stream : r.stream;
      if (graph) {
        if (!r.in_graph && ErrorSurfaces(r, "cudaGraphLaunch")) {
          any_missing = true;
          continue;
        }
        if (!r.in_graph) BeginGraph(r, i);
        if (r.device_fault_ns >= 0) {  // the faulted replay never reaches it
          any_missing = true;
          continue;
        }
        ready[g] = r.graph_gpu + static_cast<int64_t>(rng_.Uniform(600, 1500));
        corr[g] = r.graph_corr;
      } else if (r.device_fault_ns >= 0) {
        any_missing = true;  // launched behind the faulted replay: never runs
        QueuedCall(r, "cudaLaunchKernel", 7.0);
      } else {
        int64_t call = HostNs(r, 7.0, 0.3);
        if (r.straggler)
          call +=
              static_cast<int64_t>(fault_rng_.Uniform(0.3, 1.0) * (r.host_factor - 1) * 400 * kUs);
        if (r.launch_factor > 1.0) call = static_cast<int64_t>(call * r.launch_factor);
        // The straggler's late launch is where its injected delay sits.
        corr[g] = AddApi(r, "cudaLaunchKernel", r.host, call, r.straggler);
        ready[g] = std::max(lane, r.host + std::min<int64_t>(call, 3000) +
                                      static_cast<int64_t>(rng_.LogNormal(std::log(3000.0), 0.4)));
        if (op.comm == Comm::kDp) ready[g] = std::max(ready[g], r.stream);
        r.host += call;
      }
    }
    // Transfer time: the last arrival plus the wire time.
    const StepContext& c = *ctx_[0];
    bool crosses = false;
    if (n > 1) {
      const int32_t n0 = NodeOfRank(cfg_.cluster, group_[0]->rank);
      for (size_t g = 1; g < n; ++g) crosses |= NodeOfRank(cfg_.cluster, group_[g]->rank) != n0;
    }
    int64_t dur = CommNs(op, c, static_cast<int32_t>(n), crosses);
    double link = 1.0;
    bool link_hit = false;
    for (size_t g = 0; g < n; ++g) {
      if (group_[g]->kernel_factor > 1.0) dur = static_cast<int64_t>(dur * 1.0);
    }
    if (crosses && link_factor_ > 1.0) {
      link = link_factor_;
      link_hit = true;
      if (fault_rng_.Bernoulli(link_loss_p_)) {
        dur += static_cast<int64_t>(fault_rng_.Uniform(0.3, 1.5) * kMs);
        ++result_->link_spikes;
      }
    }
    dur = static_cast<int64_t>(dur * link * Noise());
    int64_t last = 0;
    for (size_t g = 0; g < n; ++g) last = std::max(last, ready[g]);
    int64_t end = last + dur;
    const int64_t comm_index = op.comm == Comm::kWorld
                                   ? cfg_.cluster.pp * (1 + cfg_.cluster.tp) + cfg_.cluster.dp
                                   : communicator_;
    const int64_t seq = e_->sequence[static_cast<size_t>(comm_index)]++;
    if (any_missing) end = -1;  // never completes: the run is killed
    for (size_t g = 0; g < n; ++g) {
      RankState& r = *group_[g];
      if (ready[g] < 0) continue;
      int64_t k_end = end;
      if (end < 0) {
        k_end = ready[g] + (result_->crash_collective.empty() ? kKillDelayNs : kNcclTimeoutNs);
        if (!result_->crash_collective.empty()) {
          result_->crash_sequence = seq;
          result_->crash_numel = c.tokens * cfg_.model.hidden;
          result_->crash_group_size = static_cast<int32_t>(n);
        }
      }
      // A collective hung by nccl_timeout is the operator the fault affected.
      const bool hung = end < 0 && !result_->crash_collective.empty();
      const bool hit = link_hit || r.straggler || hung;
      AddKernel(r, op, ready[g], k_end, corr[g], stream[g], hit);
      // NVLS all-reduce is torch symmetric memory's kernel: no NCCL record.
      if (op.work != Work::kNvlsAllReduce) {
        wire::CollectiveRecord coll;
        coll.clock = wire::ClockDomain::kGpu;
        coll.start_ns = ready[g];
        coll.end_ns = k_end;
        coll.communicator = e_->communicators[static_cast<size_t>(comm_index)];
        coll.sequence = seq;
        coll.op = op.coll_op;
        coll.size_bytes = CollBytes(op, c, static_cast<int32_t>(n));
        coll.dtype = op.work == Work::kAllGather ? "float32" : "bfloat16";
        coll.group_size = static_cast<int32_t>(n);
        coll.group_rank = static_cast<int32_t>(g);
        coll.correlation = corr[g];
        coll.device = LocalRankOf(cfg_.cluster, r.rank);
        coll.stream = stream[g];
        r.buf->collectives.push_back(coll);
        r.buf->collective_hit.push_back(hit);
        if (hit) r.buf->any_hit = true;
      }
      if (r.in_graph) {
        r.graph_gpu = k_end;
        r.stream = k_end;
      } else if (stream[g] == kNcclStream) {
        r.comm_stream = k_end;
        r.stream = std::max(r.stream, k_end);  // compute waits for the gathered weights
      } else {
        r.stream = k_end;
      }
      if (end < 0) Stop(r, k_end);
    }
  }

  int64_t CollBytes(const Op& op, const StepContext& c, int32_t n) const {
    const ModelSpec& m = cfg_.model;
    switch (op.work) {
      case Work::kAllReduce:
        return std::max<int64_t>(1, c.tokens) * m.hidden * 2;
      case Work::kAllGather:
        return std::max<int64_t>(1, c.seqs) * m.vocab * 4;
      case Work::kAllToAll:
        return std::max<int64_t>(1, c.tokens / cfg_.cluster.tp) * m.experts_per_token * m.hidden;
      case Work::kParamGather:
        return static_cast<int64_t>(
            (4.0 * m.hidden * m.hidden * 0.75 + 3.0 * m.hidden * m.intermediate) * 2);
      default:
        return std::max<int64_t>(1, c.tokens) * m.hidden * 2;
    }
  }

  void PointToPoint(RankState& r, size_t g, const Op& op, const StepContext& c) {
    const int32_t tp = cfg_.cluster.tp;
    const int32_t tp_rank = r.rank % tp;
    const int32_t stage = r.rank / tp;
    PendingSend& link = (op.send ? *pp_out_ : *pp_in_)[static_cast<size_t>(tp_rank)];
    const int32_t peer = op.send ? r.rank + tp : r.rank - tp;
    const bool crosses = NodeOfRank(cfg_.cluster, r.rank) != NodeOfRank(cfg_.cluster, peer);
    const size_t comm =
        static_cast<size_t>(cfg_.cluster.pp + (op.send ? stage : stage - 1) * tp + tp_rank);
    if (r.device_fault_ns >= 0) {  // never runs: the other stage waits until the kill
      QueuedCall(r, "cudaLaunchKernel", 7.0);
      return;
    }
    int64_t call = HostNs(r, 7.0, 0.3);
    if (r.launch_factor > 1.0) call = static_cast<int64_t>(call * r.launch_factor);
    const uint64_t corr = AddApi(r, "cudaLaunchKernel", r.host, call, false);
    const int64_t ready =
        std::max(r.stream, r.host + std::min<int64_t>(call, 3000) +
                               static_cast<int64_t>(rng_.LogNormal(std::log(3000.0), 0.4)));
    r.host += call;
    int64_t dur = CommNs(op, c, 2, crosses);
    bool hit = false;
    if (crosses && link_factor_ > 1.0) {
      dur = static_cast<int64_t>(dur * link_factor_);
      hit = true;
      if (fault_rng_.Bernoulli(link_loss_p_)) {
        dur += static_cast<int64_t>(fault_rng_.Uniform(0.3, 1.5) * kMs);
        ++result_->link_spikes;
      }
    }
    dur = static_cast<int64_t>(dur * Noise());
    wire::CollectiveRecord coll;
    coll.clock = wire::ClockDomain::kGpu;
    coll.communicator = e_->communicators[comm];
    coll.op = op.send ? "send" : "recv";
    coll.size_bytes = std::max<int64_t>(1, c.tokens) * cfg_.model.hidden * 2;
    coll.dtype = "bfloat16";
    coll.group_size = 2;
    coll.group_rank = op.send ? 0 : 1;
    coll.correlation = corr;
    coll.device = LocalRankOf(cfg_.cluster, r.rank);
    coll.stream = kComputeStream;
    if (op.send) {
      const int64_t seq = e_->sequence[comm]++;
      AddKernel(r, op, ready, ready + dur, corr, kComputeStream, hit);
      coll.sequence = seq;
      coll.start_ns = ready;
      coll.end_ns = ready + dur;
      r.buf->collectives.push_back(coll);
      r.buf->collective_hit.push_back(hit);
      link = {&r, r.buf->kernels.size() - 1, r.buf->collectives.size() - 1, ready, seq};
      r.stream = ready + dur;
      return;
    }
    int64_t end;
    if (link.r == nullptr || link.ready < 0) {
      end = ready + (result_->crash_collective.empty() ? kKillDelayNs : kNcclTimeoutNs);
      hit = hit || !result_->crash_collective.empty();
      coll.sequence = e_->sequence[comm]++;
    } else {
      end = std::max(link.ready, ready) + dur;
      coll.sequence = link.sequence;
      link.r->buf->kernels[link.kernel].end_ns = end;
      link.r->buf->collectives[link.coll].end_ns = end;
      link.r->stream = std::max(link.r->stream, end);
    }
    AddKernel(r, op, ready, end, corr, kComputeStream, hit);
    coll.start_ns = ready;
    coll.end_ns = end;
    r.buf->collectives.push_back(coll);
    r.buf->collective_hit.push_back(hit);
    r.stream = end;
    if (link.r == nullptr || link.ready < 0) Stop(r, end);
  }

 private:
  EmitterState* e_;
  const std::vector<Op>& ops_;
  std::vector<RankState*> group_;
  std::vector<const StepContext*> ctx_;
  ForwardMode mode_;
  StepResult* result_;
  const SimConfig& cfg_;
  Rng& rng_;
  Rng& fault_rng_;  // draws only faults make, so that a twin without them stays in step
  double link_factor_ = 1.0;
  double link_loss_p_ = 0.0;
  std::vector<PendingSend>* pp_in_;   // by tp rank: the previous stage's sends
  std::vector<PendingSend>* pp_out_;  // by tp rank: this stage's sends
  int32_t communicator_;
  bool has_logits_ = false;  // the stage computes the logits (the last pipeline stage)
};

}  // namespace

void InterpretStage(const SimConfig& config, Rng* rng, Rng* fault_rng, EmitterState* state,
                    const StageRun& run, StepResult* result) {
  Interpreter(config, rng, fault_rng, state, run, result).Run();
}

}  // namespace teller::sim
