#include <cctype>

#include "launcher/cli.h"

namespace arcreduce::launcher {

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;  // also true for an empty quoted word such as ''
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const size_t end = text.find('\'', i + 1);
      if (end == std::string::npos) throw UsageError("--mpi-args: unterminated ' in: " + text);
      word += text.substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      for (++i;; ++i) {
        if (i >= text.size()) throw UsageError("--mpi-args: unterminated \" in: " + text);
        if (text[i] == '"') break;
        if (text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == '"' || text[i + 1] == '\\')) {
          ++i;
        }
        word += text[i];
      }
    } else if (c == '\\') {
      if (i + 1 >= text.size()) throw UsageError("--mpi-args: trailing \\ in: " + text);
      word += text[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

}  // namespace arcreduce::launcher
