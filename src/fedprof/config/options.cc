#include "fedprof/config/options.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace fedprof {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxInt = 9.007199254740992e15;  // exact in a double

std::vector<OptionSpec> MakeTable() {
  using T = OptionType;
  return {
      // Run.
      {"seed", T::kInt, "1", 0, kMaxInt, "",
       "Fixes partition, noise, client specs, model init, sampling and training."},
      {"rounds", T::kInt, "50", 1, 1e7, "", "Communication rounds T_max."},
      {"threads", T::kInt, "0", 0, 1024, "",
       "Clients trained concurrently; 0 = all cores. Never changes the numbers."},
      // Data.
      {"data.name", T::kString, "fashion-mnist", 0, 0, "fashion-mnist|mnist|emnist|cifar10|csv",
       "Data set. IDX (fashion-mnist, mnist, emnist), CIFAR-10 binary, or CSV."},
      {"data.dir", T::kString, "", 0, 0, "",
       "Directory of the data files; empty = the data set's default location "
       "(fashion-mnist: /usr/share/datasets/fashion-mnist, mnist: data/mnist)."},
      {"data.emnist_split", T::kString, "digits", 0, 0, "",
       "EMNIST split; files are emnist-<split>-{train,test}-{images-idx3,labels-idx1}-ubyte[.gz]."},
      {"data.train_file", T::kString, "", 0, 0, "", "CSV: training file."},
      {"data.test_file", T::kString, "", 0, 0, "", "CSV: test file."},
      {"data.targets", T::kString, "", 0, 0, "", "CSV: target column name(s), comma-separated."},
      {"data.task", T::kString, "classification", 0, 0, "classification|regression",
       "CSV: classification (one integer target) or regression (R^2 and RMSE reported)."},
      {"data.train_limit", T::kInt, "0", 0, kMaxInt, "",
       "Use only the first n training samples; 0 = all."},
      {"data.test_limit", T::kInt, "0", 0, kMaxInt, "", "Use only the first n test samples; 0 = all."},
      {"data.holdout_share", T::kDouble, "0", 0, 0.9, "",
       "Share of the training set held out on the server (seeded) before partitioning; "
       "FedProf's reference set D_V when fedprof.reference = holdout."},
      // Clients and partition.
      {"clients.count", T::kInt, "100", 1, 1e7, "", "Client population N."},
      {"partition.kind", T::kString, "dominant", 0, 0, "iid|dominant|sampled|sampled_dominant",
       "iid, or non-IID where each client has a dominant class: disjoint shares of the data set. "
       "sampled, sampled_dominant: the same, but client k's samples are drawn with replacement "
       "from its seed when needed (clients may share samples; sizes from partition.size_mean, "
       "size_sd), for populations far larger than the data set."},
      {"partition.dominant_share", T::kDouble, "0.6", 0, 1, "",
       "Share of a client's samples from its dominant class (client k: class k mod classes)."},
      {"partition.size_mean", T::kDouble, "0", 0, kInf, "",
       "Client sizes ~ Normal(mean, sd^2); 0 = equal split of the training set."},
      {"partition.size_sd", T::kDouble, "0", 0, kInf, "", "Standard deviation of client sizes."},
      // Data quality.
      {"quality.irrelevant", T::kDouble, "0", 0, 1, "",
       "Fraction of clients whose data is irrelevant (other images, random labels)."},
      {"quality.blurred", T::kDouble, "0", 0, 1, "", "Fraction of clients with Gaussian-blurred images."},
      {"quality.salt_pepper", T::kDouble, "0", 0, 1, "",
       "Fraction of clients with salt-and-pepper noise."},
      {"quality.gaussian_noise", T::kDouble, "0", 0, 1, "",
       "Fraction of clients with additive Gaussian noise (images or features)."},
      {"quality.polluted", T::kDouble, "0", 0, 1, "",
       "Fraction of clients with polluted tabular features (invalid values)."},
      {"quality.irrelevant_source", T::kString, "synthetic", 0, 0, "synthetic|mnist|fashion-mnist",
       "Where irrelevant images come from: uniform-noise images or another IDX data set."},
      {"quality.blur_sigma", T::kDouble, "1.5", 0.1, 20, "", "Gaussian blur sigma, in pixels."},
      {"quality.sp_density", T::kDouble, "0.3", 0, 1, "",
       "Share of pixels set to 0 or 1 by salt-and-pepper noise."},
      {"quality.noise_sigma", T::kDouble, "0.3", 0, 100, "",
       "Additive Gaussian noise sigma (pixel scale [0, 1], or feature units)."},
      {"quality.pollute_share", T::kDouble, "0.5", 0, 1, "",
       "Share of a polluted client's feature cells replaced by invalid values."},
      // Model.
      {"model.name", T::kString, "lenet5", 0, 0, "lenet5|cnn|mlp|shufflenet_v2|resnet18",
       "LeNet-5, a small CNN with batch norm, an MLP for tabular data, ShuffleNet v2, or "
       "ResNet-18 (CIFAR form). Not used when model.file is set."},
      {"model.file", T::kString, "", 0, 0, "",
       "A TorchScript module exported from PyTorch (torch.jit.script(net).save(path)) to train "
       "instead of model.name, from its saved parameters. It maps a batch shaped like the data to "
       "[n, classes] (or [n, targets]). FedProf profiles any layer its forward calls once; FedBN "
       "keeps its BatchNorm submodules local. "
       "Deployment clients need the same file in their own config. See docs/models.md."},
      {"model.width", T::kDouble, "1.0", 0.5, 2, "",
       "ShuffleNet v2 width multiplier: 0.5, 1.0, 1.5 or 2.0."},
      {"model.hidden", T::kString, "64", 0, 0, "", "MLP hidden layer widths, comma-separated."},
      {"model.profile_layer", T::kString, "", 0, 0, "",
       "Layer whose representations are profiled (model.file: any submodule by its dotted path, "
       "e.g. layer4.1.conv2, or LINEAR:input for the input of a Linear layer); empty = the "
       "model's default (the first dense layer; for a model file whose only dense layer is its "
       "classifier, that layer's input)."},
      // Local training.
      {"train.epochs", T::kInt, "5", 1, 10000, "", "Local epochs E per round."},
      {"train.batch_size", T::kInt, "32", 1, 1e6, "", "Local mini-batch size."},
      {"train.lr", T::kDouble, "0.01", 0, 100, "", "Local learning rate in round 1."},
      {"train.lr_decay", T::kDouble, "0.99", 0, 1, "", "Learning rate factor per round."},
      {"train.momentum", T::kDouble, "0.9", 0, 0.999, "", "SGD momentum."},
      {"train.weight_decay", T::kDouble, "0", 0, 1, "", "SGD weight decay."},
      {"train.proximal_mu", T::kDouble, "", 0, 1e3, "",
       "mu of a proximal term mu/2 ||w - w_global||^2 in the local loss (FedProx), with any "
       "strategy; empty = the preset's (fedprox: fedprox.mu, the others: 0)."},
      // Strategy.
      {"strategy.name", T::kString, "fedavg", 0, 0, "fedavg|fedprof|fedavg-rp|fedprox|fedadam|afl|fedbn|cfcfm|clustered",
       "Federated strategy, a preset of selector + aggregator: fedavg (uniform + average), "
       "fedprof (fedprof + average), fedavg-rp (uniform + average, always partial), fedprox "
       "(size + average, proximal term fedprox.mu), fedadam (uniform + fedadam), afl (afl + "
       "average), fedbn (uniform + fedbn), cfcfm (cfcfm + average), clustered (clustered + "
       "average). strategy.selector, strategy.aggregator and train.proximal_mu override it."},
      {"strategy.selector", T::kString, "", 0, 0, "uniform|size|fedprof|afl|cfcfm|clustered",
       "Which clients train each round; empty = the preset's. uniform: K at random; size: by "
       "data size; fedprof: by representation-profile score (fedprof.*); afl: by loss valuation "
       "(afl.*); cfcfm: the K fastest; clustered: one per cluster of similar updates "
       "(clustered.*)."},
      {"strategy.aggregator", T::kString, "", 0, 0,
       "average|fedadam|fedbn|median|trimmed_mean|krum|multi_krum",
       "How results become the next global model; empty = the preset's. average: size-weighted "
       "averaging (strategy.aggregation); fedadam: Adam on the server over the average "
       "(fedadam.*); fedbn: averaging, clients keep their batch-norm layers (needs a model with "
       "batch norm). Robust to poisoned models (robust.*, docs/robustness.md): median "
       "(coordinate-wise), trimmed_mean (coordinate-wise), krum and multi_krum; they replace "
       "the average in both aggregation modes."},
      {"strategy.fraction", T::kDouble, "0.1", 1e-9, 1, "",
       "Client fraction C: K = max(1, round(N C)) clients per round."},
      {"strategy.aggregation", T::kString, "full", 0, 0, "full|partial",
       "full: all N clients weighted by |D_k|/|D|, unselected ones contributing the global model; "
       "partial: selected clients weighted by |D_k|/|D_S|."},
      // FedProf (Eqs. 8-13, Alg. 2).
      {"fedprof.alpha", T::kDouble, "10", 0, 1e6, "",
       "alpha of the score exp(-alpha div); 0 = uniform sampling. Papers: 10 (GasTurbine, "
       "EMNIST), 25 (CIFAR-10)."},
      {"fedprof.sampling", T::kString, "without_replacement", 0, 0,
       "without_replacement|with_replacement",
       "K distinct clients by successive weighted draws, or K independent draws as the papers' "
       "random.choices (a client drawn twice trains once). The fedprof selector's alone; the "
       "others ignore it."},
      {"fedprof.reference", T::kString, "holdout", 0, 0, "holdout|test|client",
       "Reference set D_V: the held-out share of the training data (data.holdout_share), the "
       "test set, or one client's data (fedprof.reference_client)."},
      {"fedprof.reference_client", T::kInt, "0", 0, 1e7, "",
       "The client whose data is D_V when fedprof.reference = client."},
      {"fedprof.secure_matching", T::kString, "none", 0, 0, "none|paillier",
       "paillier: clients send Enc(q div) under the server's Paillier key instead of their "
       "profile, so the server learns the divergence and nothing else (App. C.2)."},
      {"fedprof.paillier_bits", T::kInt, "2048", 2048, 3072, "",
       "Paillier key size for secure matching, in bits: 2048, or 3072 for longer-term security "
       "(any multiple of 256 in between)."},
      // Baselines; defaults from each method's paper.
      {"fedprox.mu", T::kDouble, "0.01", 0, 1e3, "",
       "The fedprox preset's proximal weight mu (Li et al. 2020 tune it in {0.001, 0.01, 0.1, "
       "1}); train.proximal_mu overrides it."},
      {"fedadam.server_lr", T::kDouble, "0.01", 0, 1e3, "",
       "FedAdam server learning rate eta (Reddi et al. 2021)."},
      {"fedadam.beta1", T::kDouble, "0.9", 0, 0.999999, "", "FedAdam first-moment decay."},
      {"fedadam.beta2", T::kDouble, "0.99", 0, 0.999999, "", "FedAdam second-moment decay."},
      {"fedadam.tau", T::kDouble, "0.001", 1e-12, 10, "", "FedAdam adaptivity tau."},
      {"clustered.sketch_dim", T::kInt, "1024", 16, 1e6, "",
       "Clustered sampling: clients' updates are compared through count sketches of this size."},
      {"afl.drop_share", T::kDouble, "0.75", 0, 1, "",
       "AFL alpha1: share of clients with the lowest valuations left out (Goetz et al. 2019)."},
      {"afl.temperature", T::kDouble, "0.01", 0, 1e3, "",
       "AFL alpha2: selection probability proportional to exp(alpha2 * valuation)."},
      {"afl.random_share", T::kDouble, "0.1", 0, 1, "",
       "AFL alpha3: share of the K clients picked uniformly at random."},
      // Robust aggregation (docs/robustness.md).
      {"robust.trim_share", T::kDouble, "0.2", 0, 0.499, "",
       "trimmed_mean: share beta of each coordinate's values cut from each end (floor(beta n) "
       "of n); tolerates up to that share of poisoned models (Yin et al. 2018)."},
      {"robust.byzantine", T::kInt, "", 0, 1e6, "",
       "krum, multi_krum: poisoned models f tolerated per round; needs more than 2f + 2 "
       "clients per round (Blanchard et al. 2017). Empty = the most each round's n results "
       "allow, floor((n - 3) / 2); a round with too few results for f runs with that most."},
      {"robust.multi_krum_select", T::kInt, "0", 0, 1e7, "",
       "multi_krum: how many of the lowest-scoring models are averaged (m); 0 = n - f."},
      {"robust.max_update_norm", T::kDouble, "0", 0, 1e9, "",
       "Bound on each result's update relative to the global model, ||w_k - theta|| / "
       "||theta||, with any aggregator; 0 = none."},
      {"robust.norm_action", T::kString, "clip", 0, 0, "clip|refuse",
       "A result beyond robust.max_update_norm: clip (its update scaled down onto the bound) or "
       "refuse (refused like an invalid result, counted in refused)."},
      // Simulated attackers (docs/robustness.md).
      {"attack.share", T::kDouble, "0", 0, 1, "",
       "Share of the clients that poison their models: round(share N) of them, chosen from the "
       "seed; the same in simulate, launch and a client built from the config (fedprof client)."},
      {"attack.kind", T::kString, "sign_flip", 0, 0, "scale|sign_flip",
       "What an attacker returns after training honestly to w: scale: theta + lambda (w - "
       "theta); sign_flip: theta - lambda (w - theta); with its true sample count."},
      {"attack.scale", T::kDouble, "4", 0, 1e6, "", "The attack's lambda."},
      // Cost model (Eqs. 27-34).
      {"cost.speed_mean", T::kDouble, "1.0", 1e-3, 1e3, "", "Client speed s_k mean, GHz."},
      {"cost.speed_sd", T::kDouble, "0.2", 0, 1e3, "", "Client speed s_k standard deviation, GHz."},
      {"cost.bandwidth_mean", T::kDouble, "1.0", 1e-3, 1e6, "", "Downlink bandwidth bw_k mean, MHz."},
      {"cost.bandwidth_sd", T::kDouble, "0.3", 0, 1e6, "", "Bandwidth standard deviation, MHz."},
      {"cost.snr_db", T::kDouble, "10", -30, 100, "", "Signal-to-noise ratio, dB."},
      {"cost.bits_per_sample", T::kDouble, "0", 0, 1e12, "",
       "BPS; 0 = from the data (8 bits per pixel value, 32 per tabular feature)."},
      {"cost.cycles_per_bit", T::kDouble, "400", 0, 1e9, "", "CPB, processor cycles per bit."},
      {"cost.p_trans", T::kDouble, "0.75", 0, 1e3, "", "Transmitter power P_trans, W."},
      {"cost.p_f", T::kDouble, "0.7", 0, 1e3, "", "Baseline processor power P_f, W (at 1 GHz)."},
      {"cost.he_cycles_per_unit", T::kDouble, "0", 0, 1e12, "",
       "Secure matching: client cycles per profiled unit; 0 = measured on x86-64 (4.8e6 for "
       "2048-bit keys, 1.0e7 for 3072)."},
      // Source models for transfer learning (fedprof pretrain).
      {"pretrain.architecture", T::kString, "vgg_small", 0, 0, "vgg_small|lenet5",
       "Architecture fedprof pretrain trains on the data.* set."},
      {"pretrain.epochs", T::kInt, "3", 1, 1e5, "", "Pretraining epochs."},
      {"pretrain.batch_size", T::kInt, "64", 1, 1e6, "", "Pretraining batch size."},
      {"pretrain.lr", T::kDouble, "0.01", 0, 10, "", "Pretraining SGD learning rate (momentum 0.9)."},
      {"pretrain.on_holdout", T::kBool, "false", 0, 0, "",
       "Train on the held-out share (data.holdout_share) instead of the rest, so that a transfer "
       "run with the same data.* options gives its clients the samples the source never saw."},
      // Transfer schemes (fedprof fbftl); FbFTL paper, Section III.
      {"transfer.source_model", T::kString, "", 0, 0, "",
       "Source model: a file from fedprof pretrain, or a TorchScript module exported from PyTorch."},
      {"transfer.cut", T::kString, "fc2", 0, 0, "",
       "Cut layer m_c: the first stage of the task head; the stages before it are the frozen extractor."},
      {"transfer.schemes", T::kString, "FL,FTL_f,FTL_c,SFL,FbFTL", 0, 0, "",
       "Schemes to run, comma-separated: FL, FTL_f, FTL_c, SFL, FbFTL."},
      {"transfer.clients", T::kInt, "500", 1, 1e8, "", "Clients U."},
      {"transfer.samples_per_client", T::kInt, "8", 1, 1e6, "", "Samples per client K_u."},
      {"transfer.fraction", T::kDouble, "0.016", 0, 1, "",
       "Fraction C of clients per iteration (U C clients, at least 1)."},
      {"transfer.epochs", T::kInt, "10", 1, 1e5, "",
       "Epochs of the gradient schemes (FL, FTL_f, FTL_c, SFL); an epoch selects every client once."},
      {"transfer.head_epochs", T::kInt, "100", 1, 1e5, "",
       "FbFTL: most epochs the server trains the head on the uploaded features."},
      {"transfer.patience", T::kInt, "10", 1, 1e5, "",
       "FbFTL: stop after this many epochs without a better validation accuracy."},
      {"transfer.refit", T::kBool, "false", 0, 0, "",
       "FbFTL: after early stopping, train a fresh head on every uploaded sample (validation "
       "split included) for the epochs the validation chose; that head is kept."},
      {"transfer.validation_share", T::kDouble, "0.1", 0, 0.9, "",
       "FbFTL: share of the uploaded samples the server keeps for validation (early stopping)."},
      {"transfer.batch_size", T::kInt, "64", 1, 1e6, "", "FbFTL: head training batch size."},
      {"transfer.lr", T::kDouble, "0.01", 0, 10, "", "SGD learning rate (every scheme)."},
      {"transfer.momentum", T::kDouble, "0.9", 0, 0.999, "", "SGD momentum."},
      {"transfer.weight_decay", T::kDouble, "0.0005", 0, 1, "", "SGD weight decay."},
      {"transfer.sample_share", T::kDouble, "1", 0, 1, "",
       "Share of each client's samples it uses (seeded); the data-insufficiency experiment."},
      {"transfer.keep_ratio", T::kDouble, "1", 1e-9, 1, "",
       "Top-k sparsification S_r of uploads: share r of elements kept (Eq. 22)."},
      {"transfer.bits", T::kInt, "32", 1, 32, "", "Quantisation Q_q of uploads: q bits per value."},
      {"transfer.quantizer", T::kString, "minmax", 0, 0, "minmax|symmetric",
       "Q_q's levels: minmax (2^q between the vector's min and max, the paper's) or symmetric "
       "(2^q-1 over [-max|v|, max|v|], so 0 is a level)."},
      {"transfer.block_loss", T::kDouble, "0", 0, 0.999, "",
       "Block loss rate BLR; a packet of transfer.blocks_per_packet blocks is lost with Eq. 18's PLR."},
      {"transfer.blocks_per_packet", T::kInt, "1", 1, 1e6, "",
       "Blocks n_b per packet: FbFTL samples per packet; a gradient upload is one packet."},
      {"transfer.retransmissions", T::kInt, "0", 0, 100, "",
       "Retransmissions n_r of a lost packet (Eq. 19); a packet still lost is dropped."},
      {"transfer.dp_noise", T::kDouble, "0", 0, 1e6, "",
       "Noise multiplier sigma of the Gaussian noise on uploads; 0 = no differential privacy."},
      {"transfer.dp_clip", T::kDouble, "1", 1e-9, 1e9, "",
       "Clipping norm S: each uploaded vector is scaled to L2 norm at most S, noise sd sigma S."},
      {"transfer.dp_form", T::kString, "clipped", 0, 0, "clipped|paper",
       "FbFTL noise: clipped (norm S, provable) or paper (sd sigma max|z-z'|/K over the client's samples)."},
      {"transfer.dp_delta", T::kDouble, "1e-6", 1e-15, 0.5, "", "delta of the reported (epsilon, delta)."},
      // Evaluation and reporting.
      {"eval.every", T::kInt, "1", 1, 1e7, "", "Evaluate the global model every n rounds (and the last)."},
      {"eval.batch_size", T::kInt, "128", 1, 1e7, "", "Evaluation batch size."},
      {"eval.federated_every", T::kInt, "0", 0, 1e7, "",
       "Federated evaluation every n rounds (and the last); 0 = none. A share of the available "
       "clients evaluates the global model on its own data; metrics.csv gains fed_clients, "
       "fed_accuracy and fed_loss (weighted by sample counts), evaluation.csv each client's figures."},
      {"eval.federated_fraction", T::kDouble, "0.1", 1e-9, 1, "",
       "Share of the available clients asked for a federated evaluation (at least one)."},
      {"report.target", T::kDouble, "0", 0, 1, "",
       "Accuracy (R^2 for regression) target for rounds/time/energy-to-target; 0 = none."},
      {"report.progress", T::kBool, "true", 0, 0, "", "Print a progress line per round."},
      {"report.per_client_limit", T::kInt, "10000", 0, 1e7, "",
       "Outputs with a column or bar per client (scores.csv, scores.png, selection.png) are "
       "written only for populations up to this size."},
      // Deployment (fedprof server / client over gRPC).
      {"deploy.min_clients", T::kInt, "0", 0, 1e7, "",
       "Clients that must have registered before round 1; 0 = all clients.count."},
      {"deploy.start_timeout_s", T::kDouble, "300", 1, 1e6, "",
       "Longest wait for deploy.min_clients at the start (and for any client to be available "
       "later); past it the server stops with an error."},
      {"deploy.round_timeout_s", T::kDouble, "600", 0.1, 1e7, "",
       "Round deadline: a selected client with no result by then counts as timed out."},
      {"deploy.min_results", T::kInt, "1", 0, 1e7, "",
       "Quorum: a round with fewer usable results selects more clients among those not yet "
       "asked, up to deploy.round_attempts attempts; then the server stops (resume with "
       "--resume). 0 = none."},
      {"deploy.round_attempts", T::kInt, "3", 1, 1000, "", "Attempts at reaching the quorum per round."},
      {"deploy.heartbeat_s", T::kDouble, "2", 0.05, 3600, "", "Interval of the clients' heartbeats."},
      {"deploy.heartbeat_timeout_s", T::kDouble, "10", 0.1, 1e5, "",
       "A client silent for this long has left: it drops out of its round and is not selected "
       "until it is back."},
      {"deploy.chunk_kb", T::kInt, "1024", 1, 3072, "",
       "Models travel in chunks of this many KiB, below gRPC's 4 MiB message limit."},
      {"deploy.max_samples", T::kInt, "1000000", 1, 2147483647, "",
       "Largest sample count (aggregation weight) a client may claim at registration."},
      // Distributed simulation (torchrun environment, fedprof launch).
      {"dist.timeout_s", T::kDouble, "1800", 1, 1e6, "",
       "Distributed simulation: the longest any rank waits for another (rendezvous, a command, "
       "a client's result); past it, or when a rank is lost, every rank ends with an error "
       "naming it. Must exceed the slowest client's training and rank 0's evaluation."},
  };
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

const char* TypeName(OptionType t) {
  switch (t) {
    case OptionType::kInt: return "int";
    case OptionType::kDouble: return "float";
    case OptionType::kBool: return "bool";
    case OptionType::kString: return "string";
  }
  return "";
}

std::string FormatBound(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) <= kMaxInt) {
    return std::to_string(static_cast<long long>(v));
  }
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

}  // namespace

const std::vector<OptionSpec>& AllOptions() {
  static const std::vector<OptionSpec> table = MakeTable();
  return table;
}

const OptionSpec* FindOption(const std::string& name) {
  for (const auto& o : AllOptions()) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

std::string NearestOption(const std::string& name) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& o : AllOptions()) {
    const size_t d = EditDistance(name, o.name);
    if (d < best_d) {
      best_d = d;
      best = o.name;
    }
  }
  return best;
}

bool MayBeEmpty(const OptionSpec& option) { return *option.default_value == '\0'; }

std::string ValidValues(const OptionSpec& o) {
  const std::string or_empty = MayBeEmpty(o) ? " or empty" : "";
  switch (o.type) {
    case OptionType::kInt:
    case OptionType::kDouble:
      return "[" + FormatBound(o.min) + ", " + FormatBound(o.max) + "]" + or_empty;
    case OptionType::kBool: return "true|false";
    case OptionType::kString: return *o.choices ? o.choices + or_empty : "text";
  }
  return "";
}

bool MayChangeOnResume(const std::string& name) {
  return name == "rounds" || name == "threads" || name == "report.progress" ||
         name == "dist.timeout_s" || name.rfind("deploy.", 0) == 0;
}

std::string OptionsMarkdown() {
  std::ostringstream md;
  md << "| option | type | default | valid | description |\n|---|---|---|---|---|\n";
  for (const auto& o : AllOptions()) {
    std::string valid = ValidValues(o);
    std::replace(valid.begin(), valid.end(), '|', ',');
    std::string description;
    for (const char* c = o.description; *c; ++c) description += *c == '|' ? "\\|" : std::string(1, *c);
    md << "| `" << o.name << "` | " << TypeName(o.type) << " | `" << o.default_value << "` | "
       << valid << " | " << description << " |\n";
  }
  return md.str();
}

}  // namespace fedprof
