#ifndef FEDPROF_TRANSPORT_FORWARDING_H_
#define FEDPROF_TRANSPORT_FORWARDING_H_

#include <string>
#include <vector>

#include "fedprof/transport/transport.h"

namespace fedprof {

// A transport around another (`inner`, which outlives it): every call passes
// through unless a subclass overrides it. Colluding attackers, secure
// aggregation and client availability are each such a layer.
class ForwardingTransport : public Transport {
 public:
  explicit ForwardingTransport(Transport& inner) : inner_(inner) {}

  int num_clients() const override { return inner_.num_clients(); }
  void Open() override { inner_.Open(); }
  void Close() override { inner_.Close(); }
  std::string SaveState() override { return inner_.SaveState(); }
  void LoadState(const std::string& state) override { inner_.LoadState(state); }
  std::vector<ClientDescription> Describe() override { return inner_.Describe(); }
  std::vector<ClientInfo> Available() override { return inner_.Available(); }
  std::vector<ClientInfo> AvailableOrWait(const std::function<bool(int)>& wanted) override {
    return inner_.AvailableOrWait(wanted);
  }
  void SetVirtualTime(double t_s) override { inner_.SetVirtualTime(t_s); }
  const std::vector<ClientInfo>* VirtualPopulation(Availability** availability) override {
    return inner_.VirtualPopulation(availability);
  }
  void Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) override {
    inner_.Fit(tasks, sink);
  }
  bool StreamsTasks() const override { return inner_.StreamsTasks(); }
  void LaunchTasks(const std::vector<ClientInstructions>& tasks) override { inner_.LaunchTasks(tasks); }
  bool AwaitResult(const ResultSink& sink) override { return inner_.AwaitResult(sink); }

 protected:
  Transport& inner_;
};

}  // namespace fedprof

#endif  // FEDPROF_TRANSPORT_FORWARDING_H_
