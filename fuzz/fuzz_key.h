#ifndef FEDPROF_FUZZ_FUZZ_KEY_H_
#define FEDPROF_FUZZ_FUZZ_KEY_H_

#include "fedprof/privacy/paillier.h"

namespace fedprof::fuzz {

// A fixed 1024-bit Paillier key (two 512-bit primes from `openssl prime
// -generate -bits 512`), so that every run of a target is deterministic and
// the seed corpora (fuzz/make_corpus.py) can hold its ciphertexts.
inline const PaillierSecretKey& FuzzKey() {
  static const PaillierSecretKey key = PaillierSecretKey::FromPrimes(
      BigInt::FromDecimal(
          "1162241209333127230727095053655864728585201953749417673690811944527520308095237614751763"
          "1544546667490588923481953287567537136886555637453054969981458985457"),
      BigInt::FromDecimal(
          "1335132875128343215557908087486949411743365767354364540278128739983555017811902188235524"
          "5263661479187934052525839686458197203120859633787209035985562595209"));
  return key;
}

}  // namespace fedprof::fuzz

#endif  // FEDPROF_FUZZ_FUZZ_KEY_H_
