// Request framing (src/server/request_framing.h): where a request ends, and
// which requests are refused before their bodies are read. Expected sizes are
// counted from the literal requests.
#include "server/request_framing.h"

#include <gtest/gtest.h>

#include <string>

namespace dgemma::server {
namespace {

using State = Framing::State;

FramingLimits limits(int64_t body = 1000, size_t header = 256) {
  FramingLimits l;
  l.max_body_bytes = body;
  l.max_header_bytes = header;
  return l;
}

TEST(RequestFraming, AGetWithoutBodyEndsAtTheBlankLine) {
  const std::string r = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const Framing f = frame_request(r, limits());
  ASSERT_EQ(f.state, State::kComplete);
  EXPECT_EQ(f.request_bytes, r.size());
  EXPECT_EQ(f.header_bytes, r.size());
}

TEST(RequestFraming, NeedsMoreUntilTheHeadersAndTheWholeBodyArrive) {
  const std::string r = "POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
  for (size_t cut = 0; cut < r.size(); ++cut)
    EXPECT_EQ(frame_request(r.substr(0, cut), limits()).state, State::kNeedMore) << "cut at " << cut;
  const Framing f = frame_request(r, limits());
  ASSERT_EQ(f.state, State::kComplete);
  EXPECT_EQ(f.request_bytes, r.size());
  // Once the headers are in, the size of the whole request is known (the
  // reader then only compares sizes); not before, and not for chunked bodies.
  EXPECT_EQ(frame_request(r.substr(0, r.size() - 2), limits()).whole_request_bytes, r.size());
  EXPECT_EQ(frame_request(r.substr(0, 20), limits()).whole_request_bytes, 0u);
  EXPECT_EQ(frame_request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", limits()).whole_request_bytes,
            0u);
}

TEST(RequestFraming, APipelinedSecondRequestIsNotPartOfTheFirst) {
  const std::string first = "POST /a HTTP/1.1\r\ncontent-length: 2\r\n\r\nok";
  const std::string second = "GET /b HTTP/1.1\r\n\r\n";
  const Framing f = frame_request(first + second, limits());
  ASSERT_EQ(f.state, State::kComplete);
  EXPECT_EQ(f.request_bytes, first.size());
  const Framing g = frame_request(second, limits());
  ASSERT_EQ(g.state, State::kComplete);
  EXPECT_EQ(g.request_bytes, second.size());
}

TEST(RequestFraming, BadContentLengthsAreRefusedAtOnce) {
  for (const char* value : {"-5", "5x", "", "0x10", "+5", "1 2"}) {
    const Framing f = frame_request("POST / HTTP/1.1\r\nContent-Length: " + std::string(value) + "\r\n\r\n", limits());
    EXPECT_EQ(f.state, State::kRefused) << value;
    EXPECT_EQ(f.status, 400) << value;
  }
  const Framing two = frame_request("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", limits());
  EXPECT_EQ(two.status, 400);
  // The same length twice is one length.
  EXPECT_EQ(frame_request("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", limits()).state,
            State::kComplete);
}

TEST(RequestFraming, ABodyOverTheLimitIsRefusedBeforeItArrives) {
  const Framing f = frame_request("POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", limits(1000));
  EXPECT_EQ(f.state, State::kRefused);
  EXPECT_EQ(f.status, 413);
  // 10^15 and a number past 2^64 saturate instead of wrapping around.
  for (const char* huge : {"1000000000000000", "99999999999999999999999999"}) {
    const Framing g = frame_request("POST / HTTP/1.1\r\nContent-Length: " + std::string(huge) + "\r\n\r\n", limits());
    EXPECT_EQ(g.status, 413) << huge;
  }
  EXPECT_EQ(frame_request("POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n", limits(1000)).state, State::kNeedMore);
}

TEST(RequestFraming, HeadersOverTheLimitAre431WithOrWithoutTheBlankLine) {
  const std::string big = "GET / HTTP/1.1\r\nX: " + std::string(300, 'a');
  EXPECT_EQ(frame_request(big, limits()).status, 431);
  EXPECT_EQ(frame_request(big + "\r\n\r\n", limits()).status, 431);
  EXPECT_EQ(frame_request("GET / HTTP/1.1\r\nX: " + std::string(200, 'a'), limits()).state, State::kNeedMore);
}

TEST(RequestFraming, MalformedHeaderLinesAreRefused) {
  EXPECT_EQ(frame_request("GET / HTTP/1.1\r\nno colon here\r\n\r\n", limits()).status, 400);
  EXPECT_EQ(frame_request("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", limits()).status, 400);
  EXPECT_EQ(frame_request("GET / HTTP/1.1\r\nContent-Length : 1\r\n\r\nx", limits()).status, 400);
  EXPECT_EQ(frame_request("\r\n\r\n", limits()).status, 400);
}

TEST(RequestFraming, ChunkedBodiesEndAtTheLastChunkAndTrailers) {
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body = "5\r\nhello\r\nA;ext=1\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n";
  const std::string r = head + body;
  for (size_t cut = head.size(); cut < r.size(); ++cut)
    EXPECT_EQ(frame_request(r.substr(0, cut), limits()).state, State::kNeedMore) << "cut at " << cut;
  const Framing f = frame_request(r + "GET / HTTP/1.1\r\n\r\n", limits());
  ASSERT_EQ(f.state, State::kComplete);
  EXPECT_EQ(f.request_bytes, r.size());
  EXPECT_EQ(f.header_bytes, head.size());
}

TEST(RequestFraming, ChunkedBodiesAreCheckedAsTheyArrive) {
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(frame_request(head + "zz\r\n", limits()).status, 400);
  EXPECT_EQ(frame_request(head + "3\r\nabcX\r\n", limits()).status, 400);         // chunk longer than its size
  EXPECT_EQ(frame_request(head + "3E9\r\n", limits(1000)).status, 413);           // 1001 bytes announced
  EXPECT_EQ(frame_request(head + "1000000000000000\r\n", limits()).status, 400);  // 16 hex digits
  EXPECT_EQ(frame_request(head + "3E8\r\n", limits(1000)).state, State::kNeedMore);
}

TEST(RequestFraming, OtherTransferEncodingsAndAmbiguousFramingAreRefused) {
  EXPECT_EQ(frame_request("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", limits()).status, 501);
  EXPECT_EQ(
      frame_request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", limits()).status,
      400);
}

TEST(RequestFraming, ExpectContinueIsReportedOnlyWhileTheBodyIsMissing) {
  const std::string head = "POST / HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-Continue\r\n\r\n";
  const Framing waiting = frame_request(head, limits());
  EXPECT_EQ(waiting.state, State::kNeedMore);
  EXPECT_TRUE(waiting.expects_continue);
  EXPECT_EQ(waiting.header_bytes, head.size());
  const Framing whole = frame_request(head + "abc", limits());
  EXPECT_EQ(whole.state, State::kComplete);
  EXPECT_FALSE(whole.expects_continue);
  EXPECT_FALSE(frame_request("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\n", limits()).expects_continue);
}

}  // namespace
}  // namespace dgemma::server
