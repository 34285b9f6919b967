#include "fedprof/deploy/shared/secagg_setup.h"

#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/secagg/wire.h"

namespace fedprof {

namespace pb = federation::v1;

federation::v1::SecAggSetup SetupToWire(const secagg::SessionConfig& config, double reply_wait_s) {
  pb::SecAggSetup s;
  s.set_run_id(config.run_id.data(), config.run_id.size());
  s.set_nonce(config.nonce.data(), config.nonce.size());
  s.set_plus(config.protocol == secagg::Protocol::kSecAggPlus);
  s.set_neighbors(config.graph.neighbors);
  s.set_threshold(config.graph.threshold);
  s.set_length(static_cast<int64_t>(config.length));
  if (config.word_bits != 128) s.set_word_bits(config.word_bits);
  for (const auto& [id, key] : config.verify_keys) {
    s.add_clients(static_cast<int32_t>(id));
    s.add_verify_keys(key.data(), key.size());
  }
  s.set_reply_wait_s(reply_wait_s);
  return s;
}

secagg::SessionConfig SetupFromWire(const federation::v1::SecAggSetup& s, int64_t length, int64_t own_id,
                                    int64_t round, const SecAggPolicy& policy,
                                    const std::map<int64_t, std::string>* roster, int word_bits) {
  const auto bad = [](const std::string& what) { throw Error("task: secure aggregation " + what); };
  secagg::SessionConfig config;
  if (s.run_id().size() != secagg::kKeyBytes || s.nonce().size() != secagg::kKeyBytes) {
    bad("run id of " + std::to_string(s.run_id().size()) + " bytes and nonce of " +
        std::to_string(s.nonce().size()) + " bytes, expected 32 each");
  }
  config.run_id.assign(s.run_id().begin(), s.run_id().end());
  config.nonce.assign(s.nonce().begin(), s.nonce().end());
  config.round = round;
  config.protocol = s.plus() ? secagg::Protocol::kSecAggPlus : secagg::Protocol::kSecAgg;
  if (s.neighbors() < 0 || s.threshold() < 0) bad("with a negative k or t");
  config.graph = {s.neighbors(), s.threshold()};
  // k and t are the client's own to choose: the server's must agree.
  config.tolerance = policy.tolerance;
  config.neighbors = policy.neighbors;
  config.threshold = policy.threshold;
  if (s.length() != length) {
    bad("of " + std::to_string(s.length()) + " words; this task's input has " + std::to_string(length));
  }
  config.length = static_cast<size_t>(s.length());
  const int32_t bits = s.word_bits() == 0 ? 128 : s.word_bits();
  if (bits != word_bits) {
    bad("of " + std::to_string(bits) + "-bit words; this task's input has " + std::to_string(word_bits));
  }
  config.word_bits = bits;
  if (s.clients_size() != s.verify_keys_size() || s.clients_size() < 2 ||
      static_cast<size_t>(s.clients_size()) > secagg::kMaxSessionClients) {
    bad("of " + std::to_string(s.clients_size()) + " clients and " + std::to_string(s.verify_keys_size()) +
        " keys");
  }
  for (int i = 0; i < s.clients_size(); ++i) {
    const std::string& key = s.verify_keys(i);
    if (s.clients(i) < 0 || key.size() != secagg::kKeyBytes) {
      bad("client " + std::to_string(s.clients(i)) + " with a key of " + std::to_string(key.size()) +
          " bytes");
    }
    if (!config.verify_keys.emplace(s.clients(i), secagg::Bytes(key.begin(), key.end())).second) {
      bad("names client " + std::to_string(s.clients(i)) + " twice");
    }
    if (roster == nullptr) continue;
    const auto listed = roster->find(s.clients(i));
    if (listed == roster->end()) {
      bad("names client " + std::to_string(s.clients(i)) + ", which secagg-roster does not");
    }
    if (listed->second != key) {
      bad("gives client " + std::to_string(s.clients(i)) +
          " a verification key that is not secagg-roster's (a server passing its own key off as a client's)");
    }
  }
  if (config.verify_keys.count(own_id) == 0) bad("of clients without this one");
  if (!(s.reply_wait_s() > 0 && s.reply_wait_s() <= 1e7)) bad("reply wait " + FormatDouble(s.reply_wait_s()));
  try {
    secagg::CheckConfig(config);
  } catch (const Error& e) {
    bad(std::string("setup: ") + e.what());
  }
  return config;
}

}  // namespace fedprof
