#include "cli/tpe_command.h"

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "cli/cli_status.h"
#include "cli/progress_printer.h"
#include "tpe/compression_report.h"
#include "tpe/tpe_encoder.h"

namespace teller::cli {
namespace {

constexpr const char* kInputHelp =
    "bundle directories, store files, raw traces (a directory of per-rank files is one input), "
    "or dataset folders from `teller synth dataset` (every bundle in them); each input is "
    "opened on its own";
constexpr const char* kUnitHelp =
    "what one step record is: request-step = the paper's step record C_q(s), request q's "
    "projection of engine step s over every rank that served it (needs request ids); "
    "engine-step = one engine step's whole call tree on one rank";

}  // namespace

TpeCommand::TpeCommand(CLI::App* app) {
  tpe_ = app->add_subcommand(
      "tpe",
      "Trace Pair Encoding (paper 3.5): learn a vocabulary of merged call-chain tokens, "
      "encode steps with it, measure compression");
  tpe_->require_subcommand(1);

  train_ = tpe_->add_subcommand(
      "train",
      "Learn a TPE vocabulary from the step serializations of the inputs and save it "
      "as JSON");
  train_->add_option("inputs", inputs_, kInputHelp);
  train_->add_option("-o,--output", output_, "vocabulary JSON to write ('-' for stdout)")
      ->required();
  train_
      ->add_option("--vocab-size", vocab_size_,
                   "target size: base symbols + merges; training stops earlier when no pair "
                   "occurs --min-pair-count times")
      ->capture_default_str();
  train_
      ->add_option("--min-pair-count", min_pair_count_,
                   "a pair seen fewer times (weighted by chain count) is never merged")
      ->capture_default_str();
  train_
      ->add_option("--merge-siblings", merge_siblings_,
                   "on: merges may also join a leaf with its next sibling (the paper's adjacent "
                   "merges, kept exactly decodable); off: a node's [layer, name] pair and first "
                   "children only (version-1 vocabularies)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  train_->add_option("--split", split_,
                     "[DATASET_DIR:]SPLIT:PART, e.g. request_disjoint:train: only the requests of "
                     "that part of the dataset's splits.json (request-step only); a DATASET_DIR "
                     "here is the input when none is given");
  train_->add_option("--unit", unit_, kUnitHelp)->capture_default_str();
  train_->add_flag("-q,--quiet", quiet_, "no progress on stderr");

  encode_ = tpe_->add_subcommand(
      "encode",
      "Encode steps with a vocabulary: per token input_id, parent_idx, duration_ns, "
      "depth and the token's base symbols");
  encode_->add_option("inputs", inputs_, kInputHelp)->required();
  encode_->add_option("--vocab", vocab_path_, "vocabulary JSON from `teller tpe train`")
      ->required();
  encode_->add_option("--step", step_,
                      "only this step (engine-step: the step number; request-step: the global "
                      "step shared by the ranks); default all");
  encode_->add_option("--rank", rank_, "only this rank (request-step: that rank's projection)");
  encode_->add_option("--request", request_,
                      "only this request id ('bundle/request' in a dataset); engine-step: the "
                      "steps carrying it");
  encode_
      ->add_option("--format", format_,
                   "text: a header line per step, then a tab-separated row per token; json: one "
                   "JSON object per step")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  encode_->add_option("--max-tokens", max_tokens_, "tokens printed per step, 0 for all")
      ->capture_default_str();
  encode_->add_option("--split", split_, "[DATASET_DIR:]SPLIT:PART: only requests of that part");
  encode_->add_option("--unit", unit_, kUnitHelp)->capture_default_str();
  encode_->add_flag("-q,--quiet", quiet_, "no progress on stderr");

  stats_ = tpe_->add_subcommand(
      "stats",
      "Compression of the inputs' steps under one or more vocabularies: events per "
      "step before and after, ratio, reduction, unknown symbols");
  stats_->add_option("inputs", inputs_, kInputHelp);
  stats_
      ->add_option("--vocab", vocab_paths_,
                   "vocabulary JSON from `teller tpe train`; repeat to compare several")
      ->required();
  stats_->add_option("--split", split_,
                     "[DATASET_DIR:]SPLIT:PART, e.g. request_disjoint:test: only the requests of "
                     "that part (request-step only)");
  stats_
      ->add_option("--format", format_,
                   "text, markdown (a Table-6 row per vocabulary) or json (an object per "
                   "vocabulary, one a line)")
      ->check(CLI::IsMember({"text", "markdown", "json"}))
      ->capture_default_str();
  stats_->add_option("--unit", unit_, kUnitHelp)->capture_default_str();
  stats_->add_flag("-q,--quiet", quiet_, "no progress on stderr");

  table_ = tpe_->add_subcommand(
      "table",
      "Table 6 (paper 5.2): train a vocabulary per size on one split of a dataset, "
      "measure on another; prints a markdown table");
  table_->add_option("inputs", inputs_, "dataset folders from `teller synth dataset`")->required();
  table_->add_option("--train", train_split_, "SPLIT:PART to train on")->capture_default_str();
  table_->add_option("--test", test_split_, "SPLIT:PART to measure on (never used for training)")
      ->capture_default_str();
  table_->add_option("--vocab-sizes", vocab_sizes_, "vocabulary sizes, one row each")
      ->delimiter(',')
      ->capture_default_str();
  table_->add_option("--min-pair-count", min_pair_count_, "as in `teller tpe train`")
      ->capture_default_str();
  table_->add_option("--merge-siblings", merge_siblings_, "on|off, as in `teller tpe train`")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  table_->add_option("--json", json_output_,
                     "also write the numbers as JSON to this file ('-' for stdout, instead of "
                     "the table)");
  table_->add_option("--unit", unit_, kUnitHelp)->capture_default_str();
  table_->add_flag("-q,--quiet", quiet_, "no progress on stderr");
}

bool TpeCommand::selected() const { return tpe_ != nullptr && tpe_->parsed(); }

int TpeCommand::Run() const {
  if (train_->parsed()) return RunTrain();
  if (encode_->parsed()) return RunEncode();
  if (stats_->parsed()) return RunStats();
  if (table_->parsed()) return RunTable();
  return kExitUsage;
}

base::StatusOr<tpe::TpeVocabulary> TpeCommand::LoadVocabulary(const std::string& path) {
  auto vocab = tpe::TpeVocabulary::Load(path);
  if (!vocab.ok()) return vocab.status().WithContext("--vocab");
  return vocab;
}

double TpeCommand::SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int TpeCommand::LoadCorpora(const std::vector<step_records::CorpusSource>& sources,
                            step_records::CorpusUnit unit,
                            const std::vector<step_records::Corpus*>& corpora) const {
  ProgressPrinter progress(quiet_);
  step_records::CorpusOptions options;
  options.unit = unit;
  options.progress = &progress;
  options.on_source = [&progress](const step_records::CorpusSource& source, size_t done,
                                  size_t total, size_t records) {
    if (total <= 1) return;
    progress.Note(
        fmt::format("teller: tpe: [{}/{}] {}: {} step records", done, total, source.name, records));
  };
  base::Status status = step_records::LoadCorpora(sources, options, corpora);
  for (const step_records::Corpus* corpus : corpora) {
    if (status.ok()) status = step_records::CheckCorpusNotEmpty(*corpus, unit, sources);
  }
  return status.ok() ? kExitOk : Fail(status);
}

int TpeCommand::LoadCorpus(std::string_view verb, VerbCorpus* out) const {
  auto unit = step_records::ParseCorpusUnit(unit_);
  if (!unit.ok()) return Usage(unit.status().message());
  out->unit = *unit;
  out->inputs = inputs_;
  out->corpus.filter.step = step_;
  out->corpus.filter.rank = rank_;
  out->corpus.filter.request = request_;
  if (!split_.empty()) {
    auto split = step_records::ParseSplitPart(split_);
    if (!split.ok()) return Usage(split.status().message());
    if (*unit != step_records::CorpusUnit::kRequestStep) {
      if (verb != "train") return Usage("--split needs --unit request-step");
      return Usage(
          "--split needs --unit request-step (an engine step is shared by requests of "
          "different splits)");
    }
    if (out->inputs.empty() && !split->dataset.empty()) out->inputs.push_back(split->dataset);
    out->corpus.filter.split = *split;
  }
  if (out->inputs.empty()) {
    return Usage(fmt::format("tpe {}: no input (give INPUT... or --split DATASET_DIR:...)", verb));
  }
  auto sources = step_records::ExpandCorpusInputs(out->inputs);
  if (!sources.ok()) return Fail(sources.status());
  out->sources = std::move(sources).value();
  return LoadCorpora(out->sources, out->unit, {&out->corpus});
}

int TpeCommand::RunTrain() const {
  VerbCorpus loaded;
  if (int code = LoadCorpus("train", &loaded); code != kExitOk) return code;
  const step_records::Corpus& corpus = loaded.corpus;
  const std::string unit_name(step_records::CorpusUnitName(loaded.unit));
  tpe::TpeTrainConfig config;
  config.vocab_size = vocab_size_;
  config.min_pair_count = min_pair_count_;
  config.merge_siblings = merge_siblings_ == "on";
  config.corpus = step_records::DescribeCorpus(loaded.inputs, loaded.unit, corpus.filter.split);
  const auto start = std::chrono::steady_clock::now();
  auto vocab = tpe::TpeVocabulary::Train(corpus.serializations, corpus.symbols, config);
  if (!vocab.ok()) return Fail(vocab.status());
  const double seconds = SecondsSince(start);
  tpe::TpeEncoder encoder(*vocab, corpus.symbols);
  auto stats = encoder.Measure(corpus.serializations);
  if (!stats.ok()) return Fail(stats.status());

  const bool to_stdout = IsStdout(output_);
  if (to_stdout) {
    Print(vocab->ToJson() + "\n");
  } else if (base::Status status = vocab->Save(output_); !status.ok()) {
    return Fail(status);
  }
  std::string stop;
  if (vocab->size() < vocab_size_) {
    stop = fmt::format("; stopped below --vocab-size {}: no pair left that occurs {} times or more",
                       vocab_size_, min_pair_count_);
  }
  if (!quiet_) {
    std::fprintf(stderr, "teller: trained in %.2f s (%zu %ss, %lld base tokens)\n", seconds,
                 corpus.serializations.size(), unit_name.c_str(),
                 static_cast<long long>(vocab->corpus_tokens()));
  }
  std::string summary = fmt::format(
      "wrote {}: {} from {} {}s; in-sample {:.2f} -> {:.2f} events/step ({:.2f}x){}\n",
      to_stdout ? std::string("stdout") : output_, tpe::VocabularySummary(*vocab), stats->steps,
      unit_name, stats->NodesPerStep(), stats->TokensPerStep(), stats->NodeRatio(), stop);
  if (to_stdout) {
    if (!quiet_) std::fprintf(stderr, "teller: %s", summary.c_str());
  } else {
    Print(summary);
  }
  return kExitOk;
}

}  // namespace teller::cli
