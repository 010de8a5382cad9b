#include "sim/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/engine_profile.h"

namespace teller::sim {

std::string_view PhaseName(StepPhase phase) {
  switch (phase) {
    case StepPhase::kPrefill:
      return "prefill";
    case StepPhase::kDecode:
      return "decode";
    case StepPhase::kMixed:
      return "mixed";
  }
  return "decode";
}

StepPhase StepPlan::PhaseOfRank(int32_t dp_rank) const {
  bool prefill = false, decode = false;
  for (const StepEntry& e : entries) {
    if (e.dp_rank != dp_rank) continue;
    (e.prefill && !e.misrouted ? prefill : decode) = true;
  }
  if (prefill && decode) return StepPhase::kMixed;
  return prefill ? StepPhase::kPrefill : StepPhase::kDecode;
}

std::string MakeRequestId(EngineKind engine, const std::string& run_id, int32_t index, Rng* rng) {
  const uint64_t a = rng->Next(), b = rng->Next();
  return ProfileFor(engine).RequestId(run_id, index, a, b);
}

EngineScheduler::EngineScheduler(const SimConfig& config, Rng* rng) : config_(config) {
  const WorkloadSpec& w = config.workload;
  const ClusterSpec& c = config.cluster;
  dp_size_ = ProfileFor(config.engine).DataParallelSize(c);
  effective_blocks_ = config.engine_spec.num_gpu_blocks;
  fsdp_batch_.assign(static_cast<size_t>(dp_size_), 0);
  int64_t t = 0;
  for (int32_t i = 0; i < w.num_requests; ++i) {
    Request r;
    r.index = i;
    r.id = MakeRequestId(config.engine, config.run_id, i, rng);
    if (w.online) {
      t += static_cast<int64_t>(rng->Exponential(1e9 / w.arrival_rate_per_s));
      r.arrival_ns = t;
    } else {
      r.arrival_ns = 0;
    }
    double prompt = rng->LogNormal(std::log(w.prompt_median), w.prompt_sigma);
    r.prompt_tokens = static_cast<int32_t>(std::clamp(prompt, 8.0, double(w.prompt_max)));
    double output = rng->LogNormal(std::log(w.output_median), w.output_sigma);
    r.output_tokens =
        static_cast<int32_t>(std::clamp(std::round(output), 1.0, double(w.output_max)));
    if (rng->Bernoulli(w.shared_prefix_fraction)) {
      r.prefix_tokens = std::min(w.shared_prefix_tokens, r.prompt_tokens - 1);
    }
    r.dp_rank = i % dp_size_;
    requests_.push_back(std::move(r));
  }
}

int64_t EngineScheduler::NextArrivalNs() const {
  for (const Request& r : requests_) {
    if (r.state == RequestState::kPending) return r.arrival_ns;
  }
  return -1;
}

bool EngineScheduler::Done() const {
  for (const Request& r : requests_) {
    if (r.state != RequestState::kFinished && r.state != RequestState::kAborted) return false;
  }
  return true;
}

void EngineScheduler::Admit(int64_t now_ns) {
  for (Request& r : requests_) {
    if (r.state == RequestState::kPending && r.arrival_ns <= now_ns) {
      r.state = RequestState::kWaiting;
      waiting_.push_back(r.index);
    }
  }
}

int32_t EngineScheduler::BlocksFor(int32_t tokens) const {
  const int32_t bs = config_.engine_spec.block_size;
  return (tokens + bs - 1) / bs;
}

bool EngineScheduler::TryGrow(Request* request, int32_t new_total_tokens) {
  const int32_t need = BlocksFor(new_total_tokens) - request->blocks;
  if (need <= 0) return true;
  if (used_blocks_ + need > effective_blocks_) return false;
  used_blocks_ += need;
  request->blocks += need;
  return true;
}

void EngineScheduler::Preempt(int32_t index, StepPlan* plan) {
  Request& r = requests_[static_cast<size_t>(index)];
  used_blocks_ -= r.blocks;
  r.blocks = 0;
  r.computed_tokens = 0;  // recompute
  r.state = RequestState::kWaiting;
  ++r.preemptions;
  ++total_preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), index));
  waiting_.insert(waiting_.begin(), index);
  plan->preempted.push_back(index);
}

bool EngineScheduler::GrowOrPreempt(Request* r, size_t position, int32_t tokens, StepPlan* plan) {
  bool ok = TryGrow(r, r->computed_tokens + tokens);
  while (!ok && running_.size() > position + 1) {
    Preempt(running_.back(), plan);
    ok = TryGrow(r, r->computed_tokens + tokens);
  }
  if (!ok) Preempt(r->index, plan);
  return ok;
}

void EngineScheduler::AddEntry(StepPlan* plan, Request* r, int32_t tokens, bool prefill) {
  StepEntry e;
  e.request = r->index;
  e.tokens = tokens;
  e.context_before = r->computed_tokens;
  e.prefill = prefill;
  e.samples = r->computed_tokens + tokens >= r->TotalTokens();
  e.dp_rank = r->dp_rank;
  if (prefill && r->computed_tokens == 0) e.cached_tokens = r->cached_hit_tokens;
  if (r->first_step < 0) {
    r->first_step = plan->step;
    plan->added.push_back(r->index);
  }
  r->last_step = plan->step;
  plan->entries.push_back(e);
}

// vLLM v1: one token budget shared by decodes and prefill chunks.
bool EngineScheduler::ScheduleChunked(StepPlan* plan) {
  int32_t budget = config_.engine_spec.max_num_batched_tokens;
  // Running requests first, in order; preempt from the back when blocks run out.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request& r = requests_[static_cast<size_t>(running_[i])];
    const int32_t remaining = r.TotalTokens() - r.computed_tokens;
    const int32_t tokens = r.InPrefill() ? std::min(remaining, budget) : 1;
    if (!GrowOrPreempt(&r, i, tokens, plan)) continue;
    AddEntry(plan, &r, tokens, r.InPrefill());
    budget -= tokens;
    ++i;
  }
  // Then waiting requests, FCFS.
  for (size_t i = 0; i < waiting_.size() && budget > 0;) {
    const int32_t index = waiting_[i];
    Request& r = requests_[static_cast<size_t>(index)];
    if (index == starved_request_ ||
        static_cast<int32_t>(running_.size()) >= config_.engine_spec.max_num_seqs) {
      ++i;
      continue;
    }
    if (r.computed_tokens == 0 && r.preemptions == 0 && config_.engine_spec.radix_cache) {
      r.cached_hit_tokens = r.prefix_tokens;
    }
    int32_t tokens = std::min(r.TotalTokens() - r.computed_tokens, budget);
    bool misroute = false;
    if (misroute_next_ && r.first_step < 0) {
      tokens = 1;  // the scheduler grants one token: looks like a decode
      misroute = true;
    }
    if (!TryGrow(&r, r.computed_tokens + tokens)) break;
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    running_.push_back(index);
    r.state = RequestState::kRunning;
    AddEntry(plan, &r, tokens, true);
    if (misroute) {
      plan->entries.back().misrouted = true;
      r.misrouted = true;
      misroute_next_ = false;
    }
    budget -= tokens;
  }
  return !plan->entries.empty();
}

// vLLM v0 and SGLang: a prefill batch when waiting prompts fit, else a decode batch.
bool EngineScheduler::SchedulePrefillFirst(StepPlan* plan) {
  int32_t budget = config_.engine_spec.max_num_batched_tokens;
  for (size_t i = 0; i < waiting_.size();) {
    const int32_t index = waiting_[i];
    Request& r = requests_[static_cast<size_t>(index)];
    if (index == starved_request_ ||
        static_cast<int32_t>(running_.size()) >= config_.engine_spec.max_num_seqs) {
      ++i;
      continue;
    }
    int32_t hit = 0;
    if (config_.engine_spec.radix_cache && r.preemptions == 0) hit = r.prefix_tokens;
    int32_t tokens = r.TotalTokens() - hit;
    bool misroute = false;
    if (misroute_next_ && r.first_step < 0) {
      tokens = 1;
      misroute = true;
    }
    if (tokens > budget && !plan->entries.empty()) break;
    r.cached_hit_tokens = hit;
    r.computed_tokens = misroute ? 0 : hit;
    if (!TryGrow(&r, r.computed_tokens + tokens)) {
      r.computed_tokens = 0;
      break;
    }
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    running_.push_back(index);
    r.state = RequestState::kRunning;
    AddEntry(plan, &r, tokens, true);
    if (misroute) {
      plan->entries.back().misrouted = true;
      r.misrouted = true;
      misroute_next_ = false;
    }
    budget -= tokens;
  }
  if (!plan->entries.empty()) return true;
  // Decode batch; a request still short of its prompt (misrouted) finishes it here.
  for (size_t i = 0; i < running_.size();) {
    Request& r = requests_[static_cast<size_t>(running_[i])];
    const int32_t tokens = r.InPrefill() ? r.TotalTokens() - r.computed_tokens : 1;
    if (!GrowOrPreempt(&r, i, tokens, plan)) continue;
    AddEntry(plan, &r, tokens, r.InPrefill());
    ++i;
  }
  return !plan->entries.empty();
}

// Torch FSDP serving: each data-parallel rank runs a static batch to completion;
// every rank steps together because the layers' all-gathers need all of them.
bool EngineScheduler::ScheduleStatic(StepPlan* plan) {
  for (int32_t dp = 0; dp < dp_size_; ++dp) {
    bool has_running = false;
    for (int32_t index : running_) {
      if (requests_[static_cast<size_t>(index)].dp_rank == dp) has_running = true;
    }
    if (!has_running) {
      int32_t taken = 0;
      for (size_t i = 0; i < waiting_.size() && taken < config_.engine_spec.max_num_seqs;) {
        Request& r = requests_[static_cast<size_t>(waiting_[i])];
        if (r.dp_rank != dp || r.index == starved_request_) {
          ++i;
          continue;
        }
        waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
        running_.push_back(r.index);
        r.state = RequestState::kRunning;
        used_blocks_ += 0;
        int32_t tokens = r.TotalTokens() - r.computed_tokens;
        bool misroute = false;
        if (misroute_next_ && r.first_step < 0) {
          tokens = 1;
          misroute = true;
        }
        AddEntry(plan, &r, tokens, true);
        if (misroute) {
          plan->entries.back().misrouted = true;
          r.misrouted = true;
          misroute_next_ = false;
        }
        ++taken;
      }
      continue;
    }
    for (int32_t index : running_) {
      Request& r = requests_[static_cast<size_t>(index)];
      if (r.dp_rank != dp) continue;
      const int32_t tokens = r.InPrefill() ? r.TotalTokens() - r.computed_tokens : 1;
      AddEntry(plan, &r, tokens, r.InPrefill());
    }
  }
  return !plan->entries.empty();
}

bool EngineScheduler::Schedule(int32_t step, int64_t now_ns, StepPlan* plan) {
  *plan = StepPlan();
  plan->step = step;
  Admit(now_ns);
  // KV capacity under pressure: a fraction of what is in use now.
  const int32_t configured = config_.engine_spec.num_gpu_blocks;
  if (kv_factor_ < 1.0) {
    if (effective_blocks_ == configured) {
      int32_t largest = 0;
      for (int32_t index : running_) {
        const Request& r = requests_[static_cast<size_t>(index)];
        largest = std::max(largest, BlocksFor(r.prompt_tokens + r.output_tokens + 1));
      }
      effective_blocks_ = std::max(largest + 1, static_cast<int32_t>(used_blocks_ * kv_factor_));
    }
    // The blocks are gone now: evict running requests (recompute) until the rest fit.
    while (used_blocks_ > effective_blocks_ && running_.size() > 1) Preempt(running_.back(), plan);
  } else {
    effective_blocks_ = configured;
  }
  bool any = false;
  switch (ProfileFor(config_.engine).batching()) {
    case BatchingPolicy::kChunkedPrefill:
      any = ScheduleChunked(plan);
      break;
    case BatchingPolicy::kPrefillFirst:
      any = SchedulePrefillFirst(plan);
      break;
    case BatchingPolicy::kStaticPerRank:
      any = ScheduleStatic(plan);
      break;
  }
  bool prefill = false, decode = false;
  for (const StepEntry& e : plan->entries) {
    if (e.prefill && !e.misrouted) {
      prefill = true;
      plan->prefill_tokens += e.tokens;
    } else {
      decode = true;
      plan->decode_tokens += e.tokens;
    }
  }
  plan->phase =
      prefill && decode ? StepPhase::kMixed : (prefill ? StepPhase::kPrefill : StepPhase::kDecode);
  plan->kv_blocks_used = used_blocks_;
  plan->kv_blocks_total = effective_blocks_;
  plan->waiting = static_cast<int32_t>(waiting_.size());
  plan->running = static_cast<int32_t>(running_.size());
  return any;
}

std::vector<int32_t> EngineScheduler::Complete(const StepPlan& plan, int64_t end_ns) {
  std::vector<int32_t> finished;
  for (const StepEntry& e : plan.entries) {
    Request& r = requests_[static_cast<size_t>(e.request)];
    if (r.state != RequestState::kRunning) continue;
    r.computed_tokens += e.tokens;
    if (r.computed_tokens >= r.TotalTokens() && !r.InPrefill()) {
      ++r.generated;
      if (r.first_token_ns < 0) r.first_token_ns = end_ns;
      if (r.generated >= r.output_tokens) {
        r.state = RequestState::kFinished;
        r.finish_ns = end_ns;
        used_blocks_ -= r.blocks;
        r.blocks = 0;
        running_.erase(std::find(running_.begin(), running_.end(), r.index));
        finished.push_back(r.index);
      }
    }
  }
  return finished;
}

std::vector<int32_t> EngineScheduler::AbortAll(int64_t now_ns) {
  std::vector<int32_t> aborted;
  for (Request& r : requests_) {
    if (r.state == RequestState::kFinished || r.state == RequestState::kAborted) continue;
    r.state = RequestState::kAborted;
    r.finish_ns = now_ns;
    aborted.push_back(r.index);
  }
  running_.clear();
  waiting_.clear();
  used_blocks_ = 0;
  return aborted;
}

}  // namespace teller::sim
