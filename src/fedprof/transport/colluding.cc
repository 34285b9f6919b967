#include "fedprof/transport/colluding.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>

namespace fedprof {

void ColludingTransport::Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) {
  const bool training = std::any_of(tasks.begin(), tasks.end(), [](const ClientInstructions& t) {
    return t.instructions.train.epochs > 0;
  });
  if (!training || tasks.empty()) {
    inner_.Fit(tasks, sink);
    return;
  }
  const std::shared_ptr<const FlatParams> global = tasks.front().instructions.global;
  struct Held {
    size_t index;
    FitResult result;
  };
  std::mutex mutex;
  struct Honest {
    int client_id;
    int64_t num_samples;
    std::vector<double> update;
  };
  std::vector<Honest> honest;
  std::vector<Held> held;
  auto update_of = [&](const FitResult& r) {
    std::vector<double> u(global->size());
    for (size_t i = 0; i < u.size(); ++i) u[i] = static_cast<double>(r.params[i]) - (*global)[i];
    return u;
  };
  const ResultSink wrapped(
      [&](size_t index, FitResult&& r) -> std::string {
        const bool trained = r.ok && r.params.size() == global->size();
        if (trained) {
          const std::lock_guard<std::mutex> lock(mutex);
          if (plan_.For(r.client_id).colluding()) {
            held.push_back({index, std::move(r)});
            return "";  // answered for now; the server judges the crafted model
          }
          honest.push_back({r.client_id, r.num_samples, update_of(r)});
        }
        return sink(index, std::move(r));
      },
      [&](const std::vector<size_t>& indices, const ModelSum* sum, const std::string& lost) {
        return sink.Sum(indices, sum, lost);
      });
  inner_.Fit(tasks, wrapped);
  if (held.empty()) return;
  std::sort(held.begin(), held.end(),
            [](const Held& a, const Held& b) { return a.result.client_id < b.result.client_id; });
  std::sort(honest.begin(), honest.end(),
            [](const Honest& a, const Honest& b) { return a.client_id < b.client_id; });
  Defence defence;
  // The round's models as the server will hold them, the attackers'
  // replaced by each candidate (tailored attackers).
  std::vector<ClientUpdate> round;
  if (plan_.attack.kind == AttackKind::kTailored) {
    for (const Honest& h : honest) {
      ClientUpdate u{h.client_id, h.num_samples, FlatParams(global->size())};
      for (size_t i = 0; i < u.params.size(); ++i) u.params[i] = static_cast<float>((*global)[i] + h.update[i]);
      round.push_back(std::move(u));
    }
    const size_t first_held = round.size();
    for (const Held& h : held) round.push_back({h.result.client_id, h.result.num_samples, {}});
    defence = [&, first_held](const std::vector<double>& crafted) -> std::optional<std::vector<double>> {
      FlatParams model(global->size());
      for (size_t i = 0; i < model.size(); ++i) model[i] = static_cast<float>((*global)[i] + crafted[i]);
      for (size_t k = first_held; k < round.size(); ++k) round[k].params = model;
      bool own_step = false;
      const FlatParams estimate = rule_.EstimateOf(*global, round, &own_step);
      if (own_step) return std::nullopt;
      std::vector<double> update(estimate.size());
      for (size_t i = 0; i < update.size(); ++i) update[i] = static_cast<double>(estimate[i]) - (*global)[i];
      return update;
    };
  }
  // The honest updates, moved once the tailored attackers' models hold them.
  std::vector<std::vector<double>> seen;
  for (Honest& h : honest) seen.push_back(std::move(h.update));
  if (seen.empty()) {
    for (const Held& h : held) seen.push_back(update_of(h.result));
  }
  const std::vector<double> crafted =
      ColludingUpdate(plan_.attack, seen, static_cast<int>(honest.size() + held.size()),
                      static_cast<int>(held.size()), defence);
  for (Held& h : held) {
    for (size_t i = 0; i < crafted.size(); ++i)
      h.result.params[i] = static_cast<float>((*global)[i] + crafted[i]);
    sink(h.index, std::move(h.result));
  }
}

}  // namespace fedprof
