// TOML configs with option validation (config/config.h, options.cc).
// Input: a TOML document; lines "#set key=value" after it are also applied
// as --set assignments. A config that is accepted must write itself back
// (ToToml) as TOML that reads back to an equal config with the same
// fingerprint: that is how a run's config.toml is resumed.

#include "fedprof/config/config.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  const std::string text = fuzz::Bytes(data, size);
  return fuzz::Run([&] {
    Config config;
    config.MergeTomlString(text, "fuzz.toml");
    size_t pos = 0;
    while ((pos = text.find("\n#set ", pos)) != std::string::npos) {
      pos += 6;
      config.SetAssignment(text.substr(pos, text.find('\n', pos) - pos));
    }
    const std::string toml = config.ToToml();
    Config again;
    try {
      again.MergeTomlString(toml, "config.toml");
    } catch (const Error& e) {
      FUZZ_CHECK(false, std::string("ToToml wrote a config it cannot read: ") + e.what());
    }
    FUZZ_CHECK(again == config, "ToToml did not round-trip");
    FUZZ_CHECK(again.Fingerprint() == config.Fingerprint(), "fingerprint changed");
  });
}
