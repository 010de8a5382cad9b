#include "sim/engine_profile.h"

#include "sim/log_emitter.h"
#include "sim/profiles.h"

namespace teller::sim {

int32_t EngineProfile::DataParallelSize(const ClusterSpec& cluster) const {
  return data_parallel_ ? cluster.world() / (cluster.tp * cluster.pp) : cluster.dp;
}

int32_t EngineProfile::PipelineStages(const ClusterSpec& cluster) const {
  return data_parallel_ ? 1 : cluster.pp;
}

int32_t EngineProfile::CollectiveGroupSize(const ClusterSpec& cluster) const {
  return data_parallel_ ? cluster.world() : cluster.tp;
}

// Serving engines: one TP communicator per stage, one PP communicator per stage and tp
// rank; with data-parallel replicas, one TP communicator per replica and one over every
// rank (the expert-parallel all-to-all).
int32_t EngineProfile::CommunicatorCount(const ClusterSpec& cluster) const {
  if (data_parallel_) return 1;
  return cluster.pp + cluster.pp * cluster.tp + (cluster.dp > 1 ? cluster.dp + 1 : 0);
}

void EngineProfile::AddLayerWrapperOpen(OpListBuilder&, int16_t) const {}
void EngineProfile::AddLayerWrapperClose(OpListBuilder&) const {}

void EngineProfile::LogRankStartup(LogEmitter&, int32_t, int64_t) const {}
void EngineProfile::LogEngineReady(LogEmitter&, int64_t) const {}
void EngineProfile::LogRequestArrived(LogEmitter&, const Request&, int64_t) const {}
void EngineProfile::LogRequestAborted(LogEmitter&, const Request&, int64_t) const {}
void EngineProfile::LogPreempted(LogEmitter&, const Request&, int64_t, int64_t) const {}
void EngineProfile::LogMetrics(LogEmitter&, const StepPlan&, double, double, int64_t) const {}
void EngineProfile::LogWorkerDied(LogEmitter&, int32_t, int64_t) const {}
void EngineProfile::LogShutdown(LogEmitter&, int64_t) const {}

void EngineProfile::LogStepDone(LogEmitter& log, const StepPlan& plan, double kv_usage,
                                int64_t end) const {
  LogWindow& w = log.window();
  const double interval = log.config().engine_spec.metrics_interval_s;
  if (interval <= 0 || end - w.last_metrics_ns < static_cast<int64_t>(interval * 1e9)) return;
  const double secs = (end - w.last_metrics_ns) / 1e9;
  LogMetrics(log, plan, kv_usage, secs, end);
  w.prompt_tokens = 0;
  w.gen_tokens = 0;
  w.last_metrics_ns = end;
}

const EngineProfile& ProfileFor(EngineKind engine) {
  switch (engine) {
    case EngineKind::kVllmV0:
      return VllmV0Profile();
    case EngineKind::kVllmV1Offline:
      return VllmV1OfflineProfile();
    case EngineKind::kVllmV1Online:
      return VllmV1OnlineProfile();
    case EngineKind::kSglang:
      return SglangProfile();
    case EngineKind::kTorchFsdp:
      return TorchFsdpProfile();
  }
  return VllmV1OnlineProfile();
}

}  // namespace teller::sim
