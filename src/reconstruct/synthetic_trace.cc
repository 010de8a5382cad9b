#include "reconstruct/synthetic_trace.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "fmt/format.h"

namespace teller::reconstruct {
namespace {

using model::Layer;

struct PendingEvent {
  Layer layer;
  model::StringId name;
  model::ProcessIndex process;
  model::ThreadIndex thread;
  int64_t start_ns;
  int64_t dur_ns;
  int64_t correlation;  // -1 none
  uint8_t flags;
  int64_t step_number;  // STEP args, -1 none
  model::StringId phase;
  model::StringId requests;
  model::StringId communicator;
  bool collective;
  int64_t sequence;
};

// The names the written rows carry: the step ranges' argument keys, the collectives' op.
struct RowNames {
  model::StringId key_step, key_phase, key_requests, all_reduce;
};

// The events in their order, with the step ranges' arguments and the collectives' rows.
void AppendPendingEvents(const std::vector<PendingEvent>& pending, int processes,
                         const RowNames& names, model::Trace* out) {
  model::Trace& trace = *out;
  const auto& [key_step, key_phase, key_requests, all_reduce] = names;
  trace.events.Reserve(pending.size());
  for (const PendingEvent& e : pending) {
    model::EventRow row = trace.events.Append(
        e.layer, model::EventPhase::kComplete, e.name, e.process, e.thread, e.start_ns, e.dur_ns,
        model::EventId::Invalid(),
        e.correlation >= 0 ? model::CorrelationId(e.correlation) : model::CorrelationId::Invalid(),
        e.flags);
    if (e.step_number >= 0) {
      trace.AddIntArg(row, key_step, e.step_number);
      trace.AddStringArg(row, key_phase, e.phase);
      trace.AddStringArg(row, key_requests, e.requests);
    }
    if (e.collective) {
      model::CollectiveTable& c = trace.collectives;
      c.event.push_back(row);
      c.communicator.push_back(e.communicator);
      c.sequence.push_back(e.sequence);
      c.op.push_back(all_reduce);
      c.size_bytes.push_back(1 << 20);
      c.dtype.push_back(base::StringPool::kEmpty);
      c.group_size.push_back(processes);
      c.group_rank.push_back(static_cast<int32_t>(e.process.value()));
    }
  }
}

}  // namespace

model::Trace MakeSyntheticTrace(const SyntheticOptions& options) {
  model::Trace trace;
  std::mt19937_64 rng(options.seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  base::StringPool& s = trace.strings;
  const model::StringId step_name = s.Intern("engine_step"), module_name = s.Intern("Module"),
                        op_name = s.Intern("aten::mm"), launch = s.Intern("cudaLaunchKernel"),
                        graph_launch = s.Intern("cudaGraphLaunch"),
                        kernel = s.Intern("gemm_kernel"), nccl_launch = s.Intern("ncclKernel"),
                        detok = s.Intern("detokenize"), annotation = s.Intern("gpu_step_range"),
                        key_step = s.Intern("step"), key_phase = s.Intern("phase"),
                        key_requests = s.Intern("requests"), decode = s.Intern("decode"),
                        comm = s.Intern("pg0"), all_reduce = s.Intern("all_reduce"),
                        odd_launch = s.Intern("ncclKernel_other"), log_text = s.Intern("log line");
  std::vector<model::StringId> communicators{comm};
  for (int k = 1; k < options.communicators; ++k) {
    communicators.insert(communicators.begin(), s.Intern(fmt::format("pg{}", k)));
  }
  // Interned only when asked for, so that the default pool stays as it was.
  std::vector<model::StringId> kernel_names{kernel};
  for (const char* name : {"rms_norm_kernel", "flash_attn_kernel", "silu_kernel"}) {
    if (static_cast<int>(kernel_names.size()) >= options.kernel_names) break;
    kernel_names.push_back(s.Intern(name));
  }
  std::vector<PendingEvent> pending;
  const int64_t kBase = 1'700'000'000'000'000'000;
  for (int p = 0; p < options.processes; ++p) {
    const int host = p % std::max(options.hosts, 1);
    model::ProcessIndex process =
        trace.processes.Append(10000 + p, s.Intern(fmt::format("host{}", host)), s.Intern("python"),
                               p, base::StringPool::kEmpty);
    model::ThreadIndex main = trace.threads.Append(process, 1, s.Intern("main"), false, -1);
    model::ThreadIndex background =
        trace.threads.Append(process, 2, s.Intern("background"), false, -1);
    model::ThreadIndex stream = trace.threads.Append(process, 7, s.Intern("stream 7"), true, p);
    int64_t t = kBase + uniform(0, 1000) + host * options.host_clock_skew_ns;
    int64_t stream_free = t;
    int64_t correlation = 1;
    auto add = [&](Layer layer, model::StringId name, model::ThreadIndex thread, int64_t start,
                   int64_t dur) -> PendingEvent& {
      pending.push_back(PendingEvent{layer, name, process, thread, start, dur, -1, 0, -1,
                                     base::StringPool::kEmpty, base::StringPool::kEmpty,
                                     base::StringPool::kEmpty, false, -1});
      return pending.back();
    };
    for (int step = 0; step < options.steps_per_process; ++step) {
      int64_t step_start = t;
      size_t step_index = pending.size();
      add(Layer::kStep, step_name, main, step_start, 0);
      t += 1000;
      int64_t first_kernel = INT64_MAX;
      const bool reordered = options.reorder_every > 0 && (step + p) % options.reorder_every == 0;
      const bool extra_kernel =
          options.extra_kernel_every > 0 && (step + 2 * p + 1) % options.extra_kernel_every == 0;
      for (int m = 0; m < options.modules_per_step; ++m) {
        int64_t module_start = t;
        size_t module_index = pending.size();
        add(Layer::kFe, module_name, main, module_start, 0);
        t += 500;
        bool graph = options.graph_every > 0 && m % options.graph_every == options.graph_every - 1;
        auto kernels_of_op = [&](int o) {
          return (graph && o == 0 ? options.graph_kernels : 1) +
                 (extra_kernel && m == 0 && o == 0 ? 1 : 0);
        };
        // A compute kernel is named by its position in the module (reversed: from the end).
        int module_kernels = 0;
        for (int o = 0; o < options.ops_per_module; ++o) {
          const bool comm = m == options.modules_per_step - 1 &&
                            o >= options.ops_per_module - options.comm_kernels_per_step;
          if (!comm) module_kernels += kernels_of_op(o);
        }
        int kernel_position = 0;
        for (int o = 0; o < options.ops_per_module; ++o) {
          int64_t op_start = t;
          size_t op_index = pending.size();
          add(Layer::kBe, op_name, main, op_start, 0);
          t += 300;
          const int comm_index = o - (options.ops_per_module - options.comm_kernels_per_step);
          const bool last = m == options.modules_per_step - 1 && comm_index >= 0;
          const bool odd = last && comm_index == 0 && step == options.odd_comm_step &&
                           p == options.processes - 1;
          int64_t corr = correlation++;
          PendingEvent& rt = add(Layer::kRt, graph && o == 0 ? graph_launch : launch, main, t,
                                 uniform(3000, 6000));
          rt.correlation = corr;
          int64_t launch_start = t;
          t += rt.dur_ns + 200;
          int kernels = kernels_of_op(o);
          if (graph && o == 0) rt.flags = model::kFlagGraphLaunch;
          for (int k = 0; k < kernels; ++k) {
            int64_t start = std::max(stream_free, launch_start + uniform(2000, 4000));
            int64_t dur = uniform(5000, 30000);
            stream_free = start + dur;
            first_kernel = std::min(first_kernel, start);
            const model::StringId comm_name = odd ? odd_launch : nccl_launch;
            const int position = last ? 0 : kernel_position++;
            const int name_index = (reordered ? module_kernels - 1 - position : position) %
                                   static_cast<int>(kernel_names.size());
            PendingEvent& kev =
                add(last ? Layer::kComm : Layer::kK, last ? comm_name : kernel_names[name_index],
                    stream, start, dur);
            kev.correlation = corr;
            if (graph && o == 0) kev.flags = model::kFlagGraphNode;
            if (last && options.collective_rows) {
              kev.collective = true;
              kev.communicator = communicators[comm_index % communicators.size()];
              kev.sequence = options.collective_sequence
                                 ? int64_t{step} * options.comm_kernels_per_step + comm_index
                                 : -1;
            }
          }
          pending[op_index].dur_ns = t - op_start;
          t += 100;
        }
        pending[module_index].dur_ns = t - module_start;
        t += 200;
      }
      PendingEvent& step_event = pending[step_index];
      step_event.dur_ns = t + 1000 - step_start;
      step_event.step_number = step;
      step_event.phase = decode;
      std::string ids;
      for (int r = 0; r < options.requests_per_step; ++r) {
        if (r > 0) ids += ",";
        ids += fmt::format("r{}", (step / 4) * options.requests_per_step + r);
      }
      step_event.requests = s.Intern(ids);
      const int64_t step_dur = step_event.dur_ns;  // `add` below may move pending
      // Background work inside the step window and a device-side annotation.
      add(Layer::kBe, detok, background, step_start + step_dur / 2, 2000);
      add(Layer::kFe, annotation, stream, first_kernel, stream_free - first_kernel);
      for (int l = 0; l < options.log_lines_per_step; ++l) {
        model::StringId request =
            l % 2 == 0 ? s.Intern(fmt::format("r{}", (step / 4) * options.requests_per_step))
                       : base::StringPool::kEmpty;
        trace.AppendLog(step_start + step_dur / 2, process, 10000 + p, p, model::LogLevel::kInfo,
                        model::LogStream::kStdout, request, model::TemplateId(0), log_text,
                        base::StringPool::kEmpty, 1);
      }
      t = step_start + step_dur + 20000;
    }
  }
  if (options.shuffle_rows) std::shuffle(pending.begin(), pending.end(), rng);
  AppendPendingEvents(pending, options.processes, {key_step, key_phase, key_requests, all_reduce},
                      &trace);
  return trace;
}

}  // namespace teller::reconstruct
