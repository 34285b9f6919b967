#include "fedprof/profiling/profiler.h"

#include <torch/torch.h>

#include <cstring>

#include "fedprof/core/error.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"

namespace fedprof {

namespace {

// Sums of a profiled layer's rows and of their squares, in double.
struct RowSums {
  torch::Tensor sum, sum_sq;
};

RowSums SumRows(const torch::Tensor& rep) {
  const torch::Tensor r = rep.to(torch::kDouble);
  return {r.sum(0), r.pow(2).sum(0)};
}

// The profile of n rows whose sums per batch are `sums`, added in batch order.
Profile FromSums(const std::vector<RowSums>& sums, int64_t n, int64_t version,
                 const std::string& layer) {
  Profile p;
  p.version = version;
  p.layer = layer;
  if (n == 0) return p;
  torch::Tensor sum = sums[0].sum, sum_sq = sums[0].sum_sq;
  for (size_t b = 1; b < sums.size(); ++b) {
    sum = sum + sums[b].sum;
    sum_sq = sum_sq + sums[b].sum_sq;
  }
  const torch::Tensor mean = sum / static_cast<double>(n);
  const torch::Tensor var =
      (sum_sq / static_cast<double>(n) - mean.pow(2)).clamp_min(kVarianceFloor);
  p.mean.assign(mean.data_ptr<double>(), mean.data_ptr<double>() + mean.numel());
  p.var.assign(var.data_ptr<double>(), var.data_ptr<double>() + var.numel());
  return p;
}

}  // namespace

Profile ComputeProfile(ModelReplicas& replicas, const Dataset& data, int64_t version,
                       int64_t batch_size) {
  const int64_t n = data.size();
  std::vector<RowSums> sums((n + batch_size - 1) / batch_size);
  replicas.ForEachBatch(n, batch_size, [&](int64_t b, int64_t start, int64_t len, Model& model) {
    torch::NoGradGuard no_grad;
    model.eval();
    torch::Tensor rep;
    model.Forward(data.x.narrow(0, start, len), &rep);
    sums[b] = SumRows(rep);
  });
  return FromSums(sums, n, version, replicas.primary().profiled_layer());
}

std::vector<Profile> ComputeProfiles(Model& model, const std::vector<const Dataset*>& data,
                                     int64_t version, int64_t batch_size) {
  torch::NoGradGuard no_grad;
  model.eval();
  int64_t total = 0;
  for (const Dataset* d : data) total += d->size();
  // The layer's rows of every sample, data set after data set.
  std::vector<torch::Tensor> reps;
  size_t next = 0;   // the data set the next pass starts in
  int64_t from = 0;  // and its first sample there
  for (int64_t start = 0; start < total; start += batch_size) {
    std::vector<torch::Tensor> pieces;
    for (int64_t want = std::min(batch_size, total - start); want > 0;) {
      const int64_t have = data[next]->size() - from;
      const int64_t take = std::min(want, have);
      if (take > 0) pieces.push_back(data[next]->x.narrow(0, from, take));
      want -= take;
      from += take;
      if (from == data[next]->size()) {
        ++next;
        from = 0;
      }
    }
    torch::Tensor rep;
    model.Forward(pieces.size() == 1 ? pieces[0] : torch::cat(pieces), &rep);
    reps.push_back(rep);
  }
  std::vector<int64_t> sizes;
  sizes.reserve(data.size());
  for (const Dataset* d : data) sizes.push_back(d->size());
  return ProfilesFromRows(reps.empty() ? torch::Tensor() : torch::cat(reps), sizes, version,
                          model.profiled_layer(), batch_size);
}

std::vector<Profile> ProfilesFromRows(const torch::Tensor& rows, const std::vector<int64_t>& sizes,
                                      int64_t version, const std::string& layer,
                                      int64_t batch_size) {
  std::vector<Profile> profiles;
  profiles.reserve(sizes.size());
  int64_t offset = 0;
  for (const int64_t n : sizes) {
    std::vector<RowSums> sums;
    for (int64_t b = 0; b < n; b += batch_size) {
      sums.push_back(SumRows(rows.narrow(0, offset + b, std::min(batch_size, n - b))));
    }
    profiles.push_back(FromSums(sums, n, version, layer));
    offset += n;
  }
  return profiles;
}

Profile ComputeProfile(Model& model, const Dataset& data, int64_t version, int64_t batch_size) {
  ModelReplicas single(model);
  return ComputeProfile(single, data, version, batch_size);
}

SharedRepresentations::SharedRepresentations(InputTables tables, int64_t batch_size)
    : tables_(std::move(tables)), batch_size_(batch_size) {
  int64_t passes = 0;
  for (const int64_t rows : tables_.sizes) {
    first_pass_.push_back(passes);
    passes += (rows + batch_size_ - 1) / batch_size_;
  }
  passes_.resize(static_cast<size_t>(passes));
  computed_ = std::make_unique<std::once_flag[]>(static_cast<size_t>(passes));
}

const torch::Tensor& SharedRepresentations::Pass(Model& model, int table, int64_t c) {
  const size_t i = static_cast<size_t>(first_pass_[table] + c);
  std::call_once(computed_[i], [&] {
    torch::NoGradGuard no_grad;
    model.eval();
    const int64_t start = c * batch_size_;
    const int64_t len = std::min(batch_size_, tables_.sizes[table] - start);
    torch::Tensor rep;
    model.Forward(tables_.inputs(table, start, len), &rep);
    // Its own storage, whatever the representation is a view of.
    passes_[i] = rep.reshape({len, -1}).clone(torch::MemoryFormat::Contiguous);
  });
  return passes_[i];
}

torch::Tensor SharedRepresentations::Gather(Model& model, const std::vector<const TableRows*>& sets) {
  int64_t total = 0;
  for (const TableRows* s : sets) {
    if (s->table < 0 || s->table >= static_cast<int>(tables_.sizes.size())) {
      throw Error("shared inputs: no table " + std::to_string(s->table));
    }
    for (const int64_t r : s->rows) {
      if (r < 0 || r >= tables_.sizes[s->table]) {
        throw Error("shared inputs: row " + std::to_string(r) + " of table " +
                    std::to_string(s->table) + ", which has " +
                    std::to_string(tables_.sizes[s->table]));
      }
    }
    total += static_cast<int64_t>(s->rows.size());
  }
  if (total == 0) return torch::Tensor();
  torch::Tensor out;
  char* to = nullptr;
  int64_t row_bytes = 0;
  for (const TableRows* s : sets) {
    for (const int64_t r : s->rows) {
      const torch::Tensor& pass = Pass(model, s->table, r / batch_size_);
      if (!out.defined()) {
        out = torch::empty({total, pass.size(1)}, pass.options());
        to = static_cast<char*>(out.data_ptr());
        row_bytes = pass.size(1) * static_cast<int64_t>(pass.element_size());
      }
      std::memcpy(to, static_cast<const char*>(pass.data_ptr()) + (r % batch_size_) * row_bytes,
                  static_cast<size_t>(row_bytes));
      to += row_bytes;
    }
  }
  return out;
}

}  // namespace fedprof
