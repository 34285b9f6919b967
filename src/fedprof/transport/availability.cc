#include "fedprof/transport/availability.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "fedprof/core/text.h"

namespace fedprof {

AvailabilityTransport::AvailabilityTransport(Transport& inner, std::unique_ptr<Availability> availability,
                                             double overcommit, int clients_per_round)
    : ForwardingTransport(inner),
      availability_(std::move(availability)),
      overcommit_(overcommit),
      clients_per_round_(clients_per_round) {}

void AvailabilityTransport::NoteExpectedTimes(const std::vector<ClientInfo>& clients) {
  expected_s_.assign(static_cast<size_t>(num_clients()), 0.0);
  for (const ClientInfo& c : clients) expected_s_.at(c.id) = std::max(0.0, c.expected_time_s);
}

void AvailabilityTransport::SetVirtualTime(double t_s) {
  now_s_ = t_s;
  inner_.SetVirtualTime(t_s);
}

std::vector<ClientInfo> AvailabilityTransport::Available() {
  std::vector<ClientInfo> all = inner_.Available();
  NoteExpectedTimes(all);
  if (!availability_) return all;
  all.erase(std::remove_if(all.begin(), all.end(),
                           [&](const ClientInfo& c) { return availability_->OnlineUntil(c.id, now_s_) < 0; }),
            all.end());
  return all;
}

const std::vector<ClientInfo>* AvailabilityTransport::VirtualPopulation(Availability** availability) {
  const std::vector<ClientInfo>* clients = inner_.VirtualPopulation(availability);
  if (!clients) return nullptr;
  NoteExpectedTimes(*clients);
  *availability = availability_.get();
  return clients;
}

void AvailabilityTransport::Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) {
  std::vector<ClientInstructions> staying;
  std::vector<size_t> index_of;  // position in `tasks` of each task in `staying`
  for (size_t i = 0; i < tasks.size(); ++i) {
    const int id = tasks[i].client_id;
    const double finish = now_s_ + (static_cast<size_t>(id) < expected_s_.size() ? expected_s_[id] : 0.0);
    const double until = availability_ ? availability_->OnlineUntil(id, now_s_) : INFINITY;
    if (until < finish) {
      FitResult lost;
      lost.client_id = id;
      lost.timed_out = true;
      lost.error = until < 0 ? "offline at virtual time " + FormatDouble(now_s_) + " s"
                             : "went offline at virtual time " + FormatDouble(until) +
                                   " s, before finishing at " + FormatDouble(finish) + " s";
      sink(i, std::move(lost));
      continue;
    }
    staying.push_back(tasks[i]);
    index_of.push_back(i);
  }
  if (overcommit_ <= 1) {
    const ResultSink::Each each = [&](size_t j, FitResult&& r) { return sink(index_of.at(j), std::move(r)); };
    if (!sink.TakesSums()) {
      inner_.Fit(staying, each);
      return;
    }
    inner_.Fit(staying, ResultSink(each, [&](const std::vector<size_t>& js, const ModelSum* sum,
                                             const std::string& lost) {
                 std::vector<size_t> is;
                 for (size_t j : js) is.push_back(index_of.at(j));
                 return sink.Sum(is, sum, lost);
               }));
    return;
  }
  // Over-committed: the round keeps the first K to finish, which only all
  // the results together tell.
  std::vector<std::pair<size_t, FitResult>> results;
  inner_.Fit(staying, [&](size_t j, FitResult&& r) {
    results.emplace_back(index_of.at(j), std::move(r));
    return std::string();
  });
  std::sort(results.begin(), results.end(), [](const auto& a, const auto& b) {
    return a.second.ok != b.second.ok                     ? a.second.ok
           : a.second.cost.time_s != b.second.cost.time_s ? a.second.cost.time_s < b.second.cost.time_s
                                                          : a.second.client_id < b.second.client_id;
  });
  const auto keep = static_cast<size_t>(std::max(0, clients_per_round_));
  for (size_t n = 0; n < results.size(); ++n) {
    FitResult& r = results[n].second;
    if (n >= keep && r.ok) {
      FitResult late;
      late.client_id = r.client_id;
      late.timed_out = true;
      late.error = "over-committed: finished after the round's first " + std::to_string(keep);
      late.cost.energy_j = r.cost.energy_j;
      late.cost.profiling_energy_j = r.cost.profiling_energy_j;
      sink(results[n].first, std::move(late));
    } else {
      sink(results[n].first, std::move(r));
    }
  }
}

}  // namespace fedprof
