#include "fedprof/fbftl/options.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {

TransferOptions ReadTransferOptions(const RunOptions::Transfer& t, int64_t seed) {
  TransferOptions o;
  o.seed = static_cast<uint64_t>(seed);
  o.schemes = SplitList(t.schemes);
  for (const std::string& s : o.schemes) {
    if (SchemeId(s) == 0) {
      throw Error("transfer.schemes: unknown scheme '" + s +
                  "'; expected FL, FTL_f, FTL_c, SFL or FbFTL");
    }
  }
  o.cut = t.cut;
  o.clients = t.clients;
  o.samples_per_client = t.samples_per_client;
  o.per_iteration = std::max<int64_t>(
      1, std::llround(static_cast<double>(o.clients) * t.fraction));
  o.epochs = static_cast<int>(t.epochs);
  o.head_epochs = static_cast<int>(t.head_epochs);
  o.patience = static_cast<int>(t.patience);
  o.refit = t.refit;
  o.batch_size = t.batch_size;
  o.validation_share = t.validation_share;
  o.lr = t.lr;
  o.momentum = t.momentum;
  o.weight_decay = t.weight_decay;
  o.sample_share = t.sample_share;
  o.compression.keep_ratio = t.keep_ratio;
  o.compression.bits = static_cast<int>(t.bits);
  o.compression.quantizer =
      t.quantizer == "symmetric" ? Quantizer::kSymmetric : Quantizer::kMinMax;
  o.blocks_per_packet = t.blocks_per_packet;
  o.packet_loss =
      PacketLossRate(t.block_loss, static_cast<int>(o.blocks_per_packet));
  o.retransmissions = static_cast<int>(t.retransmissions);
  o.dp_noise = t.dp_noise;
  o.dp_clip = t.dp_clip;
  o.dp_delta = t.dp_delta;
  o.dp_paper_form = t.dp_form == "paper";
  return o;
}

uint64_t SchemeId(const std::string& scheme) {
  static const std::map<std::string, uint64_t> ids = {
      {"FL", 1}, {"FTL_f", 2}, {"FTL_c", 3}, {"SFL", 4}, {"FbFTL", 5}};
  const auto found = ids.find(scheme);
  return found == ids.end() ? 0 : found->second;
}

PretrainOptions ReadPretrainOptions(const RunOptions::Pretrain& p, int64_t seed) {
  PretrainOptions o;
  o.seed = static_cast<uint64_t>(seed);
  o.epochs = static_cast<int>(p.epochs);
  o.batch_size = p.batch_size;
  o.lr = p.lr;
  return o;
}

}  // namespace fedprof
