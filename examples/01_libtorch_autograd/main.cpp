// Training a small CNN on Fashion-MNIST with libtorch, the conv and linear
// layers keeping the input they save for backward compressed by ebac.
//
// The idiom (docs/pytorch.md, "libtorch"): a torch::autograd::Function whose
// forward compresses the tensor backward will need into a kByte tensor (the
// stream's bytes, no copy), saves that through save_for_backward, keeps the
// static metadata in ctx->saved_data, and whose backward decompresses it.
//
//   train_fmnist [--data-dir DIR] [--steps N] [--batch B] [--lr LR]
//                [--eb EB] [--mode rel|abs] [--pipeline NAME] [--eval-n N]
//                [--threads T]
//   --eb 0 trains without compression (the baseline).
#include <ebac/ebac.hpp>
#include <torch/torch.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// ---- settings shared by the compressed layers ------------------------------
struct compression {
  double eb = 1e-2;
  ebac::bound_mode mode = ebac::bound_mode::relative;
  ebac::pipeline_spec spec;
  int threads = 0;
  // bytes of the inputs saved in the last step, raw and compressed
  std::int64_t raw_bytes = 0, stored_bytes = 0;
};
compression g_comp;

// ---- tensor <-> stream -------------------------------------------------------
/// Compresses a float32 CPU tensor; the stream's bytes become a kByte tensor
/// that owns them.
Tensor compress(const Tensor& t) {
  const Tensor x = t.contiguous();
  ebac::extents shape;
  shape.rank = static_cast<int>(x.dim());
  for (int i = 0; i < shape.rank; ++i) shape.dims[i] = static_cast<std::uint64_t>(x.size(i));
  ebac::compress_options opt;
  opt.bound = {g_comp.eb, g_comp.mode};
  opt.checksum = false;  // an in-memory training buffer
  opt.threads = g_comp.threads;
  auto bytes =
      ebac::with_pipeline(g_comp.spec, shape, [&](auto p) { return ebac::host::compress(x.data_ptr<float>(), shape, p, opt); });
  auto* owner = new std::vector<std::byte>(std::move(bytes));
  g_comp.raw_bytes += x.numel() * 4;
  g_comp.stored_bytes += static_cast<std::int64_t>(owner->size());
  return torch::from_blob(
      owner->data(), {static_cast<std::int64_t>(owner->size())}, [owner](void*) { delete owner; }, torch::kUInt8);
}

Tensor decompress(const Tensor& blob, c10::IntArrayRef sizes) {
  Tensor out = torch::empty(sizes, torch::kFloat32);
  ebac::host::decompress(reinterpret_cast<const std::byte*>(blob.data_ptr<std::uint8_t>()),
                         static_cast<std::size_t>(blob.numel()), out.data_ptr<float>(), static_cast<std::uint64_t>(out.numel()),
                         g_comp.threads);
  return out;
}

// ---- the custom autograd functions ------------------------------------------
/// y = conv2d(x, w, b) with x kept compressed for the weight gradient.
struct CompressedConv2d : torch::autograd::Function<CompressedConv2d> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w, const Tensor& b, int64_t padding) {
    ctx->save_for_backward({compress(x), w});
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    ctx->saved_data["padding"] = padding;
    return torch::conv2d(x, w, b, /*stride=*/1, padding);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto sizes = ctx->saved_data["x_sizes"].toIntVector();
    const int64_t pad = ctx->saved_data["padding"].toInt();
    const Tensor x = decompress(saved[0], sizes);
    const Tensor& w = saved[1];
    const int64_t bias_size = w.size(0);
    auto [gx, gw, gb] = at::convolution_backward(grads[0], x, w, c10::IntArrayRef(&bias_size, 1), {1, 1}, {pad, pad}, {1, 1},
                                                 false, {0, 0}, 1, {true, true, true});
    return {gx, gw, gb, Tensor()};
  }
};

/// y = x w^T + b with x kept compressed.
struct CompressedLinear : torch::autograd::Function<CompressedLinear> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w, const Tensor& b) {
    ctx->save_for_backward({compress(x), w});
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    return torch::addmm(b, x, w.t());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor x = decompress(saved[0], ctx->saved_data["x_sizes"].toIntVector());
    const Tensor& g = grads[0];
    return {g.mm(saved[1]), g.t().mm(x), g.sum(0)};
  }
};

// ---- the model ---------------------------------------------------------------
struct NetImpl : torch::nn::Module {
  torch::nn::Conv2d c1{torch::nn::Conv2dOptions(1, 16, 3).padding(1)};
  torch::nn::Conv2d c2{torch::nn::Conv2dOptions(16, 32, 3).padding(1)};
  torch::nn::Linear fc1{32 * 7 * 7, 128}, fc2{128, 10};
  bool compressed = true;

  NetImpl() {
    register_module("c1", c1);
    register_module("c2", c2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor conv(torch::nn::Conv2d& c, const Tensor& x) {
    return compressed ? CompressedConv2d::apply(x, c->weight, c->bias, 1) : c->forward(x);
  }
  Tensor linear(torch::nn::Linear& l, const Tensor& x) {
    return compressed ? CompressedLinear::apply(x, l->weight, l->bias) : l->forward(x);
  }
  Tensor forward(Tensor x) {
    x = torch::max_pool2d(torch::relu(conv(c1, x)), 2);
    x = torch::max_pool2d(torch::relu(conv(c2, x)), 2);
    x = torch::relu(linear(fc1, x.flatten(1)));
    return linear(fc2, x);
  }
};
TORCH_MODULE(Net);

// ---- Fashion-MNIST (IDX, gzip) -------------------------------------------------
std::vector<std::uint8_t> read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<std::uint8_t> out;
  std::uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  gzclose(f);
  if (n < 0) throw std::runtime_error("cannot read " + path);
  return out;
}

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

std::pair<Tensor, Tensor> load_split(const std::string& dir, const std::string& split) {
  const auto img = read_gz(dir + "/" + split + "-images-idx3-ubyte.gz");
  const auto lab = read_gz(dir + "/" + split + "-labels-idx1-ubyte.gz");
  if (img.size() < 16 || be32(img.data()) != 0x803 || lab.size() < 8 || be32(lab.data()) != 0x801)
    throw std::runtime_error("bad IDX header in " + dir + " (" + split + ")");
  const std::int64_t n = be32(img.data() + 4), h = be32(img.data() + 8), w = be32(img.data() + 12);
  if (img.size() != static_cast<std::size_t>(16 + n * h * w) || lab.size() != static_cast<std::size_t>(8 + n))
    throw std::runtime_error("IDX size mismatch in " + split);
  Tensor x = torch::from_blob(const_cast<std::uint8_t*>(img.data() + 16), {n, 1, h, w}, torch::kUInt8)
                 .to(torch::kFloat32)
                 .div(255.0)
                 .sub(0.2860)
                 .div(0.3530);
  Tensor y = torch::from_blob(const_cast<std::uint8_t*>(lab.data() + 8), {n}, torch::kUInt8).to(torch::kInt64);
  return {x, y};
}

double accuracy(Net& net, const Tensor& x, const Tensor& y, std::int64_t n) {
  torch::NoGradGuard ng;
  net->eval();
  n = std::min<std::int64_t>(n, x.size(0));
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < n; i += 500) {
    const std::int64_t j = std::min(n, i + 500);
    correct += net->forward(x.slice(0, i, j)).argmax(1).eq(y.slice(0, i, j)).sum().item<std::int64_t>();
  }
  net->train();
  return n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string data_dir = "/usr/share/datasets/fashion-mnist", pipeline = "ratio", mode = "rel";
  std::int64_t steps = 200, batch = 64, eval_n = 2000;
  double lr = 0.05;
  int threads = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--data-dir") data_dir = next();
    else if (a == "--steps") steps = std::stoll(next());
    else if (a == "--batch") batch = std::stoll(next());
    else if (a == "--lr") lr = std::stod(next());
    else if (a == "--eb") g_comp.eb = std::stod(next());
    else if (a == "--mode") mode = next();
    else if (a == "--pipeline") pipeline = next();
    else if (a == "--eval-n") eval_n = std::stoll(next());
    else if (a == "--threads") threads = std::stoi(next());
    else throw std::runtime_error("unknown argument " + a + " (see the comment at the top of main.cpp)");
  }
  if (!ebac::parse_pipeline(pipeline, g_comp.spec)) throw std::runtime_error("unknown pipeline " + pipeline);
  if (!ebac::parse_bound_mode(mode, g_comp.mode)) throw std::runtime_error("mode must be rel or abs");
  torch::set_num_threads(threads);
  g_comp.threads = threads;
  torch::manual_seed(0);

  auto [xtr, ytr] = load_split(data_dir, "train");
  auto [xte, yte] = load_split(data_dir, "t10k");
  Net net;
  net->compressed = g_comp.eb > 0;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(lr).momentum(0.9));
  std::printf("train_fmnist: %lld steps, batch %lld, %s\n", static_cast<long long>(steps), static_cast<long long>(batch),
              net->compressed ? ("eb " + std::to_string(g_comp.eb) + " " + mode + ", pipeline " + pipeline).c_str()
                              : "no compression (baseline)");
  const auto t0 = std::chrono::steady_clock::now();
  double loss_avg = 0;
  for (std::int64_t step = 1; step <= steps; ++step) {
    const Tensor idx = torch::randint(xtr.size(0), {batch}, torch::kInt64);
    g_comp.raw_bytes = g_comp.stored_bytes = 0;
    opt.zero_grad();
    Tensor loss = torch::nn::functional::cross_entropy(net->forward(xtr.index_select(0, idx)), ytr.index_select(0, idx));
    loss.backward();
    opt.step();
    loss_avg += loss.item<double>();
    if (step % 20 == 0 || step == steps) {
      std::printf("step %4lld  loss %.4f", static_cast<long long>(step), loss_avg / (step % 20 ? step % 20 : 20));
      if (net->compressed)
        std::printf("  saved conv/linear inputs %.2f MB -> %.3f MB (%.1fx)", g_comp.raw_bytes / 1e6, g_comp.stored_bytes / 1e6,
                    static_cast<double>(g_comp.raw_bytes) / g_comp.stored_bytes);
      std::printf("\n");
      loss_avg = 0;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("train_fmnist: %.1f s (%.1f ms/step), test accuracy %.4f on %lld images\n", secs,
              1e3 * secs / static_cast<double>(steps), accuracy(net, xte, yte, eval_n),
              static_cast<long long>(std::min<std::int64_t>(eval_n, xte.size(0))));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_fmnist: %s\n", e.what());
  return 1;
}
