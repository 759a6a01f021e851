// Shared pieces of the fuzz targets: a failed contract check aborts with a message (so libFuzzer
// and the replay test both report it as a crash), and inputs are split into words.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace arcreduce::fuzz {

// Aborts when a parser broke its contract; `what` says which invariant and is printed first.
inline void check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz contract violated: %s\n", what.c_str());
  std::abort();
}

// An Error's message must say what was wrong: never empty.
inline void check_message(const char* message, const char* parser) {
  check(message != nullptr && message[0] != '\0', std::string(parser) + " threw an empty message");
}

// Splits `text` at `separator` into words (empty words kept).
inline std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text) {
    if (c == separator) {
      words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  words.push_back(word);
  return words;
}

}  // namespace arcreduce::fuzz
