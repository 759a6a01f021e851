// Replays files through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer, so the main
// build (any compiler) checks every checked-in seed and regression input on every test run.
// Usage: <target>_replay FILE_OR_DIR...; a contract violation aborts, as under the fuzzer.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int replay(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", file.c_str());
    return 1;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int failures = 0;
  int replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path(argv[i]);
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (!entry.is_regular_file() || entry.path().filename() == ".gitkeep") continue;
        failures += replay(entry.path());
        ++replayed;
      }
    } else if (std::filesystem::exists(path)) {
      failures += replay(path);
      ++replayed;
    }
  }
  std::fprintf(stderr, "%d input(s) replayed\n", replayed);
  return failures == 0 && replayed > 0 ? 0 : 1;
}
