#include "diagnose/fault_rules.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace teller::diagnose {

using localize::OperatorFamily;

FaultCategory CategoryOfFamily(OperatorFamily family) {
  switch (family) {
    case OperatorFamily::kUnnamed:
      return FaultCategory::kNone;
    case OperatorFamily::kKvCache:
    case OperatorFamily::kAlloc:
      return FaultCategory::kMemoryResource;
    case OperatorFamily::kMemcpy:
    case OperatorFamily::kMemset:
    case OperatorFamily::kSync:
    case OperatorFamily::kLaunch:
    case OperatorFamily::kGraphLaunch:
    case OperatorFamily::kCopy:
    case OperatorFamily::kRuntimeOther:
      return FaultCategory::kRuntimeDriver;
    case OperatorFamily::kHostOp:
    case OperatorFamily::kFrontend:
      return FaultCategory::kSchedulingSoftware;
    default:
      break;
  }
  if (localize::IsCollectiveFamily(family)) return FaultCategory::kCommunicationNetwork;
  return FaultCategory::kCudaKernel;
}

std::string_view NextAction(FaultCategory category) {
  switch (category) {
    case FaultCategory::kNone:
      return "Nothing stands out against this run's own baseline; if users still see the "
             "problem, record a longer window that includes normal and slow periods.";
    case FaultCategory::kMemoryResource:
      return "Check GPU and host memory: KV-cache usage and preemptions in the engine metrics, "
             "allocator activity (torch.cuda.memory_stats, PYTORCH_CUDA_ALLOC_CONF), and host "
             "memory pressure (free -m, swap, NUMA) on the node.";
    case FaultCategory::kCudaKernel:
      return "Check the GPU that ran the slow kernels: nvidia-smi -q -d CLOCK,PERFORMANCE for "
             "throttle reasons, other processes sharing it, and recent kernel or library "
             "version changes; compare with the same kernels on its peers.";
    case FaultCategory::kRuntimeDriver:
      return "Check the CUDA runtime and driver path on that rank: driver version and Xid "
             "messages (dmesg), host CPU contention of the launching thread, and "
             "synchronizing calls in the step.";
    case FaultCategory::kCommunicationNetwork:
      return "Check the interconnect between the ranks: NCCL_DEBUG=INFO output, link and IB "
             "counters (ibstat, nvidia-smi nvlink -s), and whether one rank arrives late to "
             "the collective (its host-side work before the call).";
    case FaultCategory::kSchedulingSoftware:
      return "Check the engine's scheduler: step timing and queue lengths in its metrics, "
             "recent configuration changes, and the host work between steps (Python GC, "
             "tokenization, scheduling policy).";
  }
  return "";
}

std::string_view NextActionOfCrash(const cause::CrashReport& crash) {
  if (crash.category == FaultCategory::kRuntimeDriver) {
    return "On that rank's GPU: dmesg for Xid messages (13, 31, 43, 79) at the time of the error, "
           "nvidia-smi -q for ECC and retired pages; rerun the step with CUDA_LAUNCH_BLOCKING=1 "
           "to see whether a kernel or the driver fails.";
  }
  return "Run the kernels named above under compute-sanitizer (memcheck) with the step's inputs, "
         "or "
         "turn on CUDA core dumps (CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1) to get the faulting PC "
         "without CUDA_LAUNCH_BLOCKING in production; run the engine eager (--enforce-eager) to "
         "rule out CUDA graphs, and check the kernel's inputs (block tables, slot mapping, "
         "indices) for out-of-range values.";
}

std::string_view NextActionOfHang(const cause::HangReport& hang) {
  if (hang.evidence == cause::HangEvidence::kStalledStep) {
    return "On the stalled process, while it still hangs: its Python stack (py-spy dump --pid) "
           "and native stack (gdb -p, or cuda-gdb), nvidia-smi for its GPU's utilization; if it "
           "waits in a collective, the other ranks' stacks and the NCCL state "
           "(NCCL_DEBUG=INFO, TORCH_NCCL_DUMP_ON_TIMEOUT=1 for a Flight Recorder dump).";
  }
  if (hang.culprits.empty()) {
    return "Every rank waits: compare the collectives each rank issued last (Flight Recorder: "
           "TORCH_NCCL_TRACE_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1) for a mismatch in op, "
           "size or order; if they match, the transport stalled: NCCL_DEBUG=INFO, IB and NVLink "
           "counters, nccl-tests across the same ranks.";
  }
  return "On the culprit rank: its stack now (py-spy dump --pid, or gdb for the C++ side), its "
         "last "
         "log lines (an error, an OOM or a crash before the hang), and whether its process is "
         "alive; then why it skipped or never reached the collective (a data-dependent branch, "
         "an exception swallowed in one rank). Flight Recorder dumps "
         "(TORCH_NCCL_DUMP_ON_TIMEOUT=1) "
         "show each rank's last collectives.";
}

std::string_view NextActionOfCause(cause::CauseKind kind) {
  using cause::CauseKind;
  switch (kind) {
    case CauseKind::kGpuSlow:
      return "On that rank's GPU: nvidia-smi -q -d CLOCK,PERFORMANCE,TEMPERATURE for throttle "
             "reasons (power, thermal, HW slowdown), other processes on it (nvidia-smi pmon), and "
             "Xid messages in dmesg; drain the node if it stays slow.";
    case CauseKind::kFamilySlow:
      return "For that kernel family: what changed in the deployment (engine, PyTorch, CUDA or "
             "kernel library version, attention backend, quantization), and whether the inputs "
             "changed shape (context length, batch size).";
    case CauseKind::kHostSlow:
      return "On that rank's host: memory pressure and swapping (free -m, vmstat 1, "
             "/proc/pressure/memory), CPU contention of the engine's threads (top -H), and NUMA "
             "placement.";
    case CauseKind::kLaunchLatency:
      return "On that rank's host: CPU contention of the launching thread (top -H, pidstat -t), "
             "driver lock contention (other processes on the GPU), and whether CUDA graphs are "
             "disabled or being recaptured.";
    case CauseKind::kLaunchRetry:
      return "The failing calls on that rank (their CUDA error in the trace, e.g. 701 launch out "
             "of resources): registers or shared memory a kernel asks for, the driver's and the "
             "GPU's health (Xid in dmesg, nvidia-smi -q), and other processes holding the GPU.";
    case CauseKind::kCopyLatency:
      return "Host-device copies on that rank: pinned memory exhausted or pageable buffers "
             "(cudaHostAlloc use), PCIe link width and speed (nvidia-smi -q -d PCIE), and NUMA "
             "placement of the buffers.";
    case CauseKind::kSyncLatency:
      return "Synchronizing calls on that rank: which call waits (torch.cuda.synchronize, "
             ".item(), .cpu() in the step), and what it waits for on the GPU.";
    case CauseKind::kAllocator:
      return "The caching allocator on that rank: torch.cuda.memory_stats (num_alloc_retries, "
             "fragmentation), PYTORCH_CUDA_ALLOC_CONF (expandable_segments), and memory headroom "
             "(gpu_memory_utilization, mem_fraction_static).";
    case CauseKind::kStraggler:
      return "What delays that rank before its collectives: its host CPU (top -H), data loading "
             "or Python work before the call, and its GPU's clocks; NCCL_DEBUG=INFO shows who "
             "arrives last.";
    case CauseKind::kLinkDegraded:
      return "The interconnect: NCCL_DEBUG=INFO (transport, retries), IB and NVLink counters "
             "(ibstat, perfquery, nvidia-smi nvlink -e), and the link between the nodes; run "
             "nccl-tests all_reduce_perf across them.";
    case CauseKind::kEnginePause:
      return "What stops the engine loop between steps: Python GC (gc.set_debug, gc.freeze), "
             "GIL contention from other threads (py-spy dump), tokenization or detokenization "
             "on the loop, and scheduler work.";
    case CauseKind::kReorder:
      return "What changed in the code path: engine, PyTorch or compiler version (torch.compile "
             "or CUDA-graph recapture), and configuration flags that select kernels.";
  }
  return "";
}

}  // namespace teller::diagnose
