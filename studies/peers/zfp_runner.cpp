// zfp_runner - runs ZFP (fixed-accuracy mode) on a raw float32 array for
// studies/compare.py, timing compression and decompression in memory.
//
//   zfp_runner --input F.f32 --dims D0,D1,... --eb E1[,E2,...] [--min-time S]
//              [--recon PREFIX] [--threads N] [--serial]
//
// dims are outermost first (C order), as everywhere in ebac; ZFP takes 1 to 4
// dimensions with x fastest, so leading dimensions beyond four are folded
// into the outermost one. For each bound it prints one JSON object per line:
//   {"eb": .., "bytes_out": .., "compress_s": .., "decompress_s": ..,
//    "compress_s_omp": .. | null, "decompress_s_omp": .. | null, "omp_threads": ..,
//    "zfp_version": ".."}
// Times are the best of repeated runs (until min-time seconds in total, at
// most 100, at least 3; one with --min-time 0), excluding file IO and buffer
// allocation. The stream carries ZFP's full header, so bytes_out is a
// self-describing size. With --recon, the serial reconstruction for bound i
// is written to PREFIX.i.f32 so the caller can check the error itself. A *_omp time is null when this
// libzfp has no OpenMP policy or refuses it for this mode (ZFP decompresses
// fixed-accuracy streams serially only), and always with --serial, which skips the
// OpenMP runs.
#include <zfp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

struct options {
  std::string input, recon;
  std::vector<std::size_t> dims;
  std::vector<double> bounds;
  double min_time = 0.2;
  int threads = 0;
  bool serial = false;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t b = 0;
  for (;;) {
    const std::size_t e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) return out;
    b = e + 1;
  }
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--serial") {
      o.serial = true;
      continue;
    }
    if (i + 1 >= argc) throw std::runtime_error("missing value after " + key);
    const std::string v = argv[++i];
    if (key == "--input") o.input = v;
    else if (key == "--recon") o.recon = v;
    else if (key == "--min-time") o.min_time = std::stod(v);
    else if (key == "--threads") o.threads = std::stoi(v);
    else if (key == "--dims")
      for (const auto& d : split(v, ',')) o.dims.push_back(std::stoull(d));
    else if (key == "--eb")
      for (const auto& e : split(v, ',')) o.bounds.push_back(std::stod(e));
    else throw std::runtime_error("unknown option " + key);
  }
  if (o.input.empty() || o.dims.empty() || o.bounds.empty()) throw std::runtime_error("need --input, --dims and --eb");
  for (double eb : o.bounds)
    if (!(eb > 0)) throw std::runtime_error("--eb values must be > 0");
  return o;
}

template <class F>
double best_seconds(F&& f, double min_time) {
  using clock = std::chrono::steady_clock;
  double best = 1e300, total = 0;
  // At least 3 runs when timing at all: one preempted first run must not be the only sample.
  for (int rep = 0; rep < 100 && (rep < (min_time > 0 ? 3 : 1) || total < min_time); ++rep) {
    const auto t0 = clock::now();
    if (!f()) return -1;  // the library refused this configuration
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::min(best, s);
    total += s;
  }
  return best;
}

/// A zfp_field over `data` with C-order dims folded to at most 4, x fastest.
zfp_field* make_field(float* data, const std::vector<std::size_t>& dims) {
  std::vector<std::size_t> d;
  for (std::size_t v : dims)
    if (v != 1) d.push_back(v);  // size-1 axes carry no correlation
  if (d.empty()) d.push_back(1);
  while (d.size() > 4) {
    d[1] *= d[0];
    d.erase(d.begin());
  }
  std::reverse(d.begin(), d.end());  // x = innermost
  switch (d.size()) {
    case 1: return zfp_field_1d(data, zfp_type_float, d[0]);
    case 2: return zfp_field_2d(data, zfp_type_float, d[0], d[1]);
    case 3: return zfp_field_3d(data, zfp_type_float, d[0], d[1], d[2]);
    default: return zfp_field_4d(data, zfp_type_float, d[0], d[1], d[2], d[3]);
  }
}

std::string number(double v) {
  if (v < 0) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

int run(const options& o) {
  std::size_t n = 1;
  for (std::size_t d : o.dims) n *= d;
  std::ifstream f(o.input, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + o.input);
  std::vector<float> in(n), out(n);
  f.read(reinterpret_cast<char*>(in.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (static_cast<std::size_t>(f.gcount()) != n * sizeof(float) || f.peek() != EOF)
    throw std::runtime_error(o.input + ": size does not match --dims as float32");

  zfp_field* src = make_field(in.data(), o.dims);
  zfp_field* dst = make_field(out.data(), o.dims);
  zfp_stream* zs = zfp_stream_open(nullptr);
  int omp_threads = 0;
#ifdef _OPENMP
  omp_threads = o.threads > 0 ? o.threads : omp_get_max_threads();
#endif

  for (std::size_t i = 0; i < o.bounds.size(); ++i) {
    zfp_stream_set_accuracy(zs, o.bounds[i]);
    std::vector<unsigned char> buf(zfp_stream_maximum_size(zs, src));
    bitstream* bs = stream_open(buf.data(), buf.size());
    zfp_stream_set_bit_stream(zs, bs);
    std::size_t bytes = 0;

    auto compress = [&] {
      zfp_stream_rewind(zs);
      if (!zfp_write_header(zs, src, ZFP_HEADER_FULL)) return false;
      bytes = zfp_compress(zs, src);
      return bytes != 0;
    };
    auto decompress = [&] {
      zfp_stream_rewind(zs);
      zfp_field* hf = zfp_field_alloc();  // the header, not the caller, says what the stream is
      const bool ok = zfp_read_header(zs, hf, ZFP_HEADER_FULL) != 0;
      zfp_field_free(hf);
      return ok && zfp_decompress(zs, dst) != 0;
    };
    auto policy = [&](zfp_exec_policy p) {
      if (!zfp_stream_set_execution(zs, p)) return false;
      if (p == zfp_exec_omp) zfp_stream_set_omp_threads(zs, static_cast<unsigned>(o.threads > 0 ? o.threads : 0));
      return true;
    };

    policy(zfp_exec_serial);
    const double tc = best_seconds(compress, o.min_time);
    const std::size_t serial_bytes = bytes;
    const double td = best_seconds(decompress, o.min_time);
    if (tc < 0 || td < 0) throw std::runtime_error("ZFP failed on " + o.input);
    if (!o.recon.empty()) {
      const std::string path = o.recon + "." + std::to_string(i) + ".f32";
      std::ofstream r(path, std::ios::binary);
      r.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(n * sizeof(float)));
      if (!r) throw std::runtime_error("cannot write " + path);
    }
    double tco = -1, tdo = -1;
    if (!o.serial && policy(zfp_exec_omp)) {
      tco = best_seconds(compress, o.min_time);
      if (tco >= 0 && bytes != serial_bytes) throw std::runtime_error("ZFP OpenMP stream size differs from serial");
      // OpenMP decompression is not supported for fixed-accuracy streams: decompress() fails and tdo stays null.
      tdo = best_seconds(decompress, o.min_time);
    }
    policy(zfp_exec_serial);
    stream_close(bs);
    std::printf(
        "{\"eb\": %.17g, \"bytes_out\": %zu, \"compress_s\": %s, \"decompress_s\": %s, "
        "\"compress_s_omp\": %s, \"decompress_s_omp\": %s, \"omp_threads\": %d, \"zfp_version\": \"%s\"}\n",
        o.bounds[i], serial_bytes, number(tc).c_str(), number(td).c_str(), number(tco).c_str(), number(tdo).c_str(), omp_threads,
        ZFP_VERSION_STRING);
    std::fflush(stdout);
  }
  zfp_stream_close(zs);
  zfp_field_free(src);
  zfp_field_free(dst);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zfp_runner: %s\n", e.what());
    return 2;
  }
}
