#!/usr/bin/env python3
"""Checks tools/function_lengths.py on small sources (a long function is found; lambdas,
control blocks, raw strings, digit separators and initializer lists do not confuse it)."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import function_lengths  # noqa: E402

SOURCE = """
namespace a {
struct S {
  int Short() const { return 1'000'000; }
};
S::S(int x) : x_(x), y_{x} {
  int y = 0;
}
std::string Raw() {
  return R"(} { } {)";
}
int Long(int v) {
%s
  auto f = [&](int k) {
    if (k) { return k; }
    return 0;
  };
  for (int i = 0; i < 3; ++i) {
    v += f(i);
  }
  return v;
}
}  // namespace a
""" % "\n".join("  v += %d;  // '{'" % i for i in range(160))


def main():
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "sample.cc")
        with open(path, "w") as out:
            out.write(SOURCE)
        found = {name: end - start + 1 for name, start, end in function_lengths.functions(path)}
    assert set(found) == {"Short", "S::S", "Raw", "Long"}, found
    assert found["Long"] > 160, found
    assert found["S::S"] == 3, found
    assert found["Raw"] == 3, found
    print("function_lengths_test: ok", found)


if __name__ == "__main__":
    main()
