#include "fedprof/transport/secure_aggregation.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/rng.h"
#include "fedprof/protocol/wire.h"
#include "fedprof/secagg/in_process.h"

namespace fedprof {

SecureAggregationOptions SecureAggregationFrom(const RunOptions& o) {
  SecureAggregationOptions s;
  // Under "none" the tolerance still says what a client would accept.
  if (o.secagg.protocol != "none") s.protocol = secagg::ParseProtocol(o.secagg.protocol);
  s.tolerance.dropout = o.secagg.dropout;
  s.tolerance.corrupt = o.secagg.corrupt;
  s.tolerance.security_bits = static_cast<int>(o.secagg.security_bits);
  s.tolerance.correctness_bits = static_cast<int>(o.secagg.correctness_bits);
  s.tolerance.min_clients = static_cast<int>(o.secagg.min_clients);
  s.neighbors = static_cast<int>(o.secagg.neighbors);
  s.threshold = static_cast<int>(o.secagg.threshold);
  // The colluders are counted among the whole population: the server may
  // invite all of its own into one session. A deployment counts them among
  // its roster (run/deployment.cc).
  s.tolerance.fleet = static_cast<int>(o.secagg.fleet > 0 ? o.secagg.fleet : o.clients.count);
  s.drop_after_masking = o.secagg.drop_after_masking;
  s.seed = static_cast<uint64_t>(o.seed);
  s.client_noise = ParseNoiseKind(o.dp.noise);
  s.key_dir = o.dp.key_dir;
  s.distributed_dp = o.dp.mode == "distributed";
  s.progress = o.report.progress;
  return s;
}

namespace {

std::optional<secagg::RoundParams> ParamsOf(const SecureAggregationOptions& options, int invited) {
  try {
    return secagg::ParamsFor(options.protocol, invited, options.tolerance, options.neighbors,
                             options.threshold);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

secagg::Tolerance ClientTolerance(const RunOptions& run, int roster) {
  secagg::Tolerance tolerance = SecureAggregationFrom(run).tolerance;
  tolerance.fleet = std::max<int>(roster, static_cast<int>(run.secagg.fleet));
  return tolerance;
}

int FewestInSum(const SecureAggregationOptions& options, int invited) {
  const auto params = ParamsOf(options, invited);
  return params ? params->min_survivors : 0;
}

int FewestHonestInSum(const SecureAggregationOptions& options, int invited) {
  const auto params = ParamsOf(options, invited);
  return params ? std::max(0, params->min_survivors - params->corrupt) : 0;
}

int FewestInvited(const SecureAggregationOptions& options, int most) {
  for (int n = std::max(2, options.tolerance.min_clients); n <= most; ++n) {
    if (FewestHonestInSum(options, n) > 0) return n;
  }
  return 0;
}
namespace {

// `count` of `ids`, drawn without replacement from the round's stream.
std::set<int64_t> DrawDropouts(const std::vector<int64_t>& ids, size_t count, uint64_t seed,
                               int64_t round) {
  std::vector<int64_t> pool = ids;
  Rng rng = MakeRng(seed, Stream::kSecAggDropouts, {static_cast<uint64_t>(round)});
  std::set<int64_t> drawn;
  for (size_t i = 0; i < count && i < pool.size(); ++i) {
    const size_t j = i + static_cast<size_t>(UniformIndex(rng, pool.size() - i));
    std::swap(pool[i], pool[j]);
    drawn.insert(pool[i]);
  }
  return drawn;
}

}  // namespace

SecureAggregationTransport::SecureAggregationTransport(Transport& inner,
                                                       SecureAggregationOptions options)
    : ForwardingTransport(inner),
      options_(std::move(options)),
      run_id_(secagg::RandomBytes(secagg::kKeyBytes)) {}

void SecureAggregationTransport::Fit(const std::vector<ClientInstructions>& tasks,
                                     const ResultSink& sink) {
  // Each accepted model, as its client's input: the words its term adds to
  // the exact sum. The sink sees the result without it.
  std::map<int64_t, std::vector<secagg::Word>> inputs;
  std::map<int64_t, size_t> index_of;
  size_t length = 0;
  inner_.Fit(tasks, Transport::ResultSink([&](size_t index, FitResult&& r) -> std::string {
    const FitInstructions& task = tasks[index].instructions;
    if (!r.ok || r.params.empty() || r.summed) {
      if (options_.distributed_dp) KeepOnlyWhatTheTaskAsks(task, true, &r);
      return sink(index, std::move(r));
    }
    std::vector<secagg::Word> words;
    try {
      const std::string& key =
          options_.client_noise == NoiseKind::kKeyed && task.ddg ? ClientKey(r.client_id) : std::string();
      const auto noise = ClientNoise(options_.client_noise, key, options_.seed, task, r.client_id);
      words = SessionInput(task, r, *noise);
    } catch (const Error& e) {
      // An honest client cannot encode such a model; it reports the failure.
      FitResult failed;
      failed.client_id = r.client_id;
      failed.cost = r.cost;
      failed.error = std::string("its model cannot be securely aggregated: ") + e.what();
      return sink(index, std::move(failed));
    }
    r.params = FlatParams();
    r.summed = true;
    KeepOnlyWhatTheTaskAsks(task, options_.distributed_dp, &r);
    const int64_t id = r.client_id;
    std::string why = sink(index, std::move(r));
    if (why.empty()) {
      length = words.size();
      inputs[id] = std::move(words);
      index_of[id] = index;
    }
    return why;
  }));
  if (inputs.empty()) return;

  std::vector<int64_t> ids;
  for (const auto& entry : inputs) ids.push_back(entry.first);
  // Each client's long-term signing key, as a deployment's PKI provides it:
  // here every key is made in this one process, which models the protocol's
  // cost and exactness, not its privacy (docs/secagg.md).
  std::map<int64_t, secagg::Bytes> signing_keys, verify_keys;
  for (int64_t id : ids) {
    secagg::KeyPair key = secagg::GenerateEd25519();
    signing_keys[id] = std::move(key.secret);
    verify_keys[id] = std::move(key.public_key);
  }
  const int64_t round = tasks.front().instructions.round;
  secagg::Dropouts dropouts;
  dropouts.after_masked_input =
      DrawDropouts(ids, static_cast<size_t>(options_.drop_after_masking * static_cast<double>(ids.size())),
                   options_.seed, round);

  secagg::SessionReport report;
  SessionOutcome outcome;
  outcome.clients = ids;
  const auto start = std::chrono::steady_clock::now();
  try {
    const secagg::SessionConfig config =
        SessionConfigFor(options_, run_id_, round, length, std::move(verify_keys),
                         SessionWordBits(tasks.front().instructions));
    report = secagg::RunInProcess(config, signing_keys, inputs, dropouts);
    outcome.finished = true;
    outcome.result = report.result;
    outcome.excluded = report.excluded;
    outcome.aborted = report.aborted;
  } catch (const Error& e) {
    outcome.failure = e.what();
  }
  inputs.clear();
  HandOverSession(outcome, index_of, tasks.front().instructions, sink);
  if (!outcome.finished) return;

  SecureAggregationCost cost;
  cost.clients = static_cast<int>(ids.size());
  cost.survivors = static_cast<int>(report.result.survivors.size());
  cost.neighbors = report.params.graph.neighbors;
  cost.threshold = report.params.graph.threshold;
  for (const auto& [id, party] : report.clients) {
    (void)id;
    cost.client_bytes_sent += static_cast<double>(party.bytes_sent);
    cost.client_bytes_received += static_cast<double>(party.bytes_received);
    cost.client_seconds += party.seconds;
  }
  const double n = static_cast<double>(report.clients.size());
  cost.client_bytes_sent /= n;
  cost.client_bytes_received /= n;
  cost.client_seconds /= n;
  cost.server_bytes_received = report.server.bytes_received;
  cost.server_seconds = report.server.seconds;
  cost.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sessions_.push_back(cost);
  if (options_.progress) LogProgress(DescribeSession(round, options_.protocol, cost));
}

const std::string& SecureAggregationTransport::ClientKey(int64_t id) {
  auto it = client_keys_.find(id);
  if (it == client_keys_.end()) {
    if (options_.key_dir.empty()) {
      throw Error("dp.noise = keyed: dp.key_dir names no directory of the clients' keys");
    }
    it = client_keys_.emplace(id, ReadNoiseKey(ClientNoiseKeyPath(options_.key_dir, id))).first;
  }
  return it->second;
}

SessionLoad SecureAggregationLoad(const SecureAggregationOptions& options, int clients, size_t length,
                                  int word_bits) {
  const secagg::RoundParams params =
      secagg::ParamsFor(options.protocol, clients, options.tolerance, options.neighbors, options.threshold);
  const int k = params.graph.neighbors;
  const secagg::ClientTraffic traffic =
      secagg::TrafficOfOneClient(clients, k, params.quorum, length, secagg::kChunkWords, word_bits);
  SessionLoad load;
  load.upload_bits = 8.0 * static_cast<double>(traffic.sent);
  load.download_bits = 8.0 * static_cast<double>(traffic.received);
  load.cycles = kMaskCyclesPerWord * static_cast<double>(k + 1) * static_cast<double>(length);
  return load;
}

secagg::SessionConfig SessionConfigFor(const SecureAggregationOptions& options, const secagg::Bytes& run_id,
                                       int64_t round, size_t length,
                                       std::map<int64_t, secagg::Bytes> verify_keys, int word_bits) {
  secagg::SessionConfig config;
  config.run_id = run_id;
  config.round = round;
  config.nonce = secagg::RandomBytes(secagg::kKeyBytes);
  config.protocol = options.protocol;
  config.length = length;
  config.word_bits = word_bits;
  config.verify_keys = std::move(verify_keys);
  config.tolerance = options.tolerance;
  config.neighbors = options.neighbors;
  config.threshold = options.threshold;
  config.graph = secagg::ParamsFor(config).graph;
  return config;
}

namespace {

// What `asked` wants that `reads` does not, in words, or "".
std::string UnreadReport(const ReportRequest& asked, const ClientReads& reads) {
  if (asked.profile && !reads.profile) return asked.public_key ? "the divergence of its profile" : "its profile";
  if (asked.loss && !reads.loss) return "the received model's loss on its data";
  if (asked.train_loss && !reads.train_loss) return "its training loss";
  if (asked.evaluate && !reads.evaluate) return "its evaluation of the model";
  if (asked.sketch_dim > 0 && asked.sketch_dim != reads.sketch_dim) return "a sketch of its update";
  return "";
}

}  // namespace

std::string RefusedTask(const FitInstructions& task, const secagg::SessionConfig* setup,
                        const SecAggPolicy& policy) {
  const std::string prefix = "refused a task that would send ";
  if (task.ddg && !policy.distributed_dp) {
    return prefix + "its update in an encoding of the server's: this client's configuration does not set "
                    "dp.mode = distributed, from which a client computes its own";
  }
  if (!policy.required) return "";
  if (policy.reads) {
    const std::string unread = UnreadReport(task.report, *policy.reads);
    if (!unread.empty()) {
      return prefix + unread + ": this client's own strategy (its config's strategy.*, eval.federated_every) "
                               "does not read it";
    }
  }
  const std::string reason = ": this client's configuration requires secure aggregation (secagg.protocol)";
  if (task.train.epochs > 0 && setup == nullptr) return prefix + "its model in the clear" + reason;
  if (task.report.sketch_dim > 0) return prefix + "a sketch of its update" + reason;
  if (policy.distributed_dp) {
    const std::string dp = ": this client's configuration requires distributed DP (dp.mode = distributed)";
    if (task.report.loss || task.report.train_loss) return prefix + "a loss on its data in the clear" + dp;
    if (task.report.evaluate) return prefix + "its evaluation of the model in the clear" + dp;
    if (task.report.profile && !policy.dp_clear_profiles) {
      return prefix + (task.report.public_key ? "the divergence of its profile" : "its profile") +
             " in the clear" + dp + " (dp.clear_profiles = true on this client allows it)";
    }
    if (task.train.epochs > 0) {
      if (!task.ddg) return prefix + "its update without noise" + dp;
      const auto invited = static_cast<int64_t>(setup->verify_keys.size());
      SecureAggregationOptions own;
      own.protocol = setup->protocol;
      own.tolerance = policy.tolerance;
      own.neighbors = policy.neighbors;
      own.threshold = policy.threshold;
      const std::string mismatch =
          DdgMismatch(*task.ddg, policy.dp, invited, FewestHonestInSum(own, static_cast<int>(invited)));
      if (!mismatch.empty()) return prefix + "its update in an encoding of the server's: " + mismatch + dp;
    }
  }
  if (task.report.profile && !task.report.public_key && !policy.clear_profiles) {
    return prefix + "its profile in the clear" + reason +
           " (fedprof.secure_matching = paillier keeps it encrypted; secagg.clear_profiles = true "
           "allows it)";
  }
  return "";
}

void KeepOnlyWhatTheTaskAsks(const FitInstructions& task, bool distributed, FitResult* r) {
  r->within_clip = false;
  if (!task.report.train_loss || distributed) {
    r->train_loss = 0;
    r->train_loss_rms = 0;
  }
  if (distributed) {
    r->num_samples = 1;
    r->pre_train_loss = 0;
    r->eval_samples = r->eval_correct = 0;
    r->eval_loss = 0;
  }
}

std::map<int64_t, std::string> SessionOutcome::Lost() const {
  std::map<int64_t, std::string> lost;
  for (int64_t id : clients) {
    if (std::binary_search(result.survivors.begin(), result.survivors.end(), id)) continue;
    const auto left = aborted.find(id);
    const auto out = excluded.find(id);
    lost[id] = left != aborted.end()  ? "it left secure aggregation: " + left->second
               : out != excluded.end() ? "secure aggregation excluded it: " + out->second
                                       : std::string("its masked model never reached secure aggregation");
  }
  return lost;
}

size_t SessionLength(const FitInstructions& task, size_t num_params) {
  return task.ddg ? task.ddg->padded() : num_params + 1;
}

int SessionWordBits(const FitInstructions& task) { return task.ddg ? task.ddg->bits : 128; }

std::vector<secagg::Word> SessionInput(const FitInstructions& task, const FitResult& result,
                                       RandomBits& noise) {
  if (!task.ddg) return ModelSum::TermWords(result.params, result.num_samples);
  if (!task.global) throw Error("distributed DP: a task without its global model");
  const std::vector<uint64_t> encoded = DdgEncode(*task.ddg, *task.global, result.params, noise);
  return std::vector<secagg::Word>(encoded.begin(), encoded.end());
}

std::unique_ptr<RandomBits> ClientNoise(NoiseKind kind, const std::string& key, uint64_t seed,
                                        const FitInstructions& task, int64_t client) {
  NoiseSource source;
  source.kind = kind;
  source.key = key;
  const std::string context =
      kind == NoiseKind::kKeyed ? TaskDigest(task) + " client " + std::to_string(client) : std::string();
  return NoiseBits(source, "client", context, DdgClientRng(seed, task.round, client));
}

ModelSum SessionSum(const FitInstructions& task, const std::vector<secagg::Word>& words, int64_t count) {
  const std::string origin = "the secure aggregation's sum";
  if (!task.ddg) return ModelSum::FromTermWords(words, count, origin);
  if (!task.global) throw Error("distributed DP: a round without its global model");
  // The session's words are b bits (dp.bits is whole bytes): the sum is
  // exactly the sum modulo 2^b.
  const std::vector<uint64_t> low(words.begin(), words.end());
  return ModelSum::FromUpdateSum(*task.global, DdgDecode(*task.ddg, low), count, origin);
}

void HandOverSession(const SessionOutcome& outcome, const std::map<int64_t, size_t>& index_of,
                     const FitInstructions& task, const Transport::ResultSink& sink) {
  const auto indices_of = [&](const std::vector<int64_t>& clients) {
    std::vector<size_t> indices;
    for (int64_t id : clients) indices.push_back(index_of.at(id));
    return indices;
  };
  if (outcome.clients.empty()) return;
  if (!outcome.finished) {
    sink.Sum(indices_of(outcome.clients), nullptr, "secure aggregation failed: " + outcome.failure);
    return;
  }
  const std::vector<int64_t>& survivors = outcome.result.survivors;
  if (!survivors.empty()) {
    try {
      const ModelSum total = SessionSum(task, outcome.result.sum, static_cast<int64_t>(survivors.size()));
      sink.Sum(indices_of(survivors), &total);
    } catch (const Error& e) {
      sink.Sum(indices_of(survivors), nullptr, e.what());
    }
  }
  for (const auto& [id, why] : outcome.Lost()) sink.Sum({index_of.at(id)}, nullptr, why);
}

std::string DescribeSession(int64_t round, secagg::Protocol protocol, const SecureAggregationCost& cost) {
  char line[240];
  std::snprintf(line, sizeof(line),
                "round %lld: %s of %d clients (k = %d, t = %d): %d models in the sum, "
                "%.2f MB sent per client, server %.2f s of %.2f s",
                static_cast<long long>(round), secagg::ProtocolName(protocol).c_str(), cost.clients,
                cost.neighbors, cost.threshold, cost.survivors, cost.client_bytes_sent / 1e6,
                cost.server_seconds, cost.wall_seconds);
  return line;
}

}  // namespace fedprof
