// fedprof profile / fedprof divergence: representation profiles as files.
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/data/loaders.h"
#include "fedprof/models/models.h"
#include "fedprof/privacy/secure_matching.h"
#include "fedprof/profiling/profile.h"
#include "fedprof/profiling/profiler.h"
#include "fedprof/sim/population.h"
#include "fedprof/run/simulation.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {
namespace {

// SPEC: NAME[:train|test] for a known data set (fashion-mnist, mnist, emnist,
// cifar10; test by default), or idx:IMAGES,LABELS for any IDX pair.
Dataset LoadDataSpec(const std::string& spec, const std::string& data_dir) {
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (name == "idx") {
    const auto comma = rest.find(',');
    if (comma == std::string::npos) throw Error("--data " + spec + ": expected idx:IMAGES,LABELS");
    return LoadIdx(rest.substr(0, comma), rest.substr(comma + 1));
  }
  if (!rest.empty() && rest != "train" && rest != "test") {
    throw Error("--data " + spec + ": expected NAME[:train|test] or idx:IMAGES,LABELS");
  }
  Config c;
  c.Set("data.name", name, "--data");
  c.Set("data.dir", data_dir, "--data-dir");
  TrainTest tt = LoadData(c.options().data, c.options().seed);
  return rest == "train" ? tt.train : tt.test;
}

}  // namespace

Runner AddProfile(CLI::App& app) {
  struct Args {
    std::string model, data, data_dir, out, layer;
    int64_t limit = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "profile", "Write the representation profile (Eq. 8) of a data set under a run's model");
  sub->add_option("--model", args->model, "A run directory (or its checkpoint.bin)")->required();
  sub->add_option("--data", args->data,
                  "NAME[:train|test] (fashion-mnist, mnist, emnist, cifar10) or idx:IMAGES,LABELS")
      ->required();
  sub->add_option("--data-dir", args->data_dir, "Directory of the named data set");
  sub->add_option("--limit", args->limit, "Profile only the first n samples");
  sub->add_option("--layer", args->layer, "Layer to profile (default: the run's)");
  sub->add_option("--out", args->out, "Profile JSON to write")->required();
  return [args] {
    Dataset data = LoadDataSpec(args->data, args->data_dir);
    if (args->limit > 0 && args->limit < data.size()) {
      data.x = data.x.narrow(0, 0, args->limit);
      data.y = data.y.narrow(0, 0, args->limit);
    }
    int64_t version = 0;
    std::shared_ptr<Model> model = LoadRunModel(args->model, data, &version);
    if (!args->layer.empty()) model->SetProfiledLayer(args->layer);
    const Profile p = ComputeProfile(*model, data, version);
    WriteFileAtomic(args->out, ProfileToJson(p) + "\n");
    std::printf("profile of %lld samples, layer %s (%zu units), model version %lld -> %s\n",
                static_cast<long long>(data.size()), p.layer.c_str(), p.units(),
                static_cast<long long>(version), args->out.c_str());
  };
}

Runner AddDivergence(CLI::App& app) {
  struct Args {
    std::string client, reference;
    double alpha = 10;
    bool json = false;
    bool secure = false;
    int key_bits = 2048;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "divergence", "Divergence (Eq. 9) and score (Eq. 13) of a profile against a reference");
  sub->add_option("profile", args->client, "Client profile JSON")->required();
  sub->add_option("reference", args->reference, "Reference profile JSON")->required();
  sub->add_option("--alpha", args->alpha, "alpha of exp(-alpha div)")->capture_default_str();
  sub->add_flag("--json", args->json, "Print {\"divergence\", \"score\", \"kl\"} as JSON");
  sub->add_flag("--secure", args->secure,
                "Also compute it under Paillier encryption (App. C.2), both sides here, with "
                "each side's time and bytes");
  sub->add_option("--key-bits", args->key_bits, "Paillier key size with --secure (2048 or 3072)")
      ->capture_default_str();
  return [args] {
    const Profile p = ProfileFromJson(ReadFile(args->client), args->client);
    const Profile r = ProfileFromJson(ReadFile(args->reference), args->reference);
    std::string why = CheckProfile(r, r);
    if (!why.empty()) throw Error(args->reference + ": " + why);
    why = CheckProfile(p, r);
    if (!why.empty()) throw Error(args->client + ": " + why);
    const std::vector<double> kl = UnitKl(p, r);
    const double div = Divergence(p, r);
    const double score = Score(div, args->alpha);
    nlohmann::json j = {{"divergence", div}, {"score", score}, {"kl", kl}};
    if (args->secure) {
      const SecureMatchingRun run = RunSecureMatching(p, r, args->key_bits);
      j["secure_divergence"] = run.divergence;
      j["client_ms"] = run.client_ms;
      j["server_ms"] = run.server_ms;
      j["bytes_to_client"] = run.bytes_to_client;
      j["bytes_to_server"] = run.bytes_to_server;
      j["key_ms"] = run.key_ms;
    }
    if (args->json) {
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("divergence %.6g  score %.6g  (alpha %g, %zu units)\n", div, score, args->alpha,
                kl.size());
    if (args->secure) {
      std::printf("secure     %.6g  (Paillier %d bits; |difference| %.3g)\n",
                  j["secure_divergence"].get<double>(), args->key_bits,
                  std::fabs(j["secure_divergence"].get<double>() - div));
      std::printf("server     %.1f ms, %lld bytes to the client (public key, encrypted reference)\n",
                  j["server_ms"].get<double>(), j["bytes_to_client"].get<long long>());
      std::printf("client     %.1f ms, %lld bytes to the server (one ciphertext)\n",
                  j["client_ms"].get<double>(), j["bytes_to_server"].get<long long>());
    }
  };
}

}  // namespace fedprof::cli
