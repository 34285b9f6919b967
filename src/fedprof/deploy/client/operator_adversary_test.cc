// The server's operator as the adversary. A server that follows the
// secure-aggregation protocol to the letter can still pull every lever a
// deployment hands it: the config and its seed, the cohort and its size,
// running a round again, the encoding of the clients' updates, and what a
// result carries in the clear. Here it pulls each against honest clients
// that are the deployment's own client code: each task goes through its
// wire form and the client's checks (FromWire, SetupFromWire,
// RefusedReceivedTask with the client's ledger), each model through
// SecAggParticipation into a real session with SecAggServer. After each
// attack the harness computes what the adversary would (an un-noised sum
// of the updates, a client's update norm) and checks that it is not there,
// and that every honest client the attack needs refuses in one line.
// (Split survivor views at small n are in secagg/adversary_test.cc; a
// relay's certificate at the server's address in tests/deploy_test.cc.)

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "federation.pb.h"
#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"
#include "fedprof/deploy/client/result.h"
#include "fedprof/deploy/client/secagg.h"
#include "fedprof/deploy/server/secagg_sessions.h"
#include "fedprof/privacy/client_ledger.h"
#include "fedprof/privacy/distributed_dp.h"
#include "fedprof/protocol/wire.h"
#include "fedprof/secagg/server.h"
#include "fedprof/secagg/wire.h"

namespace fedprof {
namespace {

namespace pb = federation::v1;

constexpr size_t kDim = 1000;  // model values (D = 1024)
constexpr double kClip = 0.5;
constexpr double kZ = 1.0;
constexpr uint64_t kSeed = 1;  // the config's seed, which the operator knows

// What an honest client of the federation holds: its keys, its own policy
// (from its own config), its ledger, and the update it trains.
struct HonestClient {
  int64_t id = 0;
  secagg::Bytes signing_key, verify_key;
  SecAggPolicy policy;
  std::unique_ptr<ClientLedger> ledger;
  FlatParams update;  // w − θ, within the clip norm
};

// Each honest client's own settings: distributed DP at z = 1, C = 0.5,
// b = 32; SecAgg+ with the default tolerance, the colluders counted among
// `fleet` clients; noise as `noise` says (keyed: a key of its own).
SecAggPolicy PolicyOf(int64_t id, int fleet, NoiseKind noise) {
  SecAggPolicy p;
  p.required = true;
  p.tolerance.min_clients = 10;
  p.tolerance.fleet = fleet;
  p.distributed_dp = true;
  p.dp.noise_multiplier = kZ;
  p.dp.clip_norm = kClip;
  p.dp.bits = 32;
  p.dp.rounding_beta = 0;  // one rounding draw per value: the seeded noise is then exactly regenerable
  p.noise.kind = noise;
  p.noise.key = std::string(32, static_cast<char>('A' + id));
  p.dp_seed = kSeed;
  return p;
}

// What one round did: each honest client's refusal ("" took part), and the
// session's decoded noised sum with the un-noised sum of the same clients'
// updates (empty when no session finished).
struct Outcome {
  std::map<int64_t, std::string> refused;
  std::vector<double> noised, clean;
  int in_sum = 0;
};

class Operator {
 public:
  // `n` honest clients 0..n-1 with their policies; each trains `update_norm`
  // of update in its own direction.
  Operator(int n, int fleet, NoiseKind noise, double budget = 0) {
    Rng rng(17);
    global_ = std::make_shared<FlatParams>(kDim);
    for (float& v : *global_) v = static_cast<float>(0.1 * StandardNormal(rng));
    for (int64_t id = 0; id < n; ++id) {
      HonestClient c;
      c.id = id;
      const secagg::KeyPair key = secagg::GenerateEd25519();
      c.signing_key = key.secret;
      c.verify_key = key.public_key;
      c.policy = PolicyOf(id, fleet, noise);
      c.ledger = std::make_unique<ClientLedger>("", 1e-5, budget);
      c.update.resize(kDim);
      double sq = 0;
      for (float& v : c.update) {
        v = static_cast<float>(StandardNormal(rng));
        sq += static_cast<double>(v) * v;
      }
      for (float& v : c.update) v = static_cast<float>(v * 0.9 * kClip / std::sqrt(sq));
      clients_.push_back(std::move(c));
    }
  }

  std::vector<HonestClient>& clients() { return clients_; }

  // The operator's task for round `round` of run `run` (32 bytes) with
  // learning rate `lr` (0: the update is none), encoded by `settings` for
  // `fewest_honest` honest clients, and its session's config with the k and
  // t of `tolerance` (the operator's) for all the clients.
  struct Round {
    FitInstructions task;
    secagg::SessionConfig session;
  };
  Round Make(const std::string& run, int64_t round, double lr, const DdgSettings& settings,
             int64_t fewest_honest, const secagg::Tolerance& tolerance) const {
    Round r;
    r.task.round = round;
    r.task.global = global_;
    r.task.model_version = round - 1;
    r.task.train.epochs = 1;
    r.task.train.lr = lr;
    r.task.seed = kSeed;
    r.task.clip_norm = settings.clip_norm;
    r.task.ddg = DdgEncodingFor(settings, kDim, static_cast<int64_t>(clients_.size()), fewest_honest,
                                DdgRotationSeed(kSeed, round));
    r.session.run_id = run;
    r.session.round = round;
    r.session.nonce = secagg::RandomBytes(secagg::kKeyBytes);
    r.session.protocol = secagg::Protocol::kSecAggPlus;
    r.session.length = SessionLength(r.task, kDim);
    r.session.word_bits = SessionWordBits(r.task);
    for (const HonestClient& c : clients_) r.session.verify_keys[c.id] = c.verify_key;
    r.session.tolerance = tolerance;
    r.session.graph = secagg::ParamsFor(r.session).graph;
    return r;
  }
  // The task an honest operator would send: the clients' own settings, for
  // the fewest honest clients under the clients' own tolerance.
  Round Honest(const std::string& run, int64_t round, double lr) const {
    const SecAggPolicy& p = clients_.front().policy;
    SecureAggregationOptions own;
    own.tolerance = p.tolerance;
    const int n = static_cast<int>(clients_.size());
    return Make(run, round, lr, p.dp, FewestHonestInSum(own, n), p.tolerance);
  }

  // Sends `r` to every honest client through the wire and each client's
  // checks, and runs the session among those that take part.
  Outcome Send(const Round& r) {
    Outcome out;
    pb::TaskHeader header;
    ToWire(r.task, 7, static_cast<int64_t>(kDim), &header);
    *header.mutable_secagg() = SetupToWire(r.session, 90);
    std::map<int64_t, std::unique_ptr<SecAggParticipation>> parts;
    std::vector<double> clean(kDim, 0.0);
    for (HonestClient& c : clients_) {
      std::string& why = out.refused[c.id];
      ReceivedTask t;
      t.status = pb::TASK;
      t.got = true;
      t.task_id = 7;
      try {
        t.instructions = FromWire(header);
      } catch (const Error& e) {
        why = std::string("task from the server: ") + e.what();
        continue;
      }
      t.instructions.global = global_;
      try {
        t.secagg =
            SetupFromWire(header.secagg(), static_cast<int64_t>(SessionLength(t.instructions, kDim)), c.id,
                          t.instructions.round, c.policy, nullptr, SessionWordBits(t.instructions));
        t.secagg_wait_s = 90;
      } catch (const Error& e) {
        t.refused = std::string("refused the server's secure aggregation: ") + e.what();
      }
      why = RefusedReceivedTask(t, c.policy, c.ledger.get());
      if (!why.empty()) continue;
      FitResult result;
      result.ok = true;
      result.client_id = static_cast<int>(c.id);
      result.num_samples = 100 + c.id;
      result.train_loss = 0.7;
      result.within_clip = true;
      result.params = *global_;
      const bool trains = t.instructions.train.lr != 0;
      for (size_t i = 0; i < kDim; ++i) {
        if (trains) result.params[i] += c.update[i];
      }
      for (size_t i = 0; i < kDim; ++i) clean[i] += static_cast<double>(result.params[i]) - (*global_)[i];
      parts[c.id] = SecAggParticipation::Join(t, c.id, c.signing_key, 1 << 20, &result, c.policy);
      EXPECT_TRUE(parts[c.id]) << result.error;
      if (!parts[c.id]) parts.erase(c.id);
      last_results_[c.id] = result;
    }
    if (parts.size() < 2) return out;
    try {
      const secagg::AggregateResult sum = RunSession(r.session, parts);
      out.in_sum = static_cast<int>(sum.survivors.size());
      std::vector<uint64_t> words(sum.sum.begin(), sum.sum.end());
      out.noised = DdgDecode(*r.task.ddg, words);
      out.clean = clean;
    } catch (const Error& e) {
      ADD_FAILURE() << "the session failed: " << e.what();
    }
    return out;
  }

  // What client `id` sent in the clear with its last result.
  const FitResult& LastResult(int64_t id) const { return last_results_.at(id); }

 private:
  // The session among `parts`, each message through the wire.
  static secagg::AggregateResult RunSession(const secagg::SessionConfig& config,
                                            std::map<int64_t, std::unique_ptr<SecAggParticipation>>& parts) {
    secagg::SecAggServer server(config);
    const std::string who = "a client";
    for (auto& [id, part] : parts) {
      server.ReceiveAdvertise(id, secagg::FromWire(part->Answer(pb::SecAggReply()).request.advertise(), who));
    }
    pb::SecAggReply reply;
    *reply.mutable_roster() = secagg::ToWire(server.CloseAdvertise());
    for (auto& [id, part] : parts) {
      server.ReceiveRosterSignature(id,
                                    secagg::FromWire(part->Answer(reply).request.roster_signature(), who));
    }
    for (const auto& [id, directory] : server.CloseRoster()) {
      *reply.mutable_directory() = secagg::ToWire(directory);
      server.ReceiveShares(id, secagg::FromWire(parts.at(id)->Answer(reply).request.shares(), who));
    }
    for (const auto& [id, bundle] : server.CloseShares()) {
      *reply.mutable_bundle() = secagg::ToWire(bundle);
      SecAggParticipation::Step step = parts.at(id)->Answer(reply);
      secagg::MaskedInputAssembler masked(config.length, who, static_cast<size_t>(config.word_bits / 8));
      while (step.request.has_masked()) {
        masked.Add(step.request.masked());
        step = parts.at(id)->Answer(pb::SecAggReply());
      }
      server.ReceiveMasked(id, masked.Finish());
    }
    *reply.mutable_survivors() = secagg::ToWire(server.CloseMasked());
    for (auto& [id, part] : parts) {
      server.ReceiveSignature(id, secagg::FromWire(part->Answer(reply).request.signature(), who));
    }
    *reply.mutable_unmask() = secagg::ToWire(server.CloseConsistency());
    for (int64_t id : server.signers()) {
      server.ReceiveUnmask(id, secagg::FromWire(parts.at(id)->Answer(reply).request.unmask(), who));
    }
    return server.Finish();
  }

  std::shared_ptr<FlatParams> global_;
  std::vector<HonestClient> clients_;
  std::map<int64_t, FitResult> last_results_;
};

std::string RunId(char tag) { return std::string(32, tag); }
// The i-th of many run ids (i < 256).
std::string NthRunId(int i) { return std::string(31, 'n') + static_cast<char>(i); }

double Cosine(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// ‖a − b‖.
double Distance(const std::vector<double>& a, const std::vector<double>& b) {
  double sq = 0;
  for (size_t i = 0; i < a.size(); ++i) sq += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(sq);
}

// The norm of the noise the sum of `n` clients carries, each at sd σ.
double NoiseNorm(const DdgParams& p, int n) { return std::sqrt(static_cast<double>(n * kDim)) * p.noise_sd; }

void ExpectAllRefused(const Outcome& o, const std::string& says) {
  for (const auto& [id, why] : o.refused) {
    EXPECT_NE(why.find(says), std::string::npos) << "client " << id << ": " << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  EXPECT_TRUE(o.noised.empty()) << "a session ran";
}

// Finding 1. The operator knows the config's seed, so it regenerates each
// client's rounding and noise as dp.noise = seeded draws them (for the
// task's round and the client's id) and subtracts them from the decoded
// sum. Against seeded clients (simulation's noise) that leaves the sum of
// the updates, exact to the rounding: the harness finds it. Against keyed
// clients (a deployment's: each client's own key) what is left is off by
// the whole noise. A deployed client refuses seeded noise outright
// (DeployTest.DistributedDpOverTheNetworkEqualsSimulation).
TEST(OperatorAdversary, TheNoiseCannotBeRegeneratedFromTheSeed) {
  for (const NoiseKind noise : {NoiseKind::kSeeded, NoiseKind::kKeyed, NoiseKind::kSecret}) {
    SCOPED_TRACE(static_cast<int>(noise));
    Operator op(10, 10, noise);
    const Operator::Round r = op.Honest(RunId('a'), 3, 0.1);
    const Outcome o = op.Send(r);
    for (const auto& [id, why] : o.refused) ASSERT_EQ(why, "") << "client " << id;
    ASSERT_EQ(o.in_sum, 10);
    const DdgParams& p = *r.task.ddg;
    // The regenerated noise of each client, in the sum's integer units.
    std::vector<uint64_t> regenerated(p.padded(), 0);
    for (const HonestClient& c : op.clients()) {
      SeededBits bits(DdgClientRng(kSeed, r.task.round, c.id));
      for (size_t i = 0; i < p.padded(); ++i) Uniform01(bits);  // its rounding's draws
      for (size_t i = 0; i < p.padded(); ++i) {
        regenerated[i] += static_cast<uint64_t>(DiscreteGaussian(bits, p.noise_sd / p.granularity));
      }
    }
    // Decoded: the noise in model units, taken off the noised sum.
    std::vector<double> noise_only = DdgDecode(p, regenerated);
    std::vector<double> recovered(kDim);
    for (size_t i = 0; i < kDim; ++i) recovered[i] = o.noised[i] - noise_only[i];
    const double error = Distance(recovered, o.clean);
    const double rounding = 10 * p.granularity * std::sqrt(static_cast<double>(p.padded()));
    if (noise == NoiseKind::kSeeded) {
      EXPECT_LT(error, rounding) << "the harness finds the sum when the noise is the seed's";
    } else {
      EXPECT_GT(error, 0.5 * std::sqrt(2.0) * NoiseNorm(p, 10)) << "the un-noised sum was recovered";
    }
  }
}

// Finding 2. The operator runs a round again (train.lr = 0, so that the
// second sum is the noise alone) and subtracts: every client refuses a
// second contribution to a round of a run, and a round that goes back. A
// new run id with the very same task is refused too (its digest). A new run
// with lr = 0 is another task: the clients take part, with fresh noise, so
// the difference is off by two noises, and each pays for it in its ledger;
// with a budget, the m-th rerun that would average the noise down is
// refused.
TEST(OperatorAdversary, ARoundCannotBeRunAgainAndRerunsCostTheBudget) {
  // What each client spends by two contributions and by three: its budget
  // lies between.
  const auto spent = [](int contributions) {
    Operator probe(10, 10, NoiseKind::kKeyed);
    const Operator::Round r = probe.Honest(RunId('p'), 1, 0.1);
    SecureAggregationOptions own;
    own.tolerance = probe.clients().front().policy.tolerance;
    const DdgRelease release{*r.task.ddg, FewestInSum(own, 10), FewestHonestInSum(own, 10)};
    return DdgEpsilonUnsampled(std::vector<DdgRelease>(static_cast<size_t>(contributions), release), true,
                               1e-5)
        .epsilon;
  };
  const double two = spent(2);
  Operator op(10, 10, NoiseKind::kKeyed, (two + spent(3)) / 2);
  const Outcome first = op.Send(op.Honest(RunId('a'), 5, 0.1));
  ASSERT_EQ(first.in_sum, 10);

  ExpectAllRefused(op.Send(op.Honest(RunId('a'), 5, 0.0)),
                   "was contributed to before: a server running a round again");
  ExpectAllRefused(op.Send(op.Honest(RunId('a'), 4, 0.1)), "of that run already (a run going back)");
  ExpectAllRefused(op.Send(op.Honest(RunId('b'), 5, 0.1)),
                   "(its model and training) was contributed to before");

  const Operator::Round again = op.Honest(RunId('b'), 5, 0.0);
  const Outcome rerun = op.Send(again);
  ASSERT_EQ(rerun.in_sum, 10) << "a new task of a new run is taken";
  std::vector<double> difference(kDim);
  for (size_t i = 0; i < kDim; ++i) difference[i] = first.noised[i] - rerun.noised[i];
  EXPECT_GT(Distance(difference, first.clean), std::sqrt(2.0) * 0.5 * NoiseNorm(*again.task.ddg, 10))
      << "the difference of the two sums is the clean sum";
  for (const HonestClient& c : op.clients()) {
    EXPECT_EQ(c.ledger->spent().contributions, 2);
    EXPECT_NEAR(c.ledger->spent().against_server, two, 1e-9 * two);
  }
  // Another task (a later round of another run): within the rules, past the budget.
  const Outcome third = op.Send(op.Honest(RunId('c'), 6, 0.0));
  ExpectAllRefused(third, "past its privacy budget (dp.client_budget)");
  for (const HonestClient& c : op.clients()) EXPECT_EQ(c.ledger->spent().contributions, 2);
}

// Finding 3. The operator invites 10 clients of a fleet of 100, among which
// 10 are its own (γ = 0.1): at k and t for one colluder (γ·n), two or three
// of them split the victim's neighbours. Every client counts the colluders
// among the fleet, finds no k and t safe for 10 of 10, and refuses the
// session before it sends anything. Among a fleet of 30 (three colluders),
// a session of 10 has k and t for three, and each client adds the noise of
// a sum whose honest part may be six: a server that asks for the noise of
// eight (γ·n again) is refused.
TEST(OperatorAdversary, TheCohortCannotShrinkTheColluders) {
  {
    Operator op(10, 100, NoiseKind::kKeyed);
    secagg::Tolerance operators;  // c = ⌈γ n⌉ = 1
    operators.min_clients = 10;
    const Outcome o = op.Send(op.Make(RunId('a'), 1, 0.1, op.clients().front().policy.dp, 8, operators));
    ExpectAllRefused(o,
                     "no threshold lets 10 invited clients tolerate 1 dropouts (secagg.dropout = 0.1) and 10 "
                     "colluders (secagg.corrupt = 0.1 of a fleet of 100)");
  }
  Operator op(10, 30, NoiseKind::kKeyed);
  SecureAggregationOptions own;
  own.tolerance = op.clients().front().policy.tolerance;
  EXPECT_EQ(secagg::CorruptBound(10, own.tolerance), 3);
  EXPECT_EQ(FewestHonestInSum(own, 10), 9 - 3);
  // The operator's encoding for 8 honest ones, with the clients' own k and t.
  const Outcome thin = op.Send(op.Make(RunId('b'), 1, 0.1, op.clients().front().policy.dp, 8, own.tolerance));
  ExpectAllRefused(thin, "of a sum of at least 6 honest clients");
  const Outcome fair = op.Send(op.Honest(RunId('c'), 1, 0.1));
  EXPECT_EQ(fair.in_sum, 10);
}

// Finding 4. The encoding is each client's to compute: a quantization step
// of 20 noise sds (the discrete Gaussian then rounds to zero: no noise), a
// word width not of whole bytes (whose high bits would count how many
// values wrapped), or one the client's config does not say, are refused in
// one line; the session's sum is exactly modulo 2^b.
TEST(OperatorAdversary, TheEncodingIsTheClients) {
  Operator op(10, 10, NoiseKind::kKeyed);
  const Operator::Round honest = op.Honest(RunId('a'), 1, 0.1);
  Operator::Round coarse = honest;
  coarse.task.ddg->granularity = 20 * honest.task.ddg->noise_sd;
  ExpectAllRefused(op.Send(coarse), "its update in an encoding of the server's: its quantization step");
  Operator::Round wide = honest;
  wide.task.ddg->bits = 25;
  ExpectAllRefused(op.Send(wide), "task from the server: task: distributed DP: bits: expected 8, 16, 24, 32");
  Operator::Round narrow = honest;
  narrow.task.ddg->bits = 24;
  narrow.session.word_bits = 24;
  narrow.session.length = SessionLength(narrow.task, kDim);
  ExpectAllRefused(op.Send(narrow), "its word width (dp.bits) 24 is not this client's 32");
  EXPECT_EQ(SessionWordBits(honest.task), 32) << "the session sums modulo 2^b itself";
  const Outcome o = op.Send(honest);
  ASSERT_EQ(o.in_sum, 10);
  EXPECT_GT(Distance(o.noised, o.clean), 0.5 * NoiseNorm(*honest.task.ddg, 10)) << "the noise is in the sum";
}

// Finding 5. What a result carries in the clear under secure aggregation:
// never whether the update needed clipping (a binary search over clip
// norms would find its norm), a training loss only when the strategy needs
// it, and under distributed DP no loss and no sample count. The operator
// asks for a client's update under ever other clip norms: the distributed
// client refuses every norm but its own, and the plain secure-aggregation
// client's results all say the same.
TEST(OperatorAdversary, NothingLeavesInTheClearThatTheDocsDoNotList) {
  Operator op(10, 10, NoiseKind::kKeyed);
  const Outcome o = op.Send(op.Honest(RunId('a'), 1, 0.1));
  ASSERT_EQ(o.in_sum, 10);
  for (const HonestClient& c : op.clients()) {
    const FitResult& r = op.LastResult(c.id);
    EXPECT_FALSE(r.within_clip);
    EXPECT_EQ(r.train_loss, 0);
    EXPECT_EQ(r.train_loss_rms, 0);
    EXPECT_EQ(r.num_samples, 1) << "under distributed DP every update weighs 1";
  }
  // A search over clip norms.
  for (const double clip : {0.1, 0.3, 1.0}) {
    DdgSettings other = op.clients().front().policy.dp;
    other.clip_norm = clip;
    SecureAggregationOptions own;
    own.tolerance = op.clients().front().policy.tolerance;
    const Outcome search = op.Send(op.Make(RunId('b'), 1 + static_cast<int64_t>(clip * 10), 0.1, other,
                                           FewestHonestInSum(own, 10), own.tolerance));
    ExpectAllRefused(search, "its clip norm (dp.clip_norm)");
  }
  // Under plain secure aggregation: the results say nothing of the norm,
  // and a loss only when asked.
  for (const bool asked : {false, true}) {
    FitInstructions task;
    task.round = 1;
    task.train.epochs = 1;
    task.clip_norm = 0.2;
    task.report.train_loss = asked;
    for (const bool within : {false, true}) {
      FitResult r;
      r.ok = true;
      r.num_samples = 40;
      r.train_loss = 0.7;
      r.train_loss_rms = 0.9;
      r.within_clip = within;
      KeepOnlyWhatTheTaskAsks(task, false, &r);
      EXPECT_FALSE(r.within_clip);
      EXPECT_EQ(r.train_loss, asked ? 0.7 : 0);
      EXPECT_EQ(r.train_loss_rms, asked ? 0.9 : 0);
      EXPECT_EQ(r.num_samples, 40) << "the clear weight of the sum";
    }
  }
  // Under distributed DP a client sends no figure of its own, whatever the
  // result: a report's or a failure's sample count is 1 too.
  FitInstructions profile_task;
  profile_task.report.profile = true;
  FitResult report_result;
  report_result.num_samples = 40;
  report_result.eval_samples = 40;
  report_result.eval_loss = 0.3;
  KeepOnlyWhatTheTaskAsks(profile_task, true, &report_result);
  EXPECT_EQ(report_result.num_samples, 1);
  EXPECT_EQ(report_result.eval_samples, 0);
  EXPECT_EQ(report_result.eval_loss, 0);
  // Nor does it take a task under distributed DP without its own config's.
  SecAggPolicy plain;
  plain.required = true;
  FitInstructions encoded = op.Honest(RunId('c'), 1, 0.1).task;
  const std::string why = RefusedTask(encoded, nullptr, plain);
  EXPECT_NE(why.find("does not set dp.mode = distributed, from which a client computes its own"),
            std::string::npos)
      << why;
  // Under distributed DP a client sends no report of its own.
  SecAggPolicy policy = op.clients().front().policy;
  FitInstructions report;
  report.train.epochs = 0;
  report.report.loss = true;
  EXPECT_NE(RefusedTask(report, nullptr, policy).find("a loss on its data in the clear"), std::string::npos);
  report.report.loss = false;
  report.report.evaluate = true;
  EXPECT_NE(RefusedTask(report, nullptr, policy).find("its evaluation of the model"), std::string::npos);
  report.report.evaluate = false;
  report.report.profile = true;
  report.report.public_key = std::make_shared<const std::string>("paillier");
  EXPECT_NE(RefusedTask(report, nullptr, policy).find("the divergence of its profile in the clear"),
            std::string::npos);
  policy.dp_clear_profiles = true;
  EXPECT_EQ(RefusedTask(report, nullptr, policy), "") << "its own config may allow it";
}

// The operator reruns a round under ever new run ids (each a new task, so fresh
// noise) and averages the noised sums: the noise falls as 1/√m. A client
// without a budget takes every rerun, and after 48 the average points along the
// clean sum. A deployed client under distributed DP keeps kDefaultClientBudget
// unless its own config says dp.client_unbounded = true, so the reruns stop
// after the few contributions the budget holds, at a cosine near the noise's;
// its refusal tells the operator nothing of what it spent or has left.
TEST(OperatorAdversary, TheDefaultBudgetEndsRerunsBeforeTheyAverageTheNoiseAway) {
  Config distributed;
  distributed.SetAssignment("dp.mode=distributed");
  const double budget = DeployedClientBudget(distributed.options().dp);
  EXPECT_EQ(budget, kDefaultClientBudget);
  Config unbounded = distributed;
  unbounded.SetAssignment("dp.client_unbounded=true");
  EXPECT_EQ(DeployedClientBudget(unbounded.options().dp), 0) << "no budget only in words";
  EXPECT_EQ(DeployedClientBudget(Config().options().dp), 0) << "none without noise of its own to spend";

  constexpr int kReruns = 48;
  const auto attack = [](double kept, int* taken, std::string* refused) {
    Operator op(10, 10, NoiseKind::kKeyed, kept);
    std::vector<double> sum(kDim, 0.0), clean;
    *taken = 0;
    for (int i = 0; i < kReruns; ++i) {
      const Outcome o = op.Send(op.Honest(NthRunId(i), 1 + i, 0.1));
      if (o.noised.empty()) {
        *refused = o.refused.at(0);
        ExpectAllRefused(o, "past its privacy budget (dp.client_budget)");
        break;
      }
      ++*taken;
      clean = o.clean;  // the same updates in every round
      for (size_t k = 0; k < kDim; ++k) sum[k] += o.noised[k];
    }
    return Cosine(sum, clean);
  };
  int taken = 0;
  std::string refused;
  const double averaged = attack(0, &taken, &refused);
  EXPECT_EQ(taken, kReruns);
  EXPECT_GT(averaged, 0.35) << "the harness finds the clean sum in the average";
  const double bounded = attack(budget, &taken, &refused);
  // What the budget holds: the most contributions whose composition stays within it.
  Operator probe(10, 10, NoiseKind::kKeyed);
  const Operator::Round r = probe.Honest(RunId('p'), 1, 0.1);
  SecureAggregationOptions own;
  own.tolerance = probe.clients().front().policy.tolerance;
  const DdgRelease release{*r.task.ddg, FewestInSum(own, 10), FewestHonestInSum(own, 10)};
  int holds = 0;
  while (DdgEpsilonUnsampled(std::vector<DdgRelease>(static_cast<size_t>(holds + 1), release), true, 1e-5)
             .epsilon <= budget) {
    ++holds;
  }
  testing::Test::RecordProperty("cosine_unbounded", std::to_string(averaged));
  testing::Test::RecordProperty("cosine_default_budget", std::to_string(bounded));
  testing::Test::RecordProperty("contributions_default_budget", taken);
  EXPECT_EQ(taken, holds);
  EXPECT_LT(taken, 10);
  EXPECT_LT(bounded, 0.25) << "after " << taken << " contributions";
  EXPECT_EQ(refused.find_first_of("0123456789"), std::string::npos) << refused;
}

// The operator's config names a fleet of 10 where the CA certified 20: a client
// that counted its colluders among the config's fleet would accept k and t for
// one colluder in a session of 10, which two colluders break, and noise for one
// honest client too many. The client counts among the larger of its roster and
// the config's fleet, refuses both, and logs what it assumed for the session it
// takes.
TEST(OperatorAdversary, AFleetInTheConfigCannotCountFewerThanTheRoster) {
  Config run;
  run.SetAssignment("secagg.protocol=secagg+");
  run.SetAssignment("secagg.fleet=10");
  EXPECT_EQ(ClientTolerance(run.options(), 20).fleet, 20);
  run.SetAssignment("secagg.fleet=40");
  EXPECT_EQ(ClientTolerance(run.options(), 20).fleet, 40) << "a config may count more";
  run.SetAssignment("secagg.fleet=0");
  EXPECT_EQ(ClientTolerance(run.options(), 20).fleet, 20);

  Operator op(10, 20, NoiseKind::kKeyed);
  secagg::Tolerance operators = op.clients().front().policy.tolerance;
  operators.fleet = 10;  // c = 1
  const secagg::GraphParams theirs = secagg::ParamsFor(secagg::Protocol::kSecAggPlus, 10, operators).graph;
  EXPECT_FALSE(secagg::SecureAgainstActiveServer(secagg::Protocol::kSecAggPlus, 10,
                                                 op.clients().front().policy.tolerance, theirs.neighbors,
                                                 theirs.threshold))
      << "k " << theirs.neighbors << ", t " << theirs.threshold << " hold against one colluder, not two";
  SecureAggregationOptions at_ten;
  at_ten.tolerance = operators;
  const int64_t their_honest = FewestHonestInSum(at_ten, 10);
  EXPECT_EQ(their_honest, 8);
  ExpectAllRefused(op.Send(op.Make(RunId('a'), 1, 0.1, op.clients().front().policy.dp, their_honest, operators)),
                   "refused the server's secure aggregation");
  SecureAggregationOptions own;
  own.tolerance = op.clients().front().policy.tolerance;
  ExpectAllRefused(op.Send(op.Make(RunId('b'), 1, 0.1, op.clients().front().policy.dp, their_honest,
                                   own.tolerance)),
                   "of a sum of at least 7 honest clients");
  const Operator::Round fair = op.Honest(RunId('c'), 1, 0.1);
  EXPECT_EQ(op.Send(fair).in_sum, 10);
  ReceivedTask task;
  task.instructions = fair.task;
  task.secagg = fair.session;
  const std::string assumed = SessionAssumptions(task, op.clients().front().policy);
  EXPECT_NE(assumed.find("secagg+ session of 10 invited: k = "), std::string::npos) << assumed;
  EXPECT_NE(assumed.find("at most 2 colluders (secagg.corrupt = 0.1 of a fleet of 20), at least 7 honest "
                         "clients in the sum"),
            std::string::npos)
      << assumed;
}

// Reports (no training: a loss, an evaluation, a profile or its divergence)
// leave outside any sum. The operator asks 1,000 of them with crafted reference
// models: a client answers only what its own strategy reads, each answer goes
// in its ledger, and it stops at its limits in a run and over every run.
TEST(OperatorAdversary, ReportsAreTheClientsOwnStrategysAndCapped) {
  SecAggPolicy plain;  // SecAgg+, no DP: a loss may leave in the clear where the strategy reads it
  plain.required = true;
  plain.reads = ClientReads{};  // FedAvg's: nothing
  FitInstructions loss;
  loss.train.epochs = 0;
  loss.report.loss = true;
  EXPECT_NE(RefusedTask(loss, nullptr, plain)
                .find("the received model's loss on its data: this client's own strategy"),
            std::string::npos);
  FitInstructions divergence;
  divergence.train.epochs = 0;
  divergence.report.profile = true;
  divergence.report.public_key = std::make_shared<const std::string>("paillier");
  EXPECT_NE(RefusedTask(divergence, nullptr, plain).find("the divergence of its profile"), std::string::npos);
  FitInstructions evaluate;
  evaluate.train.epochs = 0;
  evaluate.report.evaluate = true;
  EXPECT_NE(RefusedTask(evaluate, nullptr, plain).find("its evaluation of the model"), std::string::npos);
  FitInstructions oort;
  oort.train.epochs = 1;
  oort.report.train_loss = true;
  EXPECT_NE(RefusedTask(oort, nullptr, plain).find("its training loss"), std::string::npos);

  SecAggPolicy afl = plain;
  afl.reads->loss = true;
  EXPECT_EQ(RefusedTask(loss, nullptr, afl), "");
  ClientLedger ledger("", 1e-5, 0, ReportLimits{21, 200});
  int answered = 0, in_first_run = 0;
  for (int i = 0; i < 1000; ++i) {
    ReceivedTask t;
    t.instructions = loss;
    t.instructions.round = i % 50;
    t.run_id = NthRunId(i / 50);
    const std::string why = RefusedReceivedTask(t, afl, &ledger);
    if (why.empty()) {
      ++answered;
      if (i < 50) ++in_first_run;
    } else {
      EXPECT_EQ(why.rfind("refused a report: this client has answered the most reports it answers", 0), 0u)
          << why;
    }
  }
  EXPECT_EQ(in_first_run, 21);
  EXPECT_EQ(answered, 200);
  EXPECT_EQ(ledger.spent().reports, 200);
  EXPECT_EQ(ledger.spent().contributions, 0);
}

// A client's time for a task grows with its sample count, and the operator
// picks the epochs and batch size that amplify it: under secure aggregation or
// distributed DP a result's header states no clock and no cost; the server
// prices the round by the times it measures.
TEST(OperatorAdversary, NoClockLeavesAClientUnderSecureAggregation) {
  FitResult trained;
  trained.ok = true;
  trained.num_samples = 1;
  trained.cost.time_s = 3.5;
  trained.cost.energy_j = 2;
  trained.cost.profiling_time_s = 0.4;
  trained.cost.profiling_energy_j = 0.1;
  for (const auto& [secure, distributed] : {std::pair{false, false}, {true, false}, {true, true}}) {
    SecAggPolicy policy;
    policy.required = secure;
    policy.distributed_dp = distributed;
    FitResult r = trained;
    const double sent = ClockSent(policy, 1.25, &r);
    pb::ResultChunk chunk;
    ResultChunks(r, "session", 7, sent, 1 << 20).Next(&chunk);
    const pb::ResultHeader& h = chunk.header();
    if (!secure) {
      EXPECT_EQ(h.compute_s(), 1.25);
      EXPECT_EQ(h.profiling_s(), 0.4);
      continue;
    }
    for (const double v : {h.compute_s(), h.profiling_s(), h.cost_time_s(), h.cost_energy_j(),
                           h.cost_profiling_time_s(), h.cost_profiling_energy_j()}) {
      EXPECT_EQ(v, 0) << "distributed " << distributed;
    }
  }
}

}  // namespace
}  // namespace fedprof
