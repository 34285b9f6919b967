#ifndef FEDPROF_FBFTL_PAYLOAD_H_
#define FEDPROF_FBFTL_PAYLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

namespace fedprof {

class StagedModel;

// A trainable layer as the FbFTL paper counts it (Section III-D): a dense
// layer N- -> N+ has T = N+(N- + 1) parameters and X = T multiplications per
// sample; a conv layer (stride 1, same padding) on an a x b x c- input with
// c+ kernels of a' x b' has T = c+(a'b'c- + 1) and X = a b T.
struct LayerCount {
  std::string name;
  int64_t inputs = 0;      // N-: values entering the layer per sample
  int64_t params = 0;      // T_m
  double macs = 0;         // X_m per sample
};

// The layers of a named architecture for an input of `channels` x `height` x
// `width` and `classes` outputs. "vgg16": VGG-16's 13 conv layers (max-pool
// after blocks 1-5) and the FbFTL paper's dense stack 25088 -> 4096 -> 4096 ->
// 4096 -> 512 -> classes (fc1..fc5; 153,144,650 parameters at 3x224x224 and
// 10 classes). Throws fedprof::Error naming --model for an unknown one.
std::vector<LayerCount> DescribeLayers(const std::string& model, int64_t channels, int64_t height,
                                       int64_t width, int64_t classes);

// The stages of `model` as the paper counts layers, for one sample of
// `input_shape`: N⁻ (values entering), T (parameters) and X (multiplications:
// T for a dense layer, input height × width × T for a conv layer, even one
// whose stride or padding differ). Throws c10::Error when the model does not
// accept the shape.
std::vector<LayerCount> CountStageLayers(StagedModel& model,
                                         const std::vector<int64_t>& input_shape);

// The layers `fedprof payload --model` names, for one sample of `input`
// (C, H, W): "vgg16" described without building it (DescribeLayers), a
// transfer architecture (vgg_small, lenet5) or a staged model file built and
// counted (CountStageLayers). Throws fedprof::Error naming --model or
// --input when the model is unknown or does not take the input.
std::vector<LayerCount> PayloadLayers(const std::string& model, const std::vector<int64_t>& input,
                                      int64_t classes);

struct PayloadSetup {
  int64_t clients = 6250;             // U
  int64_t samples_per_client = 8;     // K_u
  double fraction = 1.28e-3;          // C (U C clients per iteration)
  double bits = 32;                   // d
  double epochs_fl = 105;             // FL (and SFL)
  double epochs_ftl_f = 31;           // FTL_f
  double epochs_ftl_c = 84;           // FTL_c
};

// One scheme's row of the paper's Table III, from the closed forms Eqs. 2-17.
struct SchemePayload {
  std::string scheme;
  double upload_batches = 0;   // I U C, or Σ K_u for FbFTL
  double params_per_batch = 0;
  double bits_per_batch = 0;
  double uplink_bits = 0;      // P
  double downlink_bits = 0;    // D
  double client_macs = 0;      // X
};

// Rows for FL, SFL, FTL_f, FTL_c and FbFTL with the cut at layer `cut` (the
// first layer of the task head). An epoch is U K_u samples, so I = epochs U /
// (U C) iterations of U C clients each. Throws fedprof::Error naming --cut
// when no layer has that name.
std::vector<SchemePayload> ClosedFormPayloads(const std::vector<LayerCount>& layers,
                                              const std::string& cut, const PayloadSetup& setup);

}  // namespace fedprof

#endif  // FEDPROF_FBFTL_PAYLOAD_H_
