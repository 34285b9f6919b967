#include "fedprof/protocol/wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

#include "federation.pb.h"
#include "fedprof/core/error.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/text.h"

namespace fedprof {

namespace pb = federation::v1;

static_assert(sizeof(float) == 4 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire carries little-endian float32, copied as is");

std::string ProtocolMismatch(uint32_t theirs, const std::string& peer) {
  if (theirs == kProtocolVersion) return "";
  return peer + " speaks protocol version " + std::to_string(theirs) + ", this side version " +
         std::to_string(kProtocolVersion);
}

std::string TaskDigest(const FitInstructions& t) {
  Sha256Stream digest;
  const auto add = [&digest](const auto& v) { digest.Update(&v, sizeof(v)); };
  const std::string label = "fedprof task";
  digest.Update(label.data(), label.size());
  add(t.round);
  add(t.model_version);
  add(t.seed);
  add(t.train.epochs);
  add(t.train.batch_size);
  add(t.train.lr);
  add(t.train.momentum);
  add(t.train.weight_decay);
  add(t.objective.prox_mu);
  add(t.objective.keep_local_batch_norm);
  const uint64_t algorithm_name = t.objective.algorithm.size();
  add(algorithm_name);
  digest.Update(t.objective.algorithm.data(), algorithm_name);
  add(t.objective.scaffold_correct);
  add(t.objective.feddyn_alpha);
  add(t.objective.moon_mu);
  add(t.objective.moon_tau);
  add(t.clip_norm);
  add(t.report.profile);
  add(t.report.loss);
  add(t.report.train_loss);
  add(t.report.evaluate);
  add(t.report.sketch_dim);
  const bool encoded = t.ddg.has_value();
  add(encoded);
  if (encoded) {
    add(t.ddg->noise_sd);
    add(t.ddg->granularity);
    add(t.ddg->bits);
    add(t.ddg->rounding_beta);
    add(t.ddg->rotation_seed);
    add(t.ddg->dim);
  }
  const uint64_t values = t.global ? t.global->size() : 0;
  add(values);
  if (values > 0) digest.Update(t.global->data(), values * sizeof(float));
  return ToHex(digest.Finish());
}

void ToWire(const FitInstructions& ins, int64_t task_id, int64_t num_params, pb::TaskHeader* out) {
  out->set_protocol_version(kProtocolVersion);
  out->set_task_id(task_id);
  out->set_round(ins.round);
  out->set_model_version(ins.model_version);
  out->set_num_params(num_params);
  out->set_profile(ins.report.profile);
  out->set_report_loss(ins.report.loss);
  out->set_report_train_loss(ins.report.train_loss);
  out->set_prox_mu(ins.objective.prox_mu);
  out->set_keep_local_batch_norm(ins.objective.keep_local_batch_norm);
  out->set_algorithm(ins.objective.algorithm);
  out->set_scaffold_correct(ins.objective.scaffold_correct);
  out->set_feddyn_alpha(ins.objective.feddyn_alpha);
  out->set_moon_mu(ins.objective.moon_mu);
  out->set_moon_tau(ins.objective.moon_tau);
  out->set_sketch_dim(ins.report.sketch_dim);
  out->set_evaluate(ins.report.evaluate);
  out->set_clip_norm(ins.clip_norm);
  if (ins.ddg) {
    pb::DistributedDpEncoding* e = out->mutable_distributed_dp();
    e->set_noise_sd(ins.ddg->noise_sd);
    e->set_granularity(ins.ddg->granularity);
    e->set_bits(ins.ddg->bits);
    e->set_rounding_beta(ins.ddg->rounding_beta);
    e->set_rotation_seed(ins.ddg->rotation_seed);
  }
  pb::TrainSettings* t = out->mutable_train();
  t->set_epochs(ins.train.epochs);
  t->set_batch_size(ins.train.batch_size);
  t->set_lr(ins.train.lr);
  t->set_momentum(ins.train.momentum);
  t->set_weight_decay(ins.train.weight_decay);
  out->set_seed(ins.seed);
  if (ins.report.public_key) out->set_public_key(*ins.report.public_key);
  if (ins.report.secure_reference) {
    out->set_secure_reference(*ins.report.secure_reference);
  }
}

FitInstructions FromWire(const pb::TaskHeader& h) {
  const std::string mismatch = ProtocolMismatch(h.protocol_version(), "the server");
  if (!mismatch.empty()) throw Error(mismatch);
  if (h.num_params() < 0 || static_cast<uint64_t>(h.num_params()) > kMaxModelValues) {
    throw Error("task: model of " + std::to_string(h.num_params()) + " values, expected 0.." +
                std::to_string(kMaxModelValues));
  }
  if (h.sketch_dim() < 0 || static_cast<size_t>(h.sketch_dim()) > kMaxSketchDim) {
    throw Error("task: sketch size " + std::to_string(h.sketch_dim()) + " out of range");
  }
  const pb::TrainSettings& t = h.train();
  if (t.epochs() < 0 || t.batch_size() < 1) {
    throw Error("task: " + std::to_string(t.epochs()) + " epochs of batch " +
                std::to_string(t.batch_size()) + " make no training");
  }
  if (!(h.clip_norm() >= 0 && std::isfinite(h.clip_norm()))) {
    throw Error("task: clip norm " + FormatDouble(h.clip_norm()) + ", expected a finite value >= 0");
  }
  FitInstructions ins;
  ins.clip_norm = h.clip_norm();
  if (h.has_distributed_dp()) {
    const pb::DistributedDpEncoding& e = h.distributed_dp();
    DdgParams p;
    p.clip_norm = h.clip_norm();
    p.noise_sd = e.noise_sd();
    p.granularity = e.granularity();
    p.bits = e.bits();
    p.rounding_beta = e.rounding_beta();
    p.dim = static_cast<size_t>(h.num_params());
    p.rotation_seed = e.rotation_seed();
    try {
      CheckDdgParams(p);
    } catch (const Error& error) {
      throw Error(std::string("task: ") + error.what());
    }
    ins.ddg = p;
  }
  ins.round = h.round();
  ins.model_version = h.model_version();
  ins.report.profile = h.profile();
  ins.report.loss = h.report_loss();
  ins.report.train_loss = h.report_train_loss();
  ins.objective.prox_mu = h.prox_mu();
  ins.objective.keep_local_batch_norm = h.keep_local_batch_norm();
  if (h.algorithm().size() > kMaxAlgorithmNameLength) {
    throw Error("task: a client algorithm name of " + std::to_string(h.algorithm().size()) + " bytes");
  }
  ins.objective.algorithm = h.algorithm();
  ins.objective.scaffold_correct = h.scaffold_correct();
  ins.objective.feddyn_alpha = h.feddyn_alpha();
  ins.objective.moon_mu = h.moon_mu();
  ins.objective.moon_tau = h.moon_tau();
  if (ins.objective.algorithm == "moon" && ins.objective.moon_mu > 0 &&
      !(ins.objective.moon_tau > 0 && std::isfinite(ins.objective.moon_tau) && std::isfinite(ins.objective.moon_mu))) {
    throw Error("task: MOON's mu " + FormatDouble(ins.objective.moon_mu) + " and tau " +
                FormatDouble(ins.objective.moon_tau) + ", expected finite values and tau > 0");
  }
  ins.report.sketch_dim = h.sketch_dim();
  ins.report.evaluate = h.evaluate();
  ins.train.epochs = t.epochs();
  ins.train.batch_size = t.batch_size();
  ins.train.lr = t.lr();
  ins.train.momentum = t.momentum();
  ins.train.weight_decay = t.weight_decay();
  ins.seed = h.seed();
  if (h.public_key().empty() != h.secure_reference().empty()) {
    throw Error("task: a public key without an encrypted reference, or the reverse");
  }
  if (!h.public_key().empty()) {
    ins.report.public_key = std::make_shared<const std::string>(h.public_key());
    ins.report.secure_reference = std::make_shared<const std::string>(h.secure_reference());
  }
  return ins;
}

void ToWire(const FeatureScaling& scaling, pb::FeatureScaling* out) {
  *out->mutable_names() = {scaling.names.begin(), scaling.names.end()};
  *out->mutable_mean() = {scaling.mean.begin(), scaling.mean.end()};
  *out->mutable_sd() = {scaling.sd.begin(), scaling.sd.end()};
}

FeatureScaling FromWire(const pb::FeatureScaling& wire) {
  if (static_cast<size_t>(wire.names_size()) > kMaxFeatures) {
    throw Error("register reply: feature scaling of " + std::to_string(wire.names_size()) + " columns, over " +
                std::to_string(kMaxFeatures));
  }
  FeatureScaling s;
  s.names = {wire.names().begin(), wire.names().end()};
  s.mean = {wire.mean().begin(), wire.mean().end()};
  s.sd = {wire.sd().begin(), wire.sd().end()};
  const std::string problem = FeatureScalingProblem(s);
  if (!problem.empty()) throw Error("register reply: feature scaling: " + problem);
  return s;
}

ModelSpec FromWire(const pb::ModelSpec& m) {
  static const char* const kNames[] = {"lenet5",   "cnn",      "mlp",
                                       "shufflenet_v2", "resnet18", "torchscript"};
  if (std::find(std::begin(kNames), std::end(kNames), m.name()) == std::end(kNames)) {
    throw Error("register reply: model '" + Printable(m.name(), 64) +
                "' is not one of lenet5|cnn|mlp|shufflenet_v2|resnet18|torchscript");
  }
  const bool scripted = m.name() == "torchscript";
  if (scripted != !m.file_sha256().empty() ||
      (scripted && (m.file_sha256().size() != 64 ||
                    m.file_sha256().find_first_not_of("0123456789abcdef") != std::string::npos))) {
    throw Error("register reply: a TorchScript model comes with the SHA-256 of its file, and "
                "only it");
  }
  int64_t values = 1;
  for (int64_t d : m.input_shape()) {
    if (d < 1 || d > (int64_t{1} << 24)) {
      throw Error("register reply: sample dimension " + std::to_string(d) + " outside 1..2^24");
    }
    values *= d;  // both factors at most 2^24: no overflow
    if (values > (int64_t{1} << 24)) break;
  }
  if (m.input_shape_size() < 1 || m.input_shape_size() > 3 || values > (int64_t{1} << 24)) {
    throw Error("register reply: sample shape of " + std::to_string(m.input_shape_size()) +
                " dimensions and " + std::to_string(values) +
                " values, expected 1..3 dimensions of at most 2^24 values");
  }
  if (m.outputs() < 1 || m.outputs() > (int64_t{1} << 20)) {
    throw Error("register reply: " + std::to_string(m.outputs()) + " outputs, expected 1..2^20");
  }
  if (m.hidden_size() > 64) {
    throw Error("register reply: " + std::to_string(m.hidden_size()) +
                " hidden layers, expected at most 64");
  }
  for (int64_t h : m.hidden()) {
    if (h < 1 || h > (int64_t{1} << 20)) {
      throw Error("register reply: hidden layer of " + std::to_string(h) +
                  " units, expected 1..2^20");
    }
  }
  if (m.profile_layer().size() > kMaxLayerNameLength) {
    throw Error("register reply: profiled layer name too long");
  }
  if (!(m.width() >= 0.5 && m.width() <= 2)) {  // model.width's range; NaN fails too
    throw Error("register reply: width " + std::to_string(m.width()) + ", expected 0.5..2");
  }
  ModelSpec spec;
  spec.name = m.name();
  spec.input_shape.assign(m.input_shape().begin(), m.input_shape().end());
  spec.outputs = m.outputs();
  spec.hidden.assign(m.hidden().begin(), m.hidden().end());
  spec.profile_layer = m.profile_layer();
  spec.width = m.width();
  spec.file_sha256 = m.file_sha256();
  return spec;
}

void ToWire(const FitResult& r, pb::ResultHeader* out) {
  out->set_protocol_version(kProtocolVersion);
  out->set_client_id(r.client_id);
  out->set_ok(r.ok);
  out->set_error(r.error.substr(0, kMaxErrorLength));
  out->set_num_params(static_cast<int64_t>(r.params.size()));
  out->set_num_samples(r.num_samples);
  out->set_train_loss(r.train_loss);
  out->set_train_loss_rms(r.train_loss_rms);
  out->set_within_clip(r.within_clip);
  out->set_pre_train_loss(r.pre_train_loss);
  if (r.profile) {
    pb::Profile* p = out->mutable_profile();
    p->set_version(r.profile->version);
    p->set_layer(r.profile->layer);
    *p->mutable_mean() = {r.profile->mean.begin(), r.profile->mean.end()};
    *p->mutable_var() = {r.profile->var.begin(), r.profile->var.end()};
  }
  *out->mutable_sketch() = {r.sketch.begin(), r.sketch.end()};
  out->set_cost_time_s(r.cost.time_s);
  out->set_cost_energy_j(r.cost.energy_j);
  out->set_cost_profiling_time_s(r.cost.profiling_time_s);
  out->set_cost_profiling_energy_j(r.cost.profiling_energy_j);
  out->set_timed_out(r.timed_out);
  out->set_encrypted_divergence(r.encrypted_divergence);
  out->set_eval_samples(r.eval_samples);
  out->set_eval_correct(r.eval_correct);
  out->set_eval_loss(r.eval_loss);
  out->set_algorithm_scalar(r.algorithm_scalar);
  out->set_num_algorithm_values(static_cast<int64_t>(r.algorithm_values.size()));
}

FitResult FromWire(const pb::ResultHeader& h) {
  const std::string mismatch = ProtocolMismatch(h.protocol_version(), "the client");
  if (!mismatch.empty()) throw Error(mismatch);
  if (h.num_params() < 0 || static_cast<uint64_t>(h.num_params()) > kMaxModelValues) {
    throw Error("result: model of " + std::to_string(h.num_params()) + " values, expected 0.." +
                std::to_string(kMaxModelValues));
  }
  if (h.sketch_size() > static_cast<int>(kMaxSketchDim)) throw Error("result: sketch too large");
  if (h.error().size() > kMaxErrorLength) throw Error("result: error message too long");
  if (h.encrypted_divergence().size() > kMaxCiphertextBytes) {
    throw Error("result: encrypted divergence of " + std::to_string(h.encrypted_divergence().size()) +
                " bytes, more than any key makes");
  }
  FitResult r;
  r.client_id = h.client_id();
  r.ok = h.ok();
  // The reason ends up in the server's log and errors: one line.
  r.error = Printable(h.error(), kMaxErrorLength);
  r.num_samples = h.num_samples();
  r.train_loss = h.train_loss();
  r.train_loss_rms = h.train_loss_rms();
  r.within_clip = h.within_clip();
  r.pre_train_loss = h.pre_train_loss();
  r.algorithm_scalar = h.algorithm_scalar();  // checked by the algorithm's server half
  if (h.has_profile()) {
    const pb::Profile& p = h.profile();
    if (p.layer().size() > kMaxLayerNameLength) {
      throw Error("result: profile layer name of " + std::to_string(p.layer().size()) +
                  " bytes, over " + std::to_string(kMaxLayerNameLength));
    }
    if (static_cast<size_t>(p.mean_size()) > kMaxProfileUnits ||
        p.mean_size() != p.var_size()) {
      throw Error("result: profile with " + std::to_string(p.mean_size()) + " means and " +
                  std::to_string(p.var_size()) + " variances");
    }
    Profile profile;
    profile.version = p.version();
    profile.layer = p.layer();
    profile.mean.assign(p.mean().begin(), p.mean().end());
    profile.var.assign(p.var().begin(), p.var().end());
    r.profile = std::move(profile);
  }
  r.sketch.assign(h.sketch().begin(), h.sketch().end());
  r.cost.time_s = h.cost_time_s();
  r.cost.energy_j = h.cost_energy_j();
  r.cost.profiling_time_s = h.cost_profiling_time_s();
  r.cost.profiling_energy_j = h.cost_profiling_energy_j();
  r.timed_out = h.timed_out();
  r.encrypted_divergence = h.encrypted_divergence();
  r.eval_samples = h.eval_samples();
  r.eval_correct = h.eval_correct();
  r.eval_loss = h.eval_loss();
  return r;
}

std::string ClaimProblem(int64_t num_samples, double speed_ghz, double bandwidth_mhz,
                         int64_t max_samples) {
  if (num_samples < 1 || num_samples > max_samples) {
    return "claims " + std::to_string(num_samples) + " samples, outside [1, " +
           std::to_string(max_samples) + "] (deploy.max_samples)";
  }
  if (!(speed_ghz >= 0 && speed_ghz < 1e6 && bandwidth_mhz >= 0 && bandwidth_mhz < 1e9)) {
    return "states an impossible speed or bandwidth (NaN, negative or too large)";
  }
  return "";
}

void CheckRelayedIds(const pb::RelaySyncRequest& request, int num_clients) {
  int previous = -1;
  for (const pb::RelayedClient& c : request.clients()) {
    if (c.client_id() <= previous || c.client_id() >= num_clients) {
      throw Error("its clients are not distinct ids of 0.." + std::to_string(num_clients - 1) +
                  " in increasing order");
    }
    previous = c.client_id();
  }
}

std::vector<ClientInstructions> FromWire(const pb::RelayBatchHeader& batch, int num_clients,
                                         std::shared_ptr<const FlatParams> global,
                                         std::map<int, int64_t>* task_ids) {
  std::vector<ClientInstructions> tasks;
  task_ids->clear();
  for (const pb::RelayTask& t : batch.tasks()) {
    const int id = t.client_id();
    if (id < 0 || id >= num_clients || !task_ids->emplace(id, t.header().task_id()).second) {
      throw Error("a task for client " + std::to_string(id) + ", twice or not one of 0.." +
                  std::to_string(num_clients - 1));
    }
    ClientInstructions c;
    c.client_id = id;
    c.instructions = FromWire(t.header());
    c.instructions.global = global;
    tasks.push_back(std::move(c));
  }
  return tasks;
}

void AppendFloats(const std::string& bytes, size_t expected, FlatParams* out) {
  if (bytes.size() % sizeof(float) != 0) {
    throw Error("model chunk of " + std::to_string(bytes.size()) + " bytes is not whole float32s");
  }
  const size_t n = bytes.size() / sizeof(float);
  if (out->size() + n > expected) {
    throw Error("model chunks exceed the " + std::to_string(expected) + " values announced");
  }
  const size_t at = out->size();
  out->resize(at + n);
  if (n > 0) std::memcpy(out->data() + at, bytes.data(), bytes.size());
}

void PutFloats(const FlatParams& params, size_t begin, size_t count, std::string* out) {
  out->assign(reinterpret_cast<const char*>(params.data() + begin), count * sizeof(float));
}

}  // namespace fedprof
