// Op lists: what one pipeline stage of the model runs in a step, with real names. The
// skeleton (model runner, input copies, embedding, decoder layers, Mamba mixers, logits,
// sampler, output copy or pipeline send) is shared; the engine's profile adds its norms,
// projections, attention, MLP and layer wrappers through OpListBuilder.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "sim/rng.h"
#include "sim/step_ops.h"

namespace teller::sim {

class EngineProfile;

// Appends ops to a stage's list and tracks whether the current region is captured by CUDA
// graphs. Also carries what the engine's parts need: the model, tp and the step's shape.
class OpListBuilder {
 public:
  OpListBuilder(const SimConfig& config, const StepContext& ctx, std::deque<std::string>* names,
                std::vector<Op>* ops);

  Op& Push(Op op);
  void Open(std::string_view name, wire::RangeLayer layer, bool graph_full = true,
            bool graph_piece = true);
  void Close(bool graph_full = true, bool graph_piece = true);
  void Fe(std::string_view name) { Open(name, wire::RangeLayer::kFe); }
  void Be(std::string_view name) { Open(name, wire::RangeLayer::kBe); }
  Op& Kernel(std::string_view name, Family family, Work work, Api api, int64_t n = 0, int64_t k = 0,
             int16_t layer = -1);
  // Backend op wrapping one kernel.
  Op& BeKernel(std::string_view be, std::string_view kernel, Family family, Work work, Api api,
               int64_t n = 0, int64_t k = 0, int16_t layer = -1);
  void Collective(std::string_view be_outer, std::string_view be_inner, std::string_view kernel,
                  Work work, Comm comm, std::string_view coll_op, int16_t layer);
  // aten::linear -> aten::t, aten::mm with the GEMM of the step's token count.
  void Linear(int64_t n, int64_t k, int16_t layer);
  // vLLM's tensor-parallel all-reduce (nothing when tp is 1): NCCL, or torch symmetric
  // memory's NVLS multimem all-reduce on an NVSwitch node (no NCCL record).
  void TpAllReduce(int16_t layer);
  // A routed MoE MLP (vLLM's FusedMoE, shared by SGLang): router GEMM, top-k routing, the
  // expert-parallel all-to-all dispatch and combine when replicas step together, grouped
  // expert GEMMs (vLLM's Triton fused_moe_kernel with FP8, trtllm-gen on Blackwell).
  void FusedMoe(std::string_view act_op, std::string_view act_kernel, int16_t layer);
  // Data-parallel replicas agree on the step's batch sizes (vLLM's CPU all-reduce over the
  // DP group: host ranges only).
  void DataParallelSync();
  // A name built from the model's class prefix, kept for the run.
  std::string_view ModelName(std::string_view suffix);

  const ModelSpec& model() const { return model_; }
  const ClusterSpec& cluster() const { return cluster_; }
  const StepContext& ctx() const { return ctx_; }
  int64_t tp() const { return tp_; }
  int64_t q_width() const { return model_.heads * model_.head_dim / tp_; }
  int64_t kv_width() const { return model_.kv_heads * model_.head_dim / tp_; }
  size_t size() const { return ops_->size(); }
  std::vector<Op>& ops() { return *ops_; }

  bool piece_ok = true;  // current region is captured by piecewise graphs
  bool full_ok = true;   // current region is captured by a full graph

 private:
  void ExpertAllToAll(bool combine, int16_t layer);
  void GroupedExpertGemms(std::string_view act_op, std::string_view act_kernel, int16_t layer);

  const ModelSpec& model_;
  const ClusterSpec& cluster_;
  const StepContext& ctx_;
  int64_t tp_;
  std::string_view gemm_;
  std::deque<std::string>* names_;
  std::vector<Op>* ops_;
};

// The op list of one pipeline stage in a step. reorder_p: chance per attention layer that
// the operator-reorder fault swaps the q/k norms and the rotary embedding (drawn from rng).
void BuildStageOps(const EngineProfile& profile, const SimConfig& config, int32_t stage,
                   const StepContext& ctx, ForwardMode mode, double reorder_p, Rng* rng,
                   std::deque<std::string>* names, std::vector<Op>* ops);

}  // namespace teller::sim
