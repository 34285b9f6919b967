// The option table: one row per option, bound to its RunOptions field. Its
// queries (lookups, choices, Markdown): option_queries.cc.
#include "fedprof/config/options.h"

#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

namespace fedprof {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxInt = 9.007199254740992e15;  // exact in a double

// A field's option type, and the assignment of a validated value to it.
template <class T>
struct FieldType;
template <>
struct FieldType<int64_t> {
  static constexpr OptionType kType = OptionType::kInt;
  static int64_t From(const std::string& text) { return std::strtoll(text.c_str(), nullptr, 10); }
  static std::string Text(int64_t v) { return std::to_string(v); }
};
template <>
struct FieldType<double> {
  static constexpr OptionType kType = OptionType::kDouble;
  static double From(const std::string& text) { return std::strtod(text.c_str(), nullptr); }
  static std::string Text(double v) { return CanonicalDouble(v); }
};
template <>
struct FieldType<bool> {
  static constexpr OptionType kType = OptionType::kBool;
  static bool From(const std::string& text) { return text == "true"; }
  static std::string Text(bool v) { return v ? "true" : "false"; }
};
template <>
struct FieldType<std::string> {
  static constexpr OptionType kType = OptionType::kString;
  static std::string From(const std::string& text) { return text; }
  static std::string Text(const std::string& v) { return v; }
};
// An option that may be left empty ("not set").
template <class T>
struct FieldType<std::optional<T>> {
  static constexpr OptionType kType = FieldType<T>::kType;
  static std::optional<T> From(const std::string& text) {
    if (text.empty()) return std::nullopt;
    return FieldType<T>::From(text);
  }
  static std::string Text(const std::optional<T>& v) { return v ? FieldType<T>::Text(*v) : ""; }
};

// A row bound to `field` (reached from RunOptions by `get`).
template <class T, class Get>
OptionSpec Row(const char* name, Get get, const char* default_value, double min, double max,
               const char* choices, const char* description) {
  OptionSpec o{name, FieldType<T>::kType, default_value, min, max, choices, description, false,
               nullptr, nullptr};
  o.bind = [get](const std::string& text, RunOptions* options) {
    get(*options) = FieldType<T>::From(text);
  };
  o.read = [get](const RunOptions& options) {
    return FieldType<T>::Text(get(const_cast<RunOptions&>(options)));
  };
  return o;
}

OptionSpec Resumable(OptionSpec o) {
  o.resumable = true;
  return o;
}

// One row: the option section.field bound to RunOptions::section.field, its
// name spelled once. RUN_OPTION: a top-level option (seed, rounds, threads).
#define OPTION(section, field, ...)                                             \
  Row<decltype(std::declval<RunOptions>().section.field)>(                         \
      #section "." #field,                                                     \
      [](RunOptions& o) -> auto& { return o.section.field; }, __VA_ARGS__)
#define RUN_OPTION(field, ...)                                                   \
  Row<decltype(RunOptions::field)>(                                            \
      #field, [](RunOptions& o) -> auto& { return o.field; }, __VA_ARGS__)

std::vector<OptionSpec> MakeTable() {
  return {
      // Run.
      RUN_OPTION(seed, "1", 0, kMaxInt, "",
       "Fixes partition, noise, client specs, model init, sampling and training."),
      Resumable(RUN_OPTION(rounds, "50", 1, 1e7, "", "Communication rounds T_max.")),
      Resumable(RUN_OPTION(threads, "0", 0, 1024, "",
       "Clients trained concurrently; 0 = all cores. Never changes the numbers.")),
      // Data.
      OPTION(data, name, "fashion-mnist", 0, 0, "fashion-mnist|mnist|emnist|cifar10|csv|memory",
       "Data set. IDX (fashion-mnist, mnist, emnist), CIFAR-10 binary, CSV, or one held in memory "
       "(data.memory_key: fedprof.Dataset from Python)."),
      OPTION(data, memory_key, "", 0, 0, "",
       "data.name = memory: the key of the in-memory data set (its content digest), so that a "
       "run names, and resumes on, exactly the data it ran on."),
      OPTION(data, dir, "", 0, 0, "",
       "Directory of the data files; empty = the data set's default location "
       "(fashion-mnist: /usr/share/datasets/fashion-mnist, mnist: data/mnist)."),
      OPTION(data, emnist_split, "digits", 0, 0, "",
       "EMNIST split; files are emnist-<split>-{train,test}-{images-idx3,labels-idx1}-ubyte[.gz]."),
      OPTION(data, train_file, "", 0, 0, "", "CSV: training file."),
      OPTION(data, test_file, "", 0, 0, "", "CSV: test file."),
      OPTION(data, targets, "", 0, 0, "", "CSV: target column name(s), comma-separated."),
      OPTION(data, task, "classification", 0, 0, "classification|regression",
       "CSV: classification (one integer target) or regression (R^2 and RMSE reported)."),
      OPTION(data, train_limit, "0", 0, kMaxInt, "",
       "Use only the first n training samples; 0 = all."),
      OPTION(data, test_limit, "0", 0, kMaxInt, "", "Use only the first n test samples; 0 = all."),
      OPTION(data, holdout_share, "0", 0, 0.9, "",
       "Share of the training set held out on the server (seeded) before partitioning; "
       "FedProf's reference set D_V when fedprof.reference = holdout."),
      // Clients and partition.
      OPTION(clients, count, "100", 1, 1e7, "", "Client population N."),
      OPTION(partition, kind, "dominant", 0, 0,
       "iid|dominant|dirichlet|classes|shards|sampled|sampled_dominant|sampled_dirichlet|"
       "sampled_classes|given",
       "How the training set is shared out (docs/partitions.md). Disjoint shares: iid; dominant "
       "(each client's dominant class makes up partition.dominant_share of its data); dirichlet "
       "(per class, shares over the clients ~ Dir(partition.beta), Li et al. 2022); classes (each "
       "client holds partition.classes labels, #C = k); shards (sorted by label, cut into "
       "partition.shards shards a client, McMahan et al. 2017). sampled, sampled_dominant, "
       "sampled_dirichlet, sampled_classes: the same label skews, but client k's samples are "
       "drawn with replacement from its seed when needed (sizes from partition.size_mean, "
       "size_sd), for populations far larger than the data set. given: the per-client rows that "
       "came with an in-memory data set (data.name = memory), e.g. one client per writer."),
      OPTION(partition, dominant_share, "0.6", 0, 1, "",
       "Share of a client's samples from its dominant class (client k: class k mod classes)."),
      OPTION(partition, beta, "0.5", 1e-6, 1e6, "",
       "Concentration beta of the Dirichlet draws (dirichlet, sampled_dirichlet, "
       "partition.sizes = dirichlet): smaller is more skewed."),
      OPTION(partition, min_size, "10", 0, kMaxInt, "",
       "dirichlet, partition.sizes = dirichlet: redraw until every client holds at least this "
       "many samples (at most 1000 draws, then an error)."),
      OPTION(partition, classes, "2", 1, 1e6, "",
       "classes, sampled_classes: distinct labels a client holds (client k: label k mod classes, "
       "the rest drawn)."),
      OPTION(partition, shards, "2", 1, 1e6, "", "shards: shards a client holds."),
      OPTION(partition, sizes, "normal", 0, 0, "normal|dirichlet",
       "Client sizes of iid, dominant and the sampled kinds. normal: ~ Normal(size_mean, "
       "size_sd^2) (size_mean 0 = an equal split). dirichlet (iid, dominant): shares of the "
       "training set ~ Dir(partition.beta), quantity skew."),
      OPTION(partition, size_mean, "0", 0, kInf, "",
       "Client sizes ~ Normal(mean, sd^2); 0 = equal split of the training set."),
      OPTION(partition, size_sd, "0", 0, kInf, "", "Standard deviation of client sizes."),
      // Data quality.
      OPTION(quality, irrelevant, "0", 0, 1, "",
       "Fraction of clients whose data is irrelevant (other images, random labels)."),
      OPTION(quality, blurred, "0", 0, 1, "", "Fraction of clients with Gaussian-blurred images."),
      OPTION(quality, salt_pepper, "0", 0, 1, "",
       "Fraction of clients with salt-and-pepper noise."),
      OPTION(quality, gaussian_noise, "0", 0, 1, "",
       "Fraction of clients with additive Gaussian noise (images or features)."),
      OPTION(quality, polluted, "0", 0, 1, "",
       "Fraction of clients with polluted tabular features (invalid values)."),
      OPTION(quality, irrelevant_source, "synthetic", 0, 0, "synthetic|mnist|fashion-mnist",
       "Where irrelevant images come from: uniform-noise images or another IDX data set."),
      OPTION(quality, blur_sigma, "1.5", 0.1, 20, "", "Gaussian blur sigma, in pixels."),
      OPTION(quality, sp_density, "0.3", 0, 1, "",
       "Share of pixels set to 0 or 1 by salt-and-pepper noise."),
      OPTION(quality, noise_sigma, "0.3", 0, 100, "",
       "Additive Gaussian noise sigma (pixel scale [0, 1], or feature units)."),
      OPTION(quality, pollute_share, "0.5", 0, 1, "",
       "Share of a polluted client's feature cells replaced by invalid values."),
      OPTION(quality, feature_skew, "0", 0, 100, "",
       "Feature skew: client k of N gets additive Gaussian noise of sigma = feature_skew * k / N "
       "on its inputs (Li et al. 2022's noise-based skew), on top of its data kind; 0 = off."),
      // Model.
      OPTION(model, name, "lenet5", 0, 0, "lenet5|cnn|mlp|shufflenet_v2|resnet18",
       "LeNet-5, a small CNN with batch norm, an MLP for tabular data, ShuffleNet v2, or "
       "ResNet-18 (CIFAR form). Not used when model.file is set."),
      OPTION(model, file, "", 0, 0, "",
       "A TorchScript module exported from PyTorch (torch.jit.script(net).save(path)) to train "
       "instead of model.name, from its saved parameters. It maps a batch shaped like the data to "
       "[n, classes] (or [n, targets]). FedProf profiles any layer its forward calls once; FedBN "
       "keeps its BatchNorm submodules local. "
       "Deployment clients need the same file in their own config. See docs/models.md."),
      OPTION(model, width, "1.0", 0.5, 2, "",
       "ShuffleNet v2 width multiplier: 0.5, 1.0, 1.5 or 2.0."),
      OPTION(model, hidden, "64", 0, 0, "", "MLP hidden layer widths, comma-separated."),
      OPTION(model, profile_layer, "", 0, 0, "",
       "Layer whose representations are profiled (model.file: any submodule by its dotted path, "
       "e.g. layer4.1.conv2, or LINEAR:input for the input of a Linear layer); empty = the "
       "model's default (the first dense layer; for a model file whose only dense layer is its "
       "classifier, that layer's input)."),
      // Local training.
      OPTION(train, epochs, "5", 1, 10000, "", "Local epochs E per round."),
      OPTION(train, batch_size, "32", 1, 1e6, "", "Local mini-batch size."),
      OPTION(train, lr, "0.01", 0, 100, "", "Local learning rate in round 1."),
      OPTION(train, lr_decay, "0.99", 0, 1, "", "Learning rate factor per round."),
      OPTION(train, momentum, "0.9", 0, 0.999, "", "SGD momentum."),
      OPTION(train, weight_decay, "0", 0, 1, "", "SGD weight decay."),
      OPTION(train, proximal_mu, "", 0, 1e3, "",
       "mu of a proximal term mu/2 ||w - w_global||^2 in the local loss (FedProx), with any "
       "strategy; empty = the preset's (fedprox: fedprox.mu, the others: 0)."),
      // Strategy.
      OPTION(strategy, name, "fedavg", 0, 0,
       "fedavg|fedprof|fedavg-rp|fedprox|fedadam|afl|fedbn|cfcfm|clustered|oort|fedbuff|scaffold|fednova|"
       "feddyn|moon",
       "Federated strategy, a preset of selector + aggregator: fedavg (uniform + average), "
       "fedprof (fedprof + average), fedavg-rp (uniform + average, always partial), fedprox "
       "(size + average, proximal term fedprox.mu), fedadam (uniform + fedadam), afl (afl + "
       "average), fedbn (uniform + fedbn), cfcfm (cfcfm + average), clustered (clustered + "
       "average), oort (oort + average), fedbuff (uniform + fedbuff), and the client algorithms "
       "scaffold, fednova, feddyn, moon (uniform + average + that algorithm, always partial). "
       "strategy.selector, strategy.aggregator, strategy.algorithm and train.proximal_mu "
       "override it."),
      OPTION(strategy, selector, "", 0, 0, "uniform|size|fedprof|afl|cfcfm|clustered|oort",
       "Which clients train each round; empty = the preset's. uniform: K at random; size: by "
       "data size; fedprof: by representation-profile score (fedprof.*); afl: by loss valuation "
       "(afl.*); cfcfm: the K fastest; clustered: one per cluster of similar updates "
       "(clustered.*); oort: by statistical utility and speed (oort.*, Lai et al. 2021)."),
      OPTION(strategy, aggregator, "", 0, 0,
       "average|fedadam|fedbn|fedbuff|median|trimmed_mean|krum|multi_krum|bulyan|centered_clipping|fltrust|flame|zeno|root",
       "How results become the next global model; empty = the preset's. average: size-weighted "
       "averaging (strategy.aggregation); fedadam: Adam on the server over the average "
       "(fedadam.*); fedbuff: asynchronous, a step every fedbuff.buffer results, each weighted by "
       "its staleness (fedbuff.*, in simulation and deployment; rounds counts the steps); fedbn: "
       "averaging, clients keep their batch-norm layers (needs a model with batch norm). Robust to poisoned models (robust.*, docs/robustness.md): median "
       "(coordinate-wise), trimmed_mean (coordinate-wise), krum, multi_krum, bulyan, "
       "centered_clipping, fltrust (trust from the server's own update on its root data set), "
       "flame (clustering, clipping and noise against backdoors) and zeno (the updates that lower "
       "the loss on the server's validation data most); they replace the average in both "
       "aggregation modes. root: the server's own update on its root data set, the clients' "
       "models ignored (the reference for the rules that use the server's data)."),
      OPTION(strategy, algorithm, "", 0, 0, "none|scaffold|fednova|feddyn|moon",
       "What runs on the clients around local SGD, with its server half (docs/algorithms.md); "
       "empty = the preset's, none = plain SGD. scaffold: control variates correct every step "
       "(scaffold.*, Karimireddy et al. 2020); fednova: updates normalised by their effective "
       "steps (Wang et al. 2020); feddyn: dynamic regularisation (feddyn.alpha, Acar et al. "
       "2021); moon: model-contrastive loss on the profiled layer (moon.*, Li et al. 2021). "
       "Composes with every selector; the aggregation becomes partial."),
      OPTION(strategy, fraction, "0.1", 1e-9, 1, "",
       "Client fraction C: K = max(1, round(N C)) clients per round."),
      OPTION(strategy, aggregation, "full", 0, 0, "full|partial",
       "full: all N clients weighted by |D_k|/|D|, unselected ones contributing the global model; "
       "partial: selected clients weighted by |D_k|/|D_S|."),
      // FedProf (Eqs. 8-13, Alg. 2).
      OPTION(fedprof, alpha, "10", 0, 1e6, "",
       "alpha of the score exp(-alpha div); 0 = uniform sampling. Papers: 10 (GasTurbine, "
       "EMNIST), 25 (CIFAR-10)."),
      OPTION(fedprof, sampling, "without_replacement", 0, 0,
       "without_replacement|with_replacement",
       "K distinct clients by successive weighted draws, or K independent draws as the papers' "
       "random.choices (a client drawn twice trains once). The fedprof selector's alone; the "
       "others ignore it."),
      OPTION(fedprof, reference, "holdout", 0, 0, "holdout|test|client",
       "Reference set D_V: the held-out share of the training data (data.holdout_share), the "
       "test set, or one client's data (fedprof.reference_client)."),
      OPTION(fedprof, reference_client, "0", 0, 1e7, "",
       "The client whose data is D_V when fedprof.reference = client."),
      OPTION(fedprof, secure_matching, "none", 0, 0, "none|paillier",
       "paillier: clients send Enc(q div) under the server's Paillier key instead of their "
       "profile, so the server learns the divergence and nothing else (App. C.2)."),
      OPTION(fedprof, paillier_bits, "2048", 2048, 3072, "",
       "Paillier key size for secure matching, in bits: 2048, or 3072 for longer-term security "
       "(any multiple of 256 in between)."),
      OPTION(fedprof, profile_group, "64", 1, 65536, "",
       "Simulation: the clients of each group of this many consecutive ids that hold fewer "
       "samples than one forward pass (128) profile their data in shared passes of 128 "
       "instead of a small pass each; under a sampled partition, those whose inputs are "
       "samples of a data set as they are or blurred (clean, blurred, irrelevant from a data "
       "set) take their representations from one pass per 128 samples of that set "
       "(docs/scale.md). Their profiles then differ from a client's own pass by float "
       "rounding (about 1e-7). 1: each client alone, bit for bit as a deployed client."),
      // Baselines; defaults from each method's paper.
      OPTION(fedprox, mu, "0.01", 0, 1e3, "",
       "The fedprox preset's proximal weight mu (Li et al. 2020 tune it in {0.001, 0.01, 0.1, "
       "1}); train.proximal_mu overrides it."),
      OPTION(scaffold, server_lr, "1", 1e-6, 1e3, "",
       "SCAFFOLD's global step size eta_g: x <- x + eta_g (mean y_i - x); 1 = the average itself."),
      OPTION(scaffold, correct, "true", 0, 0, "",
       "SCAFFOLD: correct each local step by c - c_i; false keeps the control variates but trains "
       "as FedAvg."),
      OPTION(feddyn, alpha, "0.01", 0, 1e3, "",
       "FedDyn's alpha, the weight of the dynamic regulariser (Acar et al. 2021 use 0.01-0.1); "
       "0 = FedAvg."),
      OPTION(moon, mu, "1", 0, 1e3, "",
       "MOON's mu, the weight of the model-contrastive loss (Li et al. 2021 tune it in {0.1, 1, "
       "5, 10}); 0 = FedAvg."),
      OPTION(moon, tau, "0.5", 1e-3, 1e3, "",
       "MOON's temperature tau of the contrastive logits (the paper's 0.5)."),
      OPTION(fedadam, server_lr, "0.01", 0, 1e3, "",
       "FedAdam server learning rate eta (Reddi et al. 2021)."),
      OPTION(fedadam, beta1, "0.9", 0, 0.999999, "", "FedAdam first-moment decay."),
      OPTION(fedadam, beta2, "0.99", 0, 0.999999, "", "FedAdam second-moment decay."),
      OPTION(fedadam, tau, "0.001", 1e-12, 10, "", "FedAdam adaptivity tau."),
      OPTION(clustered, sketch_dim, "1024", 16, 1e6, "",
       "Clustered sampling: clients' updates are compared through count sketches of this size."),
      OPTION(afl, drop_share, "0.75", 0, 1, "",
       "AFL alpha1: share of clients with the lowest valuations left out (Goetz et al. 2019)."),
      OPTION(afl, temperature, "0.01", 0, 1e3, "",
       "AFL alpha2: selection probability proportional to exp(alpha2 * valuation)."),
      OPTION(afl, random_share, "0.1", 0, 1, "",
       "AFL alpha3: share of the K clients picked uniformly at random."),
      // Client availability in simulation (docs/availability.md).
      OPTION(availability, kind, "always", 0, 0, "always|on_off|diurnal|trace",
       "When simulated clients are online, in the cost model's virtual time: always; on_off: each "
       "alternates exponential online and offline periods (availability.online_mean_s, "
       "offline_mean_s); diurnal: online by slots with a chance that follows the client's time of "
       "day (availability.share, amplitude, time_zones_h, slot_s, day_s); trace: the intervals of "
       "availability.trace. Selection sees the clients online when a round starts; one that goes "
       "offline before it would finish is lost (timed out)."),
      OPTION(availability, online_mean_s, "3600", 1e-6, 1e12, "",
       "on_off: mean online period, virtual seconds."),
      OPTION(availability, offline_mean_s, "3600", 0, 1e12, "",
       "on_off: mean offline period, virtual seconds (online share = online / (online + offline))."),
      OPTION(availability, share, "0.5", 0, 1, "",
       "diurnal: the mean chance of being online in a slot, over a day."),
      OPTION(availability, amplitude, "0.8", 0, 1, "",
       "diurnal: A; the chance at local time tau is share (1 + A cos(2 pi tau / day_s)): highest at "
       "local midnight, lowest at noon."),
      OPTION(availability, time_zones_h, "0", 0, 24, "",
       "diurnal: clients' local clocks are offset by up to this many hours (uniformly); 24 flattens "
       "the population's share, 0 puts everyone on one clock."),
      OPTION(availability, slot_s, "600", 1e-3, 1e9, "",
       "diurnal: virtual seconds per slot; each client is online or not for a whole slot."),
      OPTION(availability, day_s, "86400", 1, 1e12, "", "diurnal: virtual seconds per day."),
      OPTION(availability, trace, "", 0, 0, "",
       "trace: a CSV file, header client,start,end, one online interval [start, end) in virtual "
       "seconds per line; clients it never names are never online."),
      OPTION(availability, overcommit, "1", 1, 10, "",
       "A round asks ceil(overcommit K) clients and keeps the first K to finish (simulation)."),
      // Oort (Lai et al., OSDI 2021, Alg. 1; docs/strategies.md).
      OPTION(oort, exploration, "0.9", 0, 1, "",
       "Oort: epsilon in round 1, the share of K drawn from clients not yet explored."),
      OPTION(oort, exploration_decay, "0.95", 0, 1, "",
       "Oort: epsilon is multiplied by this every round, down to oort.exploration_min."),
      OPTION(oort, exploration_min, "0.2", 0, 1, "", "Oort: the smallest epsilon."),
      OPTION(oort, cut_off, "0.95", 0, 1, "",
       "Oort: c; the (1 - epsilon) K explored clients are drawn by utility among those within c of "
       "the (1 - epsilon) K-th highest."),
      OPTION(oort, penalty, "2", 0, 100, "",
       "Oort: alpha; a client slower than the preferred round duration T has its utility times (T / "
       "t)^alpha."),
      OPTION(oort, duration_percentile, "10", 0, 100, "",
       "Oort: T starts as this percentile of the clients' round times; 100 = no penalty."),
      OPTION(oort, pacer_window, "20", 1, 1e6, "",
       "Oort's pacer: W; every W rounds, if the last W rounds collected less statistical utility "
       "than the W before, T's percentile rises by oort.pacer_step."),
      OPTION(oort, pacer_step, "5", 0, 100, "", "Oort's pacer: Delta, in percentile points."),
      OPTION(oort, clip_quantile, "0.98", 0, 1, "",
       "Oort: statistical utilities above this quantile of the explored clients' count as it."),
      // Buffered asynchronous aggregation (Nguyen et al., AISTATS 2022; docs/fedbuff.md).
      OPTION(fedbuff, concurrency, "0", 0, 1e7, "",
       "fedbuff: clients training at once; a client that finishes is replaced at once by one the "
       "selector picks among the idle online clients. 0 = K (strategy.fraction x clients.count)."),
      OPTION(fedbuff, buffer, "0", 0, 1e7, "",
       "fedbuff: results per server step (the paper's K). 0 = fedbuff.concurrency."),
      OPTION(fedbuff, refill, "arrival", 0, 0, "arrival|step",
       "fedbuff: when a finished client's place gets a new one: arrival, at once (the paper's); step, "
       "at the next server step, on the new model (concurrency = buffer then makes synchronous rounds "
       "whatever the clients' speeds)."),
      OPTION(fedbuff, server_lr, "1", 1e-6, 1e3, "",
       "fedbuff: the server learning rate eta_g applied to the buffer's weighted mean update."),
      OPTION(fedbuff, staleness_exponent, "0.5", 0, 10, "",
       "fedbuff: a result tau versions stale is weighted (1 + tau)^-a; 0.5 is the paper's "
       "1/sqrt(1 + tau), 0 weighs all alike."),
      // Robust aggregation (docs/robustness.md).
      OPTION(robust, trim_share, "0.2", 0, 0.499, "",
       "trimmed_mean: share beta of each coordinate's values cut from each end (floor(beta n) "
       "of n); tolerates up to that share of poisoned models (Yin et al. 2018)."),
      OPTION(robust, byzantine, "", 0, 1e6, "",
       "krum, multi_krum: poisoned models f tolerated per round; needs more than 2f + 2 "
       "clients per round (Blanchard et al. 2017). Empty = the most each round's n results "
       "allow, floor((n - 3) / 2); a round with too few results for f runs with that most. Also "
       "bulyan's f, robust.pre_aggregation = nnm's, and zeno's b (the models it leaves out; empty "
       "= floor(n / 2))."),
      OPTION(robust, multi_krum_select, "0", 0, 1e7, "",
       "multi_krum: how many of the lowest-scoring models are averaged (m); 0 = n - f."),
      OPTION(robust, cc_radius, "0", 0, 1e9, "",
       "centered_clipping: the clipping radius tau on ||update - v||; 0 = the median of those "
       "distances in each iteration."),
      OPTION(robust, cc_iterations, "1", 1, 100, "",
       "centered_clipping: iterations l (Karimireddy et al. 2021: one suffices)."),
      OPTION(robust, cc_start, "zero", 0, 0, "zero|last",
       "centered_clipping: where its iterations start, v_0: zero, or last, the global model's "
       "last step (the paper's Alg. 2 starts from the last aggregate; with robust.momentum, the "
       "momentum)."),
      OPTION(robust, pre_aggregation, "none", 0, 0, "none|bucketing|nnm",
       "A stage before any robust aggregator: bucketing, the means of buckets of "
       "robust.bucket_size updates in a random order (Karimireddy et al. 2022); nnm, each update "
       "replaced by the mean of its n - f nearest (Allouah et al. 2023), f = robust.byzantine or, "
       "empty, floor((n - 1) / 2)."),
      OPTION(robust, bucket_size, "2", 1, 1e6, "", "bucketing: updates per bucket s."),
      OPTION(robust, fallback, "none", 0, 0, "none|root",
       "A stage after any robust aggregator: root, the server's own update on its root data set "
       "(robust.root_size, robust.root_epochs) replaces the aggregator's estimate when it has the "
       "lower loss on the server's validation data (D_V after the root set); none = the "
       "estimate."),
      OPTION(robust, momentum, "0", 0, 0.999, "",
       "Server momentum beta with any robust aggregator: m <- beta m + (1 - beta) step, the "
       "global model moves by m; 0 = none."),
      OPTION(robust, fltrust_scale, "root", 0, 0, "root|median",
       "fltrust: the norm every trusted update is rescaled to: root, the server's own update's "
       "(Cao et al. 2021, Eq. 3); median, the median of the round's update norms."),
      OPTION(robust, flame_noise, "0.001", 0, 10, "",
       "flame: the noise factor lambda; the noise's sd is lambda times the clipping bound (the "
       "paper's 0.001 for image classification)."),
      OPTION(robust, zeno_rho, "0", 0, 1e9, "",
       "zeno: rho, the score's penalty per squared unit of an update's norm (Xie et al. 2019, "
       "Def. 1)."),
      OPTION(robust, validation_size, "0", 0, 1e9, "",
       "zeno, robust.fallback: samples of the server's validation data (its reference set D_V "
       "after the root set) in each round's validation batch, drawn from the seed and the round; "
       "0 = all of it."),
      OPTION(robust, root_size, "100", 0, 1e9, "",
       "fltrust, root, robust.fallback: samples of the server's root data set, the first of its "
       "reference set D_V (fedprof.reference); 0 = all of D_V. Cao et al. 2021 use 100."),
      OPTION(robust, root_epochs, "", 1, 10000, "",
       "fltrust, root, robust.fallback: epochs of the server's own training on the root data "
       "set (batch size, learning rate and its decay as the clients'); empty = as many SGD steps "
       "as a client of mean size takes in train.epochs, so that the server's update has a "
       "client's scale."),
      OPTION(robust, max_update_norm, "0", 0, 1e9, "",
       "Bound on each result's update relative to the global model, ||w_k - theta|| / "
       "||theta||, with any aggregator; 0 = none."),
      OPTION(robust, norm_action, "clip", 0, 0, "clip|refuse",
       "A result beyond robust.max_update_norm: clip (its update scaled down onto the bound) or "
       "refuse (refused like an invalid result, counted in refused)."),
      // Simulated attackers (docs/robustness.md).
      OPTION(attack, share, "0", 0, 1, "",
       "Share of the clients that poison their models: round(share N) of them, chosen from the "
       "seed; the same in simulate, launch and a client built from the config (fedprof client)."),
      OPTION(attack, kind, "sign_flip", 0, 0,
       "scale|sign_flip|label_flip|backdoor|alie|ipm|min_max|min_sum|tailored",
       "What an attacker returns, with its true sample count. After training honestly to w: "
       "scale: theta + lambda (w - theta); sign_flip: theta - lambda (w - theta). label_flip: it "
       "trains on labels c -> C - 1 - c. backdoor: it trains with a pixel trigger and "
       "attack.target's label on attack.poison_share of its images and returns theta + lambda "
       "(w - theta) (Bagdasaryan et al. 2020). Colluding attackers who see the round's honest updates "
       "(mean mu, sd sigma) all return theta plus: alie: mu - z sigma (Baruch et al. 2019); ipm: "
       "-lambda mu (Xie et al. 2019); min_max, min_sum: mu - gamma sigma/||sigma|| as far as the "
       "honest updates' distances allow (Shejwalkar and Houmansadr 2021); tailored: mu + gamma p "
       "with the gamma that moves the aggregator's own estimate furthest from mu (the same paper's "
       "aggregation-tailored attack; p = attack.perturbation)."),
      OPTION(attack, perturbation, "std", 0, 0, "std|unit|sign",
       "tailored: the direction p: std, -sigma/||sigma||; unit, -mu/||mu||; sign, -sign(mu) scaled to length 1."),
      OPTION(attack, scale, "4", 0, 1e6, "", "The attack's lambda (scale, sign_flip, backdoor; ipm's epsilon)."),
      OPTION(attack, target, "0", 0, 1e6, "", "backdoor: the class triggered images are labelled as."),
      OPTION(attack, poison_share, "0.3", 0, 1, "",
       "backdoor: the share of an attacker's images given the trigger and the target label (the "
       "paper mixes 20 of 64 per batch)."),
      OPTION(attack, z, "", 0, 100, "",
       "alie: z; empty = z_max = Phi^-1((n - s)/n), s = floor(n/2 + 1) - f, for the round's n "
       "results of which f are the attackers'."),
      // Cost model (Eqs. 27-34).
      OPTION(cost, speed_mean, "1.0", 1e-3, 1e3, "", "Client speed s_k mean, GHz."),
      OPTION(cost, speed_sd, "0.2", 0, 1e3, "", "Client speed s_k standard deviation, GHz."),
      OPTION(cost, bandwidth_mean, "1.0", 1e-3, 1e6, "", "Downlink bandwidth bw_k mean, MHz."),
      OPTION(cost, bandwidth_sd, "0.3", 0, 1e6, "", "Bandwidth standard deviation, MHz."),
      OPTION(cost, snr_db, "10", -30, 100, "", "Signal-to-noise ratio, dB."),
      OPTION(cost, bits_per_sample, "0", 0, 1e12, "",
       "BPS; 0 = from the data (8 bits per pixel value, 32 per tabular feature)."),
      OPTION(cost, cycles_per_bit, "400", 0, 1e9, "", "CPB, processor cycles per bit."),
      OPTION(cost, p_trans, "0.75", 0, 1e3, "", "Transmitter power P_trans, W."),
      OPTION(cost, p_f, "0.7", 0, 1e3, "", "Baseline processor power P_f, W (at 1 GHz)."),
      OPTION(cost, he_cycles_per_unit, "0", 0, 1e12, "",
       "Secure matching: client cycles per profiled unit; 0 = measured on x86-64 (4.8e6 for "
       "2048-bit keys, 1.0e7 for 3072)."),
      // Source models for transfer learning (fedprof pretrain).
      OPTION(pretrain, architecture, "vgg_small", 0, 0, "vgg_small|lenet5",
       "Architecture fedprof pretrain trains on the data.* set."),
      OPTION(pretrain, epochs, "3", 1, 1e5, "", "Pretraining epochs."),
      OPTION(pretrain, batch_size, "64", 1, 1e6, "", "Pretraining batch size."),
      OPTION(pretrain, lr, "0.01", 0, 10, "", "Pretraining SGD learning rate (momentum 0.9)."),
      OPTION(pretrain, on_holdout, "false", 0, 0, "",
       "Train on the held-out share (data.holdout_share) instead of the rest, so that a transfer "
       "run with the same data.* options gives its clients the samples the source never saw."),
      // Transfer schemes (fedprof fbftl); FbFTL paper, Section III.
      OPTION(transfer, source_model, "", 0, 0, "",
       "Source model: a file from fedprof pretrain, or a TorchScript module exported from PyTorch."),
      OPTION(transfer, cut, "fc2", 0, 0, "",
       "Cut layer m_c: the first stage of the task head; the stages before it are the frozen extractor."),
      OPTION(transfer, schemes, "FL,FTL_f,FTL_c,SFL,FbFTL", 0, 0, "",
       "Schemes to run, comma-separated: FL, FTL_f, FTL_c, SFL, FbFTL."),
      OPTION(transfer, clients, "500", 1, 1e8, "", "Clients U."),
      OPTION(transfer, samples_per_client, "8", 1, 1e6, "", "Samples per client K_u."),
      OPTION(transfer, fraction, "0.016", 0, 1, "",
       "Fraction C of clients per iteration (U C clients, at least 1)."),
      OPTION(transfer, epochs, "10", 1, 1e5, "",
       "Epochs of the gradient schemes (FL, FTL_f, FTL_c, SFL); an epoch selects every client once."),
      OPTION(transfer, head_epochs, "100", 1, 1e5, "",
       "FbFTL: most epochs the server trains the head on the uploaded features."),
      OPTION(transfer, patience, "10", 1, 1e5, "",
       "FbFTL: stop after this many epochs without a better validation accuracy."),
      OPTION(transfer, refit, "false", 0, 0, "",
       "FbFTL: after early stopping, train a fresh head on every uploaded sample (validation "
       "split included) for the epochs the validation chose; that head is kept."),
      OPTION(transfer, validation_share, "0.1", 0, 0.9, "",
       "FbFTL: share of the uploaded samples the server keeps for validation (early stopping)."),
      OPTION(transfer, batch_size, "64", 1, 1e6, "", "FbFTL: head training batch size."),
      OPTION(transfer, lr, "0.01", 0, 10, "", "SGD learning rate (every scheme)."),
      OPTION(transfer, momentum, "0.9", 0, 0.999, "", "SGD momentum."),
      OPTION(transfer, weight_decay, "0.0005", 0, 1, "", "SGD weight decay."),
      OPTION(transfer, sample_share, "1", 0, 1, "",
       "Share of each client's samples it uses (seeded); the data-insufficiency experiment."),
      OPTION(transfer, keep_ratio, "1", 1e-9, 1, "",
       "Top-k sparsification S_r of uploads: share r of elements kept (Eq. 22)."),
      OPTION(transfer, bits, "32", 1, 32, "", "Quantisation Q_q of uploads: q bits per value."),
      OPTION(transfer, quantizer, "minmax", 0, 0, "minmax|symmetric",
       "Q_q's levels: minmax (2^q between the vector's min and max, the paper's) or symmetric "
       "(2^q-1 over [-max|v|, max|v|], so 0 is a level)."),
      OPTION(transfer, block_loss, "0", 0, 0.999, "",
       "Block loss rate BLR; a packet of transfer.blocks_per_packet blocks is lost with Eq. 18's PLR."),
      OPTION(transfer, blocks_per_packet, "1", 1, 1e6, "",
       "Blocks n_b per packet: FbFTL samples per packet; a gradient upload is one packet."),
      OPTION(transfer, retransmissions, "0", 0, 100, "",
       "Retransmissions n_r of a lost packet (Eq. 19); a packet still lost is dropped."),
      OPTION(transfer, dp_noise, "0", 0, 1e6, "",
       "Noise multiplier sigma of the Gaussian noise on uploads; 0 = no differential privacy."),
      OPTION(transfer, dp_clip, "1", 1e-9, 1e9, "",
       "Clipping norm S: each uploaded vector is scaled to L2 norm at most S, noise sd sigma S."),
      OPTION(transfer, dp_form, "clipped", 0, 0, "clipped|paper",
       "FbFTL noise: clipped (norm S, provable) or paper (sd sigma max|z-z'|/K over the client's samples)."),
      OPTION(transfer, dp_delta, "1e-6", 1e-15, 0.5, "", "delta of the reported (epsilon, delta)."),
      // Evaluation and reporting.
      OPTION(eval, every, "1", 1, 1e7, "", "Evaluate the global model every n rounds (and the last)."),
      OPTION(eval, batch_size, "128", 1, 1e7, "", "Evaluation batch size."),
      OPTION(eval, federated_every, "0", 0, 1e7, "",
       "Federated evaluation every n rounds (and the last); 0 = none. A share of the available "
       "clients evaluates the global model on its own data; metrics.csv gains fed_clients, "
       "fed_accuracy and fed_loss (weighted by sample counts), evaluation.csv each client's figures."),
      OPTION(eval, federated_fraction, "0.1", 1e-9, 1, "",
       "Share of the available clients asked for a federated evaluation (at least one)."),
      OPTION(report, target, "0", 0, 1, "",
       "Accuracy (R^2 for regression) target for rounds/time/energy-to-target; 0 = none."),
      Resumable(OPTION(report, progress, "true", 0, 0, "", "Print a progress line per round.")),
      OPTION(report, per_client_limit, "10000", 0, 1e7, "",
       "Outputs with a column or bar per client (scores.csv, scores.png, selection.png) are "
       "written only for populations up to this size."),
      Resumable(OPTION(client_state, memory_mb, "1024", 0, 1e7, "",
       "Memory for what clients keep between rounds (a client algorithm's state, FedBN's batch "
       "norm), per kind, in MiB; beyond it the states least recently used are spilled to "
       "client_state/ in the run directory and read back when their client trains (the numbers "
       "do not change). 0 = no budget, all in memory.")),
      // Secure aggregation of the round's models (docs/privacy.md).
      OPTION(secagg, protocol, "none", 0, 0, "none|secagg|secagg+",
       "secagg: Bonawitz et al. (CCS 2017), every client masks with every other; secagg+: Bell "
       "et al. (CCS 2020), each with k = O(log K) neighbours. The server learns the sum of the "
       "round's models (exactly the plaintext sum) and who is in it, never one client's model. "
       "On a client (fedprof client): every model it trains leaves it only masked, and it refuses "
       "a task that would send it (or a sketch of it) in the clear."),
      OPTION(secagg, dropout, "0.1", 0, 0.5, "",
       "delta: at most floor(delta n) of a session's n invited clients may drop out (or be "
       "declared dropped by the server): a client refuses a U_1 or U_3 smaller than "
       "n - floor(delta n). With the other secagg.* tolerances it sets k and t."),
      OPTION(secagg, corrupt, "0.1", 0, 0.5, "",
       "gamma: at most ceil(gamma F) clients of the fleet F (secagg.fleet) collude with the server, "
       "all of them possibly in one session (at most its n, at least one whenever gamma > 0); k, t "
       "and the distributed-DP noise keep every other client's secrets and noise from them."),
      OPTION(secagg, fleet, "0", 0, 1e7, "",
       "F, the clients the colluders are counted among: the server picks whom it invites, so it may "
       "invite all of its own into one small session. 0: clients.count in a simulation; a deployed "
       "server or client, the clients its secagg-roster lists (every client the CA certified)."),
      Resumable(OPTION(secagg, client_reports, "200", 0, 1e9, "",
       "A deployed client under secure aggregation: the most reports (tasks without training "
       "that ask for a loss, an evaluation, a profile or its divergence) it answers over every "
       "run, and in one run at most its own config's rounds + 1; its ledger counts them. 0 = no "
       "limit over every run.")),
      OPTION(secagg, security_bits, "40", 1, 256, "",
       "sigma: the chance that an honest client's secrets leak to the server and gamma n corrupt "
       "clients (SecAgg+'s random graph) is at most 2^-sigma."),
      OPTION(secagg, correctness_bits, "20", 1, 256, "",
       "eta: the chance that a session within the dropout tolerance fails is at most 2^-eta."),
      OPTION(secagg, min_clients, "10", 2, 1e7, "",
       "The fewest clients a session may invite; smaller ones are refused (by each client too), "
       "beside those too small for the colluders secagg.corrupt and secagg.fleet allow."),
      OPTION(secagg, neighbors, "0", 0, 1e7, "",
       "k: neighbours each client masks with and shares among (secagg+); 0: the fewest that "
       "the secagg.* tolerances allow."),
      OPTION(secagg, threshold, "0", 0, 1e7, "",
       "t: shares that recover a client's secret; 0: chosen with k. An explicit t is held to "
       "the security condition only."),
      OPTION(secagg, clear_profiles, "false", 0, 0, "",
       "Under secure aggregation, FedProf without Paillier matching (fedprof.secure_matching = "
       "none) sends each client's profile to the server in the clear: refused unless true, on "
       "the server and on each client."),
      OPTION(secagg, drop_after_masking, "0", 0, 0.5, "",
       "Simulation: the share of each session's clients that stop answering once they have "
       "sent their masked model (their models still count, recovered from their neighbours' "
       "shares); for measuring and testing recovery."),
      Resumable(OPTION(secagg, phase_timeout_s, "60", 0.1, 1e5, "",
       "Deployment: the longest the server waits for the clients' messages of one round of a "
       "session; a client that has not answered by then, or has stopped sending heartbeats, "
       "is a dropout.")),
      // User-level differential privacy of the model updates (docs/privacy.md).
      OPTION(dp, mode, "off", 0, 0, "off|central|distributed",
       "central: DP-FedAvg (McMahan et al. 2018). Clients are Poisson-sampled (uniform at q = K/N; "
       "fedprof by score, each at most at dp.max_inclusion, under fedprof.secure_matching = "
       "paillier), clip their update to dp.clip_norm (the server refuses one beyond it), and the "
       "server adds N(0, z^2 C^2) to the sum of the clipped updates, divides by K and hands the "
       "result to average or fedadam; metrics.csv gets dp_clip_norm, dp_epsilon (against observers "
       "of the models) and dp_epsilon_server (infinite: the server sees the clipped updates). "
       "distributed: the same sampling and clipping, but under secure aggregation (secagg.protocol) "
       "each client adds discrete Gaussian noise to its rotated, quantized update (Kairouz et al. "
       "2021), enough that the honest clients' noise alone makes z C, and the server only ever sees "
       "the noised sum modulo 2^dp.bits; dp_epsilon_server is then finite."),
      OPTION(dp, noise_multiplier, "1", 0, 1e6, "",
       "z: the noise sd over the clip norm (of update and count together under adaptive "
       "clipping); 0 = clipping without noise (epsilon infinite)."),
      OPTION(dp, clip_norm, "1", 1e-12, 1e12, "",
       "C: the L2 bound on each client's update w_k - theta; adaptive clipping's C at round 1."),
      OPTION(dp, clipping, "fixed", 0, 0, "fixed|adaptive",
       "adaptive: C follows the dp.target_quantile of the update norms (Andrew et al. 2021): "
       "C <- C exp(-eta_C (b - gamma)), b the noised share of unclipped updates."),
      OPTION(dp, target_quantile, "0.5", 0, 1, "", "Adaptive clipping: gamma."),
      OPTION(dp, clip_lr, "0.2", 0, 10, "", "Adaptive clipping: eta_C."),
      OPTION(dp, count_noise, "0", 0, 1e9, "",
       "Adaptive clipping: sigma_b, the noise sd of the unclipped count; 0 = K / 20 (the "
       "paper's), but never below z. The update's multiplier becomes "
       "(z^-2 - (2 sigma_b)^-2)^-1/2."),
      OPTION(dp, delta, "0", 0, 0.1, "", "delta of the privacy ledger; 0 = 1/N (clients.count)."),
      OPTION(dp, bits, "32", 8, 56, "",
       "dp.mode = distributed: b, the bits of each value of the modular sum, whole bytes (8, 16, ..., "
       "56); the quantization step is chosen so that the sum of a session's clients fits in 2^b "
       "(Eq. 61 of Kairouz et al.). Each client computes the step itself and refuses another."),
      OPTION(dp, rounding_beta, "0.60653066", 0, 0.999, "",
       "dp.mode = distributed: beta of conditional randomized rounding (a rounded update is redrawn "
       "until its norm is within the bound beta gives; 0 = unconditional). Default e^-1/2."),
      OPTION(dp, noise, "seeded", 0, 0, "seeded|secret|keyed",
       "Where DP noise and the DP sample come from: seeded, the run's seed (simulate, launch and "
       "compare only: whoever knows the config can recompute the noise and the sample, and a "
       "deployment refuses it); secret, OpenSSL's generator (no one can recompute it); keyed, a "
       "party's own key in dp.key_dir (whoever holds the key can, no one else: a simulation handed "
       "a deployment's keys gives its model). The server's for central DP and the sample; under "
       "dp.mode = distributed each client's for its own noise, from its own config."),
      OPTION(dp, key_dir, "", 0, 0, "",
       "dp.noise = keyed: the directory of the keys (fedprof keygen): server.dp.key, the server's, "
       "and client-K.dp.key, client K's. A deployed server or client reads its own from its "
       "--tls-dir when this is empty."),
      OPTION(dp, client_budget, "0", 0, 1e9, "",
       "A deployed client's own limit on its epsilon against the server over everything it "
       "contributes (every run; each contribution charged without amplification, with the noise "
       "of the fewest honest clients its sum may hold): it refuses a task that would pass it, and "
       "any update without noise. 0 = 10 under dp.mode = distributed, none otherwise. Its ledger "
       "(client-K.ledger) keeps what it spent."),
      Resumable(OPTION(dp, client_unbounded, "false", 0, 0, "",
       "true: a deployed client under dp.mode = distributed keeps no budget (dp.client_budget "
       "unset), so nothing bounds what reruns under new run ids average out of its noise.")),
      OPTION(dp, max_inclusion, "0", 0, 1, "",
       "FedProf under DP: client k is sampled with probability min(this, c lambda_k), K expected, "
       "and every round is charged at this rate; 0 = 2K/N (at most 1)."),
      OPTION(dp, clear_profiles, "false", 0, 0, "",
       "FedProf under dp.mode without Paillier matching sends each profile to the server in the "
       "clear, outside the guarantee: refused unless true (it selects as Paillier matching does, "
       "without its cost: for simulation studies)."),
      Resumable(OPTION(dp, target_epsilon, "0", 0, 1e9, "",
       "> 0: the run stops before a round that would take epsilon (at dp.delta) beyond this.")),
      // Deployment (fedprof server / client over gRPC).
      Resumable(OPTION(deploy, min_clients, "0", 0, 1e7, "",
       "Clients that must have registered before round 1; 0 = all clients.count.")),
      Resumable(OPTION(deploy, start_timeout_s, "300", 1, 1e6, "",
       "Longest wait for deploy.min_clients at the start (and for any client to be available "
       "later); past it the server stops with an error.")),
      Resumable(OPTION(deploy, round_timeout_s, "600", 0.1, 1e7, "",
       "Round deadline: a selected client with no result by then counts as timed out.")),
      Resumable(OPTION(deploy, min_results, "1", 0, 1e7, "",
       "Quorum: a round with fewer usable results selects more clients among those not yet "
       "asked, up to deploy.round_attempts attempts; then the server stops (resume with "
       "--resume). 0 = none; none under dp.mode (a round is one Poisson sample).")),
      Resumable(OPTION(deploy, round_attempts, "3", 1, 1000, "", "Attempts at reaching the quorum per round.")),
      Resumable(OPTION(deploy, heartbeat_s, "2", 0.05, 3600, "", "Interval of the clients' heartbeats.")),
      Resumable(OPTION(deploy, heartbeat_timeout_s, "10", 0.1, 1e5, "",
       "A client silent for this long has left: it drops out of its round and is not selected "
       "until it is back.")),
      Resumable(OPTION(deploy, chunk_kb, "1024", 1, 3072, "",
       "Models travel in chunks of this many KiB, below gRPC's 4 MiB message limit.")),
      Resumable(OPTION(deploy, max_samples, "1000000", 1, 2147483647, "",
       "Largest sample count (aggregation weight) a client may claim at registration.")),
      Resumable(OPTION(deploy, max_clients, "0", 0, 1e7, "",
       "Most clients connected at once; a registration past it is refused (RESOURCE_EXHAUSTED, "
       "with a retry hint) and the client retries after a jittered back-off. 0 = clients.count.")),
      // Distributed simulation (torchrun environment, fedprof launch).
      Resumable(OPTION(dist, timeout_s, "1800", 1, 1e6, "",
       "Distributed simulation: the longest any rank waits for another (rendezvous, a command, "
       "a client's result); past it, or when a rank is lost, every rank ends with an error "
       "naming it. Must exceed the slowest client's training and rank 0's evaluation.")),
  };
}

}  // namespace

std::string CanonicalDouble(double v) {
  std::ostringstream ss;
  ss.precision(17);
  ss << v;
  return ss.str();
}

const std::vector<OptionSpec>& AllOptions() {
  static const std::vector<OptionSpec> table = MakeTable();
  return table;
}

}  // namespace fedprof
