#include <gtest/gtest.h>

#include "tensor_queue/message.h"

namespace arcreduce {
namespace {

TensorSignature example_signature() {
  TensorSignature s;
  s.dtype = DType::kBFloat16;
  s.shape = {3, 0, 7};
  s.device = Device::kCPU;
  s.op = ReduceOp::kSum;
  s.compression = {"arctopk", 0.01, "ef21m"};
  return s;
}

TEST(Message, RequestListRoundTrip) {
  RequestList in;
  in.requests.push_back({"layer.0.weight", example_signature(), 1.5});
  in.requests.push_back({"", TensorSignature{}, 0});
  in.requests.push_back({"refused", TensorSignature{}, 0, "dtype complex64 on rank 2"});
  RequestList out = decode_request_list(encode(in));
  ASSERT_EQ(out.requests.size(), 3u);
  EXPECT_EQ(out.requests[0].refusal, "");
  EXPECT_EQ(out.requests[2].refusal, "dtype complex64 on rank 2");
  EXPECT_EQ(out.requests[0].name, "layer.0.weight");
  EXPECT_EQ(out.requests[0].signature, example_signature());
  EXPECT_EQ(out.requests[0].age_seconds, 1.5);
  EXPECT_EQ(out.requests[1].name, "");
  EXPECT_EQ(out.requests[1].signature, TensorSignature{});
}

TEST(Message, ResponseListRoundTrip) {
  ResponseList in;
  in.responses.push_back({"a", StatusCode::kOk, "", example_signature()});
  in.responses.push_back({"b", StatusCode::kMismatch, "tensor 'b' differs", TensorSignature{}});
  in.abort_reason = "stalled";
  ResponseList out = decode_response_list(encode(in));
  ASSERT_EQ(out.responses.size(), 2u);
  EXPECT_EQ(out.responses[0].signature, example_signature());
  EXPECT_EQ(out.responses[1].code, StatusCode::kMismatch);
  EXPECT_EQ(out.responses[1].error, "tensor 'b' differs");
  EXPECT_EQ(out.abort_reason, "stalled");
}

TEST(Message, EmptyLists) {
  EXPECT_TRUE(decode_request_list(encode(RequestList{})).requests.empty());
  EXPECT_TRUE(decode_response_list(encode(ResponseList{})).responses.empty());
}

TEST(Message, TruncatedOrTrailingBytesAreErrors) {
  RequestList in;
  in.requests.push_back({"x", example_signature(), 0});
  std::string bytes = encode(in);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_THROW(decode_request_list(bytes.substr(0, cut)), Error) << cut;
  }
  EXPECT_THROW(decode_request_list(bytes + "z"), Error);
}

TEST(Message, Strings) {
  EXPECT_EQ(shape_string({}), "[]");
  EXPECT_EQ(shape_string({4, 5}), "[4, 5]");
  EXPECT_EQ(example_signature().compression.to_string(), "arctopk(ratio=0.01, ef=ef21m)");
  EXPECT_EQ(example_signature().bytes(), 0u);
}

TEST(Message, BroadcastSignatureRoundTrip) {
  TensorSignature s;
  s.dtype = DType::kInt64;
  s.shape = {5};
  s.collective = Collective::kBroadcast;
  s.root_rank = 3;
  RequestList in;
  in.requests.push_back({"b", s, 0});
  RequestList out = decode_request_list(encode(in));
  ASSERT_EQ(out.requests.size(), 1u);
  EXPECT_EQ(out.requests[0].signature, s);
  EXPECT_EQ(out.requests[0].signature.collective, Collective::kBroadcast);
  EXPECT_EQ(out.requests[0].signature.root_rank, 3);
  TensorSignature other_root = s;
  other_root.root_rank = 2;
  EXPECT_NE(s, other_root);
}

}  // namespace
}  // namespace arcreduce
