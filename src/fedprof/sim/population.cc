#include "fedprof/sim/population.h"

#include <torch/torch.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>

#include "fedprof/client/backdoor.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/data/loaders.h"
#include "fedprof/data/memory_data.h"
#include "fedprof/data/partition.h"
#include "fedprof/data/quality.h"

namespace fedprof {
namespace {

// The tag of a client's feature-skew noise stream, beside its data kind's.
constexpr uint64_t kFeatureSkewTag = 1;

// The directory of the file this code was loaded from: build/fedprof's,
// or the Python extension's (whose process is /usr/bin/python3).
std::string CodeDir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&DefaultDataDir), &info) == 0 || info.dli_fname == nullptr) return ".";
  char resolved[PATH_MAX];
  if (::realpath(info.dli_fname, resolved) == nullptr) return ".";
  const std::string path(resolved);
  return path.substr(0, path.rfind('/'));
}

// `dir`/`stem` or `dir`/`stem`.gz, whichever exists.
std::string FindFile(const std::string& dir, const std::string& stem) {
  for (const std::string& candidate : {dir + "/" + stem, dir + "/" + stem + ".gz"}) {
    if (FileExists(candidate)) return candidate;
  }
  throw Error(dir + "/" + stem + "[.gz]: no such file (set data.dir to the data set's directory)");
}

Dataset LoadIdxSet(const std::string& name, const std::string& dir_option,
                   const std::string& emnist_split, bool train, int64_t first = 0) {
  const std::string dir = dir_option.empty() ? DefaultDataDir(name) : dir_option;
  std::string images, labels;
  if (name == "emnist") {
    // A name, not a path: it is part of the file names under `dir`.
    if (emnist_split.empty() || emnist_split.find_first_not_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos) {
      throw Error("data.emnist_split '" + Printable(emnist_split, 40) + "': a split's name, a-z only (digits, letters, "
                  "balanced, byclass, bymerge, mnist)");
    }
    const std::string prefix = "emnist-" + emnist_split + (train ? "-train-" : "-test-");
    images = FindFile(dir, prefix + "images-idx3-ubyte");
    labels = FindFile(dir, prefix + "labels-idx1-ubyte");
  } else {
    const std::string prefix = train ? "train-" : "t10k-";
    images = FindFile(dir, prefix + "images-idx3-ubyte");
    labels = FindFile(dir, prefix + "labels-idx1-ubyte");
  }
  Dataset d = LoadIdx(images, labels, name == "emnist" ? 0 : 10, first);
  d.name = name;
  return d;
}

// The clients' rows of an in-memory data set, as given with it; they index
// its whole training set, so nothing may be cut from it first.
std::vector<std::vector<int64_t>> GivenPartition(const RunOptions& options) {
  if (options.data.name != "memory") {
    throw Error(
        "partition.kind: 'given' takes the partition of an in-memory data set (data.name = memory)");
  }
  if (options.data.holdout_share > 0 || options.data.train_limit > 0) {
    throw Error(
        "partition.kind: a given partition indexes the whole training set; data.holdout_share and "
        "data.train_limit must be 0 (for FedProf's reference set, fedprof.reference = test or client)");
  }
  std::vector<std::vector<int64_t>> parts = FindMemoryData(options.data.memory_key)->partition;
  if (parts.empty()) throw Error("partition.kind: the in-memory data set came without a partition");
  return parts;
}

Dataset Head(const Dataset& d, int64_t limit) {
  if (limit <= 0 || limit >= d.size()) return d;
  Dataset out = d;
  out.x = d.x.narrow(0, 0, limit).clone();
  out.y = d.y.narrow(0, 0, limit).clone();
  return out;
}

}  // namespace

FeatureScaling FeatureScalingOf(const at::Tensor& x, const std::vector<std::string>& names) {
  if (x.dim() != 2 || x.size(1) != static_cast<int64_t>(names.size())) {
    throw Error("feature scaling: " + std::to_string(names.size()) + " column names for a table of " +
                std::to_string(x.dim() == 2 ? x.size(1) : 0) + " columns");
  }
  const torch::Tensor mean = x.mean(0).contiguous();
  const torch::Tensor sd = x.std(0, /*unbiased=*/false).clamp_min(1e-12).contiguous();
  FeatureScaling s;
  s.names = names;
  s.mean.assign(mean.data_ptr<float>(), mean.data_ptr<float>() + mean.numel());
  s.sd.assign(sd.data_ptr<float>(), sd.data_ptr<float>() + sd.numel());
  return s;
}

at::Tensor ScaleFeatures(const at::Tensor& x, const std::vector<std::string>& names, const FeatureScaling& scaling,
                         const std::string& what) {
  std::vector<int64_t> order;  // order[k]: the column of `x` named scaling.names[k]
  for (const std::string& want : scaling.names) {
    const auto at = std::find(names.begin(), names.end(), want);
    if (at == names.end()) break;
    order.push_back(at - names.begin());
  }
  if (order.size() != scaling.names.size() || names.size() != scaling.names.size()) {
    const auto listed = [](const std::vector<std::string>& columns) {
      std::string out;
      for (const std::string& c : columns) out += (out.empty() ? "" : ", ") + FileText(c);
      return out;
    };
    throw Error(what + ": feature columns " + listed(names) + "; the training file's are " +
                listed(scaling.names));
  }
  const auto row = [](const std::vector<float>& values) {
    return torch::tensor(at::ArrayRef<float>(values), torch::kFloat32).reshape({1, -1});
  };
  torch::Tensor arranged = x;
  if (!std::is_sorted(order.begin(), order.end())) {
    arranged = x.index_select(1, torch::tensor(at::ArrayRef<int64_t>(order), torch::kInt64));
  }
  return (arranged - row(scaling.mean)) / row(scaling.sd);
}

std::string DefaultDataDir(const std::string& name) {
  if (const char* root = std::getenv("FEDPROF_DATA")) {
    if (FileExists(std::string(root) + "/" + name)) return std::string(root) + "/" + name;
  }
  if (name == "fashion-mnist" && FileExists("/usr/share/datasets/fashion-mnist")) {
    return "/usr/share/datasets/fashion-mnist";
  }
  if (FileExists("data/" + name)) return "data/" + name;
  // data/NAME in the directories above the code: the repository's data/
  // for build/fedprof and for build/python/fedprof/_fedprof*.so alike.
  std::string dir = CodeDir();
  for (int up = 0; up < 4 && dir.size() > 1; ++up) {
    dir = dir.substr(0, std::max<size_t>(dir.rfind('/'), 1));
    if (FileExists(dir + "/data/" + name)) return dir + "/data/" + name;
  }
  return CodeDir() + "/../data/" + name;
}

TrainTest LoadData(const RunOptions::Data& options, uint64_t seed) {
  const std::string& name = options.name;
  const std::string& dir = options.dir;
  TrainTest tt;
  if (name == "fashion-mnist" || name == "mnist" || name == "emnist") {
    const std::string& split = options.emnist_split;
    // Only the images a limit keeps are decoded (Head below keeps them).
    tt.train = LoadIdxSet(name, dir, split, /*train=*/true, options.train_limit);
    tt.test = LoadIdxSet(name, dir, split, /*train=*/false, options.test_limit);
    // EMNIST label ranges come from the data; keep train and test agreeing.
    const int64_t classes = std::max(tt.train.num_classes, tt.test.num_classes);
    tt.train.num_classes = tt.test.num_classes = classes;
  } else if (name == "cifar10") {
    const std::string d = dir.empty() ? DefaultDataDir(name) : dir;
    std::vector<std::string> train_files;
    for (int i = 1; i <= 5; ++i) train_files.push_back(FindFile(d, "data_batch_" + std::to_string(i) + ".bin"));
    tt.train = LoadCifar10(train_files);
    tt.test = LoadCifar10({FindFile(d, "test_batch.bin")});
  } else if (name == "csv") {
    CsvOptions csv;
    csv.targets = SplitList(options.targets);
    csv.classification = options.task == "classification";
    if (csv.targets.empty()) throw Error("data.targets: CSV data needs at least one target column");
    const std::string& train_file = options.train_file;
    const std::string& test_file = options.test_file;
    if (train_file.empty() || test_file.empty()) {
      throw Error("data.train_file / data.test_file: CSV data needs both files");
    }
    tt.train = LoadCsv(train_file, csv);
    tt.test = LoadCsv(test_file, csv);
    if (csv.classification) {
      const int64_t classes = std::max(tt.train.num_classes, tt.test.num_classes);
      tt.train.num_classes = tt.test.num_classes = classes;
    }
    // Standardise features with training statistics (features of very
    // different scales otherwise stall SGD); the test file's columns are
    // matched to the training file's by name.
    tt.features = FeatureScalingOf(tt.train.x, tt.train.feature_names);
    tt.train.x = ScaleFeatures(tt.train.x, tt.train.feature_names, tt.features, train_file);
    tt.test.x = ScaleFeatures(tt.test.x, tt.test.feature_names, tt.features, test_file);
    tt.test.feature_names = tt.features.names;
  } else if (name == "memory") {
    const std::shared_ptr<const MemoryData> data = FindMemoryData(options.memory_key);
    tt.train = data->train;
    tt.test = data->test;
  } else {
    throw Error("data.name: unknown data set '" + name + "'");
  }
  if (name != "memory" && !options.memory_key.empty()) {
    throw Error("data.memory_key: only for data.name = memory, not '" + name + "'");
  }
  tt.train = Head(tt.train, options.train_limit);
  tt.test = Head(tt.test, options.test_limit);
  const double share = options.holdout_share;
  if (share > 0) {
    const int64_t n = tt.train.size();
    Rng rng = MakeRng(seed, Stream::kReferenceSplit);
    std::vector<int64_t> order = Permutation(rng, n);
    const auto held = static_cast<int64_t>(std::llround(share * static_cast<double>(n)));
    std::vector<int64_t> holdout(order.begin(), order.begin() + held);
    std::vector<int64_t> rest(order.begin() + held, order.end());
    std::sort(holdout.begin(), holdout.end());
    std::sort(rest.begin(), rest.end());
    tt.holdout = Subset(tt.train, holdout);
    tt.train = Subset(tt.train, rest);
  }
  return tt;
}

Population::Population(const Dataset& train, const RunOptions& options)
    : train_(train), seed_(static_cast<uint64_t>(options.seed)), quality_(options.quality) {
  const int n = static_cast<int>(options.clients.count);
  const RunOptions::Partition& partition = options.partition;
  const std::string& kind = partition.kind;
  if (LabelSkew(partition) && train.is_regression()) {
    throw Error("partition.kind: '" + kind + "' needs class labels; regression data takes 'iid' "
                "or 'sampled'");
  }
  std::vector<int64_t>& labels = labels_;
  if (!train.is_regression()) {
    const torch::Tensor y = train.y.contiguous();
    labels.assign(y.data_ptr<int64_t>(), y.data_ptr<int64_t>() + y.numel());
  }
  sizes_.resize(n);
  if (kind == "given") {
    parts_ = GivenPartition(options);
    if (static_cast<int>(parts_.size()) != n) {
      throw Error("partition.kind: the given partition has " + std::to_string(parts_.size()) +
                  " clients and clients.count is " + std::to_string(n));
    }
    for (int k = 0; k < n; ++k) sizes_[k] = static_cast<int32_t>(parts_[k].size());
  } else if (SampledClients(partition)) {
    sampled_ = std::make_unique<SampledPartition>(labels, train.size(), train.num_classes,
                                                  partition, seed_);
    for (int k = 0; k < n; ++k) sizes_[k] = static_cast<int32_t>(sampled_->Size(k));
  } else {
    parts_ = Partition(labels, train.size(), train.num_classes, n, partition, seed_);
    for (int k = 0; k < n; ++k) sizes_[k] = static_cast<int32_t>(parts_[k].size());
  }

  const bool images = train.is_image();
  if (!images && (quality_.irrelevant > 0 || quality_.blurred > 0 || quality_.salt_pepper > 0)) {
    throw Error("quality.irrelevant/blurred/salt_pepper: these scenarios need image data");
  }
  if (images && quality_.polluted > 0) {
    throw Error("quality.polluted: feature pollution needs tabular data");
  }
  kinds_ = AssignDataKinds(n, quality_, seed_);
  attacks_ = MakeAttackPlan(options.attack, options.seed, n);
  if (attacks_.attack.kind == AttackKind::kLabelFlip && train.is_regression()) {
    throw Error("attack.kind: label_flip needs class labels");
  }
  if (options.attack.backdoor()) {
    const std::string unfit = BackdoorUnfitFor(train, attacks_.attack.target);
    if (!unfit.empty()) throw Error(unfit);
  }

  const std::string& source = quality_.irrelevant_source;
  if (quality_.irrelevant > 0 && source != "synthetic") {
    irrelevant_source_ = LoadIdxSet(source, "", "", /*train=*/true);
    if (irrelevant_source_.x.sizes().slice(1) != train.x.sizes().slice(1)) {
      throw Error("quality.irrelevant_source: '" + source + "' images do not have the shape of " +
                  train.name + "'s");
    }
  }

  const InputTables tables = SharedTables();
  std::vector<int64_t> held(kTables, 0);
  for (int k = 0; k < n; ++k) {
    const int t = TableOf(k);
    if (t >= 0) held[t] += sizes_[k];
  }
  for (int t = 0; t < kTables; ++t) serves_[t] = tables.sizes[t] > 0 && held[t] >= tables.sizes[t];
}

Population::~Population() = default;

Client Population::MakeClient(int k) const {
  Dataset d = Subset(train_, sampled_ ? sampled_->Indices(k) : parts_.at(k));
  Rng rng = MakeRng(seed_, Stream::kNoise, {static_cast<uint64_t>(k)});
  switch (kinds_.at(k)) {
    case DataKind::kClean: break;
    case DataKind::kIrrelevant:
      d = MakeIrrelevant(d, irrelevant_source_.size() > 0 ? &irrelevant_source_ : nullptr, rng);
      break;
    case DataKind::kBlurred: ApplyGaussianBlur(d.x, quality_.blur_sigma); break;
    case DataKind::kSaltPepper: ApplySaltPepper(d.x, quality_.sp_density, rng); break;
    case DataKind::kGaussianNoise: ApplyGaussianNoise(d.x, quality_.noise_sigma, rng); break;
    case DataKind::kPolluted: ApplyPollution(d.x, quality_.pollute_share, rng); break;
  }
  if (const double sigma = FeatureSkewSigma(k); sigma > 0) {
    Rng skew = MakeRng(seed_, Stream::kNoise, {static_cast<uint64_t>(k), kFeatureSkewTag});
    ApplyGaussianNoise(d.x, sigma, skew);
  }
  const Attack& attack = attacks_.For(k);
  if (attack.kind == AttackKind::kLabelFlip) d.y = (d.num_classes - 1) - d.y;  // c -> C - 1 - c
  if (attack.kind == AttackKind::kBackdoor) {
    Rng poison = MakeRng(seed_, Stream::kAttackers, {static_cast<uint64_t>(k)});
    PoisonForBackdoor(&d, attack, poison);
  }
  Client client(k, std::move(d));
  client.set_attack(attacks_.For(k));
  return client;
}

double Population::FeatureSkewSigma(int k) const {
  return quality_.feature_skew * static_cast<double>(k) / static_cast<double>(size());
}

std::vector<int64_t> Population::LabelCounts(int k) const {
  if (labels_.empty() || train_.num_classes < 1) return {};
  std::vector<int64_t> counts(static_cast<size_t>(train_.num_classes), 0);
  for (int64_t i : sampled_ ? sampled_->Indices(k) : parts_.at(k)) counts[labels_[i]] += 1;
  return counts;
}

int Population::TableOf(int k) const {
  if (!sampled_) return -1;  // disjoint partitions: no sample is held twice
  if (FeatureSkewSigma(k) > 0) return -1;  // its own noise
  if (attacks_.For(k).kind == AttackKind::kBackdoor) return -1;  // its own triggered images
  switch (kinds_.at(k)) {
    case DataKind::kClean: return kAsIs;
    case DataKind::kBlurred: return kBlurred;
    case DataKind::kIrrelevant: return irrelevant_source_.size() > 0 ? kIrrelevantSource : -1;
    default: return -1;  // per-client noise
  }
}

InputTables Population::SharedTables() const {
  InputTables tables;
  tables.sizes.assign(kTables, 0);
  if (!sampled_) return tables;
  tables.sizes[kAsIs] = train_.size();
  tables.sizes[kBlurred] = train_.size();
  tables.sizes[kIrrelevantSource] = irrelevant_source_.size();
  tables.inputs = [this](int table, int64_t start, int64_t len) {
    switch (table) {
      case kAsIs: return train_.x.narrow(0, start, len);
      case kBlurred: {
        at::Tensor x = train_.x.narrow(0, start, len).clone();
        ApplyGaussianBlur(x, quality_.blur_sigma);
        return x;
      }
      default: return irrelevant_source_.x.narrow(0, start, len).to(torch::kFloat32);
    }
  };
  return tables;
}

bool Population::SharedRowsOf(int k, TableRows* rows) const {
  const int t = TableOf(k);
  if (t < 0 || !serves_[t]) return false;
  rows->table = t;
  if (t == kIrrelevantSource) {
    // MakeIrrelevant's draws: the first of the client's noise stream.
    Rng rng = MakeRng(seed_, Stream::kNoise, {static_cast<uint64_t>(k)});
    rows->rows = IrrelevantPicks(sizes_[k], irrelevant_source_.size(), rng);
  } else {
    rows->rows = sampled_->Indices(k);
  }
  return true;
}

}  // namespace fedprof
