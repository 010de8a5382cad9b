// teller_wire_example OUT_DIR: writes the example two-rank bundle (the fixture
// tests/fixtures/bundle/two_ranks). A tool, so it may print.
#include <cstdio>

#include "wire/example_bundle.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  teller::base::Status status = teller::wire::WriteExampleBundle(argv[1]);
  if (!status.ok()) {
    std::fprintf(stderr, "teller_wire_example: %s\n", status.c_message());
    return 1;
  }
  return 0;
}
