// Golden end-to-end cases through the real `teller` binary, in duckdb's shape:
//
//   # name: tests/golden/show/kernel_under_launch.test
//   # description: a kernel hangs under the runtime call with its correlation id
//   require real-traces            (optional: skip when ../shared/real-traces is absent)
//   load tests/fixtures/kineto/two_steps.json
//   run show --step 1 --columns layer,name,dur_ns,depth
//
// `synth ARGS` simulates a run first (`teller synth run ARGS -o build-golden/NAME-I/run.teller`
// under the source tree) and loads it.
//   ----
//   layer	name	dur_ns	depth
//   ...
//
// `run ARGS` runs `teller VERB INPUTS REST` (inputs go after the verb, or where
// {inputs} stands) and compares stdout; `run-error ARGS` expects a failing exit
// and compares the first line of stderr. `query SQL` checks rows of the built store, as
// Perfetto's diff tests do: the inputs are built once (`teller build INPUTS -o FILE`), the
// SQL runs on that store, and the expected block is its column names, then its rows,
// tab-separated (NULL for null). Run with --rebaseline to rewrite the expected blocks
// after a reviewed change.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <sqlite3.h>

#include "base/testing.h"

namespace teller {
namespace {

namespace fs = std::filesystem;
bool g_rebaseline = false;

struct GoldenCase {
  std::string command;  // the run line, without the directive (for a query, its SQL)
  bool expect_error = false;
  bool is_query = false;
  size_t expected_begin = 0;  // line index of the first expected line
  size_t expected_end = 0;
  std::string expected;
};

struct GoldenFile {
  std::vector<std::string> lines;
  std::vector<std::string> inputs;
  std::vector<std::string> synth_runs;  // `teller synth run` arguments, loaded like inputs
  bool needs_real_traces = false;
  std::vector<GoldenCase> cases;
};

std::string Expand(std::string text) {
  const std::string key = "${REAL_TRACES}";
  for (size_t at; (at = text.find(key)) != std::string::npos;) {
    text.replace(at, key.size(), base::RealTracesDir());
  }
  return text;
}

std::string Quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

GoldenFile ParseGolden(const std::string& path) {
  GoldenFile file;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) file.lines.push_back(line);
  for (size_t i = 0; i < file.lines.size(); ++i) {
    const std::string& line = file.lines[i];
    if (line.rfind("require real-traces", 0) == 0) file.needs_real_traces = true;
    if (line.rfind("load ", 0) == 0) {
      std::istringstream words(line.substr(5));
      for (std::string word; words >> word;) file.inputs.push_back(word);
    }
    if (line.rfind("synth ", 0) == 0) file.synth_runs.push_back(line.substr(6));
    bool is_run = line.rfind("run ", 0) == 0, is_error = line.rfind("run-error ", 0) == 0;
    const bool is_query = line.rfind("query ", 0) == 0;
    if (!is_run && !is_error && !is_query) continue;
    GoldenCase c;
    c.expect_error = is_error;
    c.is_query = is_query;
    c.command = line.substr(is_query ? 6 : is_error ? 10 : 4);
    size_t j = i + 1;
    if (j < file.lines.size() && file.lines[j] == "----") ++j;
    c.expected_begin = j;
    while (j < file.lines.size() && file.lines[j].rfind("run", 0) != 0 &&
           file.lines[j].rfind("load ", 0) != 0 && file.lines[j].rfind("synth ", 0) != 0 &&
           file.lines[j].rfind("query ", 0) != 0 && file.lines[j].rfind("# ", 0) != 0) {
      ++j;
    }
    size_t end = j;
    while (end > c.expected_begin && file.lines[end - 1].empty()) --end;
    c.expected_end = end;
    for (size_t k = c.expected_begin; k < end; ++k) c.expected += file.lines[k] + "\n";
    file.cases.push_back(c);
    i = j - 1;
  }
  return file;
}

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

RunResult RunTeller(const GoldenFile& file, const std::string& command) {
  std::string binary = base::BinaryDir() + "/teller";
  std::string inputs;
  for (const std::string& input : file.inputs) {
    // Relative to the source tree (the command runs there), so output that names a
    // file does not depend on where the checkout lives.
    std::string path = Expand(input);
    if (fs::path(path).is_absolute()) {
      path = fs::path(path).lexically_relative(fs::path(base::SourceDir())).string();
    }
    inputs += " " + Quote(path);
  }
  std::string args = Expand(command);
  size_t at = args.find("{inputs}");
  if (at != std::string::npos) {
    args.replace(at, 8, inputs);
  } else {
    size_t space = args.find(' ');
    args = space == std::string::npos ? args + inputs
                                      : args.substr(0, space) + inputs + args.substr(space);
  }
  // One folder per run; TempDir keeps parallel processes apart.
  static int run_count = 0;
  std::string err_path = base::TempDir("golden_" + std::to_string(run_count++)) + "/stderr";
  std::string shell = "cd " + Quote(base::SourceDir()) + " && " + Quote(binary) + " " + args +
                      " -q 2>" + Quote(err_path);
  RunResult result;
  FILE* pipe = popen(shell.c_str(), "r");
  if (!pipe) return result;
  char buffer[65536];
  size_t got;
  while ((got = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, got);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream err_text;
  err_text << err.rdbuf();
  result.err = err_text.str();
  return result;
}

// The inputs built into one store for the file's queries: `teller build INPUTS -o FILE`.
RunResult BuildStore(const GoldenFile& file, const std::string& store) {
  std::error_code ec;
  fs::remove(store, ec);
  return RunTeller(file, "build -o " + Quote(store));
}

// Column names, then each row, tab-separated; NULL for null; a failed statement's
// error as one line.
std::string QueryRows(const std::string& store, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(store.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return "cannot open " + store + "\n";
  }
  sqlite3_stmt* statement = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
    out = std::string("error: ") + sqlite3_errmsg(db) + "\n";
    sqlite3_close(db);
    return out;
  }
  const int columns = sqlite3_column_count(statement);
  for (int c = 0; c < columns; ++c) {
    out += (c ? "\t" : "") + std::string(sqlite3_column_name(statement, c));
  }
  out += "\n";
  int step;
  while ((step = sqlite3_step(statement)) == SQLITE_ROW) {
    for (int c = 0; c < columns; ++c) {
      const unsigned char* text = sqlite3_column_text(statement, c);
      out += (c ? "\t" : "") + (text ? std::string(reinterpret_cast<const char*>(text)) : "NULL");
    }
    out += "\n";
  }
  if (step != SQLITE_DONE) out += std::string("error: ") + sqlite3_errmsg(db) + "\n";
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return out;
}

std::vector<std::string> FindGoldenFiles() {
  std::vector<std::string> files;
  fs::path root = fs::path(base::SourceDir()) / "tests" / "golden";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::end(it); ++it) {
    if (it->path().extension() == ".test") {
      files.push_back(fs::relative(it->path(), base::SourceDir()).string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesExpectedOutput) {
  std::string path = (fs::path(base::SourceDir()) / GetParam()).string();
  GoldenFile file = ParseGolden(path);
  if (file.needs_real_traces && base::RealTracesDir().empty()) {
    GTEST_SKIP() << "../shared/real-traces is absent";
  }
  ASSERT_FALSE(file.cases.empty()) << path << ": no run directive";
  for (size_t i = 0; i < file.synth_runs.size(); ++i) {
    const std::string& args = file.synth_runs[i];
    // A fixed path under the source tree (ignored by git): output that names the bundle's
    // files reads the same on every machine.
    const std::string dir =
        (fs::path(base::SourceDir()) / "build-golden" /
         (fs::path(GetParam()).stem().string() + "-" + std::to_string(i)) / "run.teller")
            .string();
    std::error_code ec;
    fs::remove_all(fs::path(dir).parent_path(), ec);
    const std::string shell = "cd " + Quote(base::SourceDir()) + " && " +
                              Quote(base::BinaryDir() + "/teller") + " synth run " + args + " -o " +
                              Quote(dir) + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(shell.c_str()), 0) << path << ": synth run " << args;
    file.inputs.push_back(dir);
  }
  std::vector<std::string> rewritten = file.lines;
  long shift = 0;
  std::string store;  // built at the first query
  for (const GoldenCase& c : file.cases) {
    std::string actual;
    if (c.is_query) {
      if (store.empty()) {
        store = base::TempDir("golden_store_" + fs::path(GetParam()).stem().string()) +
                "/trace.db";
        const RunResult built = BuildStore(file, store);
        ASSERT_EQ(built.exit_code, 0) << path << ": teller build failed: " << built.err;
      }
      actual = QueryRows(store, c.command);
    } else {
      const RunResult result = RunTeller(file, c.command);
      if (c.expect_error) {
        EXPECT_NE(result.exit_code, 0) << path << ": `" << c.command << "` should fail";
        actual = result.err.substr(0, result.err.find('\n') + 1);
      } else {
        EXPECT_EQ(result.exit_code, 0) << path << ": `" << c.command << "` failed: " << result.err;
        actual = result.out;
      }
    }
    if (g_rebaseline) {
      std::vector<std::string> new_lines;
      std::istringstream stream(actual);
      for (std::string line; std::getline(stream, line);) new_lines.push_back(line);
      auto begin = rewritten.begin() + static_cast<long>(c.expected_begin) + shift;
      auto end = rewritten.begin() + static_cast<long>(c.expected_end) + shift;
      rewritten.erase(begin, end);
      rewritten.insert(rewritten.begin() + static_cast<long>(c.expected_begin) + shift,
                       new_lines.begin(), new_lines.end());
      shift += static_cast<long>(new_lines.size()) -
               static_cast<long>(c.expected_end - c.expected_begin);
    } else {
      EXPECT_EQ(actual, c.expected) << path << ": `" << c.command << "`";
    }
  }
  if (g_rebaseline) {
    std::ofstream out(path);
    for (const std::string& line : rewritten) out << line << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenTest, ::testing::ValuesIn(FindGoldenFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GoldenTest);

}  // namespace
}  // namespace teller

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--rebaseline") teller::g_rebaseline = true;
  }
  return RUN_ALL_TESTS();
}
