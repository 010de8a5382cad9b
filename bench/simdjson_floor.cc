// The floor for Kineto ingest: one bare simdjson on-demand pass over a trace that
// touches each event's ph, name, ts and dur, and nothing else.
// Prints one JSON line: {"events":N,"seconds":S,"peak_rss_bytes":B}.
#include <cstdio>

#include <simdjson.h>

#include "bench_util.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: simdjson_floor FILE.json\n");
    return 2;
  }
  simdjson::padded_string json;
  if (simdjson::padded_string::load(argv[1]).get(json)) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  double start = teller::bench::NowSeconds();
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  if (parser.iterate(json).get(doc)) return 1;
  uint64_t events = 0, checksum = 0;
  simdjson::ondemand::array array;
  if (doc["traceEvents"].get_array().get(array)) return 1;
  for (auto element : array) {
    simdjson::ondemand::object object;
    if (element.get_object().get(object)) continue;
    for (auto field : object) {
      std::string_view key;
      if (field.unescaped_key().get(key)) continue;
      if (key == "ph" || key == "name") {
        std::string_view text;
        if (!field.value().get_string().get(text)) checksum += text.size();
      } else if (key == "ts" || key == "dur") {
        std::string_view raw = field.value().raw_json_token();
        checksum += raw.size();
      }
    }
    ++events;
  }
  double seconds = teller::bench::NowSeconds() - start;
  std::printf("{\"events\":%lu,\"seconds\":%.6f,\"peak_rss_bytes\":%ld,\"checksum\":%lu}\n", events,
              seconds, teller::bench::PeakRssBytes(), checksum);
  return 0;
}
