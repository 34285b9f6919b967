#include "fedprof/profiling/profiler.h"

#include <torch/torch.h>

#include <cstring>

#include "fedprof/core/error.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"

namespace fedprof {

namespace {

// A profiled layer's rows in double, and their squares.
struct Rows {
  torch::Tensor r, r2;
};

Rows InDouble(const torch::Tensor& rep) {
  const torch::Tensor r = rep.to(torch::kDouble);
  return {r, r.pow(2)};
}

// Sums of rows and of their squares.
struct RowSums {
  torch::Tensor sum, sum_sq;
};

// The sums of rows [start, start + len).
RowSums SumRows(const Rows& rows, int64_t start, int64_t len) {
  return {rows.r.narrow(0, start, len).sum(0), rows.r2.narrow(0, start, len).sum(0)};
}

// The sums of one data set's rows: its passes' `sums`, added in pass order.
RowSums Total(const std::vector<RowSums>& sums) {
  RowSums total = sums[0];
  for (size_t b = 1; b < sums.size(); ++b) {
    total.sum = total.sum + sums[b].sum;
    total.sum_sq = total.sum_sq + sums[b].sum_sq;
  }
  return total;
}

// The profiles of data sets of counts[i] rows whose sums are totals[i]
// (unused for an empty one): the mean and the population variance (divide
// by n) floored at kVarianceFloor, computed for all of them in one set of
// elementwise operations, the same values as one at a time (a report pass
// profiles a million clients).
std::vector<Profile> FromSums(const std::vector<RowSums>& totals,
                              const std::vector<int64_t>& counts, int64_t version,
                              const std::string& layer) {
  std::vector<Profile> profiles(counts.size());
  std::vector<torch::Tensor> sums, squares;
  std::vector<double> n;
  for (size_t i = 0; i < counts.size(); ++i) {
    profiles[i].version = version;
    profiles[i].layer = layer;
    if (counts[i] == 0) continue;
    sums.push_back(totals[i].sum.reshape({-1}));
    squares.push_back(totals[i].sum_sq.reshape({-1}));
    n.push_back(static_cast<double>(counts[i]));
  }
  if (n.empty()) return profiles;
  const torch::Tensor count = torch::tensor(n, torch::kDouble).unsqueeze(1);
  const torch::Tensor mean = torch::stack(sums) / count;
  const torch::Tensor var =
      (torch::stack(squares) / count - mean.pow(2)).clamp_min(kVarianceFloor);
  const int64_t units = mean.size(1);
  const double* m = mean.data_ptr<double>();
  const double* v = var.data_ptr<double>();
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    profiles[i].mean.assign(m, m + units);
    profiles[i].var.assign(v, v + units);
    m += units;
    v += units;
  }
  return profiles;
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
    sums[b] = SumRows(InDouble(rep), 0, len);
  });
  const std::string& layer = replicas.primary().profiled_layer();
  return FromSums({n > 0 ? Total(sums) : RowSums()}, {n}, version, layer)[0];
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
  // In double and squared once for all data sets (elementwise: the same
  // values as pass by pass), summed per data set and pass.
  const Rows all = rows.defined() ? InDouble(rows) : Rows();
  std::vector<RowSums> totals(sizes.size());
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t n = sizes[i];
    std::vector<RowSums> sums;
    for (int64_t b = 0; b < n; b += batch_size) {
      sums.push_back(SumRows(all, offset + b, std::min(batch_size, n - b)));
    }
    if (n > 0) totals[i] = Total(sums);
    offset += n;
  }
  return FromSums(totals, sizes, version, layer);
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
