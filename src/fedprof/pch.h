// Precompiled header: the heavy third-party headers most translation units use.
#include <torch/torch.h>

#include <nlohmann/json.hpp>
