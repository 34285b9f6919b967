#include "fedprof/secagg/shamir.h"

#include <gmp.h>

#include <set>
#include <string>

#include "fedprof/core/error.h"

namespace fedprof::secagg {
namespace {

// RAII for mpz_t.
class Mpz {
 public:
  Mpz() { mpz_init(v_); }
  explicit Mpz(unsigned long x) { mpz_init_set_ui(v_, x); }
  Mpz(const Mpz& o) { mpz_init_set(v_, o.v_); }
  Mpz& operator=(const Mpz& o) {
    mpz_set(v_, o.v_);
    return *this;
  }
  ~Mpz() { mpz_clear(v_); }
  mpz_ptr get() { return v_; }
  mpz_srcptr get() const { return v_; }

 private:
  mpz_t v_;
};

const Mpz& Prime() {
  static const Mpz p = [] {
    Mpz v;
    mpz_ui_pow_ui(v.get(), 2, 257);
    mpz_sub_ui(v.get(), v.get(), 93);
    return v;
  }();
  return p;
}

Mpz FromBytes(const Bytes& b) {
  Mpz v;
  mpz_import(v.get(), b.size(), 1, 1, 1, 0, b.data());
  return v;
}

Bytes ToBytes(const Mpz& v, size_t length) {
  Bytes out(length, '\0');
  const size_t bytes = (mpz_sizeinbase(v.get(), 2) + 7) / 8;
  if (bytes > length) throw Error("secagg: a field element does not fit its encoding");
  size_t written = 0;
  mpz_export(&out[length - bytes], &written, 1, 1, 1, 0, v.get());
  return out;
}

Mpz Abscissa(int64_t holder) {
  if (holder < 0) throw Error("secagg: negative share holder id " + std::to_string(holder));
  Mpz x;
  mpz_set_ui(x.get(), static_cast<unsigned long>(holder));
  mpz_add_ui(x.get(), x.get(), 1);
  return x;
}

Mpz ValueOf(const Share& s) {
  if (s.value.size() != kShareBytes) {
    throw Error("secagg: a share of " + std::to_string(s.value.size()) + " bytes, expected " +
                std::to_string(kShareBytes));
  }
  Mpz v = FromBytes(s.value);
  if (mpz_cmp(v.get(), Prime().get()) >= 0) throw Error("secagg: a share is not a field element");
  return v;
}

// f(at) of the polynomial through `basis`, by Lagrange interpolation.
Mpz Interpolate(const std::vector<Share>& basis, const Mpz& at) {
  const Mpz& p = Prime();
  std::vector<Mpz> xs(basis.size());
  std::set<int64_t> seen;
  for (size_t i = 0; i < basis.size(); ++i) {
    if (!seen.insert(basis[i].holder).second) {
      throw Error("secagg: two shares from holder " + std::to_string(basis[i].holder));
    }
    xs[i] = Abscissa(basis[i].holder);
  }
  Mpz result, num, den, term, diff;
  for (size_t i = 0; i < basis.size(); ++i) {
    mpz_set_ui(num.get(), 1);
    mpz_set_ui(den.get(), 1);
    for (size_t j = 0; j < basis.size(); ++j) {
      if (j == i) continue;
      mpz_sub(diff.get(), at.get(), xs[j].get());
      mpz_mul(num.get(), num.get(), diff.get());
      mpz_mod(num.get(), num.get(), p.get());
      mpz_sub(diff.get(), xs[i].get(), xs[j].get());
      mpz_mul(den.get(), den.get(), diff.get());
      mpz_mod(den.get(), den.get(), p.get());
    }
    // Distinct holders below 2^62 give distinct abscissae mod p: den != 0.
    if (mpz_invert(den.get(), den.get(), p.get()) == 0) {
      throw Error("secagg: shares with coinciding abscissae");
    }
    mpz_mul(term.get(), ValueOf(basis[i]).get(), num.get());
    mpz_mul(term.get(), term.get(), den.get());
    mpz_add(result.get(), result.get(), term.get());
    mpz_mod(result.get(), result.get(), p.get());
  }
  return result;
}

}  // namespace

std::vector<Share> ShareSecret(const Bytes& secret, int threshold,
                               const std::vector<int64_t>& holders) {
  if (secret.size() != kKeyBytes) {
    throw Error("secagg: a secret to share of " + std::to_string(secret.size()) +
                " bytes, expected 32");
  }
  if (threshold < 1 || static_cast<size_t>(threshold) > holders.size()) {
    throw Error("secagg: threshold " + std::to_string(threshold) + " for " +
                std::to_string(holders.size()) + " share holders");
  }
  const Mpz& p = Prime();
  // f(x) = secret + a_1 x + ... + a_{t-1} x^{t-1}, a_i uniform in F_p
  // (rejection sampling from 257 random bits).
  std::vector<Mpz> coefficients(static_cast<size_t>(threshold));
  coefficients[0] = FromBytes(secret);
  for (size_t i = 1; i < coefficients.size(); ++i) {
    do {
      Bytes r = RandomBytes(kShareBytes);
      r[0] = static_cast<char>(r[0] & 0x01);
      coefficients[i] = FromBytes(r);
    } while (mpz_cmp(coefficients[i].get(), p.get()) >= 0);
  }
  std::vector<Share> shares;
  shares.reserve(holders.size());
  std::set<int64_t> seen;
  Mpz y;
  for (int64_t holder : holders) {
    if (!seen.insert(holder).second) {
      throw Error("secagg: holder " + std::to_string(holder) + " listed twice");
    }
    const Mpz x = Abscissa(holder);
    mpz_set_ui(y.get(), 0);
    for (size_t i = coefficients.size(); i-- > 0;) {  // Horner
      mpz_mul(y.get(), y.get(), x.get());
      mpz_add(y.get(), y.get(), coefficients[i].get());
      mpz_mod(y.get(), y.get(), p.get());
    }
    shares.push_back({holder, ToBytes(y, kShareBytes)});
  }
  return shares;
}

Bytes Reconstructor::Reconstruct(const std::vector<Share>& shares, int threshold) {
  if (threshold < 1 || shares.size() != static_cast<size_t>(threshold)) {
    throw Error("secagg: " + std::to_string(shares.size()) + " shares to reconstruct a " +
                std::to_string(threshold) + "-of-n secret");
  }
  const Mpz& p = Prime();
  std::vector<int64_t> holders;
  for (const Share& s : shares) holders.push_back(s.holder);
  auto cached = coefficients_.find(holders);
  if (cached == coefficients_.end()) {
    std::set<int64_t> seen;
    std::vector<Mpz> xs(holders.size());
    for (size_t i = 0; i < holders.size(); ++i) {
      if (!seen.insert(holders[i]).second) {
        throw Error("secagg: two shares from holder " + std::to_string(holders[i]));
      }
      xs[i] = Abscissa(holders[i]);
    }
    std::vector<Bytes> lambdas;
    Mpz num, den, diff;
    for (size_t i = 0; i < xs.size(); ++i) {
      mpz_set_ui(num.get(), 1);
      mpz_set_ui(den.get(), 1);
      for (size_t j = 0; j < xs.size(); ++j) {
        if (j == i) continue;
        mpz_mul(num.get(), num.get(), xs[j].get());
        mpz_mod(num.get(), num.get(), p.get());
        mpz_sub(diff.get(), xs[j].get(), xs[i].get());
        mpz_mul(den.get(), den.get(), diff.get());
        mpz_mod(den.get(), den.get(), p.get());
      }
      if (mpz_invert(den.get(), den.get(), p.get()) == 0) {
        throw Error("secagg: shares with coinciding abscissae");
      }
      mpz_mul(num.get(), num.get(), den.get());
      mpz_mod(num.get(), num.get(), p.get());
      lambdas.push_back(ToBytes(num, kShareBytes));
    }
    cached = coefficients_.emplace(holders, std::move(lambdas)).first;
  }
  Mpz secret, term;
  for (size_t i = 0; i < shares.size(); ++i) {
    mpz_mul(term.get(), ValueOf(shares[i]).get(), FromBytes(cached->second[i]).get());
    mpz_add(secret.get(), secret.get(), term.get());
  }
  mpz_mod(secret.get(), secret.get(), p.get());
  if (mpz_sizeinbase(secret.get(), 2) > 8 * kKeyBytes) {
    throw Error("secagg: shares reconstruct a value of more than 256 bits");
  }
  return ToBytes(secret, kKeyBytes);
}

Bytes Reconstruct(const std::vector<Share>& shares, int threshold) {
  return Reconstructor().Reconstruct(shares, threshold);
}

bool OnPolynomial(const std::vector<Share>& basis, const Share& share) {
  const Mpz y = Interpolate(basis, Abscissa(share.holder));
  return mpz_cmp(y.get(), ValueOf(share).get()) == 0;
}

bool FieldPrimeIsPrime() { return mpz_probab_prime_p(Prime().get(), 50) > 0; }

}  // namespace fedprof::secagg
