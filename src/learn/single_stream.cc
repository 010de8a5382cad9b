#include "learn/single_stream.h"

#include <algorithm>

#include "learn/explanation_text.h"
#include "learn/root_cause.h"
#include "learn/trainer_plugin.h"

namespace teller::learn {

base::StatusOr<SingleStreamRun> RunSingleStream(const step_records::RecordSet& train,
                                                const step_records::RecordSet& test,
                                                const SingleStreamRunOptions& options,
                                                base::ProgressSink* progress) {
  TELLER_ASSIGN_OR_RETURN(const TrainerPlugin* trainer, LoadTrainerPlugin());
  std::vector<tpe::Serialization> corpus;
  for (const step_records::StepRecord& record : train.records)
    corpus.push_back(record.serialization);
  tpe::TpeTrainConfig tpe_config;
  tpe_config.vocab_size = options.tpe_vocab_size;
  tpe_config.corpus = "teller paper-tables single-stream";
  TELLER_ASSIGN_OR_RETURN(const tpe::TpeVocabulary vocab,
                          tpe::TpeVocabulary::Train(corpus, train.symbols, tpe_config));
  step_records::TemplateVocabulary templates;
  for (size_t t = 0; t < train.templates.size(); ++t)
    templates.Intern(train.templates.Get(static_cast<int32_t>(t)));
  const ExplanationVocabulary words = ExplanationVocabularyOf(train);
  if (words.size() <= kExplainUnknown + 1)
    return base::NotFound("single-stream: no abnormal train record has a reference explanation");
  TELLER_ASSIGN_OR_RETURN(std::vector<ModelInput> train_inputs,
                          MakeInputs(train, vocab, templates, options.input));
  TELLER_ASSIGN_OR_RETURN(const std::vector<ModelInput> test_inputs,
                          MakeInputs(test, vocab, templates, options.input));
  SetExplanations(words, train, &train_inputs);
  SingleStreamShape shape;
  shape.trace_vocab = static_cast<int64_t>(vocab.size());
  shape.template_count = static_cast<int64_t>(templates.size());
  shape.type_count = diagnose::kFaultCategoryCount;
  shape.word_count = static_cast<int64_t>(words.size());
  shape.summary_features = SummaryWidth(options.input);
  TELLER_ASSIGN_OR_RETURN(
      const SingleStreamFit fit,
      trainer->fit_single_stream(shape, train_inputs, test_inputs, options.model,
                                 [&](int32_t epoch, float) {
                                   base::ReportProgress(progress, "single-stream epochs", epoch,
                                                        options.model.epochs);
                                 }));
  if (fit.type_probability.size() != test_inputs.size() * diagnose::kFaultCategoryCount ||
      fit.words.size() != test_inputs.size())
    return base::Internal("single-stream: the trainer gave outputs for another record count");
  SingleStreamRun run;
  run.type_probability.resize(test_inputs.size());
  for (size_t r = 0; r < test_inputs.size(); ++r) {
    std::copy_n(fit.type_probability.begin() +
                    static_cast<std::ptrdiff_t>(r * diagnose::kFaultCategoryCount),
                diagnose::kFaultCategoryCount, run.type_probability[r].begin());
    run.words.push_back(words.Decode(fit.words[r]));
  }
  run.epoch_loss = fit.epoch_loss;
  run.parameters = fit.parameters;
  run.tpe_vocab = shape.trace_vocab;
  run.train_seconds = fit.train_seconds;
  return run;
}

}  // namespace teller::learn
