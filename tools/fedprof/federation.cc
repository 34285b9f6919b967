// fedprof federation ... / fedprof node: a federation that outlives its
// runs, its operators' commands, and the long-lived nodes that serve it.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "build_info.h"
#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/text.h"
#include "fedprof/federation/federation.h"
#include "fedprof/federation/listing.h"
#include "fedprof/federation/node.h"
#include "fedprof/federation/operator_client.h"
#include "fedprof/run/deployment.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {
namespace {

namespace fed = fedprof::federation;
using fed::FormatNodes;
using fed::FormatRun;
using fed::FormatRuns;
using fed::NodeJson;
using fed::RunJson;
using nlohmann::json;

struct Connection {
  fed::OperatorIdentity identity;
  std::string format = "table";
};

void AddConnection(CLI::App* sub, Connection* c) {
  sub->add_option("--server", c->identity.server, "The federation's HOST:PORT")->required();
  sub->add_option("--tls-dir", c->identity.tls_dir,
                  "Directory of ca.crt and this operator's operator-NAME.crt and .key");
  sub->add_option("--operator", c->identity.name, "Which operator-NAME certificate (default: the only one)");
  sub->add_flag("--insecure", c->identity.insecure, "No TLS, for loopback experiments only");
  sub->add_option("--format", c->format, "table (for people) or json (for programs)")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
}

void CheckConnection(const Connection& c) {
  if (c.identity.insecure == !c.identity.tls_dir.empty()) {
    throw Error("--tls-dir DIR (the operator's certificate) or --insecure (loopback only): give exactly one");
  }
}

// Text from the federation is printed as the one sanitiser leaves it, and
// JSON with any invalid UTF-8 replaced.
void PrintJson(const json& j) {
  std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
}

// `j` as JSON or as the table `table` draws of it, as --format says.
void Print(const json& j, const Connection& c, std::string (*table)(const json&)) {
  if (c.format == "json") {
    PrintJson(j);
  } else {
    std::fputs(table(j).c_str(), stdout);
  }
}

Runner AddServe(CLI::App& group) {
  auto o = std::make_shared<fed::FederationOptions>();
  auto ports = std::make_shared<std::string>();
  auto monitor = std::make_shared<MonitorArgs>();
  CLI::App* sub = group.add_subcommand(
      "serve", "Run the federation: its nodes and operators on one port, each run a server of its own");
  sub->add_option("--state", o->state_dir, "Directory of its database, runs and logs (made if missing)")
      ->required();
  sub->add_option("--listen", o->listen, "HOST:PORT for nodes and operators (port 0: any free port)")
      ->capture_default_str();
  sub->add_option("--tls-dir", o->tls_dir, "Mutual TLS: ca.crt, server.crt, server.key (scripts/make-certs.sh)");
  sub->add_flag("--insecure", o->insecure, "No TLS, for loopback experiments only");
  sub->add_option("--run-ports", *ports, "A-B: the ports its runs' servers listen on (default: any free port)");
  sub->add_option("--max-runs", o->max_runs, "Runs at once; later ones wait, queued")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  sub->add_option("--stop-grace", o->stop_grace_s,
                  "Seconds a stopped run has to end its round before it is killed")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  sub->add_option("--data-root", o->data_roots,
                  "A directory whose files a run's config may name (data.dir, data.train_file, ...; "
                  "repeatable; none: only the data sets' default locations)");
  sub->add_option("--admin", o->admins,
                  "An operator (NAME of operator-NAME) who enrols and revokes nodes, reads the audit and "
                  "reads and stops every run (repeatable); the others, only their own runs");
  AddMonitorOptions(sub, monitor.get());
  return [o, ports, monitor] {
    o->monitor = MonitorOptionsOf(*monitor, "federation");
    if (!ports->empty()) {
      const auto [first, last] = ParseIdRange(*ports);
      if (first < 1 || last > 65535) throw Error("--run-ports " + Printable(*ports, 20) + ": ports are 1..65535");
      o->first_run_port = first;
      o->last_run_port = last;
    }
    fed::ServeFederation(*o);
  };
}

Runner AddSubmit(CLI::App& group) {
  struct Args {
    Connection c;
    std::string config, name;
    std::vector<std::string> sets;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = group.add_subcommand("submit", "Submit a run: a config, and the model file it names");
  sub->add_option("--config", a->config, "The run's config (TOML)");
  sub->add_option("--set", a->sets, "Override a config key: --set key=value (repeatable)");
  sub->add_option("--name", a->name, "A name for the lists (default: the config file's)");
  AddConnection(sub, &a->c);
  return [a] {
    CheckConnection(a->c);
    const Config config = Config::Load(a->config, a->sets);
    const std::string file = config.options().model.file;
    const std::string model = file.empty() ? "" : ReadFile(file);
    std::string name = a->name;
    if (name.empty() && !a->config.empty()) {
      name = a->config.substr(a->config.rfind('/') + 1);
      name = name.substr(0, name.rfind('.'));
    }
    const fed::pb::RunInfo run = fed::OperatorClient(a->c.identity).Submit(config.ToToml(), name, model);
    if (a->c.format == "json") {
      PrintJson(RunJson(run));
    } else {
      std::printf("run %lld %s (%s)\n", static_cast<long long>(run.run()), run.state().c_str(), run.name().c_str());
    }
  };
}

Runner AddRuns(CLI::App& group) {
  auto c = std::make_shared<Connection>();
  CLI::App* sub = group.add_subcommand("runs", "List the federation's runs");
  AddConnection(sub, c.get());
  return [c] {
    CheckConnection(*c);
    const std::vector<fed::pb::RunInfo> runs = fed::OperatorClient(c->identity).Runs();
    json all = json::array();
    for (const auto& r : runs) all.push_back(RunJson(r));
    Print(all, *c, FormatRuns);
  };
}

// A command about one run: RUN as its argument.
Runner AddRunCommand(CLI::App& group, const std::string& name, const std::string& what,
                     void (*act)(fed::OperatorClient&, int64_t, const Connection&)) {
  struct Args {
    Connection c;
    int64_t run = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = group.add_subcommand(name, what);
  sub->add_option("RUN", a->run, "The run's number")->required();
  AddConnection(sub, &a->c);
  return [a, act] {
    CheckConnection(a->c);
    fed::OperatorClient client(a->c.identity);
    act(client, a->run, a->c);
  };
}

Runner AddLogs(CLI::App& group) {
  struct Args {
    Connection c;
    int64_t run = 0;
    int64_t from = 0;
    bool follow = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = group.add_subcommand("logs", "A run's log; with --follow, its new lines as they come");
  sub->add_option("RUN", a->run, "The run's number")->required();
  sub->add_flag("--follow", a->follow, "Keep printing new lines until the run ends");
  sub->add_option("--from", a->from, "The first line to print (0: the first)")->capture_default_str();
  AddConnection(sub, &a->c);
  return [a] {
    CheckConnection(a->c);
    int64_t number = a->from;
    fed::OperatorClient(a->c.identity).Log(a->run, a->from, a->follow, [&](const std::string& line) {
      if (a->c.format == "json") {
        std::printf("%s\n", json({{"run", a->run}, {"line", number++}, {"text", line}})
                                .dump(-1, ' ', false, json::error_handler_t::replace)
                                .c_str());
      } else {
        std::printf("%s\n", Printable(line, 4096).c_str());
      }
      std::fflush(stdout);
    });
  };
}

// Waits, polling the run's status, until it has done `rounds` rounds (0:
// until it is over), or is over anyway.
Runner AddWait(CLI::App& group) {
  struct Args {
    Connection c;
    int64_t run = 0;
    int64_t rounds = 0;
    double timeout_s = 3600;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = group.add_subcommand(
      "wait", "Wait until a run is over (finished, stopped or failed), or has done --rounds N rounds");
  sub->add_option("RUN", a->run, "The run's number")->required();
  sub->add_option("--rounds", a->rounds, "Until it has done this many rounds (0: until it is over)")
      ->capture_default_str();
  sub->add_option("--timeout", a->timeout_s, "Seconds before giving up (exit status 1)")->capture_default_str();
  AddConnection(sub, &a->c);
  return [a] {
    CheckConnection(a->c);
    fed::OperatorClient client(a->c.identity);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(a->timeout_s);
    fed::pb::RunInfo info = client.Show(a->run);
    const auto reached = [&] {
      const bool over = info.state() == "finished" || info.state() == "stopped" || info.state() == "failed";
      return over || (a->rounds > 0 && info.rounds_done() >= a->rounds);
    };
    while (!reached()) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw Error("run " + std::to_string(a->run) + " is " + info.state() + " after " +
                    FormatDouble(a->timeout_s) + " s (" + std::to_string(info.rounds_done()) + " of " +
                    std::to_string(info.rounds()) + " rounds)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      info = client.Show(a->run);
    }
    Print(RunJson(info), a->c, FormatRun);
  };
}

Runner AddFetch(CLI::App& group) {
  struct Args {
    Connection c;
    int64_t run = 0;
    std::string out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = group.add_subcommand(
      "fetch", "Download a run's outputs: metrics, clients, summary, config and its model (checkpoint.bin)");
  sub->add_option("RUN", a->run, "The run's number")->required();
  sub->add_option("--out", a->out, "Directory to write them to (made if missing)")->required();
  AddConnection(sub, &a->c);
  return [a] {
    CheckConnection(a->c);
    const std::vector<std::string> files = fed::OperatorClient(a->c.identity).Fetch(a->run, a->out);
    if (a->c.format == "json") {
      PrintJson({{"run", a->run}, {"out", a->out}, {"files", files}});
    } else {
      for (const std::string& f : files) std::printf("%s/%s\n", a->out.c_str(), f.c_str());
    }
  };
}

Runner AddNodes(CLI::App& group) {
  auto c = std::make_shared<Connection>();
  CLI::App* sub = group.add_subcommand("nodes", "List the federation's nodes");
  AddConnection(sub, c.get());
  return [c] {
    CheckConnection(*c);
    const std::vector<fed::pb::NodeInfo> nodes = fed::OperatorClient(c->identity).Nodes();
    json all = json::array();
    for (const auto& n : nodes) all.push_back(NodeJson(n));
    Print(all, *c, FormatNodes);
  };
}

Runner AddEnrol(CLI::App& group) {
  struct Args {
    Connection c;
    std::vector<std::string> certificates;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = group.add_subcommand(
      "enrol", "Serve nodes under these certificates (the CA's client-K.crt); a node's new one re-keys it");
  sub->add_option("CERT", a->certificates, "client-K.crt files")->required();
  AddConnection(sub, &a->c);
  return [a] {
    CheckConnection(a->c);
    fed::OperatorClient client(a->c.identity);
    json all = json::array();
    for (const std::string& path : a->certificates) all.push_back(NodeJson(client.Enrol(ReadFile(path))));
    Print(all, a->c, FormatNodes);
  };
}

Runner AddRevoke(CLI::App& group) {
  struct Args {
    Connection c;
    int node = -1;
    std::string reason;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = group.add_subcommand("revoke", "Refuse a node from now on, in every run (its next call)");
  sub->add_option("NODE", a->node, "The node's id")->required();
  sub->add_option("--reason", a->reason, "Why, for the audit log");
  AddConnection(sub, &a->c);
  return [a] {
    CheckConnection(a->c);
    const fed::pb::NodeInfo node = fed::OperatorClient(a->c.identity).Revoke(a->node, a->reason);
    if (a->c.format == "json") {
      PrintJson(NodeJson(node));
    } else {
      std::printf("node %d revoked by %s at %s\n", node.id(), node.revoked_by().c_str(), node.revoked_at().c_str());
    }
  };
}

Runner AddAudit(CLI::App& group) {
  struct Args {
    Connection c;
    int64_t after = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = group.add_subcommand("audit", "The audit log: who submitted, stopped, enrolled and revoked");
  sub->add_option("--after", a->after, "Entries after this one")->capture_default_str();
  AddConnection(sub, &a->c);
  return [a] {
    CheckConnection(a->c);
    const std::vector<fed::pb::AuditEntry> entries = fed::OperatorClient(a->c.identity).Audit(a->after);
    if (a->c.format == "json") {
      json all = json::array();
      for (const auto& e : entries) {
        all.push_back({{"seq", e.seq()}, {"at", e.at()}, {"actor", e.actor()}, {"action", e.action()},
                       {"target", e.target()}, {"detail", e.detail()}});
      }
      PrintJson(all);
      return;
    }
    std::vector<std::vector<std::string>> rows = {{"#", "AT", "WHO", "ACTION", "ON", "DETAIL"}};
    for (const auto& e : entries) {
      rows.push_back({std::to_string(e.seq()), e.at(), e.actor(), e.action(), e.target(), e.detail()});
    }
    std::fputs(fed::FormatTable(rows).c_str(), stdout);
  };
}

void ShowRun(fed::OperatorClient& client, int64_t run, const Connection& c) {
  const fed::pb::RunInfo info = client.Show(run);
  Print(RunJson(info), c, FormatRun);
}

void StopRun(fed::OperatorClient& client, int64_t run, const Connection& c) {
  const fed::pb::RunInfo info = client.Stop(run);
  if (c.format == "json") {
    PrintJson(RunJson(info));
  } else {
    std::printf("run %lld %s: %s\n", static_cast<long long>(run), info.state().c_str(), info.detail().c_str());
  }
}

}  // namespace

Runner AddFederation(CLI::App& app) {
  CLI::App* group = app.add_subcommand(
      "federation", "A federation that outlives its runs: serve it, and its operators' commands");
  group->require_subcommand(1);
  auto runners = std::make_shared<std::vector<std::pair<CLI::App*, Runner>>>();
  auto add = [&](Runner run) { runners->emplace_back(group->get_subcommands({}).back(), std::move(run)); };
  add(AddServe(*group));
  add(AddSubmit(*group));
  add(AddRuns(*group));
  add(AddRunCommand(*group, "status", "One run: its state, progress, nodes and refusals", ShowRun));
  add(AddLogs(*group));
  add(AddWait(*group));
  add(AddRunCommand(*group, "stop", "Stop a run at the end of its round in progress", StopRun));
  add(AddFetch(*group));
  add(AddNodes(*group));
  add(AddEnrol(*group));
  add(AddRevoke(*group));
  add(AddAudit(*group));
  group->footer("Operators' commands take --server HOST:PORT --tls-dir DIR (ca.crt, operator-NAME.crt/.key); "
                "docs/federation.md");
  return [runners] {
    for (auto& [sub, run] : *runners) {
      if (sub->parsed()) run();
    }
  };
}

Runner AddNode(CLI::App& app) {
  auto o = std::make_shared<fed::NodeOptions>();
  auto ids = std::make_shared<std::string>();
  auto fit = std::make_shared<std::string>("train");
  CLI::App* sub = app.add_subcommand(
      "node", "Serve a federation's runs, one after another and at once, as client K, until stopped");
  sub->add_option("--server", o->server, "The federation's HOST:PORT")->required();
  CLI::Option* id = sub->add_option("--id", o->id, "This node's client id (its certificate's CN client-K)");
  CLI::Option* range = sub->add_option("--ids", *ids, "Clients A..B in this process (A-B)");
  id->excludes(range);
  sub->add_option("--tls-dir", o->tls_dir, "Mutual TLS: ca.crt, client-K.crt, client-K.key (and its ledger)");
  sub->add_flag("--insecure", o->insecure, "No TLS, for loopback experiments only");
  sub->add_option("--policy", o->policy_file, "This node's own rules for the runs it serves (TOML)");
  sub->add_option("--data-dir", o->data_dir, "Train on own files here (as fedprof client --data-dir)");
  sub->add_option("--models-dir", o->models_dir, "Where its copies of TorchScript modules are (found by SHA-256)");
  sub->add_option("--give-up-after", o->give_up_s, "Seconds without the federation before giving up (0: never)")
      ->capture_default_str();
  sub->add_option("--fit", *fit, "train, or none (load tests only: fedprof client --fit none)")
      ->check(CLI::IsMember({"train", "none"}))
      ->capture_default_str();
  return [o, ids, fit, id, range] {
    if (id->count() + range->count() == 0) throw Error("node: give --id K (or --ids A-B)");
    if (range->count() > 0) std::tie(o->id, o->last_id) = ParseIdRange(*ids);
    o->fit_none = *fit == "none";
    o->version = FEDPROF_VERSION;
    o->build = std::string("commit ") + FEDPROF_COMMIT;
    try {
      o->build += "; executable SHA-256 " + FileSha256Hex("/proc/self/exe").substr(0, 16);
    } catch (const Error&) {
    }
    fed::RunNode(*o);
  };
}

}  // namespace fedprof::cli
