// Loads two builds of ebac into one process (tests/cuda/abi): probe_a built
// against this tree's headers, probe_b against the same headers with another
// version number. Each must run its own code: same host stream, its own
// version, and the same CUDA outcome (0 on a GPU, device_error without one).
#include <cstdint>
#include <cstdio>

extern "C" int probe_a(std::uint64_t* host_bytes, int* version);
extern "C" int probe_b(std::uint64_t* host_bytes, int* version);

int main() {
  std::uint64_t a_bytes = 0, b_bytes = 0;
  int a_version = 0, b_version = 0;
  const int a = probe_a(&a_bytes, &a_version);
  const int b = probe_b(&b_bytes, &b_version);
  std::printf("probe_a: ebac %d, host stream %llu bytes, CUDA outcome %d\n", a_version, static_cast<unsigned long long>(a_bytes),
              a);
  std::printf("probe_b: ebac %d, host stream %llu bytes, CUDA outcome %d\n", b_version, static_cast<unsigned long long>(b_bytes),
              b);
  bool ok = true;
  // Each probe reads its version through an ebac inline function's static:
  // the same value from both means one library's ebac symbols served both.
  if (a_version == b_version) {
    std::puts("FAIL: both probes report the same ebac version");
    ok = false;
  }
  if (a_bytes == 0 || a_bytes != b_bytes) {
    std::puts("FAIL: the two builds' host streams differ");
    ok = false;
  }
  if (a != b) {
    std::puts("FAIL: the two builds' CUDA outcomes differ");
    ok = false;
  }
  if (a < 0) {
    std::puts("FAIL: a CUDA round trip gave a wrong size");
    ok = false;
  }
  return ok ? 0 : 1;
}
