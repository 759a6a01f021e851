// Checks a timeline file (runtime/timeline.h) as a viewer would read it:
//
//   timeline_check FILE [--row NAME[:PHASE,PHASE...]]... [--bucket-phase PHASE]... [--min-events N]
//
// - FILE parses as one JSON array of event objects, each with "ph", "pid" and "tid"; complete
//   events ("X") have numeric "ts" and "dur" >= 0;
// - on every row, complete events are properly nested: sorted by start (longer first on ties),
//   each event lies inside the enclosing one or starts after it ends (0.01 us of rounding);
// - every --row NAME exists (a thread_name record) with the spans queued, negotiated, allreduce,
//   fused and callback, plus every listed PHASE, and each PHASE lies inside "allreduce";
// - at least one "[bucket N]" row exists, and holds every --bucket-phase.
// Prints what it found and every violation; exits 0 when there is none, 1 otherwise, 2 on usage.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

struct Span {
  std::string name;
  double begin = 0, end = 0;
};

int g_violations = 0;

void violation(const std::string& what) {
  ++g_violations;
  std::printf("timeline_check: %s\n", what.c_str());
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, separator)) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

void check_nesting(const std::string& row, std::vector<Span> spans) {
  constexpr double kSlack = 0.01;  // microseconds: ts and dur are printed with 3 decimals
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<Span> open;
  for (const Span& s : spans) {
    while (!open.empty() && s.begin >= open.back().end - kSlack) open.pop_back();
    if (!open.empty() && s.end > open.back().end + kSlack) {
      violation("row '" + row + "': '" + s.name + "' [" + std::to_string(s.begin) + ", " +
                std::to_string(s.end) + "] overlaps '" + open.back().name + "' [" +
                std::to_string(open.back().begin) + ", " + std::to_string(open.back().end) +
                "] without nesting");
    }
    open.push_back(s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: timeline_check FILE [--row NAME[:PHASES]]... "
                 "[--bucket-phase PHASE]... [--min-events N]\n");
    return 2;
  }
  std::map<std::string, std::vector<std::string>> want_rows;
  std::vector<std::string> bucket_phases;
  size_t min_events = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--row") {
      const size_t colon = value.find(':');
      want_rows[value.substr(0, colon)] = colon == std::string::npos
                                              ? std::vector<std::string>{}
                                              : split(value.substr(colon + 1), ',');
    } else if (flag == "--bucket-phase") {
      bucket_phases.push_back(value);
    } else if (flag == "--min-events") {
      min_events = std::stoul(value);
    } else {
      std::fprintf(stderr, "timeline_check: unknown option %s\n", flag.c_str());
      return 2;
    }
  }

  std::ifstream in(argv[1]);
  if (!in) {
    std::printf("timeline_check: cannot open %s\n", argv[1]);
    return 1;
  }
  json events;
  try {
    events = json::parse(in);
  } catch (const std::exception& e) {
    std::printf("timeline_check: %s is not valid JSON: %s\n", argv[1], e.what());
    return 1;
  }
  if (!events.is_array()) {
    std::printf("timeline_check: %s is not a JSON array\n", argv[1]);
    return 1;
  }

  std::map<int, std::string> row_of;          // tid -> row name
  std::map<int, std::vector<Span>> spans_of;  // tid -> complete events
  for (const json& e : events) {
    if (!e.is_object() || !e.contains("ph") || !e.contains("pid")) {
      violation("event without ph/pid: " + e.dump());
      continue;
    }
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") row_of[e["tid"].get<int>()] = e["args"]["name"];
    if (ph != "X") continue;
    if (!e.contains("tid") || !e["ts"].is_number() || !e["dur"].is_number() ||
        e["dur"].get<double>() < 0) {
      violation("complete event without tid, numeric ts or dur >= 0: " + e.dump());
      continue;
    }
    const double ts = e["ts"], dur = e["dur"];
    spans_of[e["tid"].get<int>()].push_back({e["name"].get<std::string>(), ts, ts + dur});
  }
  if (events.size() < min_events) {
    violation("only " + std::to_string(events.size()) + " events, expected at least " +
              std::to_string(min_events));
  }

  std::map<std::string, int> tid_of;
  for (const auto& [tid, row] : row_of) tid_of[row] = tid;
  for (const auto& [tid, spans] : spans_of) {
    const auto it = row_of.find(tid);
    if (it == row_of.end()) violation("tid " + std::to_string(tid) + " has no thread_name record");
    check_nesting(it == row_of.end() ? std::to_string(tid) : it->second, spans);
  }

  const std::vector<std::string> every_tensor = {"queued", "negotiated", "allreduce", "fused",
                                                 "callback"};
  for (const auto& [row, phases] : want_rows) {
    const auto it = tid_of.find(row);
    if (it == tid_of.end()) {
      violation("no row for tensor '" + row + "'");
      continue;
    }
    const std::vector<Span>& spans = spans_of[it->second];
    auto find = [&](const std::string& name) {
      return std::find_if(spans.begin(), spans.end(),
                          [&](const Span& s) { return s.name == name; });
    };
    for (const std::string& name : every_tensor) {
      if (find(name) == spans.end()) violation("row '" + row + "' has no '" + name + "' span");
    }
    for (const std::string& phase : phases) {
      const auto p = find(phase);
      if (p == spans.end()) {
        violation("row '" + row + "' has no '" + phase + "' phase");
        continue;
      }
      const bool inside = std::any_of(spans.begin(), spans.end(), [&](const Span& s) {
        return s.name == "allreduce" && p->begin >= s.begin - 0.01 && p->end <= s.end + 0.01;
      });
      if (!inside) violation("row '" + row + "': '" + phase + "' is not inside 'allreduce'");
    }
  }

  std::set<std::string> bucket_spans;
  size_t bucket_rows = 0;
  for (const auto& [row, tid] : tid_of) {
    if (row.rfind("[bucket ", 0) != 0) continue;
    ++bucket_rows;
    for (const Span& s : spans_of[tid]) bucket_spans.insert(s.name);
  }
  if (bucket_rows == 0) violation("no [bucket N] row");
  if (bucket_rows > 0 && !bucket_spans.count("bucket"))
    violation("bucket rows have no 'bucket' span");
  for (const std::string& phase : bucket_phases) {
    if (!bucket_spans.count(phase)) violation("no bucket row holds a '" + phase + "' phase");
  }

  size_t complete = 0;
  for (const auto& [tid, spans] : spans_of) complete += spans.size();
  std::printf("timeline_check: %s: %zu events, %zu complete, %zu rows (%zu buckets), %d problems\n",
              argv[1], events.size(), complete, row_of.size(), bucket_rows, g_violations);
  return g_violations == 0 ? 0 : 1;
}
