#include "fedprof/data/quality.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {
namespace {

void CheckFloat(const at::Tensor& t, const char* what) {
  if (!t.defined() || t.scalar_type() != at::kFloat) {
    throw Error(std::string(what) + ": expected a float32 tensor");
  }
}

// Runs `fn` on a contiguous float view of `t`, writing back if a copy was
// needed (the effects are defined on the values, not the memory layout).
template <typename Fn>
void OnContiguous(at::Tensor& t, Fn fn) {
  if (t.is_contiguous()) {
    fn(t);
    return;
  }
  at::Tensor c = t.contiguous();
  fn(c);
  t.copy_(c);
}

// Convolves `n` values of `src` (read with stride `stride`) with `kernel`,
// clamping at the edges; `padded` is scratch of n + 2 * radius.
void Convolve1d(const float* src, int64_t n, int64_t stride,
                const std::vector<float>& kernel, std::vector<float>& padded,
                float* dst, int64_t dst_stride) {
  const auto radius = static_cast<int64_t>(kernel.size() / 2);
  for (int64_t i = -radius; i < n + radius; ++i) {
    const int64_t j = std::clamp<int64_t>(i, 0, n - 1);
    padded[i + radius] = src[j * stride];
  }
  const auto width = static_cast<int64_t>(kernel.size());
  for (int64_t i = 0; i < n; ++i) {
    const float* p = padded.data() + i;
    float sum = 0;
    for (int64_t t = 0; t < width; ++t) sum += kernel[t] * p[t];
    dst[i * dst_stride] = sum;
  }
}

}  // namespace

const char* DataKindName(DataKind kind) {
  switch (kind) {
    case DataKind::kClean:
      return "clean";
    case DataKind::kIrrelevant:
      return "irrelevant";
    case DataKind::kBlurred:
      return "blurred";
    case DataKind::kSaltPepper:
      return "salt_pepper";
    case DataKind::kGaussianNoise:
      return "gaussian_noise";
    case DataKind::kPolluted:
      return "polluted";
  }
  return "unknown";
}

std::vector<DataKind> AssignDataKinds(int num_clients,
                                      const RunOptions::Quality& options,
                                      uint64_t seed) {
  if (num_clients < 0) {
    throw Error("quality: num_clients is " + std::to_string(num_clients) +
                ", expected at least 0");
  }
  struct Share {
    DataKind kind;
    const char* name;
    double fraction;
  };
  const Share shares[] = {
      {DataKind::kIrrelevant, "quality.irrelevant", options.irrelevant},
      {DataKind::kBlurred, "quality.blurred", options.blurred},
      {DataKind::kSaltPepper, "quality.salt_pepper", options.salt_pepper},
      {DataKind::kGaussianNoise, "quality.gaussian_noise",
       options.gaussian_noise},
      {DataKind::kPolluted, "quality.polluted", options.polluted},
  };
  double sum = 0;
  std::string terms;
  for (const Share& s : shares) {
    if (!(s.fraction >= 0 && s.fraction <= 1)) {
      throw Error(std::string(s.name) + ": " + FormatDouble(s.fraction) +
                  ", expected a fraction in [0, 1]");
    }
    sum += s.fraction;
    if (s.fraction > 0) {
      terms += (terms.empty() ? "" : " + ") + std::string(s.name) + " (" +
               FormatDouble(s.fraction) + ")";
    }
  }
  if (sum > 1 + 1e-9) {
    throw Error("quality: " + terms + " sum to " + FormatDouble(sum) +
                ", expected at most 1");
  }

  Rng rng = MakeRng(seed, Stream::kDataKinds);
  const std::vector<int64_t> order = Permutation(rng, num_clients);
  std::vector<DataKind> kinds(num_clients, DataKind::kClean);
  int64_t next = 0;
  for (const Share& s : shares) {
    // Rounding each kind separately can overshoot by a client or two (e.g.
    // 0.5 + 0.5 of 3); later kinds then get what is left.
    auto count = static_cast<int64_t>(std::round(s.fraction * num_clients));
    count = std::min<int64_t>(count, num_clients - next);
    for (int64_t i = 0; i < count; ++i) kinds[order[next++]] = s.kind;
  }
  return kinds;
}

void ApplyGaussianBlur(at::Tensor& images, double sigma) {
  CheckFloat(images, "ApplyGaussianBlur");
  if (images.dim() != 4) {
    throw Error("ApplyGaussianBlur: expected images [n, c, h, w], got " +
                std::to_string(images.dim()) + " dimensions");
  }
  if (!(sigma > 0) || images.numel() == 0) return;
  const auto radius = static_cast<int64_t>(std::ceil(3 * sigma));
  std::vector<float> kernel(2 * radius + 1);
  double total = 0;
  for (int64_t i = -radius; i <= radius; ++i) {
    total += std::exp(-0.5 * (i * i) / (sigma * sigma));
  }
  for (int64_t i = -radius; i <= radius; ++i) {
    kernel[i + radius] =
        static_cast<float>(std::exp(-0.5 * (i * i) / (sigma * sigma)) / total);
  }

  OnContiguous(images, [&](at::Tensor& t) {
    const int64_t planes = t.size(0) * t.size(1);
    const int64_t h = t.size(2);
    const int64_t w = t.size(3);
    float* data = t.data_ptr<float>();
    std::vector<float> tmp(h * w);
    std::vector<float> padded(std::max(h, w) + 2 * radius);
    for (int64_t p = 0; p < planes; ++p) {
      float* plane = data + p * h * w;
      for (int64_t y = 0; y < h; ++y) {
        Convolve1d(plane + y * w, w, 1, kernel, padded, tmp.data() + y * w, 1);
      }
      for (int64_t x = 0; x < w; ++x) {
        Convolve1d(tmp.data() + x, h, w, kernel, padded, plane + x, w);
      }
    }
  });
}

void ApplySaltPepper(at::Tensor& images, double density, Rng& rng) {
  CheckFloat(images, "ApplySaltPepper");
  if (images.dim() != 4) {
    throw Error("ApplySaltPepper: expected images [n, c, h, w], got " +
                std::to_string(images.dim()) + " dimensions");
  }
  if (!(density >= 0 && density <= 1)) {
    throw Error("quality.sp_density: " + FormatDouble(density) +
                ", expected a value in [0, 1]");
  }
  OnContiguous(images, [&](at::Tensor& t) {
    const int64_t n = t.size(0);
    const int64_t channels = t.size(1);
    const int64_t area = t.size(2) * t.size(3);
    float* data = t.data_ptr<float>();
    const double half = density / 2;
    std::vector<double> draws(static_cast<size_t>(area));
    for (int64_t i = 0; i < n; ++i) {
      float* image = data + i * channels * area;
      // One draw per pixel decides both whether it is hit and which way:
      // [0, d/2) pepper, [d/2, d) salt. A pixel is all its channels. The
      // draws first, then a pass without branches (whether a pixel is hit
      // is a coin flip that a branch would mispredict).
      for (double& u : draws) u = Uniform01(rng);
      for (int64_t c = 0; c < channels; ++c) {
        float* plane = image + c * area;
        for (int64_t p = 0; p < area; ++p) {
          const float value = draws[p] < half ? 0.0f : 1.0f;
          plane[p] = draws[p] < density ? value : plane[p];
        }
      }
    }
  });
}

void ApplyGaussianNoise(at::Tensor& x, double sigma, Rng& rng) {
  CheckFloat(x, "ApplyGaussianNoise");
  if (!(sigma >= 0) || !std::isfinite(sigma)) {
    throw Error("quality.noise_sigma: " + FormatDouble(sigma) +
                ", expected a finite value >= 0");
  }
  const bool clamp = x.dim() == 4;
  OnContiguous(x, [&](at::Tensor& t) {
    float* data = t.data_ptr<float>();
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) {
      float v = data[i] + static_cast<float>(sigma * StandardNormal(rng));
      if (clamp) v = std::clamp(v, 0.0f, 1.0f);
      data[i] = v;
    }
  });
}

void ApplyPollution(at::Tensor& features, double share, Rng& rng) {
  CheckFloat(features, "ApplyPollution");
  if (features.dim() != 2) {
    throw Error("ApplyPollution: expected features [n, f], got " +
                std::to_string(features.dim()) + " dimensions");
  }
  if (!(share >= 0 && share <= 1)) {
    throw Error("quality.pollute_share: " + FormatDouble(share) +
                ", expected a value in [0, 1]");
  }
  OnContiguous(features, [&](at::Tensor& t) {
    const int64_t n = t.size(0);
    const int64_t f = t.size(1);
    if (n == 0) return;
    float* data = t.data_ptr<float>();
    // Column statistics of the clean data, in double for stability.
    std::vector<double> mean(f, 0.0);
    std::vector<double> sd(f, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < f; ++j) mean[j] += data[i * f + j];
    }
    for (double& m : mean) m /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < f; ++j) {
        const double d = data[i * f + j] - mean[j];
        sd[j] += d * d;
      }
    }
    for (double& s : sd) {
      s = std::sqrt(s / static_cast<double>(n));
      // A constant column has no scale; use 1 so polluted cells still differ.
      if (!(s > 0)) s = 1.0;
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < f; ++j) {
        if (Uniform01(rng) >= share) continue;
        const double sign = Uniform01(rng) < 0.5 ? -1.0 : 1.0;
        const double magnitude = 10.0 + 10.0 * Uniform01(rng);
        data[i * f + j] =
            static_cast<float>(mean[j] + sign * magnitude * sd[j]);
      }
    }
  });
}

Dataset MakeIrrelevant(const Dataset& client, const Dataset* source, Rng& rng) {
  CheckFloat(client.x, "MakeIrrelevant");
  const int64_t n = client.size();
  Dataset out;
  out.num_classes = client.num_classes;
  if (source != nullptr) {
    if (!source->x.defined() || source->size() == 0) {
      throw Error("MakeIrrelevant: source data set " + source->name +
                  " is empty");
    }
    if (source->x.sizes().slice(1) != client.x.sizes().slice(1)) {
      throw Error(
          "MakeIrrelevant: source " + source->name + " has samples of " +
          "shape " + c10::str(source->x.sizes().slice(1)) + ", expected " +
          c10::str(client.x.sizes().slice(1)) + " as in " + client.name);
    }
    const std::vector<int64_t> picks = IrrelevantPicks(n, source->size(), rng);
    out.x = source->x
                .index_select(0, torch::tensor(at::ArrayRef<int64_t>(picks),
                                               torch::kInt64))
                .to(torch::kFloat32)
                .contiguous();
    out.name = client.name + " (irrelevant, from " + source->name + ")";
  } else {
    out.x = torch::empty(client.x.sizes(), torch::kFloat32);
    float* x = out.x.data_ptr<float>();
    const int64_t count = out.x.numel();
    for (int64_t i = 0; i < count; ++i)
      x[i] = static_cast<float>(Uniform01(rng));
    out.name = client.name + " (irrelevant, synthetic)";
  }

  if (client.num_classes > 0) {
    out.y = torch::empty({n}, torch::kInt64);
    int64_t* y = out.y.data_ptr<int64_t>();
    const auto classes = static_cast<uint64_t>(client.num_classes);
    for (int64_t i = 0; i < n; ++i) {
      y[i] = static_cast<int64_t>(UniformIndex(rng, classes));
    }
  } else {
    // Regression has no label set to draw from; the client's own targets in
    // a random order keep their distribution but break any link to x.
    out.y = client.y.index_select(
        0, torch::tensor(at::ArrayRef<int64_t>(Permutation(rng, n)),
                         torch::kInt64));
  }
  return out;
}

std::vector<int64_t> IrrelevantPicks(int64_t n, int64_t source_size, Rng& rng) {
  std::vector<int64_t> picks(n);
  for (int64_t& p : picks) {
    p = static_cast<int64_t>(UniformIndex(rng, static_cast<uint64_t>(source_size)));
  }
  return picks;
}

}  // namespace fedprof
