#include "eval/single_stream_row.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "eval/step_scores.h"
#include "learn/single_stream.h"

namespace teller::eval {

base::Status AddSingleStream(const step_records::RecordSet& train,
                             const step_records::RecordSet& test, const std::vector<int>& labels,
                             const std::vector<int>& type_labels,
                             const std::vector<std::string>& engines, const EvalOptions& options,
                             EvalReport* report) {
  const auto start = std::chrono::steady_clock::now();
  learn::SingleStreamRunOptions run_options;
  run_options.model.seed = options.seed;
  run_options.model.threads = options.threads;
  if (options.single_stream_epochs > 0) run_options.model.epochs = options.single_stream_epochs;
  auto run = learn::RunSingleStream(train, test, run_options, options.progress);
  if (!run.ok() && (run.status().code() == base::StatusCode::kUnimplemented ||
                    run.status().code() == base::StatusCode::kNotFound)) {
    report->notes.push_back(fmt::format("{}: {}", kSingleStreamMethod, run.status().message()));
    return base::OkStatus();
  }
  if (!run.ok()) return run.status().WithContext("eval");
  // Greedy decoding writes the likeliest type token: a step is flagged when an abnormal
  // type beats normal, so its score is that type's share of the two (0.5 at the tie).
  std::vector<double> scores;
  std::vector<int> types;
  for (const auto& p : run->type_probability) {
    const auto best = std::max_element(p.begin() + 1, p.end());
    scores.push_back(*best / std::max(1e-12, static_cast<double>(*best + p[0])));
    types.push_back(*best > p[0] ? static_cast<int>(best - p.begin()) : 0);
  }
  MethodResult result;
  result.name = "teller single-stream";
  result.group = "ours";
  TELLER_RETURN_IF_ERROR(ScoreSteps(scores, labels, engines, 0.5, options, &result));
  TELLER_ASSIGN_OR_RETURN(result.type, base::ComputeMulticlassMetrics(types, type_labels));
  result.has_type = true;
  result.note = fmt::format(
      "{} parameters, TPE vocabulary {}, {} epochs trained in {:.0f} s; no operator output",
      run->parameters, run->tpe_vocab, run->epoch_loss.size(), run->train_seconds);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report->methods.push_back(std::move(result));
  TELLER_ASSIGN_OR_RETURN(SlotFormScores slot_form,
                          ScoreSlotForm("teller single-stream", test, run->words, types));
  report->slot_form.push_back(std::move(slot_form));
  if (options.progress) options.progress->Finish("single-stream epochs");
  return base::OkStatus();
}

}  // namespace teller::eval
