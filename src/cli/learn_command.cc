#include "cli/learn_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "base/file_util.h"
#include "cli/common_flags.h"
#include "cli/progress_printer.h"
#include "eval/paper_tables.h"
#include "learn/root_cause.h"
#include "step_records/dataset.h"
#include "step_records/split_part.h"

namespace teller::cli {
namespace {

base::StatusOr<bool> IsVertical(const std::string& view) {
  if (view == "horizontal") return false;
  if (view == "vertical") return true;
  return base::InvalidArgument("--view '{}': expected horizontal or vertical", view);
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = text.find(',', at);
    const std::string item =
        text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

}  // namespace

LearnCommand::LearnCommand(CLI::App* app) {
  train_ = app->add_subcommand(
      "train",
      "train the root-cause model (paper 3.6-3.7) on a dataset split (`teller synth dataset`): "
      "learns the TPE vocabulary and the log templates on the train part, keeps the weights of "
      "the best validation epoch, and writes a model folder that `teller diagnose --model` and "
      "`teller paper-tables --model` load");
  train_->add_option("dataset", dataset_, "dataset folder (manifest.json, splits.json)")
      ->required();
  train_->add_option("-o,--output", output_, "model folder to write")->required();
  train_
      ->add_option("--split", split_,
                   "split of splits.json: request_disjoint, bundle_disjoint or injection_disjoint")
      ->capture_default_str();
  train_
      ->add_option(
          "--view", view_,
          "horizontal: one record per request step over every rank; vertical: one per rank")
      ->capture_default_str();
  train_
      ->add_option("--variant", variant_,
                   "full (trace and logs), trace-only or logs-only (paper Table 5)")
      ->capture_default_str();
  train_->add_option("--epochs", epochs_, "most epochs")->capture_default_str();
  train_
      ->add_option("--patience", patience_,
                   "stop after this many epochs without a better validation score")
      ->capture_default_str();
  train_->add_option("--batch-size", batch_size_, "step records per batch")->capture_default_str();
  train_->add_option("--learning-rate", learning_rate_, "AdamW learning rate")
      ->capture_default_str();
  train_->add_option("--dim", dim_, "hidden width")->capture_default_str();
  train_->add_option("--dropout", dropout_, "dropout rate")->capture_default_str();
  train_->add_flag("--record-statistics,!--no-record-statistics", record_statistics_,
                   "give the model each record's statistical features and their deviation "
                   "from the run's median (docs/learn.md); default on");
  train_->add_flag("--operator-tokens,!--no-operator-tokens", operator_tokens_,
                   "names as what the operator is (gemm, module.layer: docs/tpe.md), so the "
                   "model reads other GPUs, libraries and engines; default on");
  train_->add_flag("--statistics-head,!--no-statistics-head", statistics_head_,
                   "add a linear read of the record statistics to the step and fault-type "
                   "logits (docs/learn.md); default on");
  train_
      ->add_option("--modality-dropout", modality_dropout_,
                   "chance that a training record's pooled trace and log vectors are hidden from "
                   "the step and type heads")
      ->capture_default_str();
  train_
      ->add_option("--summary-bins", summary_bins_,
                   "quantile bins of the piecewise-linear encoding of each record statistic "
                   "(0: raw values only)")
      ->capture_default_str();
  train_
      ->add_option("--normal-share", normal_share_,
                   "share of the normal records an epoch trains on, redrawn each epoch (all "
                   "abnormal ones kept): below 1 for the vertical view, mostly normal records")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  train_
      ->add_option("--explain-weight", explain_weight_,
                   "weight of the explanation decoder's loss (paper L_mot's lambda_r): it learns "
                   "the labels' reference explanations of abnormal steps; 0 trains no decoder")
      ->capture_default_str();
  train_
      ->add_option("--max-tokens", max_tokens_,
                   "TPE tokens per record; longer records keep their most deviant tokens")
      ->capture_default_str();
  train_->add_option("--tpe-vocab", tpe_vocab_, "TPE vocabulary size")->capture_default_str();
  train_->add_option("--seed", seed_, "random seed (weights, batch order)")->capture_default_str();
  train_->add_option("--threads", threads_, "CPU threads")->capture_default_str();
  train_->add_flag("-q,--quiet", quiet_, "no progress on stderr");

  paper_tables_ = app->add_subcommand(
      "paper-tables",
      "the paper's tables on a dataset split: abnormal-step detection, fault type, suspect "
      "operators and low-prior figures for the model (--model) and the comparison methods, "
      "each trained on the train part and measured on the test part (was `eval`; the old "
      "name works until teller 0.2)");
  paper_tables_->alias("eval");
  paper_tables_->add_option("dataset", dataset_, "dataset folder (manifest.json, splits.json)")
      ->required();
  paper_tables_->add_option("--model", model_,
                            "model folder from `teller train` (none: comparison methods only)");
  paper_tables_->add_option("--split", split_, "split of splits.json")->capture_default_str();
  paper_tables_->add_option("--train-part", train_part_, "part the comparison methods train on")
      ->capture_default_str();
  paper_tables_->add_option("--test-part", test_part_, "part everything is measured on")
      ->capture_default_str();
  paper_tables_->add_option("--view", view_, "horizontal or vertical (a model uses its own)")
      ->capture_default_str();
  paper_tables_
      ->add_option("--methods,--baselines", methods_,
                   "the comparison methods: none, or a comma list of kmeans,dbscan,"
                   "isolation_forest,gmm,svm,random_forest,xgboost, the log-based robustlog,"
                   "lanobert,logs2graphs,mad_gan and the model's single_stream variant (these "
                   "five train in the trainer plugin, libtorch); all: every comparison method "
                   "but single_stream (all,single_stream adds it); --baselines is the old name, "
                   "it works until teller 0.2")
      ->capture_default_str();
  paper_tables_->add_option("--repeats", repeats_, "low-prior resamples per prior")
      ->capture_default_str();
  paper_tables_->add_option("--markdown", markdown_, "write the tables as Markdown to this file");
  paper_tables_->add_option(
      "--json", json_,
      "write the figures as JSON to this file ('-' for stdout, instead of the "
      "tables)");
  paper_tables_->add_option("--seed", seed_, "seed of the comparison methods and the resampling")
      ->capture_default_str();
  paper_tables_->add_option("--threads", threads_, "CPU threads")->capture_default_str();
  paper_tables_->add_flag(
      "--explanations,!--no-explanations", explanations_,
      "score the rules' grounded explanation of each faulty test run against the "
      "references with BLEU (diagnoses every test run); default on");
  paper_tables_->add_flag("-q,--quiet", quiet_, "no progress on stderr");
}

bool LearnCommand::selected() const { return *train_ || *paper_tables_; }

int LearnCommand::Run() const { return *train_ ? RunTrain() : RunPaperTables(); }

int LearnCommand::RunTrain() const {
  auto vertical = IsVertical(view_);
  if (!vertical.ok()) return Fail(vertical.status());
  learn::TrainOptions options;
  options.view = view_;
  if (variant_ == "trace-only") {
    options.model.use_logs = false;
  } else if (variant_ == "logs-only") {
    options.model.use_trace = false;
  } else if (variant_ != "full") {
    return Fail(
        base::InvalidArgument("--variant '{}': expected full, trace-only or logs-only", variant_));
  }
  options.model.dim = dim_;
  options.model.dropout = dropout_;
  options.input.max_tokens = max_tokens_;
  options.input.record_statistics = record_statistics_;
  options.input.operator_tokens = operator_tokens_;
  options.model.statistics_head = statistics_head_;
  options.model.modality_dropout = modality_dropout_;
  options.explain = explain_weight_ > 0;
  options.train.explain_weight = explain_weight_;
  options.train.normal_share = normal_share_;
  options.model.summary_bins = summary_bins_;
  options.tpe_vocab_size = tpe_vocab_;
  options.train.epochs = epochs_;
  options.train.patience = patience_;
  options.train.batch_size = batch_size_;
  options.train.learning_rate = learning_rate_;
  options.train.seed = seed_;
  options.train.threads = threads_;
  options.corpus = fmt::format("{} {}:train ({} view)", dataset_, split_, view_);
  ProgressPrinter progress(quiet_);
  options.train.progress = &progress;
  auto train = step_records::LoadSplitPartRecords(dataset_, split_, "train", *vertical,
                                                  operator_tokens_, &progress);
  if (!train.ok()) return Fail(train.status());
  auto val = step_records::LoadSplitPartRecords(dataset_, split_, "val", *vertical,
                                                operator_tokens_, &progress);
  if (!val.ok()) return Fail(val.status());
  progress.Note(
      fmt::format("teller: train: {} train and {} validation step records ({} view, split {})",
                  train->records.size(), val->records.size(), view_, split_));
  const auto start = std::chrono::steady_clock::now();
  auto trained =
      learn::TrainRootCauseModel(*train, *val, options, [&](const learn::EpochReport& r) {
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double left = elapsed / r.epoch * (r.epochs - r.epoch);
        progress.Note(
            fmt::format("teller: epoch {}/{}: loss {:.3f}, validation loss {:.3f}, step F1 {:.3f}, "
                        "type macro F1 "
                        "{:.3f}, operator F1 {:.3f}, {}{}",
                        r.epoch, r.epochs, r.train_loss, r.val_loss, r.val_step_f1,
                        r.val_type_macro_f1, r.val_token_f1,
                        ProgressPrinter::FormatSeconds(r.seconds), r.best ? " (best so far)" : "",
                        r.epoch < r.epochs
                            ? fmt::format(", at most {} left", ProgressPrinter::FormatSeconds(left))
                            : ""));
      });
  if (!trained.ok()) return Fail(trained.status());
  base::Status saved = learn::SaveModel(*trained, output_);
  if (!saved.ok()) return Fail(saved);
  std::fprintf(
      stderr,
      "teller: wrote the model (%lld parameters, %zu TPE tokens, %zu log templates) to %s\n",
      static_cast<long long>(trained->model.parameter_count()), trained->vocab.size(),
      trained->templates.size(), output_.c_str());
  return kExitOk;
}

int LearnCommand::RunPaperTables() const {
  ProgressPrinter progress(quiet_);
  eval::EvalOptions options;
  options.seed = seed_;
  options.threads = threads_;
  options.repeats = repeats_;
  options.progress = &progress;
  if (methods_ != "none") options.methods = eval::ExpandMethodNames(SplitList(methods_));
  std::string view = view_;
  std::optional<learn::TrainedModel> trained;
  if (!model_.empty()) {
    auto loaded = learn::LoadModel(model_);
    if (!loaded.ok()) return Fail(loaded.status());
    trained = std::move(loaded).value();
    view = trained->options.view;
  }
  auto vertical = IsVertical(view);
  if (!vertical.ok()) return Fail(vertical.status());
  const bool operator_tokens = trained ? trained->options.input.operator_tokens : true;
  auto train = step_records::LoadSplitPartRecords(dataset_, split_, train_part_, *vertical,
                                                  operator_tokens, &progress);
  if (!train.ok()) return Fail(train.status());
  auto test = step_records::LoadSplitPartRecords(dataset_, split_, test_part_, *vertical,
                                                 operator_tokens, &progress);
  if (!test.ok()) return Fail(test.status());
  std::vector<eval::ModelOutput> outputs;
  std::string model_name;
  if (trained) {
    auto model_outputs = eval::ModelOutputsOf(*trained, *test);
    if (!model_outputs.ok()) return Fail(model_outputs.status());
    outputs = std::move(model_outputs).value();
    model_name = eval::ModelRowName(*trained);
  }
  auto report = eval::EvaluateMethods(*train, *test, outputs, model_name, options);
  if (!report.ok()) return Fail(report.status());
  for (const std::string& note : report->notes) {
    std::fprintf(stderr, "teller: paper-tables: not run: %s\n", note.c_str());
  }
  if (explanations_) {
    auto dataset = step_records::ReadDataset(dataset_);
    if (!dataset.ok()) return Fail(dataset.status());
    auto keys = step_records::ReadSplitKeys(dataset_, split_, test_part_);
    if (!keys.ok()) return Fail(keys.status());
    auto scores =
        eval::ScoreRuleExplanations(*dataset, *keys, &progress, trained ? &*trained : nullptr);
    if (!scores.ok()) return Fail(scores.status());
    report->explanations = std::move(scores).value();
  }
  report->dataset = dataset_;
  report->split = split_;
  report->train_part = train_part_;
  report->test_part = test_part_;
  if (!model_.empty()) report->model = model_name + " from " + model_;
  const std::string markdown = report->Markdown();
  if (!markdown_.empty()) {
    base::Status status = base::WriteFileAtomic(markdown_, markdown);
    if (!status.ok()) return Fail(status);
  }
  if (!json_.empty()) {
    base::Status status = WriteOutput(json_, report->Json());
    if (!status.ok()) return Fail(status);
  }
  // `--json -`: the JSON is the output, in place of the tables.
  if (!IsStdout(json_)) Print(markdown);
  return kExitOk;
}

}  // namespace teller::cli
