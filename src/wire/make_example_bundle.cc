// teller_wire_example OUT_DIR [--unranked]: writes the example two-rank bundle (the
// fixture tests/fixtures/bundle/two_ranks; with --unranked, two_unranked: no rank
// anywhere). A tool, so it may print.
#include <cstdio>
#include <string_view>

#include "wire/example_bundle.h"

int main(int argc, char** argv) {
  const bool unranked = argc == 3 && std::string_view(argv[2]) == "--unranked";
  if (argc != 2 && !unranked) {
    std::fprintf(stderr, "usage: %s OUT_DIR [--unranked]\n", argv[0]);
    return 2;
  }
  teller::base::Status status = teller::wire::WriteExampleBundle(
      argv[1], unranked ? teller::wire::ExampleRanks::kUnsaid : teller::wire::ExampleRanks::kSaid);
  if (!status.ok()) {
    std::fprintf(stderr, "teller_wire_example: %s\n", status.c_message());
    return 1;
  }
  return 0;
}
