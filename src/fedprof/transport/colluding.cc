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
  std::vector<std::pair<int, std::vector<double>>> honest;  // (client id, update)
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
          honest.emplace_back(r.client_id, update_of(r));
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
  std::sort(honest.begin(), honest.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::vector<double>> seen;
  for (auto& [id, u] : honest) seen.push_back(std::move(u));
  if (seen.empty()) {
    for (const Held& h : held) seen.push_back(update_of(h.result));
  }
  const std::vector<double> crafted = ColludingUpdate(
      plan_.attack, seen, static_cast<int>(honest.size() + held.size()), static_cast<int>(held.size()));
  for (Held& h : held) {
    for (size_t i = 0; i < crafted.size(); ++i)
      h.result.params[i] = static_cast<float>((*global)[i] + crafted[i]);
    sink(h.index, std::move(h.result));
  }
}

}  // namespace fedprof
