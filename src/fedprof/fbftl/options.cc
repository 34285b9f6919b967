#include "fedprof/fbftl/options.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {

TransferOptions ReadTransferOptions(const Config& c) {
  TransferOptions o;
  o.seed = static_cast<uint64_t>(c.GetInt("seed"));
  o.schemes = SplitList(c.GetString("transfer.schemes"));
  for (const std::string& s : o.schemes) {
    if (SchemeId(s) == 0) {
      throw Error("transfer.schemes: unknown scheme '" + s +
                  "'; expected FL, FTL_f, FTL_c, SFL or FbFTL");
    }
  }
  o.cut = c.GetString("transfer.cut");
  o.clients = c.GetInt("transfer.clients");
  o.samples_per_client = c.GetInt("transfer.samples_per_client");
  o.per_iteration = std::max<int64_t>(
      1, std::llround(static_cast<double>(o.clients) * c.GetDouble("transfer.fraction")));
  o.epochs = static_cast<int>(c.GetInt("transfer.epochs"));
  o.head_epochs = static_cast<int>(c.GetInt("transfer.head_epochs"));
  o.patience = static_cast<int>(c.GetInt("transfer.patience"));
  o.refit = c.GetBool("transfer.refit");
  o.batch_size = c.GetInt("transfer.batch_size");
  o.validation_share = c.GetDouble("transfer.validation_share");
  o.lr = c.GetDouble("transfer.lr");
  o.momentum = c.GetDouble("transfer.momentum");
  o.weight_decay = c.GetDouble("transfer.weight_decay");
  o.sample_share = c.GetDouble("transfer.sample_share");
  o.compression.keep_ratio = c.GetDouble("transfer.keep_ratio");
  o.compression.bits = static_cast<int>(c.GetInt("transfer.bits"));
  o.compression.quantizer =
      c.GetString("transfer.quantizer") == "symmetric" ? Quantizer::kSymmetric : Quantizer::kMinMax;
  o.blocks_per_packet = c.GetInt("transfer.blocks_per_packet");
  o.packet_loss =
      PacketLossRate(c.GetDouble("transfer.block_loss"), static_cast<int>(o.blocks_per_packet));
  o.retransmissions = static_cast<int>(c.GetInt("transfer.retransmissions"));
  o.dp_noise = c.GetDouble("transfer.dp_noise");
  o.dp_clip = c.GetDouble("transfer.dp_clip");
  o.dp_delta = c.GetDouble("transfer.dp_delta");
  o.dp_paper_form = c.GetString("transfer.dp_form") == "paper";
  return o;
}

uint64_t SchemeId(const std::string& scheme) {
  static const std::map<std::string, uint64_t> ids = {
      {"FL", 1}, {"FTL_f", 2}, {"FTL_c", 3}, {"SFL", 4}, {"FbFTL", 5}};
  const auto found = ids.find(scheme);
  return found == ids.end() ? 0 : found->second;
}

PretrainOptions ReadPretrainOptions(const Config& c) {
  PretrainOptions o;
  o.seed = static_cast<uint64_t>(c.GetInt("seed"));
  o.epochs = static_cast<int>(c.GetInt("pretrain.epochs"));
  o.batch_size = c.GetInt("pretrain.batch_size");
  o.lr = c.GetDouble("pretrain.lr");
  return o;
}

}  // namespace fedprof
