// Stage 4a: step roots, per process, from the best source present:
//   (a) STEP-layer events (hooks, simulator): number, phase and request ids in args;
//   (b) engine annotations: vLLM `execute_[<n>_]context_<c>(..)_generation_<g>(..)`,
//       SGLang `step[DECODE bs=32]`; failing those, vLLM `model_runner.py(..):
//       execute_model` Python frames;
//   (c) `ProfilerStep#N` ranges;
//   (d) the outermost host ranges of the process's busiest host thread.
// Only the outermost candidate of a chain of nested candidates becomes a step.
#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <string_view>

#include "fmt/format.h"
#include "reconstruct/build_state.h"

namespace teller::reconstruct::internal {
namespace {

using model::StepPhase;
using model::StepSource;

// Candidate classes, best first.
enum class StepClass : uint8_t {
  kStepLayer,
  kEngineAnnotation,
  kPythonExecuteModel,
  kProfilerStep,
  kNone,
};
constexpr size_t kClassCount = 4;

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}
bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// Reads leading decimal digits; false when there are none.
bool ReadNumber(std::string_view* text, int64_t* value) {
  size_t i = 0;
  int64_t v = 0;
  while (i < text->size() && i < 18 && std::isdigit(static_cast<unsigned char>((*text)[i]))) {
    v = v * 10 + ((*text)[i] - '0');
    ++i;
  }
  if (i == 0) return false;
  *value = v;
  text->remove_prefix(i);
  return true;
}

StepPhase PhaseFromCounts(int64_t context, int64_t generation) {
  if (context > 0 && generation > 0) return StepPhase::kMixed;
  if (context > 0) return StepPhase::kPrefill;
  if (generation > 0) return StepPhase::kDecode;
  return StepPhase::kUnknown;
}

// vLLM v1: execute_context_<c>(...)_generation_<g>(...) or
// execute_<n>_context_<c>(...)_generation_<g>(...).
bool ParseVllmExecute(std::string_view name, StepPhase* phase) {
  if (!StartsWith(name, "execute_")) return false;
  std::string_view rest = name.substr(8);
  int64_t total = 0;
  if (ReadNumber(&rest, &total)) {
    if (!StartsWith(rest, "_")) return false;
    rest.remove_prefix(1);
  }
  if (!StartsWith(rest, "context_")) return false;
  rest.remove_prefix(8);
  int64_t context = 0;
  if (!ReadNumber(&rest, &context)) return false;
  size_t at = rest.find("_generation_");
  if (at == std::string_view::npos) return false;
  rest.remove_prefix(at + 12);
  int64_t generation = 0;
  if (!ReadNumber(&rest, &generation)) return false;
  *phase = PhaseFromCounts(context, generation);
  return true;
}

StepPhase PhaseFromWord(std::string_view word) {
  std::string lower(word);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "prefill" || lower == "context" || lower == "extend" || lower == "prompt") {
    return StepPhase::kPrefill;
  }
  if (lower == "decode" || lower == "generation" || lower == "generate") {
    return StepPhase::kDecode;
  }
  if (lower == "mixed" || lower == "chunked_prefill") return StepPhase::kMixed;
  return StepPhase::kUnknown;
}

// SGLang: step[DECODE bs=32], step[PREFILL ...], step[EXTEND ...], step[MIXED ...].
bool ParseSglangStep(std::string_view name, StepPhase* phase) {
  if (!StartsWith(name, "step[") || !EndsWith(name, "]")) return false;
  std::string_view word = name.substr(5, name.size() - 6);
  word = word.substr(0, word.find(' '));
  *phase = PhaseFromWord(word);
  return true;
}

bool IsPythonExecuteModel(std::string_view name) {
  return EndsWith(name, "): execute_model") && name.find("model_runner.py(") != name.npos;
}

bool ParseProfilerStep(std::string_view name, int64_t* number) {
  if (!StartsWith(name, "ProfilerStep#")) return false;
  std::string_view rest = name.substr(13);
  return ReadNumber(&rest, number) && rest.empty();
}

StepClass ClassOfName(std::string_view name) {
  StepPhase phase;
  int64_t number;
  if (ParseVllmExecute(name, &phase) || ParseSglangStep(name, &phase)) {
    return StepClass::kEngineAnnotation;
  }
  if (IsPythonExecuteModel(name)) return StepClass::kPythonExecuteModel;
  if (ParseProfilerStep(name, &number)) return StepClass::kProfilerStep;
  return StepClass::kNone;
}

struct Candidate {
  uint32_t process;
  StepClass step_class;
  uint32_t row;
};

StepCandidate MakeStep(const model::Trace& trace, StepClass step_class, uint32_t row) {
  StepCandidate step;
  step.row = row;
  std::string_view name = trace.str(trace.events.name[row]);
  model::EventRow event(row);
  switch (step_class) {
    case StepClass::kStepLayer: {
      step.source = StepSource::kEngineStep;
      int64_t number;
      if (trace.FindIntArg(event, trace.strings.Find("step"), &number)) step.number = number;
      model::StringId text;
      if (trace.FindStringArg(event, trace.strings.Find("phase"), &text)) {
        step.phase = PhaseFromWord(trace.str(text));
      }
      if (step.phase == StepPhase::kUnknown) step.phase = PhaseFromWord(name);
      if (trace.FindStringArg(event, trace.strings.Find("requests"), &text)) {
        step.requests = text;
      }
      break;
    }
    case StepClass::kEngineAnnotation:
      step.source = StepSource::kEngineAnnotation;
      if (!ParseVllmExecute(name, &step.phase)) ParseSglangStep(name, &step.phase);
      break;
    case StepClass::kPythonExecuteModel:
      step.source = StepSource::kEngineAnnotation;
      break;
    case StepClass::kProfilerStep:
      step.source = StepSource::kProfilerStep;
      ParseProfilerStep(name, &step.number);
      break;
    case StepClass::kNone:
      break;
  }
  return step;
}

bool IsRangeLayerForTopLevel(model::Layer layer) {
  return layer == model::Layer::kStep || layer == model::Layer::kFe || layer == model::Layer::kBe ||
         layer == model::Layer::kComm || layer == model::Layer::kOther;
}

}  // namespace

void DetectSteps(model::Trace* trace, BuildState* state) {
  const model::EventTable& events = trace->events;
  const size_t processes = trace->processes.size();
  // Class of each interned name, computed once per distinct name.
  std::vector<uint8_t> name_class(trace->strings.size(), 0xff);
  std::vector<Candidate> candidates;
  std::vector<uint32_t> busiest(processes, kNone);
  for (size_t t = 0; t < trace->threads.size(); ++t) {
    if (trace->threads.is_device[t]) continue;
    uint32_t process = trace->threads.process[t].value();
    uint32_t count = state->thread_begin[t + 1] - state->thread_begin[t];
    uint32_t best = busiest[process];
    if (count > 0 &&
        (best == kNone || count > state->thread_begin[best + 1] - state->thread_begin[best])) {
      busiest[process] = static_cast<uint32_t>(t);
    }
    for (uint32_t i = state->thread_begin[t]; i < state->thread_begin[t + 1]; ++i) {
      uint32_t row = state->order[i];
      StepClass step_class = StepClass::kStepLayer;
      if (events.layer[row] != model::Layer::kStep) {
        uint32_t name = events.name[row].value();
        if (name >= name_class.size()) continue;
        if (name_class[name] == 0xff) {
          name_class[name] = static_cast<uint8_t>(ClassOfName(trace->str(events.name[row])));
        }
        step_class = static_cast<StepClass>(name_class[name]);
        if (step_class == StepClass::kNone) continue;
      }
      candidates.push_back(Candidate{process, step_class, row});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.process != b.process) return a.process < b.process;
    if (a.step_class != b.step_class) return a.step_class < b.step_class;
    return a.row < b.row;
  });

  std::array<int64_t, kClassCount> processes_by_class{};
  int64_t processes_top_level = 0;
  std::vector<uint8_t> is_candidate(candidates.empty() ? 0 : events.size(), 0);
  size_t c = 0;
  for (uint32_t p = 0; p < processes; ++p) {
    while (c < candidates.size() && candidates[c].process < p) ++c;
    if (c < candidates.size() && candidates[c].process == p) {
      // The best class present in this process; only its outermost members.
      StepClass chosen = candidates[c].step_class;
      size_t end = c;
      while (end < candidates.size() && candidates[end].process == p &&
             candidates[end].step_class == chosen) {
        is_candidate[candidates[end].row] = 1;
        ++end;
      }
      for (size_t k = c; k < end; ++k) {
        uint32_t row = candidates[k].row;
        bool nested = false;
        for (uint32_t up = state->up[row]; up != kNone && !nested; up = state->up[up]) {
          nested = is_candidate[up] != 0;
        }
        if (!nested) state->steps.push_back(MakeStep(*trace, chosen, row));
      }
      for (size_t k = c; k < end; ++k) is_candidate[candidates[k].row] = 0;
      ++processes_by_class[static_cast<size_t>(chosen)];
      continue;
    }
    // (d) outermost ranges of the busiest host thread.
    uint32_t t = busiest[p];
    if (t == kNone) continue;
    size_t before = state->steps.size();
    for (uint32_t i = state->thread_begin[t]; i < state->thread_begin[t + 1]; ++i) {
      uint32_t row = state->order[i];
      if (state->up[row] != kNone || events.dur_ns[row] <= 0 ||
          !IsRangeLayerForTopLevel(events.layer[row])) {
        continue;
      }
      StepCandidate step;
      step.row = row;
      step.source = StepSource::kTopLevelRange;
      state->steps.push_back(step);
    }
    if (state->steps.size() > before) ++processes_top_level;
  }

  auto note = [&](int64_t count, std::string_view what) {
    if (count == 0) return;
    trace->meta.notes.push_back(fmt::format(
        "steps of {} process(es) come from {}; no request ids were available, so requests "
        "and per-request trees are not known there",
        count, what));
  };
  note(processes_by_class[static_cast<size_t>(StepClass::kEngineAnnotation)],
       "engine annotations (vLLM execute_context_*/generation_*, SGLang step[...])");
  note(processes_by_class[static_cast<size_t>(StepClass::kPythonExecuteModel)],
       "vLLM model_runner.py execute_model Python frames");
  note(processes_by_class[static_cast<size_t>(StepClass::kProfilerStep)], "ProfilerStep#N ranges");
  note(processes_top_level, "the outermost host ranges of the busiest host thread");
}

}  // namespace teller::reconstruct::internal
