#ifndef FEDPROF_FBFTL_OPTIONS_H_
#define FEDPROF_FBFTL_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"
#include "fedprof/fbftl/compression.h"

namespace fedprof {

// The transfer.* options of a run of the transfer schemes, as the schemes
// use them (config/options.cc holds their defaults and ranges).
struct TransferOptions {
  uint64_t seed = 1;
  std::vector<std::string> schemes;  // of FL, FTL_f, FTL_c, SFL, FbFTL, in run order
  std::string cut;                   // m_c: the first stage of the head
  int64_t clients = 0;               // U
  int64_t samples_per_client = 0;    // K_u
  int64_t per_iteration = 0;         // U C, at least 1
  int epochs = 0, head_epochs = 0, patience = 0;
  bool refit = false;
  int64_t batch_size = 64;
  double validation_share = 0, lr = 0, momentum = 0, weight_decay = 0, sample_share = 1;
  Compression compression;
  double packet_loss = 0;   // PLR of a packet, Eq. 18
  int retransmissions = 0;  // n_r, Eq. 19
  int64_t blocks_per_packet = 1;
  double dp_noise = 0, dp_clip = 1, dp_delta = 1e-6;
  bool dp_paper_form = false;  // transfer.dp_form = paper
};

// Throws fedprof::Error for a transfer.schemes entry that is not a scheme.
TransferOptions ReadTransferOptions(const RunOptions::Transfer& options, int64_t seed);

// A scheme's id (FL 1, FTL_f 2, FTL_c 3, SFL 4, FbFTL 5), part of every
// random stream's tag so that schemes draw independently; 0 for a name that
// is no scheme. The ids are part of the reproducibility contract.
uint64_t SchemeId(const std::string& scheme);

// The pretrain.* options (and the run seed) of `fedprof pretrain`.
struct PretrainOptions {
  uint64_t seed = 1;
  int epochs = 0;
  int64_t batch_size = 64;
  double lr = 0;
};

PretrainOptions ReadPretrainOptions(const RunOptions::Pretrain& options, int64_t seed);

}  // namespace fedprof

#endif  // FEDPROF_FBFTL_OPTIONS_H_
