// tests/host/parallel.cpp - the tests of include/ebac/host/parallel.hpp.
//
// host::parallel_for: nothing thrown by a unit escapes the OpenMP region
// (the runtime would call std::terminate); the exception comes out after it,
// the lowest-numbered failing unit's, and std::bad_alloc as ebac::error
// with status::out_of_memory, on one thread as on several.
#include "test_support.hpp"

#include <ebac/ebac.hpp>

#include <atomic>
#include <doctest/doctest.h>
#include <new>
#include <stdexcept>
#include <string>

namespace {

/// Runs parallel_for and returns what it threw, as (kind, status, message).
struct outcome {
  std::string kind, message;
  ebac::status code = ebac::status::ok;
};

template <class F>
outcome run(std::int64_t n, int threads, F&& f) {
  outcome o;
  try {
    ebac::host::parallel_for(n, threads, f);
    o.kind = "none";
  } catch (const ebac::error& e) {
    o.kind = "ebac::error";
    o.code = e.code();
    o.message = e.what();
  } catch (const std::bad_alloc&) { o.kind = "std::bad_alloc"; } catch (const std::runtime_error& e) {
    o.kind = "std::runtime_error";
    o.message = e.what();
  } catch (...) { o.kind = "other"; }
  return o;
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("parallel_for carries a unit's exception out of the parallel region") {
    for (int threads : {1, 2, 4}) {
      CAPTURE(threads);
      SUBCASE("std::bad_alloc becomes ebac::error(out_of_memory)") {
        const outcome o = run(4096, threads, [](std::int64_t i) {
          if (i == 1000) throw std::bad_alloc();
        });
        CHECK(o.kind == "ebac::error");
        CHECK(o.code == ebac::status::out_of_memory);
        CHECK(o.message.find("out of memory") != std::string::npos);
      }
      SUBCASE("ebac::error keeps its status and message") {
        const outcome o = run(4096, threads, [](std::int64_t i) {
          if (i == 77) ebac::detail::fail(ebac::status::corrupt_stream, "unit 77");
        });
        CHECK(o.kind == "ebac::error");
        CHECK(o.code == ebac::status::corrupt_stream);
        CHECK(o.message == "corrupt stream: unit 77");
      }
      SUBCASE("other exceptions keep their type") {
        const outcome o = run(4096, threads, [](std::int64_t i) {
          if (i == 4095) throw std::runtime_error("last unit");
        });
        CHECK(o.kind == "std::runtime_error");
        CHECK(o.message == "last unit");
      }
      SUBCASE("the lowest-numbered failing unit wins") {
        // Every unit from 300 on fails; units run in increasing order, so
        // whichever threads see failures, unit 300's must be the one reported.
        for (int rep = 0; rep < 20; ++rep) {
          const outcome o = run(4096, threads, [](std::int64_t i) {
            if (i >= 300) throw std::runtime_error("unit " + std::to_string(i));
          });
          CHECK(o.message == "unit 300");
        }
      }
      SUBCASE("units after a failure are skipped, every unit before it ran") {
        std::atomic<std::int64_t> below{0};
        const outcome o = run(100000, threads, [&](std::int64_t i) {
          if (i < 5000) below.fetch_add(1, std::memory_order_relaxed);
          if (i == 5000) throw std::runtime_error("stop");
        });
        CHECK(o.kind == "std::runtime_error");
        CHECK(below.load() == 5000);
      }
      SUBCASE("no failure, no exception") {
        std::atomic<std::int64_t> sum{0};
        const outcome o = run(1000, threads, [&](std::int64_t i) { sum.fetch_add(i, std::memory_order_relaxed); });
        CHECK(o.kind == "none");
        CHECK(sum.load() == 999 * 1000 / 2);
      }
    }
  }

}  // TEST_SUITE
