// Property tests on real activations: every float file of data/corpus
// (manifest.tsv) through the named pipelines and a few explicit triples.
// A missing corpus is a failure, not a skip.
#include "property_inputs.hpp"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace ebac_test;

#ifndef EBAC_CORPUS_DIR
#error "EBAC_CORPUS_DIR must point at data/corpus"
#endif

namespace {

namespace fs = std::filesystem;

struct corpus_file {
  std::string file, dtype, kind, role;
  ebac::extents shape;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> v;
  std::string cur;
  std::stringstream ss(s);
  while (std::getline(ss, cur, sep)) v.push_back(cur);
  if (!s.empty() && s.back() == sep) v.push_back("");
  return v;
}

/// Reads manifest.tsv, checking its header and every row against the files.
std::vector<corpus_file> read_manifest() {
  const fs::path dir = EBAC_CORPUS_DIR;
  INFO("corpus directory: ", dir.string());
  REQUIRE_MESSAGE(fs::is_directory(dir), "the corpus directory is missing (run studies/make_corpus.py)");
  const fs::path manifest = dir / "manifest.tsv";
  REQUIRE_MESSAGE(fs::is_regular_file(manifest), "manifest.tsv is missing");
  std::ifstream in(manifest);
  std::string line;
  REQUIRE(std::getline(in, line));
  CHECK(split(line, '\t') == std::vector<std::string>{"file", "dtype", "dims", "model", "module", "kind", "role", "pair"});
  std::vector<corpus_file> out;
  int lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    CAPTURE(lineno);
    CAPTURE(line);
    const auto c = split(line, '\t');
    REQUIRE(c.size() == 8);
    corpus_file f{c[0], c[1], c[5], c[6], {}};
    for (const auto& d : split(c[2], ',')) {
      REQUIRE(!d.empty());
      REQUIRE(d.find_first_not_of("0123456789") == std::string::npos);
      REQUIRE(f.shape.rank < ebac::max_rank);
      f.shape.dims[f.shape.rank++] = std::stoull(d);
    }
    CHECK((f.kind == "post_relu" || f.kind == "other"));
    CHECK((f.role == "activation" || f.role == "grad_output"));
    if (f.file == "-") continue;
    ebac::dtype t{};
    REQUIRE_MESSAGE(ebac::parse_dtype(f.dtype, t), "written files must be f32/f16/bf16");
    const fs::path p = dir / f.file;
    REQUIRE_MESSAGE(fs::is_regular_file(p), "listed file missing: ", p.string());
    CHECK(fs::file_size(p) == count_of(f.shape) * ebac::size_of(t));
    out.push_back(f);
  }
  return out;
}

template <class T>
std::vector<T> load(const corpus_file& f) {
  const fs::path p = fs::path(EBAC_CORPUS_DIR) / f.file;
  std::ifstream in(p, std::ios::binary);
  std::vector<T> v(static_cast<std::size_t>(count_of(f.shape)));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  REQUIRE(static_cast<std::size_t>(in.gcount()) == v.size() * sizeof(T));
  return v;
}

template <class T>
void check_file(const corpus_file& f, std::size_t index) {
  const auto x = load<T>(f);
  const std::string label = "corpus " + f.file + " (" + f.kind + ", " + f.role + ")";
  if (f.kind == "post_relu") {
    std::size_t negative = 0, zeros = 0;
    for (const T& v : x) {
      negative += ebac::to_float(v) < 0;
      zeros += ebac::to_float(v) == 0;
    }
    CHECK_MESSAGE(negative == 0, label, " is post-ReLU but has negative values");
    CHECK_MESSAGE(zeros > 0, label, " is post-ReLU but has no zeros");
  }
  for (std::size_t k = 0; k < ebac::pipeline_names.size(); ++k) {
    if (sanitized_build && (k + index) % 3 != 0) continue;  // a rotating subset under the sanitizers
    check_roundtrip(x, f.shape, std::string(ebac::pipeline_names[k]), {1e-3, ebac::bound_mode::relative}, label);
  }
  // Rotate further settings over the files so the suite stays quick.
  const std::string extra[] = {"lorenzo3:linear:huffman", "none:sign:rle",        "lorenzo1:sign:bitpack", "lorenzo2:linear:rle",
                               "none:linear:huffman",     "lorenzo:sign:huffman", "lorenzo2:sign:ans",     "none:linear:ans"};
  const ebac::error_bound bounds[] = {{1e-2, ebac::bound_mode::absolute},
                                      {1e-5, ebac::bound_mode::relative},
                                      {1e-1, ebac::bound_mode::relative},
                                      {1e-4, ebac::bound_mode::absolute}};
  check_roundtrip(x, f.shape, extra[index % 8], bounds[index % 4], label);
  check_roundtrip(x, f.shape, "lorenzo2:sign:ans", bounds[(index + 2) % 4], label);
  check_roundtrip(x, f.shape, "fast", bounds[(index + 1) % 4], label);
}

}  // namespace

TEST_SUITE("property") {
  TEST_CASE("corpus: manifest and files are present and consistent") {
    const auto files = read_manifest();
    CHECK(files.size() >= 10);
    std::size_t f32 = 0, relu = 0;
    for (const auto& f : files) {
      f32 += f.dtype == "f32";
      relu += f.kind == "post_relu";
    }
    CHECK(f32 > 0);
    CHECK(relu > 0);
  }

  TEST_CASE("corpus: every real activation file round-trips within the bound") {
    const auto files = read_manifest();
    REQUIRE(!files.empty());
    std::size_t i = 0;
    for (const auto& f : files) {
      CAPTURE(f.file);
      if (f.dtype == "f32") check_file<float>(f, i);
      else if (f.dtype == "f16") check_file<ebac::float16>(f, i);
      else if (f.dtype == "bf16") check_file<ebac::bfloat16>(f, i);
      else FAIL_CHECK("unexpected dtype ", f.dtype);
      ++i;
    }
  }

  TEST_CASE("corpus: post-ReLU activations keep their ReLU mask and compress well") {
    const auto files = read_manifest();
    std::size_t checked = 0;
    for (const auto& f : files) {
      if (f.kind != "post_relu" || f.dtype != "f32") continue;
      CAPTURE(f.file);
      const auto x = load<float>(f);
      const auto s = compress(x, f.shape, "fast", {1e-2, ebac::bound_mode::relative});
      const auto y = ebac::host::decompress<float>(s.data(), s.size());
      std::size_t mask_diff = 0;
      for (std::size_t k = 0; k < x.size(); ++k) mask_diff += (x[k] > 0) != (y[k] > 0);
      CHECK(mask_diff == 0);
      // Roughly half the values are zero: even the fast pipeline must beat 2x.
      CHECK(static_cast<double>(x.size() * sizeof(float)) / static_cast<double>(s.size()) > 2.0);
      ++checked;
    }
    CHECK(checked > 0);
  }

}  // TEST_SUITE
