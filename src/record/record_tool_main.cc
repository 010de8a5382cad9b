// teller_record_tool: `teller record` as a standalone binary, for the tests of this
// stage (the `teller` binary gets the same subcommand from record_command.h).
#include <CLI/CLI.hpp>

#include "record/record_command.h"

int main(int argc, char** argv) {
  CLI::App app{"teller record (standalone test binary)"};
  app.require_subcommand(1);
  teller::record::RecordFlags flags;
  CLI::App* record = teller::record::AddRecordCommand(&app, &flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : 2;
  }
  return *record ? teller::record::RunRecordCommand(flags) : 2;
}
