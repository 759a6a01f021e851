// Fuzz target: the negotiation messages a rank receives from other ranks (tensor_queue/message.h):
// request lists (rank 0 gathers them) and response lists (every rank gets rank 0's).
// Input: the first byte picks the decoder (even: requests, odd: responses), the rest is the
// message. Contract: decoding accepts, or throws Error; an accepted message holds only values
// of their enums, shapes whose byte size fits, finite ratios and ages in [0, 1e9] s, and
// re-encodes to the very same bytes. Accepted requests then go through rank 0's MessageTable
// (3 ranks, round robin) and its stall inspector, which must answer without crashing.
#include <chrono>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "arcreduce/status.h"
#include "fuzz/fuzz_support.h"
#include "runtime/message_table.h"
#include "tensor_queue/message.h"

namespace {

using arcreduce::fuzz::check;

void check_signature(const arcreduce::TensorSignature& s) {
  using namespace arcreduce;
  check(
      static_cast<int>(s.dtype) >= 0 && static_cast<int>(s.dtype) <= static_cast<int>(DType::kBool),
      "a dtype outside the enum was accepted");
  check(s.device == Device::kCPU || s.device == Device::kCUDA, "an unknown device was accepted");
  check(
      static_cast<int>(s.op) >= 0 && static_cast<int>(s.op) <= static_cast<int>(ReduceOp::kProduct),
      "an unknown op was accepted");
  check(static_cast<int>(s.collective) >= 0 &&
            static_cast<int>(s.collective) <= static_cast<int>(Collective::kJoin),
        "an unknown collective was accepted");
  for (int64_t e : s.extents) check(e >= 0, "a negative extent was accepted");
  check(std::isfinite(s.compression.ratio), "a non-finite ratio was accepted");
  int64_t elements = 1;
  for (int64_t d : s.shape) {
    check(d >= 0, "a negative dimension was accepted");
    check(d == 0 || elements <= std::numeric_limits<int64_t>::max() / 8 / d,
          "a shape whose byte size overflows was accepted");
    elements *= d;
  }
  check(s.elements() == elements, "elements() disagrees with the shape");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arcreduce;
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    RequestList list;
    try {
      list = decode_request_list(bytes);
    } catch (const Error& e) {
      fuzz::check_message(e.what(), "decode_request_list()");
      return 0;
    }
    check(encode(list) == bytes, "a request list does not re-encode to its bytes");
    MessageTable table(3);
    const auto now = MessageTable::Clock::now();
    size_t i = 0;
    std::set<std::string> added;
    for (const Request& request : list.requests) {
      check_signature(request.signature);
      check(request.age_seconds >= 0 && request.age_seconds <= 1e9,
            "an age outside [0, 1e9] s was accepted");
      std::vector<Response> responses;
      table.add(static_cast<int>(i++ % 3), request, now, &responses);
      added.insert(request.name);
      const bool join =
          request.refusal.empty() && request.signature.collective == Collective::kJoin;
      for (const Response& response : responses) {
        // A request queued behind a refusal completes with it, under the same name; a join
        // also completes tensors the other ranks submitted earlier (the joined rank takes part
        // with zeros), never one nobody submitted.
        check(response.name == request.name || (join && added.count(response.name) > 0),
              "a response for another tensor");
        check(response.code != StatusCode::kOk || response.error.empty(),
              "an accepted tensor carries an error");
        check(response.code == StatusCode::kOk || !response.error.empty(),
              "a failed tensor without an error message");
      }
    }
    table.inspect(now + std::chrono::seconds(1), 0.5, 0.75);
  } else {
    ResponseList list;
    try {
      list = decode_response_list(bytes);
    } catch (const Error& e) {
      fuzz::check_message(e.what(), "decode_response_list()");
      return 0;
    }
    check(encode(list) == bytes, "a response list does not re-encode to its bytes");
    for (const Response& response : list.responses) {
      check(static_cast<int>(response.code) >= 0 &&
                static_cast<int>(response.code) <= static_cast<int>(StatusCode::kInternal),
            "an unknown status code was accepted");
      check_signature(response.signature);
    }
  }
  return 0;
}
