#include "fedprof/config/config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "fedprof/config/options.h"
#include "fedprof/core/error.h"

namespace fedprof {
namespace {

std::string ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigTest, DefaultsComeFromTheTable) {
  Config c;
  for (const auto& o : AllOptions()) {
    EXPECT_NO_THROW(c.Set(o.name, o.default_value)) << o.name;
  }
  EXPECT_EQ(c.options().clients.count, 100);
  EXPECT_DOUBLE_EQ(c.options().strategy.fraction, 0.1);
  EXPECT_EQ(c.options().strategy.aggregation, "full");
}

TEST(ConfigTest, TomlSectionsBecomeDottedKeys) {
  Config c;
  c.MergeTomlString("seed = 9\n[train]\nlr = 0.05\nepochs = 3\n[report]\nprogress = false\n", "t");
  EXPECT_EQ(c.options().seed, 9);
  EXPECT_DOUBLE_EQ(c.options().train.lr, 0.05);
  EXPECT_EQ(c.options().train.epochs, 3);
  EXPECT_FALSE(c.options().report.progress);
}

TEST(ConfigTest, UnknownKeyNamesTheNearestOne) {
  Config c;
  const std::string e = ErrorOf([&] { c.MergeTomlString("[train]\nlrr = 0.1\n", "exp.toml"); });
  EXPECT_NE(e.find("'train.lrr'"), std::string::npos) << e;
  EXPECT_NE(e.find("exp.toml:2"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'train.lr'"), std::string::npos) << e;
}

TEST(ConfigTest, OutOfRangeAndBadTypesAreRefused) {
  Config c;
  std::string e = ErrorOf([&] { c.SetAssignment("strategy.fraction=1.5"); });
  EXPECT_NE(e.find("strategy.fraction"), std::string::npos) << e;
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  e = ErrorOf([&] { c.SetAssignment("rounds=2.5"); });
  EXPECT_NE(e.find("whole number"), std::string::npos) << e;
  e = ErrorOf([&] { c.SetAssignment("train.lr=fast"); });
  EXPECT_NE(e.find("not a number"), std::string::npos) << e;
  e = ErrorOf([&] { c.SetAssignment("model.name=resnet"); });
  EXPECT_NE(e.find("lenet5|cnn|mlp"), std::string::npos) << e;
  e = ErrorOf([&] { c.SetAssignment("noequals"); });
  EXPECT_NE(e.find("key=value"), std::string::npos) << e;
  e = ErrorOf([&] { c.MergeTomlString("[train\n", "broken.toml"); });
  EXPECT_NE(e.find("broken.toml:1"), std::string::npos) << e;
  // A refused value leaves the old one in place.
  EXPECT_DOUBLE_EQ(c.options().strategy.fraction, 0.1);
}

TEST(ConfigTest, ResolvedTomlRoundTrips) {
  Config c;
  c.SetAssignment("train.lr=0.0123456789");
  c.SetAssignment("data.dir=/tmp/some \"quoted\" dir");
  c.SetAssignment("report.progress=false");
  Config back;
  back.MergeTomlString(c.ToToml(), "resolved");
  EXPECT_TRUE(back == c);
}

TEST(ConfigTest, FingerprintCoversWhatMayNotChangeOnResume) {
  const Config base;
  EXPECT_EQ(base.Fingerprint().size(), 64u);
  // What a resume may change leaves the fingerprint alone...
  for (const char* set : {"rounds=7", "threads=2", "report.progress=false",
                          "deploy.round_timeout_s=5", "deploy.min_results=3"}) {
    Config c;
    c.SetAssignment(set);
    EXPECT_EQ(c.Fingerprint(), base.Fingerprint()) << set;
    EXPECT_TRUE(MayChangeOnResume(std::string(set).substr(0, std::string(set).find('='))));
  }
  // ...every other option changes it.
  for (const char* set : {"seed=2", "train.lr=0.02", "data.name=mnist", "model.hidden=32",
                          "strategy.name=fedprof", "report.target=0.5"}) {
    Config c;
    c.SetAssignment(set);
    EXPECT_NE(c.Fingerprint(), base.Fingerprint()) << set;
  }
  EXPECT_FALSE(MayChangeOnResume("deployment"));
  // Values are length-prefixed: moving text between two options shows.
  Config a, b;
  a.Set("data.train_file", "ab");
  a.Set("data.test_file", "c");
  b.Set("data.train_file", "a");
  b.Set("data.test_file", "bc");
  EXPECT_NE(a.Fingerprint(), b.Fingerprint());
}

// A value of `o` other than its default, valid for it.
std::string OtherValue(const OptionSpec& o) {
  switch (o.type) {
    case OptionType::kBool: return std::string(o.default_value) == "true" ? "false" : "true";
    case OptionType::kInt:
    case OptionType::kDouble: {
      const double def = MayBeEmpty(o) ? o.min : std::strtod(o.default_value, nullptr);
      const double v = def < o.max ? std::min(o.max, def + 1) : o.min;
      return o.type == OptionType::kInt ? std::to_string(static_cast<int64_t>(v))
                                        : CanonicalDouble(v);
    }
    case OptionType::kString: {
      if (!*o.choices) return std::string(o.default_value) + "x";
      std::string choices = o.choices;
      const std::string first = choices.substr(0, choices.find('|'));
      return first != o.default_value ? first : choices.substr(choices.find('|') + 1,
                                                               choices.find('|', first.size() + 1) -
                                                                   first.size() - 1);
    }
  }
  return "";
}

TEST(OptionsTest, EveryOptionIsBoundToItsOwnField) {
  // Setting one option changes its own field, as its canonical text, and no
  // other option's field: no two rows share a field, none is left unbound.
  const Config base;
  for (const auto& o : AllOptions()) {
    const std::string def = o.type == OptionType::kDouble && *o.default_value
                                ? CanonicalDouble(std::strtod(o.default_value, nullptr))
                                : o.default_value;
    EXPECT_EQ(o.read(base.options()), def) << o.name;
    Config c;
    const std::string value = OtherValue(o);
    ASSERT_NE(value, o.default_value) << o.name;
    c.Set(o.name, value);
    EXPECT_EQ(o.read(c.options()), value) << o.name;
    for (const auto& other : AllOptions()) {
      if (&other == &o) continue;
      EXPECT_EQ(other.read(c.options()), other.read(base.options()))
          << "setting " << o.name << " changed " << other.name;
    }
  }
}

TEST(OptionsTest, ResumableOptionsAreTheTablesColumn) {
  EXPECT_EQ(ResumableOptionsList(),
            "rounds, threads, report.progress, client_state.memory_mb, secagg.client_reports, "
            "secagg.phase_timeout_s, dp.client_unbounded, dp.target_epsilon, deploy.*, dist.timeout_s");
  for (const auto& o : AllOptions()) EXPECT_EQ(MayChangeOnResume(o.name), o.resumable) << o.name;
  EXPECT_FALSE(MayChangeOnResume("no.such.option"));
}

TEST(OptionsTest, MarkdownListsEveryOption) {
  const std::string md = OptionsMarkdown();
  for (const auto& o : AllOptions()) {
    EXPECT_NE(md.find(std::string("`") + o.name + "`"), std::string::npos) << o.name;
  }
}

}  // namespace
}  // namespace fedprof
