#include "learn/log_comparisons.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <span>
#include <string>
#include <unordered_map>

#include "step_records/record_features.h"

namespace teller::learn {
namespace {

// FNV-1a, then splitmix64: the same word vector on every platform.
uint64_t HashWord(std::string_view word) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : word) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A fixed pseudo-random word vector, entries uniform in [-1, 1].
void AddWordVector(std::string_view word, float weight, std::span<float> out) {
  uint64_t state = HashWord(word);
  for (float& x : out) {
    const double unit = static_cast<double>(SplitMix(&state) >> 11) * 0x1.0p-53;
    x += weight * static_cast<float>(2 * unit - 1);
  }
}

// Inverse document frequency over the train part's templates (sklearn's smooth idf).
class TemplateWeights {
 public:
  explicit TemplateWeights(const step_records::TemplateVocabulary& train) {
    for (size_t t = 0; t < train.size(); ++t) {
      std::vector<std::string> words = LogWords(train.Get(static_cast<int32_t>(t)));
      std::sort(words.begin(), words.end());
      words.erase(std::unique(words.begin(), words.end()), words.end());
      for (const std::string& w : words) ++document_frequency_[w];
    }
    documents_ = static_cast<double>(train.size());
  }

  std::vector<float> Vector(std::string_view pattern, int32_t dims) const {
    std::map<std::string, int> term_count;
    for (std::string& w : LogWords(pattern)) ++term_count[std::move(w)];
    std::vector<float> v(static_cast<size_t>(dims), 0.0f);
    for (const auto& [word, count] : term_count) {
      const auto it = document_frequency_.find(word);
      const double df = it == document_frequency_.end() ? 0 : it->second;
      const double idf = std::log((1 + documents_) / (1 + df)) + 1;
      AddWordVector(word, static_cast<float>(count * idf), v);
    }
    double norm = 0;
    for (float x : v) norm += static_cast<double>(x) * x;
    if (norm > 0) {
      for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
    }
    return v;
  }

 private:
  std::unordered_map<std::string, int> document_frequency_;
  double documents_ = 0;
};

// Word ids of the train part's lines, most frequent first (ties by spelling).
std::unordered_map<std::string, int32_t> WordIds(const step_records::RecordSet& train,
                                                 const LogComparisonInputOptions& options) {
  std::unordered_map<std::string, int64_t> counts;
  for (const step_records::StepRecord& record : train.records) {
    for (const step_records::RecordLog& log : record.logs) {
      std::vector<std::string> words = LogWords(log.text);
      if (words.size() > static_cast<size_t>(options.max_line_words))
        words.resize(static_cast<size_t>(options.max_line_words));
      for (std::string& w : words) ++counts[std::move(w)];
    }
  }
  std::vector<std::pair<std::string, int64_t>> ranked(counts.begin(), counts.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (ranked.size() > static_cast<size_t>(options.max_words))
    ranked.resize(static_cast<size_t>(options.max_words));
  std::unordered_map<std::string, int32_t> ids;
  for (const auto& [word, count] : ranked)
    ids.emplace(word, kFirstWord + static_cast<int32_t>(ids.size()));
  return ids;
}

// Each record's window of statistical step features: the last series_window steps of
// its request (and rank, in the vertical view), padded with the earliest one.
void AddSeries(const std::vector<step_records::StepRecord>& records, int32_t window,
               LogComparisonData* data) {
  const step_records::FeatureRows rows = step_records::StatisticalFeatures(records);
  data->series_window = window;
  data->series_features = static_cast<int32_t>(rows.cols);
  std::map<std::string, std::vector<size_t>> by_key;
  for (size_t r = 0; r < records.size(); ++r) {
    std::string key = records[r].key();
    for (int32_t rank : records[r].ranks) key += "#" + std::to_string(rank);
    by_key[key].push_back(r);
  }
  const auto cols = static_cast<size_t>(rows.cols);
  for (auto& [key, members] : by_key) {
    std::stable_sort(members.begin(), members.end(),
                     [&](size_t a, size_t b) { return records[a].step < records[b].step; });
    for (size_t m = 0; m < members.size(); ++m) {
      std::vector<float>& series = data->records[members[m]].series;
      for (int32_t w = window - 1; w >= 0; --w) {
        const size_t at = members[m >= static_cast<size_t>(w) ? m - static_cast<size_t>(w) : 0];
        const float* row = rows.values.data() + at * cols;
        series.insert(series.end(), row, row + cols);
      }
    }
  }
}

LogComparisonData MakeData(const step_records::RecordSet& set, const TemplateWeights& weights,
                           const std::unordered_map<std::string, int32_t>& word_ids,
                           const LogComparisonInputOptions& options) {
  LogComparisonData data;
  data.template_dims = options.template_dims;
  data.word_count = kFirstWord + static_cast<int32_t>(word_ids.size());
  std::vector<int32_t> template_row(set.templates.size(), -1);
  std::map<std::vector<int32_t>, int32_t> line_row;
  data.records.resize(set.records.size());
  for (size_t r = 0; r < set.records.size(); ++r) {
    LogComparisonRecord& out = data.records[r];
    out.anomaly = set.records[r].is_anomaly;
    for (const step_records::RecordLog& log : set.records[r].logs) {
      const auto t = static_cast<size_t>(std::max(log.template_id, 0));
      if (t < template_row.size()) {
        if (template_row[t] < 0) {
          template_row[t] = static_cast<int32_t>(data.template_count());
          const std::vector<float> v =
              weights.Vector(set.templates.Get(static_cast<int32_t>(t)), options.template_dims);
          data.template_vectors.insert(data.template_vectors.end(), v.begin(), v.end());
        }
        out.templates.push_back(template_row[t]);
      }
      std::vector<int32_t> words;
      for (const std::string& w : LogWords(log.text)) {
        if (words.size() == static_cast<size_t>(options.max_line_words)) break;
        const auto it = word_ids.find(w);
        words.push_back(it == word_ids.end() ? kWordUnknown : it->second);
      }
      if (words.empty()) continue;
      const auto [it, added] = line_row.emplace(words, static_cast<int32_t>(data.lines.size()));
      if (added) data.lines.push_back(std::move(words));
      out.lines.push_back(it->second);
    }
  }
  AddSeries(set.records, options.series_window, &data);
  return data;
}

}  // namespace

std::vector<std::string> LogWords(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool number = false;
  auto flush = [&] {
    if (!word.empty()) words.push_back(number ? "<num>" : word);
    word.clear();
    number = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i, 3) == "<*>") {
      flush();
      i += 2;
      continue;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (std::isalnum(c) || c == '_') {
      word.push_back(static_cast<char>(std::tolower(c)));
      number = number || std::isdigit(c);
    } else {
      flush();
    }
  }
  flush();
  return words;
}

base::StatusOr<LogComparisonInputs> MakeLogComparisonInputs(
    const step_records::RecordSet& train, const step_records::RecordSet& test,
    const LogComparisonInputOptions& options) {
  if (train.records.empty() || test.records.empty())
    return base::InvalidArgument("log comparison methods: no train or no test step records");
  if (options.template_dims < 1 || options.max_line_words < 1 || options.max_words < 1 ||
      options.series_window < 1) {
    return base::InvalidArgument("log comparison methods: input sizes must be positive");
  }
  const TemplateWeights weights(train.templates);
  const std::unordered_map<std::string, int32_t> word_ids = WordIds(train, options);
  LogComparisonInputs inputs;
  inputs.train = MakeData(train, weights, word_ids, options);
  inputs.test = MakeData(test, weights, word_ids, options);
  return inputs;
}

}  // namespace teller::learn
