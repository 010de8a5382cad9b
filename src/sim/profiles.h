// The engine profiles (internal to src/sim/; callers use ProfileFor in engine_profile.h).
#pragma once

#include <string>
#include <string_view>

#include "sim/engine_profile.h"

namespace teller::sim {

const EngineProfile& VllmV0Profile();
const EngineProfile& VllmV1OfflineProfile();
const EngineProfile& VllmV1OnlineProfile();
const EngineProfile& SglangProfile();
const EngineProfile& TorchFsdpProfile();

// The op-list parts of the serving engines built on vLLM's custom ops and parallel layers
// (vLLM v0 and v1, SGLang): fused RMSNorm kernels, QKV/MergedColumn/RowParallelLinear with
// a tensor-parallel all-reduce, an attention layer whose kernels run outside piecewise
// CUDA graphs. The attention backend and the activation kernel are the engine's.
class VllmStyleProfile : public EngineProfile {
 public:
  void AddNorm(OpListBuilder& b, bool fused, int64_t width, int16_t layer) const override;
  void AddEmbeddingReduce(OpListBuilder& b) const override;
  void AddQkvProjection(OpListBuilder& b, int16_t layer) const override;
  void AddQkNorms(OpListBuilder& b, int16_t layer) const override;
  void AddRotary(OpListBuilder& b, int16_t layer) const override;
  void AddAttention(OpListBuilder& b, int16_t layer) const override;
  void AddOutputProjection(OpListBuilder& b, int16_t layer) const override;
  void AddMlp(OpListBuilder& b, int16_t layer) const override;

 protected:
  VllmStyleProfile(EngineKind kind, BatchingPolicy batching, EngineRangeNames ranges,
                   int32_t input_copies, std::string_view attention_module,
                   std::string_view silu_op, std::string_view silu_kernel)
      : EngineProfile(kind, batching, ranges, input_copies, false),
        attention_module_(attention_module),
        silu_op_(silu_op),
        silu_kernel_(silu_kernel) {}
  // KV-cache write and attention kernels inside the attention layer.
  virtual void AddAttentionBackend(OpListBuilder& b, int16_t layer) const = 0;

 private:
  std::string_view attention_module_;
  std::string_view silu_op_;
  std::string_view silu_kernel_;
};

}  // namespace teller::sim
