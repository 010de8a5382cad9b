// teller_record_tool: `teller record` as a standalone binary, for the tests of this
// stage (the `teller` binary gets the same subcommand from src/cli/record_command.cc).
#include <CLI/CLI.hpp>

#include "cli/record_command.h"

int main(int argc, char** argv) {
  CLI::App app{"teller record (standalone test binary)"};
  app.require_subcommand(1);
  teller::cli::RecordFlags flags;
  CLI::App* record = teller::cli::AddRecordCommand(&app, &flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : 2;
  }
  return *record ? teller::cli::RunRecordCommand(flags) : 2;
}
