// Paillier keys and ciphertexts (privacy/paillier.h) as peers and
// checkpoints hand them over. Input: a selector byte, then
//   0: a public key (PaillierPublicKey::Parse);
//   1: a ciphertext under the fixed key of fuzz_key.h (ParseCiphertext);
//   2: a secret key (PaillierSecretKey::Parse);
//   3: a decimal integer (BigInt::FromDecimal).
// What parses must serialise back to the same bytes (the formats are
// canonical), and a ciphertext must decrypt to a plaintext below n.

#include "fedprof/privacy/paillier.h"
#include "fuzz/fuzz_common.h"
#include "fuzz/fuzz_key.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  if (size < 1) return 0;
  const uint8_t selector = data[0] % 4;
  const std::string bytes = fuzz::Bytes(data + 1, size - 1);
  const PaillierSecretKey& key = fuzz::FuzzKey();
  return fuzz::Run([&] {
    switch (selector) {
      case 0: {
        const PaillierPublicKey pub = PaillierPublicKey::Parse(bytes);
        FUZZ_CHECK(pub.Serialize() == bytes, "public key did not round-trip");
        FUZZ_CHECK(pub.bits() >= kMinPaillierKeyBits && pub.bits() <= kMaxPaillierKeyBits,
                   "key size");
        return;
      }
      case 1: {
        const PaillierPublicKey& pub = key.public_key();
        const Ciphertext c = pub.ParseCiphertext(bytes);
        FUZZ_CHECK(pub.SerializeCiphertext(c) == bytes, "ciphertext did not round-trip");
        const BigInt m = key.Decrypt(c);
        FUZZ_CHECK(m.sign() >= 0 && m < pub.n(), "plaintext outside [0, n)");
        FUZZ_CHECK(key.DecryptWithoutCrt(c) == m, "CRT and textbook decryption differ");
        return;
      }
      case 2: {
        const PaillierSecretKey secret = PaillierSecretKey::Parse(bytes);
        FUZZ_CHECK(secret.Serialize() == bytes, "secret key did not round-trip");
        return;
      }
      default: {
        const BigInt x = BigInt::FromDecimal(bytes);
        FUZZ_CHECK(BigInt::FromDecimal(x.ToDecimal()) == x, "decimal did not round-trip");
        return;
      }
    }
  });
}
