#ifndef FEDPROF_FEDERATION_LISTING_H_
#define FEDPROF_FEDERATION_LISTING_H_

// What operators read of a federation's runs and nodes, in one form for
// every reader: the JSON of `--format json`, of the monitor's /status and
// dashboard, and the tables people read (fedprof federation runs|nodes,
// fedprof status HOST:PORT), drawn from that JSON. Text from the
// federation (names, details, rules) is made printable in the tables.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator.pb.h"

namespace fedprof::federation {

namespace pb = federation::v1;

nlohmann::json RunJson(const pb::RunInfo& run);
nlohmann::json NodeJson(const pb::NodeInfo& node);

// Rows under a header row, each column as wide as its widest cell, a line
// each.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);
// A table of runs (RunJson's), of one run with its server, nodes and
// refusals, and of nodes (NodeJson's).
std::string FormatRuns(const nlohmann::json& runs);
std::string FormatRun(const nlohmann::json& run);
std::string FormatNodes(const nlohmann::json& nodes);

}  // namespace fedprof::federation

#endif  // FEDPROF_FEDERATION_LISTING_H_
