#include "base/phase_timer.h"

#include <algorithm>

namespace teller::base {

PhaseTimer::Open& PhaseTimer::Find(std::string_view stage) {
  auto it = std::find_if(phases_.begin(), phases_.end(),
                         [&](const Open& open) { return open.name == stage; });
  if (it != phases_.end()) return *it;
  phases_.push_back({std::string(stage), Clock::now(), {}, false});
  return phases_.back();
}

void PhaseTimer::Update(std::string_view stage, uint64_t done, uint64_t total) {
  Open& open = Find(stage);
  open.done = false;  // a stage reported again after its end (the next input) runs on
  ReportProgress(inner_, stage, done, total);
}

void PhaseTimer::Finish(std::string_view stage) {
  Open& open = Find(stage);
  open.end = Clock::now();
  open.done = true;
  if (inner_) inner_->Finish(stage);
}

void PhaseTimer::Begin(std::string_view stage) { Find(stage); }

void PhaseTimer::End(std::string_view stage) {
  auto it = std::find_if(phases_.begin(), phases_.end(),
                         [&](const Open& open) { return open.name == stage; });
  if (it == phases_.end()) return;
  it->end = Clock::now();
  it->done = true;
}

void PhaseTimer::Merge(const PhaseTimer& other) {
  phases_.insert(phases_.end(), other.phases_.begin(), other.phases_.end());
}

std::vector<PhaseTimer::Phase> PhaseTimer::phases() const {
  std::vector<Phase> out;
  const Clock::time_point now = Clock::now();
  for (const Open& open : phases_) {
    const Clock::time_point end = open.done ? open.end : now;
    out.push_back({open.name, std::chrono::duration<double>(end - open.begin).count()});
  }
  return out;
}

double PhaseTimer::total_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

}  // namespace teller::base
