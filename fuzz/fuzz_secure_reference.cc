// Encrypted reference profiles and divergences (privacy/secure_matching.h)
// under the fixed key of fuzz_key.h. Input: a selector byte, then
//   0: a SecureReference (the server's, as a client receives it): Parse,
//      which must serialise back to the same bytes, then the client's
//      EncryptedDivergence of a unit-Gaussian profile and the server's
//      DecryptDivergence of it;
//   1: a client's divergence ciphertext for a reference of 1..8 units
//      (the next byte), as the server decrypts it.

#include <cmath>

#include "fedprof/privacy/secure_matching.h"
#include "fuzz/fuzz_common.h"
#include "fuzz/fuzz_key.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  if (size < 2) return 0;
  const uint8_t selector = data[0] % 2;
  const PaillierSecretKey& key = fuzz::FuzzKey();
  return fuzz::Run([&] {
    if (selector == 0) {
      const std::string bytes = fuzz::Bytes(data + 1, size - 1);
      const SecureReference ref = SecureReference::Parse(bytes, key.public_key());
      FUZZ_CHECK(ref.Serialize() == bytes, "reference did not round-trip");
      Profile client;
      client.version = ref.version;
      client.layer = ref.layer;
      client.mean.assign(ref.units(), 0.0);
      client.var.assign(ref.units(), 1.0);
      const std::string c = EncryptedDivergence(key.public_key(), ref, client);
      const double div = DecryptDivergence(key, c, ref.units());
      FUZZ_CHECK(std::isfinite(div) && div >= 0, "divergence not finite and >= 0");
      return;
    }
    const size_t units = 1 + data[1] % 8;
    const double div = DecryptDivergence(key, fuzz::Bytes(data + 2, size - 2), units);
    FUZZ_CHECK(std::isfinite(div) && div >= 0, "divergence not finite and >= 0");
  });
}
