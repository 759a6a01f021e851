#include "runtime/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace arcreduce {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;  // UTF-8 passes through unchanged
        }
    }
  }
  return out + "\"";
}

std::unique_ptr<Timeline> Timeline::open(const std::string& path, std::string* error) {
  std::FILE* file = std::fopen(path.c_str(), "w+");
  if (!file) {
    *error = "cannot create timeline file '" + path + "': " + std::strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<Timeline>(new Timeline(file, path));
}

Timeline::Timeline(std::FILE* file, std::string path)
    : file_(file), path_(std::move(path)), origin_(Clock::now()) {
  const char head[] = "[\n";
  std::fwrite(head, 1, sizeof head - 1, file_);
  close_at_ = std::ftell(file_);
  std::fputs("]\n", file_);
  std::fflush(file_);
  add("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"arcreduce rank "
      "0\"}}");
}

Timeline::~Timeline() {
  flush();
  std::fclose(file_);
}

double Timeline::micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void Timeline::add(const std::string& event_json) {
  if (full_) return;
  if (written_ + pending_.size() + event_json.size() > kMaxBytes) {
    full_ = true;
    pending_ += any_event_ ? ",\n" : "";
    pending_ +=
        "{\"name\":\"timeline size limit reached: recording stopped\",\"ph\":\"i\",\"s\":\"g\","
        "\"pid\":0,\"tid\":0,\"ts\":" +
        std::to_string(micros(Clock::now())) + "}";
    return;
  }
  if (any_event_) pending_ += ",\n";
  pending_ += event_json;
  any_event_ = true;
}

int Timeline::row_id(const std::string& row) {
  auto it = rows_.find(row);
  if (it != rows_.end()) return it->second;
  const int id = static_cast<int>(rows_.size()) + 1;
  rows_.emplace(row, id);
  const std::string tid = std::to_string(id);
  add("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + tid +
      ",\"args\":{\"name\":" + json_string(row) + "}}");
  // Rows keep their order of appearance in viewers that sort by this index.
  add("{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":" + tid +
      ",\"args\":{\"sort_index\":" + tid + "}}");
  return id;
}

void Timeline::span(const std::string& row, const char* name, const char* category,
                    Clock::time_point begin, Clock::time_point end, const std::string& args) {
  if (full_) return;
  const int tid = row_id(row);
  char times[96];
  std::snprintf(times, sizeof times, "\"ts\":%.3f,\"dur\":%.3f", micros(begin),
                std::max(0.0, micros(end) - micros(begin)));
  add(std::string("{\"name\":") + json_string(name) + ",\"cat\":" + json_string(category) +
      ",\"ph\":\"X\",\"pid\":0,\"tid\":" + std::to_string(tid) + "," + times +
      (args.empty() ? "" : ",\"args\":{" + args + "}") + "}");
}

void Timeline::phases(const std::string& row, const PhaseLog& log) {
  for (const PhaseLog::Phase& p : log.phases()) span(row, p.name, p.category, p.begin, p.end);
}

void Timeline::instant(const std::string& row, const char* name, Clock::time_point at,
                       const std::string& args) {
  if (full_) return;
  const int tid = row_id(row);
  char ts[48];
  std::snprintf(ts, sizeof ts, "\"ts\":%.3f", micros(at));
  add(std::string("{\"name\":") + json_string(name) +
      ",\"ph\":\"i\",\"s\":\"t\",\"pid\":0,\"tid\":" + std::to_string(tid) + "," + ts +
      (args.empty() ? "" : ",\"args\":{" + args + "}") + "}");
}

void Timeline::flush() {
  if (pending_.empty()) return;
  // Overwrite the closing "]" with the new events and write it again after them: the file is
  // valid JSON before and after this write.
  // pending_ starts with its separating comma unless it holds the file's first event.
  std::fseek(file_, close_at_, SEEK_SET);
  std::fwrite(pending_.data(), 1, pending_.size(), file_);
  close_at_ += static_cast<long>(pending_.size());
  std::fputs("\n]\n", file_);
  std::fflush(file_);
  written_ += pending_.size();
  pending_.clear();
}

}  // namespace arcreduce
