// Client::Fit's second step: the reports of θ as received.
#include "fedprof/client/reports.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>

#include "fedprof/client/client.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/profiling/profiler.h"
#include "tests/blobs.h"

namespace fedprof {
namespace {

using testing_support::kBlobMlp;

struct Fixture {
  Fixture() {
    torch::manual_seed(3);
    data = testing_support::DrawBlobs(30);
    model = MakeModel(kBlobMlp);
  }
  Dataset data;
  std::shared_ptr<Model> model;
};

TEST(ReportsTest, WhatNeedsTheReceivedModel) {
  ReportRequest r;
  EXPECT_FALSE(NeedsReceivedModel(r));
  r.sketch_dim = 16;
  EXPECT_FALSE(NeedsReceivedModel(r)) << "a sketch is of the update, after training";
  for (bool ReportRequest::*asked : {&ReportRequest::profile, &ReportRequest::loss,
                                     &ReportRequest::evaluate}) {
    ReportRequest one;
    one.*asked = true;
    EXPECT_TRUE(NeedsReceivedModel(one));
  }
}

TEST(ReportsTest, NothingAskedNothingReported) {
  Fixture f;
  FitResult r;
  MakeReports(ReportRequest(), 4, *f.model, f.data, &r);
  EXPECT_FALSE(r.profile.has_value());
  EXPECT_TRUE(r.encrypted_divergence.empty());
  EXPECT_EQ(r.pre_train_loss, 0);
  EXPECT_EQ(r.eval_samples, 0);
  EXPECT_EQ(r.cost.profiling_time_s, 0);
}

TEST(ReportsTest, EachReportIsOfTheModelAsItIs) {
  Fixture f;
  ReportRequest asked;
  asked.profile = true;
  asked.loss = true;
  asked.evaluate = true;
  FitResult r;
  MakeReports(asked, 4, *f.model, f.data, &r);
  ASSERT_TRUE(r.profile.has_value());
  const Profile expected = ComputeProfile(*f.model, f.data, 4);
  EXPECT_EQ(r.profile->version, 4);
  EXPECT_EQ(r.profile->mean, expected.mean);
  EXPECT_EQ(r.profile->var, expected.var);
  ModelReplicas single(*f.model);
  const EvalResult e = Evaluate(single, f.data);
  EXPECT_DOUBLE_EQ(r.pre_train_loss, e.loss);
  EXPECT_GT(r.pre_train_loss, 0);
  EXPECT_EQ(r.eval_samples, 30);
  EXPECT_EQ(r.eval_correct, e.correct);
  EXPECT_DOUBLE_EQ(r.eval_loss, e.loss);
  EXPECT_GE(r.cost.profiling_time_s, 0);

  // The loss alone: no profile, no evaluation.
  ReportRequest loss_only;
  loss_only.loss = true;
  FitResult l;
  MakeReports(loss_only, 4, *f.model, f.data, &l);
  EXPECT_FALSE(l.profile.has_value());
  EXPECT_DOUBLE_EQ(l.pre_train_loss, e.loss);
  EXPECT_EQ(l.eval_samples, 0);
}

}  // namespace
}  // namespace fedprof
