#include "sim/step_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace teller::sim {

std::string_view FamilyName(Family family) {
  switch (family) {
    case Family::kGemm:
      return "gemm";
    case Family::kAttention:
      return "attention";
    case Family::kNorm:
      return "norm";
    case Family::kRotary:
      return "rotary";
    case Family::kActivation:
      return "activation";
    case Family::kKvCache:
      return "kv_cache";
    case Family::kEmbedding:
      return "embedding";
    case Family::kSampling:
      return "sampling";
    case Family::kElementwise:
      return "elementwise";
    case Family::kCommunication:
      return "communication";
    case Family::kSsm:
      return "ssm";
    case Family::kMemory:
      return "memory";
    case Family::kSync:
      return "sync";
    case Family::kLaunch:
      return "launch";
    case Family::kHost:
      return "host";
  }
  return "other";
}

void RankBuffer::Clear() {
  ranges.clear();
  api_calls.clear();
  kernels.clear();
  memcpys.clear();
  syncs.clear();
  collectives.clear();
  range_hit.clear();
  api_hit.clear();
  kernel_hit.clear();
  memcpy_hit.clear();
  sync_hit.clear();
  collective_hit.clear();
  kernel_family.clear();
  step_requests.clear();
  any_hit = false;
}

namespace {

constexpr int64_t kUs = 1000;
constexpr int64_t kMs = 1000000;
constexpr int64_t kComputeStream = 7;
constexpr int64_t kNcclStream = 13;
constexpr int64_t kNcclTimeoutNs = 600LL * 1000 * kMs;  // torch default 10 min
constexpr int64_t kKillDelayNs = 2 * 1000 * kMs;

enum class OpKind : uint8_t {
  kOpen,
  kClose,
  kKernel,
  kCollective,
  kCopyIn,
  kCopyOut,
  kSyncOut,
  kSend,
  kRecv,
};
enum class Work : uint8_t {
  kNone,
  kGemm,
  kLmHead,
  kAttention,
  kAttnCombine,
  kElem,
  kCache,
  kSsmScan,
  kSsmUpdate,
  kConv,
  kEmbed,
  kSample,
  kAllReduce,
  kAllGather,
  kParamGather,
  kSendRecv,
};
enum class Api : uint8_t { kLaunch, kLaunchEx, kDriverEx, kNone };
enum class Comm : uint8_t { kTp, kPp, kDp };

bool IsMamba(const ModelSpec& model, int32_t layer) {
  return model.mamba_period > 0 && layer % model.mamba_period == 0;
}

}  // namespace

struct StepEmitter::Op {
  OpKind kind = OpKind::kKernel;
  wire::RangeLayer layer = wire::RangeLayer::kFe;
  std::string_view name;
  Api api = Api::kLaunch;
  Family family = Family::kElementwise;
  Work work = Work::kNone;
  int64_t n = 0, k = 0;     // gemm dims, element width, attention part mask
  bool graph_full = true;   // captured in a full CUDA graph
  bool graph_piece = true;  // captured in a piecewise graph (attention is not)
  Comm comm = Comm::kTp;
  int16_t layer_index = -1;
  bool send = false;         // kSendRecv: true send, false recv
  bool decode_path = false;  // a decode-path kernel (misroute evidence)
  bool reordered = false;    // moved by the operator-reorder fault
  std::string_view coll_op;  // "all_reduce", ...
};

// Per data-parallel rank: the work of the step.
struct StepEmitter::StepContext {
  int64_t tokens = 0;
  int64_t seqs = 0;  // sequences that sample
  int64_t prefill_tokens = 0;
  int64_t decode_seqs = 0;
  double prefill_attn = 0;  // sum tokens * (context + tokens / 2)
  double decode_ctx = 0;    // sum context of decode sequences
  bool has_prefill = false;
  bool has_decode = false;
  bool has_misroute = false;
};

struct StepEmitter::RankState {
  int32_t rank = 0;
  int32_t dp = 0;
  RankBuffer* buf = nullptr;
  int64_t host = 0;
  int64_t stream = 0;
  int64_t comm_stream = 0;
  bool stopped = false;
  std::vector<std::pair<const Op*, int64_t>> open;  // open ranges, start times
  std::vector<uint8_t> open_hit;
  // graph replay state
  bool in_graph = false;
  uint64_t graph_corr = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node = 0;
  int64_t graph_gpu = 0;
  // fault factors for this step
  double host_factor = 1.0;
  double kernel_factor = 1.0;
  double contention = 0.0;
  double launch_factor = 1.0;
  double copy_factor = 1.0;
  double sync_extra = 0.0;
  double retry_p = 0.0;
  Family slow_family = Family::kHost;
  double family_factor = 1.0;
  bool allocator_slow = false;
  bool fragmentation = false;
  bool alloc_hit = false;
  int32_t alloc_bursts = 0;
  double alloc_fraction = 0.0;
  bool straggler = false;
  bool host_pressure = false;
  bool launch_hit = false;
  bool copy_hit = false;
  bool sync_hit = false;
  bool kernel_hit = false;
  int32_t crash_layer = -1;  // illegal access here
  int32_t hang_layer = -1;   // NCCL hang here
  double reorder_p = 0.0;
  size_t stage_send_kernel = SIZE_MAX;  // index of the PP send kernel in buf
};

StepEmitter::StepEmitter(const SimConfig& config, Rng* rng) : config_(config), rng_(rng) {
  const ClusterSpec& c = config.cluster;
  world_ = c.world();
  dp_size_ = config.engine == EngineKind::kTorchFsdp ? world_ / (c.tp * c.pp) : 1;
  gpu_speed_.resize(static_cast<size_t>(world_));
  for (double& s : gpu_speed_) s = std::clamp(rng->Normal(1.0, 0.025), 0.93, 1.07);
  host_ns_.assign(static_cast<size_t>(world_), 0);
  stream_ns_.assign(static_cast<size_t>(world_), 0);
  comm_stream_ns_.assign(static_cast<size_t>(world_), 0);
  correlation_.assign(static_cast<size_t>(world_), 1);
  const int32_t comms = config.engine == EngineKind::kTorchFsdp ? 1 : c.pp + c.pp * c.tp;
  sequence_.assign(static_cast<size_t>(comms), 0);
  for (int32_t i = 0; i < comms; ++i) {
    communicators_.push_back(fmt::format("0x{:016x}", MixSeed(config.seed, 1000 + i)));
  }
}

std::string_view StepEmitter::Name(std::string text) {
  for (const std::string& s : names_) {
    if (s == text) return s;
  }
  names_.push_back(std::move(text));
  return names_.back();
}

// ---------------------------------------------------------------------------
// The interpreter: runs one op list over a group of ranks in lock step, so that
// collectives see every member's arrival.
class StepEmitter::Interpreter {
 public:
  Interpreter(StepEmitter* e, const std::vector<Op>& ops, std::vector<RankState*> group,
              std::vector<const StepContext*> ctx, ForwardMode mode, StepResult* result)
      : e_(e),
        ops_(ops),
        group_(std::move(group)),
        ctx_(std::move(ctx)),
        mode_(mode),
        result_(result),
        cfg_(e->config_),
        rng_(*e->rng_) {}

  void Run() {
    for (size_t i = 0; i < ops_.size(); ++i) {
      const Op& op = ops_[i];
      if (op.kind == OpKind::kCollective) {
        Collective(i);
        continue;
      }
      for (size_t g = 0; g < group_.size(); ++g) Exec(i, g);
    }
    for (size_t g = 0; g < group_.size(); ++g) EndGraph(*group_[g]);
  }

 private:
  bool Graphable(const Op& op) const {
    if (mode_ == ForwardMode::kEager) return false;
    return mode_ == ForwardMode::kFullGraph ? op.graph_full : op.graph_piece;
  }

  double Noise() {
    double f = rng_.LogNormal(0.0, 0.06);
    if (rng_.Bernoulli(0.004)) f *= std::min(2.5, rng_.Pareto(1.15, 2.2));
    return f;
  }

  int64_t HostNs(RankState& r, double mean_us, double sigma = 0.35) {
    return static_cast<int64_t>(rng_.LogNormal(std::log(mean_us * 1000.0), sigma) * r.host_factor);
  }

  int64_t KernelNs(const Op& op, const StepContext& c) {
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
    return 0;
  }

  // Appends an API call on rank r starting at host time; returns its correlation.
  uint64_t AddApi(RankState& r, std::string_view name, int64_t start, int64_t dur, bool hit,
                  int32_t result = 0) {
    const uint64_t corr = e_->correlation_[static_cast<size_t>(r.rank)]++;
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
    const int64_t dur = HostNs(r, 9.0 + 0.12 * kernels, 0.2);
    r.host += HostNs(r, 4.0);
    if (r.retry_p > 0 && rng_.Bernoulli(r.retry_p)) {
      const int64_t d = HostNs(r, 8.0);
      AddApi(r, "cuGraphLaunch", r.host, d, true, 701);
      r.host += d + static_cast<int64_t>(rng_.Uniform(15, 60) * kUs);
      ++result_->retries;
    }
    r.graph_corr = AddApi(r, "cudaGraphLaunch", r.host, dur, false);
    r.graph_id = e_->next_graph_id_++;
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
      const int64_t wait = std::max<int64_t>(r.stream - sync_start, 0) + HostNs(r, 6.0);
      AddApi(r, "cudaDeviceSynchronize", sync_start, wait, r.alloc_hit);
      AddSync(r, sync_start, sync_start + wait, wire::SyncType::kContextSynchronize, r.alloc_hit);
      r.host = sync_start + wait + 500;
      const int frees = static_cast<int>(rng_.UniformInt(2, 5));
      for (int f = 0; f < frees; ++f) {
        const int64_t d = static_cast<int64_t>(r.alloc_fraction * step_scale_ns / (2 * frees) *
                                               rng_.LogNormal(0, 0.3));
        AddApi(r, "cudaFree", r.host, d, r.alloc_hit);
        r.host += d + 2 * kUs;
      }
    }
    const int mallocs = static_cast<int>(rng_.UniformInt(1, 3));
    for (int a = 0; a < mallocs; ++a) {
      const int64_t d =
          static_cast<int64_t>(r.alloc_fraction * step_scale_ns /
                               (r.fragmentation ? 2 * mallocs : mallocs) * rng_.LogNormal(0, 0.3));
      AddApi(r, "cudaMalloc", r.host, d, r.alloc_hit);
      r.host += d + 2 * kUs;
    }
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
    double f = e_->gpu_speed_[static_cast<size_t>(r.rank)] * Noise() * r.kernel_factor;
    *hit = r.kernel_hit && r.kernel_factor > 1.0;
    if (r.family_factor > 1.0 && op.family == r.slow_family) {
      f *= r.family_factor;
      *hit = true;
    }
    if (r.contention > 0 && rng_.Bernoulli(0.65)) {
      f *= 1.0 + r.contention * rng_.Uniform(0.6, 2.2);
      *hit = true;
    }
    return std::max<int64_t>(1500, static_cast<int64_t>(KernelNs(op, c) * f));
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
             ((op.name == "aten::mm" || op.name == "aten::copy_") && rng_.Bernoulli(0.08)))) {
          ++r.alloc_bursts;
          AllocatorCalls(r, e_->last_step_ns_ > 0 ? e_->last_step_ns_ / 8 : 2 * kMs);
          if (r.alloc_hit) MarkOpenHit(r);
        }
        return;
      case OpKind::kClose:
        if (graph) return;
        CloseRange(r);
        return;
      case OpKind::kKernel: {
        bool hit = false;
        int64_t dur = KernelDuration(r, op, c, &hit);
        if (op.reordered || (op.decode_path && c.has_misroute)) hit = true;
        if (graph) {
          if (!r.in_graph) BeginGraph(r, i);
          const int64_t start = r.graph_gpu + static_cast<int64_t>(rng_.Uniform(600, 1800));
          AddKernel(r, op, start, start + dur, r.graph_corr, kComputeStream, hit);
          r.graph_gpu = start + dur;
          r.stream = r.graph_gpu;
          return;
        }
        // Eager launch: the call, then the kernel once the stream is free.
        const bool crash_here = r.crash_layer >= 0 && op.layer_index == r.crash_layer &&
                                op.family == Family::kAttention;
        std::string_view api = ApiName(op.api);
        if (r.retry_p > 0 && rng_.Bernoulli(r.retry_p)) {
          const int64_t d = HostNs(r, 7.0);
          AddApi(r, "cuLaunchKernelEx", r.host, d, true, 701);  // LAUNCH_OUT_OF_RESOURCES
          MarkOpenHit(r);
          r.host += d + static_cast<int64_t>(rng_.Uniform(15, 60) * kUs);
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
          // The kernel faults a few microseconds in; the error surfaces at the next call.
          AddKernel(r, op, start, start + 6 * kUs, corr, kComputeStream, true);
          r.host = call_start + call;
          const int64_t d = HostNs(r, 5.0);
          AddApi(r, "cudaLaunchKernel", r.host + 4 * kUs, d, true, 700);
          r.host += 4 * kUs + d;
          result_->crashed = true;
          result_->crash_rank = r.rank;
          result_->crash_kernel = std::string(op.name);
          Stop(r, r.host + 200 * kUs);
          return;
        }
        AddKernel(r, op, start, start + dur, corr, kComputeStream, hit);
        r.stream = start + dur;
        r.host = call_start + call;
        return;
      }
      case OpKind::kCopyIn: {
        if (graph) return;
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
        int64_t end = std::max(start + 2 * kUs, r.stream + 4 * kUs);
        if (r.sync_extra > 0) {
          end += static_cast<int64_t>(r.sync_extra * std::max<int64_t>(end - start, 300 * kUs) *
                                      rng_.Uniform(0.7, 1.3));
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
        if (!r.in_graph) BeginGraph(r, i);
        ready[g] = r.graph_gpu + static_cast<int64_t>(rng_.Uniform(600, 1500));
        corr[g] = r.graph_corr;
      } else {
        int64_t call = HostNs(r, 7.0, 0.3);
        if (r.straggler)
          call += static_cast<int64_t>(rng_.Uniform(0.3, 1.0) * (r.host_factor - 1) * 400 * kUs);
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
      if (rng_.Bernoulli(link_loss_p_)) {
        dur += static_cast<int64_t>(rng_.Uniform(0.3, 1.5) * kMs);
        ++result_->link_spikes;
      }
    }
    dur = static_cast<int64_t>(dur * link * Noise());
    int64_t last = 0;
    for (size_t g = 0; g < n; ++g) last = std::max(last, ready[g]);
    int64_t end = last + dur;
    const int64_t comm_index = CommIndex(op);
    const int64_t seq = e_->sequence_[static_cast<size_t>(comm_index)]++;
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
      wire::CollectiveRecord coll;
      coll.clock = wire::ClockDomain::kGpu;
      coll.start_ns = ready[g];
      coll.end_ns = k_end;
      coll.communicator = e_->communicators_[static_cast<size_t>(comm_index)];
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

  int64_t CommIndex(const Op& op) const {
    if (cfg_.engine == EngineKind::kTorchFsdp) return 0;
    const int32_t stage = group_[0]->rank / cfg_.cluster.tp;
    return stage;
  }

  int64_t CollBytes(const Op& op, const StepContext& c, int32_t n) const {
    const ModelSpec& m = cfg_.model;
    switch (op.work) {
      case Work::kAllReduce:
        return std::max<int64_t>(1, c.tokens) * m.hidden * 2;
      case Work::kAllGather:
        return std::max<int64_t>(1, c.seqs) * m.vocab * 4;
      case Work::kParamGather:
        return static_cast<int64_t>(
            (4.0 * m.hidden * m.hidden * 0.75 + 3.0 * m.hidden * m.intermediate) * 2);
      default:
        return std::max<int64_t>(1, c.tokens) * m.hidden * 2;
    }
  }

 public:
  struct PendingSend {
    RankState* r = nullptr;
    size_t kernel = 0;
    size_t coll = 0;
    int64_t ready = -1;
    int64_t sequence = 0;
  };
  double link_factor_ = 1.0;
  double link_loss_p_ = 0.0;
  std::vector<PendingSend>* pp_in_ = nullptr;   // by tp rank: the previous stage's sends
  std::vector<PendingSend>* pp_out_ = nullptr;  // by tp rank: this stage's sends

 private:
  void PointToPoint(RankState& r, size_t g, const Op& op, const StepContext& c) {
    const int32_t tp = cfg_.cluster.tp;
    const int32_t tp_rank = r.rank % tp;
    const int32_t stage = r.rank / tp;
    PendingSend& link = (op.send ? *pp_out_ : *pp_in_)[static_cast<size_t>(tp_rank)];
    const int32_t peer = op.send ? r.rank + tp : r.rank - tp;
    const bool crosses = NodeOfRank(cfg_.cluster, r.rank) != NodeOfRank(cfg_.cluster, peer);
    const size_t comm =
        static_cast<size_t>(cfg_.cluster.pp + (op.send ? stage : stage - 1) * tp + tp_rank);
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
      if (rng_.Bernoulli(link_loss_p_)) {
        dur += static_cast<int64_t>(rng_.Uniform(0.3, 1.5) * kMs);
        ++result_->link_spikes;
      }
    }
    dur = static_cast<int64_t>(dur * Noise());
    wire::CollectiveRecord coll;
    coll.clock = wire::ClockDomain::kGpu;
    coll.communicator = e_->communicators_[comm];
    coll.op = op.send ? "send" : "recv";
    coll.size_bytes = std::max<int64_t>(1, c.tokens) * cfg_.model.hidden * 2;
    coll.dtype = "bfloat16";
    coll.group_size = 2;
    coll.group_rank = op.send ? 0 : 1;
    coll.correlation = corr;
    coll.device = LocalRankOf(cfg_.cluster, r.rank);
    coll.stream = kComputeStream;
    if (op.send) {
      const int64_t seq = e_->sequence_[comm]++;
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
      coll.sequence = e_->sequence_[comm]++;
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

 public:
 private:
  StepEmitter* e_;
  const std::vector<Op>& ops_;
  std::vector<RankState*> group_;
  std::vector<const StepContext*> ctx_;
  ForwardMode mode_;
  StepResult* result_;
  const SimConfig& cfg_;
  Rng& rng_;
};

// ---------------------------------------------------------------------------
// Op lists: what one stage of the model runs in a step, with real names.
namespace {

constexpr std::string_view kGemmTiny =
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)";
constexpr std::string_view kGemmSmall =
    "ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn";
constexpr std::string_view kGemmLarge =
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn";
constexpr std::string_view kFusedAddRmsNorm =
    "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, "
    "c10::BFloat16 const*, float, int, int)";
constexpr std::string_view kRmsNorm =
    "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, "
    "c10::BFloat16 const*, float, int, int)";
constexpr std::string_view kRotary =
    "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, "
    "c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)";
constexpr std::string_view kReshapeAndCache =
    "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, "
    "(vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, "
    "__nv_bfloat16*, long const*, long, long, long, long, int, int, int, float const*, "
    "float const*)";
constexpr std::string_view kFlashFwd =
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, "
    "true, false, false, true, true, false, false>(Flash_fwd_params)";
constexpr std::string_view kFlashSplitKv =
    "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, true, "
    "false, false, false, true, true, false, false>(Flash_fwd_params)";
constexpr std::string_view kFlashCombine =
    "void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, "
    "false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, 4, "
    "3, true>(Flash_fwd_params)";
constexpr std::string_view kPagedAttention =
    "void vllm::paged_attention_v1_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, "
    "(vllm::Fp8KVCacheDataType)0, false>(__nv_bfloat16*, __nv_bfloat16 const*, __nv_bfloat16 "
    "const*, __nv_bfloat16 const*, int, float, int const*, int const*, int, float const*, int, "
    "int, int, float const*, float const*, int, int, int)";
constexpr std::string_view kFlashinferPrefill =
    "void flashinfer::BatchPrefillWithPagedKVCacheKernel<KernelTraits<(MaskMode)1, 128u, 1u, 4u, "
    "8u, 2u, 4u, (PosEncodingMode)0, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, int, "
    "DefaultAttention<false, false, false, false> >, PagedParams>(PagedParams)";
constexpr std::string_view kFlashinferDecode =
    "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(PosEncodingMode)0, 2u, 4u, 8u, 16u, 1u, "
    "8u, DefaultAttention<false, false, false, false>, PagedParams>(PagedParams)";
constexpr std::string_view kStoreKvCache = "store_kvcache";
constexpr std::string_view kSdpaFlash =
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, "
    "false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, "
    "cutlass::bfloat16_t> >, true, false, false, false, true, false>(pytorch_flash::"
    "Flash_fwd_params)";
constexpr std::string_view kSdpaSplitKv =
    "void pytorch_flash::flash_fwd_splitkv_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 64, "
    "128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, "
    "4, cutlass::bfloat16_t> >, true, false, false, false, true, false, false>(pytorch_flash::"
    "Flash_fwd_params)";
constexpr std::string_view kSiluAndMul =
    "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>"
    "(c10::BFloat16*, c10::BFloat16 const*, int)";
constexpr std::string_view kSglSiluAndMul =
    "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(__nv_bfloat16*, "
    "__nv_bfloat16 const*, int)";
constexpr std::string_view kMulKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, "
    "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, "
    "at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)";
constexpr std::string_view kSiluKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::"
    "operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::"
    "operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
    "at::detail::Array<char*, 2>)";
constexpr std::string_view kPowKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)"
    "#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::"
    "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)"
    "#1}, at::detail::Array<char*, 2>)";
constexpr std::string_view kMeanKernel =
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
    "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)";
constexpr std::string_view kRotaryHf =
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
    "BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::"
    "MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16, "
    "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > const&)::"
    "{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<"
    "c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> "
    "> >(at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1})";
constexpr std::string_view kEmbedding =
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned "
    "int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
    "at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::"
    "TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)";
constexpr std::string_view kDivKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, "
    "float, at::native::binary_internal::DivFunctor<float> >, at::detail::Array<char*, 3> >(int, "
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> "
    ">, at::detail::Array<char*, 3>)";
constexpr std::string_view kSoftmax =
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)";
constexpr std::string_view kArgmax =
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<"
    "float>, unsigned int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
    "unsigned int, long, 4>)";
constexpr std::string_view kAllReduce =
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
constexpr std::string_view kAllGather =
    "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
constexpr std::string_view kSendRecv =
    "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)";
constexpr std::string_view kCausalConvFwd =
    "void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16, "
    "c10::BFloat16> >(ConvParamsBase)";
constexpr std::string_view kCausalConvUpdate =
    "void causal_conv1d_update_kernel<Causal_conv1d_update_kernel_traits<64, 4, c10::BFloat16, "
    "c10::BFloat16> >(ConvParamsBase)";
constexpr std::string_view kSelectiveScanFwd =
    "void selective_scan_fwd_kernel<Selective_Scan_fwd_kernel_traits<128, 16, 1, true, true, true, "
    "true, c10::BFloat16, float, c10::BFloat16> >(SSMParamsBase)";
constexpr std::string_view kSelectiveStateUpdate = "_selective_scan_update_kernel";

}  // namespace

namespace {

struct OpListBuilder {
  std::vector<StepEmitter::Op>* ops;
  ForwardMode mode;
  bool piece_ok = true;  // current region is captured by piecewise graphs
  bool full_ok = true;   // current region is captured by a full graph

  StepEmitter::Op& Push(StepEmitter::Op op) {
    op.graph_piece = op.graph_piece && piece_ok;
    op.graph_full = op.graph_full && full_ok;
    ops->push_back(op);
    return ops->back();
  }
  void Open(std::string_view name, wire::RangeLayer layer, bool graph_full = true,
            bool graph_piece = true) {
    StepEmitter::Op op;
    op.kind = OpKind::kOpen;
    op.layer = layer;
    op.name = name;
    op.graph_full = graph_full;
    op.graph_piece = graph_piece;
    Push(op);
  }
  void Close(bool graph_full = true, bool graph_piece = true) {
    StepEmitter::Op op;
    op.kind = OpKind::kClose;
    op.graph_full = graph_full;
    op.graph_piece = graph_piece;
    Push(op);
  }
  void Fe(std::string_view name) { Open(name, wire::RangeLayer::kFe); }
  void Be(std::string_view name) { Open(name, wire::RangeLayer::kBe); }
  StepEmitter::Op& Kernel(std::string_view name, Family family, Work work, Api api, int64_t n = 0,
                          int64_t k = 0, int16_t layer = -1) {
    StepEmitter::Op op;
    op.kind = OpKind::kKernel;
    op.name = name;
    op.family = family;
    op.work = work;
    op.api = api;
    op.n = n;
    op.k = k;
    op.layer_index = layer;
    return Push(op);
  }
  // Backend op wrapping one kernel.
  StepEmitter::Op& BeKernel(std::string_view be, std::string_view kernel, Family family, Work work,
                            Api api, int64_t n = 0, int64_t k = 0, int16_t layer = -1) {
    Be(be);
    Kernel(kernel, family, work, api, n, k, layer);
    const size_t index = ops->size() - 1;
    Close();
    return (*ops)[index];
  }
  void Collective(std::string_view be_outer, std::string_view be_inner, std::string_view kernel,
                  Work work, Comm comm, std::string_view coll_op, int16_t layer) {
    if (!be_outer.empty()) Be(be_outer);
    Be(be_inner);
    StepEmitter::Op op;
    op.kind = OpKind::kCollective;
    op.name = kernel;
    op.family = Family::kCommunication;
    op.work = work;
    op.comm = comm;
    op.coll_op = coll_op;
    op.layer_index = layer;
    Push(op);
    Close();
    if (!be_outer.empty()) Close();
  }
};

std::string_view GemmName(int64_t tokens) {
  if (tokens <= 16) return kGemmTiny;
  if (tokens <= 256) return kGemmSmall;
  return kGemmLarge;
}

}  // namespace

void StepEmitter::BuildStageOps(int32_t stage, const StepContext& ctx, ForwardMode mode,
                                double reorder_p, std::vector<Op>* ops) {
  ops->clear();
  const ModelSpec& m = config_.model;
  const ClusterSpec& cl = config_.cluster;
  const EngineKind engine = config_.engine;
  const bool fsdp = engine == EngineKind::kTorchFsdp;
  const bool sglang = engine == EngineKind::kSglang;
  const bool v1 = engine == EngineKind::kVllmV1Offline || engine == EngineKind::kVllmV1Online;
  const int64_t tp = cl.tp;
  const int32_t layers_per_stage = m.layers / cl.pp;
  const int32_t first_layer = stage * layers_per_stage;
  const int32_t last_layer = stage == cl.pp - 1 ? m.layers : first_layer + layers_per_stage;
  const std::string_view gemm = GemmName(ctx.tokens);
  const std::string_view decoder = Name(m.arch + "DecoderLayer");
  const std::string_view attn_module = Name(m.arch + "Attention");
  const std::string_view mlp_module = Name(m.arch + "MLP");
  const std::string_view model_module = Name(m.arch + "ForCausalLM");
  const std::string_view norm_module = fsdp ? Name(m.arch + "RMSNorm") : "RMSNorm";
  const int64_t q_width = m.heads * m.head_dim / tp;
  const int64_t kv_width = m.kv_heads * m.head_dim / tp;

  OpListBuilder b{ops, mode};
  auto linear = [&](int64_t n, int64_t k, int16_t layer) {
    b.Be("aten::linear");
    b.Be("aten::t");
    b.Close();
    b.Be("aten::mm");
    b.Kernel(gemm, Family::kGemm, Work::kGemm, Api::kDriverEx, n, k, layer);
    b.Close();
    b.Close();
  };
  auto all_reduce = [&](int16_t layer) {
    if (tp > 1) {
      b.Collective("vllm::all_reduce", "nccl:all_reduce", kAllReduce, Work::kAllReduce, Comm::kTp,
                   "all_reduce", layer);
    }
  };
  auto vllm_norm = [&](bool fused, int64_t width, int16_t layer) {
    b.Fe(norm_module);
    b.BeKernel(fused ? "_C::fused_add_rms_norm" : "_C::rms_norm",
               fused ? kFusedAddRmsNorm : kRmsNorm, Family::kNorm, Work::kElem, Api::kLaunch, width,
               0, layer);
    b.Close();
  };
  auto hf_norm = [&](int64_t width, int16_t layer) {
    b.Fe(norm_module);
    b.BeKernel("aten::pow", kPowKernel, Family::kNorm, Work::kElem, Api::kLaunch, width, 0, layer);
    b.BeKernel("aten::mean", kMeanKernel, Family::kNorm, Work::kElem, Api::kLaunch, width, 0,
               layer);
    b.BeKernel("aten::mul", kMulKernel, Family::kNorm, Work::kElem, Api::kLaunch, width, 0, layer);
    b.Close();
  };
  auto mlp = [&](int16_t layer) {
    b.Fe(mlp_module);
    if (fsdp) {
      linear(m.intermediate, m.hidden, layer);
      linear(m.intermediate, m.hidden, layer);
      b.BeKernel("aten::silu", kSiluKernel, Family::kActivation, Work::kElem, Api::kLaunch,
                 m.intermediate, 0, layer);
      b.BeKernel("aten::mul", kMulKernel, Family::kActivation, Work::kElem, Api::kLaunch,
                 m.intermediate, 0, layer);
      linear(m.hidden, m.intermediate, layer);
    } else {
      b.Fe("MergedColumnParallelLinear");
      linear(2 * m.intermediate / tp, m.hidden, layer);
      b.Close();
      b.Fe("SiluAndMul");
      b.BeKernel(sglang ? "sgl_kernel::silu_and_mul" : "_C::silu_and_mul",
                 sglang ? kSglSiluAndMul : kSiluAndMul, Family::kActivation, Work::kElem,
                 Api::kLaunch, m.intermediate / tp, 0, layer);
      b.Close();
      b.Fe("RowParallelLinear");
      linear(m.hidden, m.intermediate / tp, layer);
      all_reduce(layer);
      b.Close();
    }
    b.Close();
  };
  auto attention_kernels = [&](int16_t layer) {
    const int64_t parts = (ctx.has_prefill ? 1 : 0) | (ctx.has_decode ? 2 : 0);
    if (fsdp) {
      b.Be("aten::scaled_dot_product_attention");
      b.BeKernel("aten::_scaled_dot_product_flash_attention",
                 ctx.has_prefill ? kSdpaFlash : kSdpaSplitKv, Family::kAttention, Work::kAttention,
                 Api::kLaunchEx, parts, 0, layer);
      b.Close();
      return;
    }
    b.Fe(sglang ? "RadixAttention" : "Attention");  // not called inside compiled pieces
    b.piece_ok = false;
    if (sglang) {
      b.BeKernel("aten::index_put_", kStoreKvCache, Family::kKvCache, Work::kCache, Api::kLaunch, 0,
                 0, layer);
      if (ctx.has_prefill) {
        b.BeKernel("flashinfer::batch_prefill_with_paged_kv_cache", kFlashinferPrefill,
                   Family::kAttention, Work::kAttention, Api::kLaunchEx, 1, 0, layer);
      }
      if (ctx.has_decode) {
        b.BeKernel("flashinfer::batch_decode_with_paged_kv_cache", kFlashinferDecode,
                   Family::kAttention, Work::kAttention, Api::kLaunchEx, 2, 0, layer)
            .decode_path = true;
      }
    } else {
      b.Be("vllm::unified_attention_with_output");
      b.BeKernel("_C_cache_ops::reshape_and_cache_flash", kReshapeAndCache, Family::kKvCache,
                 Work::kCache, Api::kLaunch, 0, 0, layer);
      if (v1) {
        b.Be("vllm_flash_attn::_flash_attn_varlen_forward");
        b.Kernel(kFlashSplitKv, Family::kAttention, Work::kAttention, Api::kLaunchEx, parts, 0,
                 layer);
        if (ctx.has_decode && ctx.decode_seqs > 16) {  // split-KV only pays off for big batches
          b.Kernel(kFlashCombine, Family::kAttention, Work::kAttnCombine, Api::kLaunchEx, 0, 0,
                   layer);
        }
        b.Close();
      } else {
        if (ctx.has_prefill) {
          b.BeKernel("vllm_flash_attn::_flash_attn_varlen_forward", kFlashFwd, Family::kAttention,
                     Work::kAttention, Api::kLaunchEx, 1, 0, layer);
        }
        if (ctx.has_decode) {
          b.BeKernel("_C::paged_attention_v1", kPagedAttention, Family::kAttention,
                     Work::kAttention, Api::kLaunch, 2, 0, layer)
              .decode_path = true;
        }
      }
      b.Close();
    }
    b.piece_ok = true;
    b.Close();
  };
  auto qk_norm_rotary = [&](int16_t layer, bool reorder) {
    const size_t before = ops->size();
    auto norms = [&] {
      if (fsdp) {
        b.BeKernel("aten::mul", kMulKernel, Family::kNorm, Work::kElem, Api::kLaunch, q_width, 0,
                   layer);
        b.BeKernel("aten::mul", kMulKernel, Family::kNorm, Work::kElem, Api::kLaunch, kv_width, 0,
                   layer);
        return;
      }
      vllm_norm(false, q_width, layer);
      vllm_norm(false, kv_width, layer);
    };
    auto rotary = [&] {
      if (fsdp) {
        b.BeKernel("aten::mul", kRotaryHf, Family::kRotary, Work::kElem, Api::kLaunch,
                   q_width + kv_width, 0, layer);
        return;
      }
      b.Fe("RotaryEmbedding");
      b.BeKernel("_C::rotary_embedding", kRotary, Family::kRotary, Work::kElem, Api::kLaunch,
                 q_width + kv_width, 0, layer);
      b.Close();
    };
    if (reorder) {
      rotary();
      norms();
      for (size_t i = before; i < ops->size(); ++i) (*ops)[i].reordered = true;
    } else {
      norms();
      rotary();
    }
  };

  const std::string_view runner =
      v1 ? "GPUModelRunner.execute_model"
         : (sglang ? "ModelRunner.forward"
                   : (fsdp ? "GenerationMixin._sample" : "ModelRunner.execute_model"));
  b.Open(runner, wire::RangeLayer::kFe, false, false);
  // Inputs to the device.
  b.full_ok = false;
  b.piece_ok = false;
  b.Fe(v1 ? "GPUModelRunner._prepare_inputs"
          : (sglang ? "ForwardBatch.init_new"
                    : (fsdp ? "prepare_inputs_for_generation" : "ModelInputForGPUBuilder.build")));
  const int copies = fsdp ? 2 : (sglang ? 4 : 5);
  for (int i = 0; i < copies; ++i) {
    b.Be("aten::copy_");
    StepEmitter::Op op;
    op.kind = OpKind::kCopyIn;
    op.n = i < 2 ? 8 : 4;
    b.Push(op);
    b.Close();
  }
  b.Close();
  if (stage > 0) {
    StepEmitter::Op op;
    op.kind = OpKind::kRecv;
    op.name = kSendRecv;
    op.family = Family::kCommunication;
    op.work = Work::kSendRecv;
    op.comm = Comm::kPp;
    b.Push(op);
  }
  if (mode == ForwardMode::kFullGraph) {
    b.Fe(sglang ? "CudaGraphRunner.replay" : "CUDAGraphRunner.forward");
  }
  b.full_ok = true;
  b.piece_ok = true;
  b.Open(model_module, wire::RangeLayer::kFe, true, false);
  if (stage == 0) {
    b.Fe("VocabParallelEmbedding");
    b.BeKernel("aten::embedding", kEmbedding, Family::kEmbedding, Work::kEmbed, Api::kLaunch);
    if (!fsdp) all_reduce(-1);
    b.Close();
  }
  for (int32_t layer = first_layer; layer < last_layer; ++layer) {
    const int16_t L = static_cast<int16_t>(layer);
    if (fsdp) {
      b.Fe("FullyShardedDataParallel");
      b.Be("FSDP::pre_forward");
      b.Collective("", "nccl:_all_gather_base", kAllGather, Work::kParamGather, Comm::kDp,
                   "_allgather_base", L);
      b.Close();
    }
    const bool mamba = IsMamba(m, layer);
    b.Fe(mamba ? std::string_view("MambaDecoderLayer") : decoder);
    if (fsdp) {
      hf_norm(m.hidden, L);
    } else {
      vllm_norm(layer != 0, m.hidden, L);
    }
    if (mamba) {
      b.Fe("MambaMixer2");
      b.Fe("MergedColumnParallelLinear");
      linear(4 * m.hidden / tp, m.hidden, L);
      b.Close();
      b.piece_ok = false;
      b.Be("vllm::mamba_mixer2");
      if (ctx.has_prefill) {
        b.BeKernel("_C::causal_conv1d_fwd", kCausalConvFwd, Family::kSsm, Work::kConv, Api::kLaunch,
                   0, 0, L);
        b.BeKernel("_C::selective_scan_fwd", kSelectiveScanFwd, Family::kSsm, Work::kSsmScan,
                   Api::kLaunch, 0, 0, L);
      }
      if (ctx.has_decode) {
        b.BeKernel("_C::causal_conv1d_update", kCausalConvUpdate, Family::kSsm, Work::kConv,
                   Api::kLaunch, 0, 0, L)
            .decode_path = true;
        b.BeKernel("vllm::selective_state_update", kSelectiveStateUpdate, Family::kSsm,
                   Work::kSsmUpdate, Api::kLaunch, 0, 0, L)
            .decode_path = true;
      }
      b.Close();
      b.piece_ok = true;
      b.Fe("MixerRMSNormGated");
      b.BeKernel("_C::rms_norm", kRmsNorm, Family::kNorm, Work::kElem, Api::kLaunch,
                 2 * m.hidden / tp, 0, L);
      b.Close();
      b.Fe("RowParallelLinear");
      linear(m.hidden, 2 * m.hidden / tp, L);
      all_reduce(L);
      b.Close();
      b.Close();
    } else {
      b.Fe(attn_module);
      if (fsdp) {
        linear(q_width, m.hidden, L);
        linear(kv_width, m.hidden, L);
        linear(kv_width, m.hidden, L);
      } else {
        b.Fe("QKVParallelLinear");
        linear(q_width + 2 * kv_width, m.hidden, L);
        b.Close();
        b.Be("aten::split_with_sizes");
        b.Close();
      }
      qk_norm_rotary(L, reorder_p > 0 && rng_->Bernoulli(reorder_p));
      attention_kernels(L);
      if (fsdp) {
        linear(m.hidden, q_width, L);
      } else {
        b.Fe("RowParallelLinear");
        linear(m.hidden, q_width, L);
        all_reduce(L);
        b.Close();
      }
      b.Close();
    }
    if (fsdp) {
      hf_norm(m.hidden, L);
    } else {
      vllm_norm(true, m.hidden, L);
    }
    mlp(L);
    b.Close();  // decoder layer
    if (fsdp) b.Close();
  }
  if (stage == cl.pp - 1) {
    if (fsdp) {
      hf_norm(m.hidden, -1);
    } else {
      vllm_norm(true, m.hidden, -1);
    }
  }
  b.Close(true, false);  // model
  if (mode == ForwardMode::kFullGraph) b.Close(false, false);
  b.full_ok = false;
  b.piece_ok = false;
  if (stage == cl.pp - 1) {
    b.Fe("LogitsProcessor");
    b.Be("aten::linear");
    b.Be("aten::t");
    b.Close();
    b.Be("aten::mm");
    b.Kernel(GemmName(ctx.seqs), Family::kGemm, Work::kLmHead, Api::kDriverEx, m.vocab / tp,
             m.hidden);
    b.Close();
    b.Close();
    if (tp > 1) {
      b.Collective("", "nccl:all_gather", kAllGather, Work::kAllGather, Comm::kTp, "all_gather",
                   -1);
    }
    b.Close();
    b.Fe("Sampler");
    b.BeKernel("aten::div", kDivKernel, Family::kSampling, Work::kSample, Api::kLaunch);
    b.BeKernel("aten::softmax", kSoftmax, Family::kSampling, Work::kSample, Api::kLaunch);
    b.BeKernel("aten::argmax", kArgmax, Family::kSampling, Work::kSample, Api::kLaunch);
    b.Close();
    b.Be("aten::to");
    b.Be("aten::copy_");
    StepEmitter::Op out;
    out.kind = OpKind::kCopyOut;
    b.Push(out);
    b.Close();
    b.Close();
    StepEmitter::Op sync;
    sync.kind = OpKind::kSyncOut;
    b.Push(sync);
  } else {
    StepEmitter::Op op;
    op.kind = OpKind::kSend;
    op.name = kSendRecv;
    op.family = Family::kCommunication;
    op.work = Work::kSendRecv;
    op.comm = Comm::kPp;
    op.send = true;
    b.Push(op);
  }
  b.Close(false, false);  // runner
}

StepResult StepEmitter::EmitStep(const StepPlan& plan, const std::vector<Request>& requests,
                                 int64_t start_ns, const std::vector<ActiveFault>& faults,
                                 bool cold_start, double benign_pause_ms,
                                 std::vector<RankBuffer>* buffers) {
  StepResult result;
  const ClusterSpec& cl = config_.cluster;
  const bool fsdp = config_.engine == EngineKind::kTorchFsdp;
  buffers->resize(static_cast<size_t>(world_));
  for (int32_t r = 0; r < world_; ++r) {
    (*buffers)[static_cast<size_t>(r)].Clear();
    (*buffers)[static_cast<size_t>(r)].rank = r;
  }

  // The work of the step per data-parallel rank.
  std::vector<StepContext> ctx(static_cast<size_t>(dp_size_));
  for (const StepEntry& e : plan.entries) {
    StepContext& c = ctx[static_cast<size_t>(fsdp ? e.dp_rank : 0)];
    c.tokens += e.tokens;
    if (e.samples) ++c.seqs;
    if (e.prefill && !e.misrouted) {
      c.has_prefill = true;
      c.prefill_tokens += e.tokens;
      c.prefill_attn += e.tokens * (e.context_before + e.tokens / 2.0);
    } else {
      c.has_decode = true;
      ++c.decode_seqs;
      c.decode_ctx += e.context_before + e.tokens;
      if (e.misrouted) c.has_misroute = true;
    }
  }
  StepContext shape;  // structure of the op list (union over data-parallel ranks)
  for (StepContext& c : ctx) {
    if (c.tokens == 0) {  // warm-up or an idle FSDP rank: a dummy decode batch
      c.tokens = plan.warmup ? 8 : 1;
      c.seqs = c.tokens;
      c.decode_seqs = c.tokens;
      c.decode_ctx = 16.0 * c.tokens;
      c.has_decode = true;
    }
    shape.tokens = std::max(shape.tokens, c.tokens);
    shape.seqs = std::max(shape.seqs, c.seqs);
    shape.has_prefill |= c.has_prefill;
    shape.has_decode |= c.has_decode;
    shape.has_misroute |= c.has_misroute;
  }

  std::vector<RankState> st(static_cast<size_t>(world_));
  for (int32_t r = 0; r < world_; ++r) {
    RankState& s = st[static_cast<size_t>(r)];
    s.rank = r;
    s.dp = fsdp ? r : 0;
    s.buf = &(*buffers)[static_cast<size_t>(r)];
    s.host = std::max(host_ns_[static_cast<size_t>(r)], start_ns);
    s.stream = stream_ns_[static_cast<size_t>(r)];
    s.comm_stream = comm_stream_ns_[static_cast<size_t>(r)];
    if (cold_start) {
      s.host_factor = 1.5;
      s.allocator_slow = true;
      s.alloc_fraction = 0.12;
    }
  }
  double link_factor = 1.0, loss_p = 0.0, reorder_p = 0.0;
  int64_t pause_ns = static_cast<int64_t>(benign_pause_ms * kMs);
  bool pause_hit = false;
  const int64_t typical_step = last_step_ns_ > 0 ? last_step_ns_ : 20 * kMs;
  for (const ActiveFault& f : faults) {
    for (RankState& s : st) {
      const bool target = f.rank < 0 || f.rank == s.rank;
      switch (f.mechanism) {
        case Mechanism::kGpuThrottle:
          if (target) {
            s.kernel_factor *= 1.0 + f.magnitude;
            s.kernel_hit = true;
          }
          break;
        case Mechanism::kKernelSlowdown:
          if (target) {
            s.slow_family = f.family;
            s.family_factor = 1.0 + f.magnitude;
          }
          break;
        case Mechanism::kKernelContention:
          if (target) s.contention = f.magnitude;
          break;
        case Mechanism::kIllegalMemoryAccess:
          if (f.rank == s.rank) s.crash_layer = f.crash_layer;
          break;
        case Mechanism::kLaunchLatency:
          if (target) s.launch_factor = 1.0 + f.magnitude;
          break;
        case Mechanism::kMemcpyLatency:
          if (target) {
            s.copy_factor = 1.0 + f.magnitude;
            s.copy_hit = true;
          }
          break;
        case Mechanism::kSyncLatency:
          if (target) {
            s.sync_extra = f.magnitude;
            s.sync_hit = true;
          }
          break;
        case Mechanism::kDriverRetry:
          if (target) s.retry_p = f.magnitude;
          break;
        case Mechanism::kHostMemoryPressure:
          if (NodeOfRank(cl, s.rank) == f.node) {
            s.host_factor *= 1.0 + f.magnitude;
            s.host_pressure = true;
            s.copy_hit = true;
          }
          break;
        case Mechanism::kAllocatorSlowPath:
        case Mechanism::kMemoryFragmentation:
          if (target) {
            s.allocator_slow = true;
            s.fragmentation = f.mechanism == Mechanism::kMemoryFragmentation;
            s.alloc_fraction = f.magnitude;
            s.alloc_hit = true;
          }
          break;
        case Mechanism::kStragglerRank:
          if (f.rank == s.rank) {
            s.host_factor *= 1.0 + f.magnitude;
            s.straggler = true;
          }
          break;
        case Mechanism::kNcclTimeout:
          if (f.rank == s.rank) s.hang_layer = f.crash_layer;
          break;
        default:
          break;
      }
    }
    switch (f.mechanism) {
      case Mechanism::kLinkDegradation:
        link_factor = 1.0 + f.magnitude;
        loss_p = 0.12;
        break;
      case Mechanism::kOperatorReorder:
        reorder_p = f.magnitude;
        break;
      case Mechanism::kEnginePause:
        pause_ns += static_cast<int64_t>(f.magnitude * typical_step * rng_->Uniform(0.7, 1.3));
        pause_hit = true;
        break;
      default:
        break;
    }
  }

  // Rank 0 drives the engine: schedule, then broadcast the step to the workers.
  RankState& driver = st[0];
  const int64_t step_begin = driver.host;
  const std::string_view schedule_name =
      config_.engine == EngineKind::kSglang
          ? "Scheduler.get_next_batch_to_run"
          : (fsdp ? "GenerationMixin.prepare_batch" : "Scheduler.schedule");
  {
    const int64_t sched_start = driver.host + static_cast<int64_t>(rng_->Uniform(5, 20) * kUs);
    int64_t dur = static_cast<int64_t>((120.0 + 6.0 * plan.entries.size()) * kUs *
                                       rng_->LogNormal(0, 0.2) * driver.host_factor);
    dur += pause_ns;
    wire::HostRangeRecord h;
    h.clock = wire::ClockDomain::kMonotonic;
    h.start_ns = sched_start;
    h.end_ns = sched_start + dur;
    h.layer = wire::RangeLayer::kFe;
    h.name = schedule_name;
    driver.buf->ranges.push_back(h);
    driver.buf->range_hit.push_back(pause_hit);
    if (pause_hit) driver.buf->any_hit = true;
    driver.host = sched_start + dur + 5 * kUs;
  }
  const int64_t dispatch = driver.host;
  std::vector<int64_t> step_start(static_cast<size_t>(world_));
  step_start[0] = step_begin;
  for (int32_t r = 1; r < world_; ++r) {
    RankState& s = st[static_cast<size_t>(r)];
    s.host = std::max(s.host, dispatch + static_cast<int64_t>(rng_->Uniform(25, 90) * kUs));
    step_start[static_cast<size_t>(r)] = s.host;
  }

  ForwardMode mode = plan.phase == StepPhase::kDecode ? config_.engine_spec.decode_mode
                                                      : config_.engine_spec.prefill_mode;
  if (cold_start) mode = ForwardMode::kEager;

  std::vector<Op> ops;
  std::vector<Interpreter::PendingSend> pp_in(static_cast<size_t>(cl.tp)),
      pp_out(static_cast<size_t>(cl.tp));
  const int32_t stages = fsdp ? 1 : cl.pp;
  for (int32_t stage = 0; stage < stages; ++stage) {
    std::vector<RankState*> group;
    std::vector<const StepContext*> group_ctx;
    if (fsdp) {
      for (RankState& s : st) {
        group.push_back(&s);
        group_ctx.push_back(&ctx[static_cast<size_t>(s.dp)]);
      }
    } else {
      for (int32_t t = 0; t < cl.tp; ++t) {
        group.push_back(&st[static_cast<size_t>(stage * cl.tp + t)]);
        group_ctx.push_back(&ctx[0]);
      }
    }
    // Illegal access / hang: the fault's layer index is within the stage's layers.
    BuildStageOps(stage, fsdp ? shape : ctx[0], mode, reorder_p, &ops);
    std::swap(pp_in, pp_out);
    for (auto& p : pp_out) p = Interpreter::PendingSend();
    Interpreter interpreter(this, ops, group, group_ctx, mode, &result);
    interpreter.link_factor_ = link_factor;
    interpreter.link_loss_p_ = loss_p;
    interpreter.pp_in_ = &pp_in;
    interpreter.pp_out_ = &pp_out;
    interpreter.Run();
  }

  // Close what a crash left open, at the time the engine kills its workers.
  int64_t kill_ns = 0;
  if (result.crashed) {
    for (const RankState& s : st) kill_ns = std::max({kill_ns, s.host, s.stream, s.comm_stream});
    for (RankState& s : st) {
      s.host = std::max(s.host, kill_ns);
      while (!s.open.empty()) {
        auto [op, start] = s.open.back();
        s.open.pop_back();
        s.open_hit.pop_back();
        wire::HostRangeRecord h;
        h.clock = wire::ClockDomain::kMonotonic;
        h.start_ns = start;
        h.end_ns = kill_ns;
        h.layer = op->layer;
        h.name = op->name;
        s.buf->ranges.push_back(h);
        s.buf->range_hit.push_back(false);
      }
    }
  }

  // The engine has the output once the last stage synchronized.
  int64_t output_ns = 0;
  const int32_t last_first = fsdp ? 0 : (cl.pp - 1) * cl.tp;
  for (int32_t r = last_first; r < world_; ++r) {
    output_ns = std::max(output_ns, st[static_cast<size_t>(r)].host);
  }
  if (!result.crashed) {
    driver.host =
        std::max(driver.host, output_ns + static_cast<int64_t>(rng_->Uniform(20, 60) * kUs));
    const int64_t dur = static_cast<int64_t>((60.0 + 9.0 * plan.entries.size()) * kUs *
                                             rng_->LogNormal(0, 0.2) * driver.host_factor);
    wire::HostRangeRecord h;
    h.clock = wire::ClockDomain::kMonotonic;
    h.start_ns = driver.host;
    h.end_ns = driver.host + dur;
    h.layer = wire::RangeLayer::kFe;
    h.name =
        config_.engine == EngineKind::kSglang
            ? "Scheduler.process_batch_result"
            : (config_.engine == EngineKind::kVllmV0
                   ? "LLMEngine._process_model_outputs"
                   : (fsdp ? "GenerationMixin.update_outputs" : "Scheduler.update_from_output"));
    driver.buf->ranges.push_back(h);
    driver.buf->range_hit.push_back(false);
    driver.host += dur + 3 * kUs;
  }

  // STEP ranges with the request ids and phase of each rank's batch.
  const std::string_view step_name =
      config_.engine == EngineKind::kSglang
          ? "Scheduler.run_batch"
          : (config_.engine == EngineKind::kVllmV0
                 ? "LLMEngine.step"
                 : (fsdp ? "GenerationMixin.generate_step" : "EngineCore.step"));
  for (RankState& s : st) {
    RankBuffer& buf = *s.buf;
    for (const StepEntry& e : plan.entries) {
      if (fsdp && e.dp_rank != s.dp) continue;
      buf.step_requests.push_back(requests[static_cast<size_t>(e.request)].id);
    }
    const StepPhase phase = fsdp ? plan.PhaseOfRank(s.dp) : plan.phase;
    buf.step_args = {wire::Arg::Int(wire::kStepArgStep, plan.step),
                     wire::Arg::String(wire::kStepArgPhase, PhaseName(phase)),
                     wire::Arg::StringList(wire::kStepArgRequests, buf.step_requests),
                     wire::Arg::Int(wire::kStepArgTokens, plan.prefill_tokens + plan.decode_tokens)};
    s.host = std::max(s.host, result.crashed ? kill_ns : s.host) + 4 * kUs;
    wire::HostRangeRecord h;
    h.clock = wire::ClockDomain::kMonotonic;
    h.start_ns = step_start[static_cast<size_t>(s.rank)];
    h.end_ns = s.host;
    h.layer = wire::RangeLayer::kStep;
    h.name = step_name;
    h.range_id = static_cast<uint64_t>(plan.step) + 1;
    h.args = buf.step_args;
    buf.ranges.push_back(h);
    buf.range_hit.push_back(false);
    host_ns_[static_cast<size_t>(s.rank)] = s.host;
    stream_ns_[static_cast<size_t>(s.rank)] = s.stream;
    comm_stream_ns_[static_cast<size_t>(s.rank)] = s.comm_stream;
  }
  result.end_ns = driver.host;
  for (size_t i = 0; i < st[0].buf->kernels.size(); ++i) {
    result.gpu_busy_ns += st[0].buf->kernels[i].end_ns - st[0].buf->kernels[i].start_ns;
  }
  if (!plan.warmup && !cold_start && !result.crashed && faults.empty()) {
    last_step_ns_ = result.end_ns - start_ns;
  }
  return result;
}

}  // namespace teller::sim
