#include "sim/op_list.h"

#include "sim/engine_profile.h"
#include "sim/kernel_names.h"

namespace teller::sim {

OpListBuilder::OpListBuilder(const SimConfig& config, const StepContext& ctx,
                             std::deque<std::string>* names, std::vector<Op>* ops)
    : model_(config.model),
      cluster_(config.cluster),
      ctx_(ctx),
      tp_(config.cluster.tp),
      gemm_(kernels::LinearGemmName(config.cluster.sm, config.model.fp8, ctx.tokens)),
      names_(names),
      ops_(ops) {}

Op& OpListBuilder::Push(Op op) {
  op.graph_piece = op.graph_piece && piece_ok;
  op.graph_full = op.graph_full && full_ok;
  ops_->push_back(op);
  return ops_->back();
}

void OpListBuilder::Open(std::string_view name, wire::RangeLayer layer, bool graph_full,
                         bool graph_piece) {
  Op op;
  op.kind = OpKind::kOpen;
  op.layer = layer;
  op.name = name;
  op.graph_full = graph_full;
  op.graph_piece = graph_piece;
  Push(op);
}

void OpListBuilder::Close(bool graph_full, bool graph_piece) {
  Op op;
  op.kind = OpKind::kClose;
  op.graph_full = graph_full;
  op.graph_piece = graph_piece;
  Push(op);
}

Op& OpListBuilder::Kernel(std::string_view name, Family family, Work work, Api api, int64_t n,
                          int64_t k, int16_t layer) {
  Op op;
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

Op& OpListBuilder::BeKernel(std::string_view be, std::string_view kernel, Family family, Work work,
                            Api api, int64_t n, int64_t k, int16_t layer) {
  Be(be);
  Kernel(kernel, family, work, api, n, k, layer);
  const size_t index = ops_->size() - 1;
  Close();
  return (*ops_)[index];
}

void OpListBuilder::Collective(std::string_view be_outer, std::string_view be_inner,
                               std::string_view kernel, Work work, Comm comm,
                               std::string_view coll_op, int16_t layer) {
  if (!be_outer.empty()) Be(be_outer);
  Be(be_inner);
  Op op;
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

void OpListBuilder::Linear(int64_t n, int64_t k, int16_t layer) {
  if (model_.fp8 && cluster_.sm >= 90 && cluster_.sm < 100) {
    // vLLM's Fp8LinearMethod: quantize the activations, then CUTLASS's scaled GEMM. The
    // inputs of the output and down projections come quantized from the attention and the
    // activation kernels; the norm outputs (width hidden) are quantized here.
    if (k == model_.hidden) {
      BeKernel("_C::static_scaled_fp8_quant", kernels::kFp8Quant, Family::kElementwise, Work::kElem,
               Api::kLaunch, k, 0, layer);
    }
    BeKernel("_C::cutlass_scaled_mm", gemm_, Family::kGemm, Work::kGemm, Api::kDriverEx, n, k,
             layer);
    return;
  }
  Be("aten::linear");
  Be("aten::t");
  Close();
  Be("aten::mm");
  Kernel(gemm_, Family::kGemm, Work::kGemm, Api::kDriverEx, n, k, layer);
  Close();
  Close();
}

void OpListBuilder::TpAllReduce(int16_t layer) {
  if (tp_ > 1 && cluster_.nvls) {
    Collective("vllm::all_reduce", "symm_mem::multimem_all_reduce_", kernels::kMultimemAllReduce,
               Work::kNvlsAllReduce, Comm::kTp, "all_reduce", layer);
    return;
  }
  if (tp_ > 1) {
    Collective("vllm::all_reduce", "nccl:all_reduce", kernels::kAllReduce, Work::kAllReduce,
               Comm::kTp, "all_reduce", layer);
  }
}

void OpListBuilder::ExpertAllToAll(bool combine, int16_t layer) {
  if (!cluster_.expert_parallel) return;
  Fe(combine ? "All2AllManager.combine" : "All2AllManager.dispatch");
  Collective("c10d::alltoall_base_", "nccl:all_to_all", kernels::kSendRecv, Work::kAllToAll,
             Comm::kWorld, "all_to_all", layer);
  Close();
}

void OpListBuilder::GroupedExpertGemms(std::string_view act_op, std::string_view act_kernel,
                                       int16_t layer) {
  const bool ep = cluster_.expert_parallel;
  const int64_t inter = ep ? model_.moe_intermediate : model_.moe_intermediate / tp_;
  // Elementwise width over the step's tokens: each token's top-k expert rows (with expert
  // parallelism this rank holds a tp-th of them).
  const int64_t routed_width = inter * model_.experts_per_token / (ep ? tp_ : 1);
  if (cluster_.sm >= 100) {  // trtllm-gen: SwiGLU fused into the gate/up GEMM
    BeKernel("trtllm::fp4_block_scale_moe", kernels::kBmmGateUp, Family::kGemm, Work::kMoeGemm,
             Api::kDriverEx, 2 * inter, model_.hidden, layer);
    BeKernel("trtllm::fp4_block_scale_moe", kernels::kBmmDown, Family::kGemm, Work::kMoeGemm,
             Api::kDriverEx, model_.hidden, inter, layer);
    BeKernel("trtllm::fp4_block_scale_moe", kernels::kMoeFinalize, Family::kElementwise,
             Work::kMoeRoute, Api::kLaunch, model_.hidden, 0, layer);
    return;
  }
  Be("vllm::inplace_fused_experts");
  BeKernel("_C::scaled_fp8_quant", kernels::kFp8Quant, Family::kElementwise, Work::kElem,
           Api::kLaunch, model_.hidden, 0, layer);
  BeKernel("triton::fused_moe_kernel", kernels::kFusedMoe, Family::kGemm, Work::kMoeGemm,
           Api::kDriverEx, 2 * inter, model_.hidden, layer);
  BeKernel(act_op, act_kernel, Family::kActivation, Work::kElem, Api::kLaunch, routed_width, 0,
           layer);
  BeKernel("_C::scaled_fp8_quant", kernels::kFp8Quant, Family::kElementwise, Work::kElem,
           Api::kLaunch, routed_width, 0, layer);
  BeKernel("triton::fused_moe_kernel", kernels::kFusedMoe, Family::kGemm, Work::kMoeGemm,
           Api::kDriverEx, model_.hidden, inter, layer);
  BeKernel("_moe_C::moe_sum", kernels::kMoeSum, Family::kElementwise, Work::kMoeRoute, Api::kLaunch,
           model_.hidden, 0, layer);
  Close();
}

void OpListBuilder::FusedMoe(std::string_view act_op, std::string_view act_kernel, int16_t layer) {
  Fe("ReplicatedLinear");  // the router
  Be("aten::linear");
  Be("aten::mm");
  Kernel(kernels::LinearGemmName(cluster_.sm, false, ctx_.tokens), Family::kGemm, Work::kGemm,
         Api::kDriverEx, model_.experts, model_.hidden, layer);
  Close();
  Close();
  Close();
  Fe("FusedMoE");
  if (cluster_.sm >= 100) {
    BeKernel("trtllm::routing", kernels::kRoutingHistogram, Family::kElementwise, Work::kMoeRoute,
             Api::kLaunch, model_.experts, 0, layer);
    BeKernel("trtllm::routing", kernels::kRoutingOffsets, Family::kElementwise, Work::kMoeRoute,
             Api::kLaunch, model_.experts, 0, layer);
  } else {
    BeKernel("_moe_C::topk_softmax", kernels::kTopkSoftmax, Family::kElementwise, Work::kMoeRoute,
             Api::kLaunch, model_.experts, 0, layer);
    BeKernel("_moe_C::moe_align_block_size", kernels::kMoeAlignBlockSize, Family::kElementwise,
             Work::kMoeRoute, Api::kLaunch, model_.experts_per_token, 0, layer);
  }
  ExpertAllToAll(false, layer);
  GroupedExpertGemms(act_op, act_kernel, layer);
  ExpertAllToAll(true, layer);
  if (!cluster_.expert_parallel) TpAllReduce(layer);
  Close();
}

void OpListBuilder::DataParallelSync() {
  if (cluster_.dp <= 1) return;
  Fe("DPMetadata.num_tokens_across_dp");
  Be("gloo:all_reduce");  // on the DP group's CPU (gloo) communicator: no kernel
  Close();
  Close();
}

std::string_view OpListBuilder::ModelName(std::string_view suffix) {
  std::string text = model_.arch + std::string(suffix);
  for (const std::string& s : *names_) {
    if (s == text) return s;
  }
  names_->push_back(std::move(text));
  return names_->back();
}

namespace {

Op PipelineOp(OpKind kind) {
  Op op;
  op.kind = kind;
  op.name = kernels::kSendRecv;
  op.family = Family::kCommunication;
  op.work = Work::kSendRecv;
  op.comm = Comm::kPp;
  op.send = kind == OpKind::kSend;
  return op;
}

// Runner range, input copies, the receive from the previous stage, graph replay range.
void AddStageStart(const EngineProfile& profile, int32_t stage, ForwardMode mode,
                   OpListBuilder& b) {
  b.Open(profile.ranges().model_runner, wire::RangeLayer::kFe, false, false);
  b.full_ok = false;
  b.piece_ok = false;
  b.Fe(profile.ranges().prepare_inputs);
  for (int i = 0; i < profile.input_copies(); ++i) {
    b.Be("aten::copy_");
    Op op;
    op.kind = OpKind::kCopyIn;
    op.n = i < 2 ? 8 : 4;
    b.Push(op);
    b.Close();
  }
  b.Close();
  b.DataParallelSync();
  if (stage > 0) b.Push(PipelineOp(OpKind::kRecv));
  if (mode == ForwardMode::kFullGraph) b.Fe(profile.ranges().graph_replay);
  b.full_ok = true;
  b.piece_ok = true;
}

void AddMambaMixer(OpListBuilder& b, int16_t L) {
  const ModelSpec& m = b.model();
  const int64_t tp = b.tp();
  b.Fe("MambaMixer2");
  b.Fe("MergedColumnParallelLinear");
  b.Linear(4 * m.hidden / tp, m.hidden, L);
  b.Close();
  b.piece_ok = false;
  b.Be("vllm::mamba_mixer2");
  if (b.ctx().has_prefill) {
    b.BeKernel("_C::causal_conv1d_fwd", kernels::kCausalConvFwd, Family::kSsm, Work::kConv,
               Api::kLaunch, 0, 0, L);
    b.BeKernel("_C::selective_scan_fwd", kernels::kSelectiveScanFwd, Family::kSsm, Work::kSsmScan,
               Api::kLaunch, 0, 0, L);
  }
  if (b.ctx().has_decode) {
    b.BeKernel("_C::causal_conv1d_update", kernels::kCausalConvUpdate, Family::kSsm, Work::kConv,
               Api::kLaunch, 0, 0, L)
        .decode_path = true;
    b.BeKernel("vllm::selective_state_update", kernels::kSelectiveStateUpdate, Family::kSsm,
               Work::kSsmUpdate, Api::kLaunch, 0, 0, L)
        .decode_path = true;
  }
  b.Close();
  b.piece_ok = true;
  b.Fe("MixerRMSNormGated");
  b.BeKernel("_C::rms_norm", kernels::kRmsNorm, Family::kNorm, Work::kElem, Api::kLaunch,
             2 * m.hidden / tp, 0, L);
  b.Close();
  b.Fe("RowParallelLinear");
  b.Linear(m.hidden, 2 * m.hidden / tp, L);
  b.TpAllReduce(L);
  b.Close();
  b.Close();
}

void AddSelfAttention(const EngineProfile& profile, int16_t L, double reorder_p, Rng* rng,
                      OpListBuilder& b) {
  b.Fe(b.ModelName("Attention"));
  profile.AddQkvProjection(b, L);
  const bool reorder = reorder_p > 0 && rng->Bernoulli(reorder_p);
  const size_t before = b.size();
  if (reorder) {
    profile.AddRotary(b, L);
    profile.AddQkNorms(b, L);
    for (size_t i = before; i < b.size(); ++i) b.ops()[i].reordered = true;
  } else {
    profile.AddQkNorms(b, L);
    profile.AddRotary(b, L);
  }
  profile.AddAttention(b, L);
  profile.AddOutputProjection(b, L);
  b.Close();
}

void AddDecoderLayer(const EngineProfile& profile, int32_t layer, double reorder_p, Rng* rng,
                     OpListBuilder& b) {
  const int16_t L = static_cast<int16_t>(layer);
  const ModelSpec& m = b.model();
  profile.AddLayerWrapperOpen(b, L);
  const bool mamba = IsMamba(m, layer);
  b.Fe(mamba ? std::string_view("MambaDecoderLayer") : b.ModelName("DecoderLayer"));
  profile.AddNorm(b, layer != 0, m.hidden, L);
  if (mamba) {
    AddMambaMixer(b, L);
  } else {
    AddSelfAttention(profile, L, reorder_p, rng, b);
  }
  profile.AddNorm(b, true, m.hidden, L);
  b.Fe(b.ModelName(m.experts > 0 ? "SparseMoeBlock" : "MLP"));
  profile.AddMlp(b, L);
  b.Close();
  b.Close();  // decoder layer
  profile.AddLayerWrapperClose(b);
}

// Logits, sampler, the copy of the sampled tokens to the host and its synchronization.
void AddSampling(OpListBuilder& b) {
  const ModelSpec& m = b.model();
  b.Fe("LogitsProcessor");
  b.Be("aten::linear");
  b.Be("aten::t");
  b.Close();
  b.Be("aten::mm");
  b.Kernel(kernels::LinearGemmName(b.cluster().sm, false, b.ctx().seqs), Family::kGemm,
           Work::kLmHead, Api::kDriverEx, m.vocab / b.tp(), m.hidden);
  b.Close();
  b.Close();
  if (b.tp() > 1) {
    b.Collective("", "nccl:all_gather", kernels::kAllGather, Work::kAllGather, Comm::kTp,
                 "all_gather", -1);
  }
  b.Close();
  b.Fe("Sampler");
  b.BeKernel("aten::div", kernels::kDivKernel, Family::kSampling, Work::kSample, Api::kLaunch);
  b.BeKernel("aten::softmax", kernels::kSoftmax, Family::kSampling, Work::kSample, Api::kLaunch);
  b.BeKernel("aten::argmax", kernels::kArgmax, Family::kSampling, Work::kSample, Api::kLaunch);
  b.Close();
  b.Be("aten::to");
  b.Be("aten::copy_");
  Op out;
  out.kind = OpKind::kCopyOut;
  b.Push(out);
  b.Close();
  b.Close();
  Op sync;
  sync.kind = OpKind::kSyncOut;
  b.Push(sync);
}

}  // namespace

void BuildStageOps(const EngineProfile& profile, const SimConfig& config, int32_t stage,
                   const StepContext& ctx, ForwardMode mode, double reorder_p, Rng* rng,
                   std::deque<std::string>* names, std::vector<Op>* ops) {
  ops->clear();
  const ModelSpec& m = config.model;
  const int32_t pp = config.cluster.pp;
  const int32_t layers_per_stage = m.layers / pp;
  const int32_t first_layer = stage * layers_per_stage;
  const int32_t last_layer = stage == pp - 1 ? m.layers : first_layer + layers_per_stage;
  const bool last_stage = stage == pp - 1;
  OpListBuilder b(config, ctx, names, ops);
  AddStageStart(profile, stage, mode, b);
  b.Open(b.ModelName("ForCausalLM"), wire::RangeLayer::kFe, true, false);
  if (stage == 0) {
    b.Fe("VocabParallelEmbedding");
    b.BeKernel("aten::embedding", kernels::kEmbedding, Family::kEmbedding, Work::kEmbed,
               Api::kLaunch);
    profile.AddEmbeddingReduce(b);
    b.Close();
  }
  for (int32_t layer = first_layer; layer < last_layer; ++layer) {
    AddDecoderLayer(profile, layer, reorder_p, rng, b);
  }
  if (last_stage) profile.AddNorm(b, true, m.hidden, -1);
  b.Close(true, false);  // model
  if (mode == ForwardMode::kFullGraph) b.Close(false, false);
  b.full_ok = false;
  b.piece_ok = false;
  if (last_stage) {
    AddSampling(b);
  } else {
    b.Push(PipelineOp(OpKind::kSend));
  }
  b.Close(false, false);  // runner
}

}  // namespace teller::sim
