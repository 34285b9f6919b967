#include "fedprof/core/text.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "fedprof/core/error.h"

namespace fedprof {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> pieces(1);
  for (char c : s) {
    if (c == sep) {
      pieces.emplace_back();
    } else {
      pieces.back() += c;
    }
  }
  return pieces;
}

std::string HexEncode(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

std::string HexDecode(const std::string& hex) {
  const auto digit = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw Error("'" + Printable(hex, 80) + "' is not lower-case hex");
  };
  if (hex.size() % 2 != 0) throw Error("'" + Printable(hex, 80) + "' is an odd number of hex digits");
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<char>(digit(hex[2 * i]) * 16 + digit(hex[2 * i + 1]));
  }
  return out;
}

namespace {
std::atomic<bool> withhold_file_text{false};
}  // namespace

std::string FileText(const std::string& s, size_t max_bytes) {
  return withhold_file_text.load() ? "(withheld)" : Printable(s, max_bytes);
}

void WithholdFileText() { withhold_file_text.store(true); }

std::string Printable(const std::string& s, size_t max_bytes) {
  static const char kHex[] = "0123456789abcdef";
  const size_t kept = std::min(s.size(), max_bytes);
  std::string out;
  out.reserve(kept + 32);
  for (size_t i = 0; i < kept; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (kept < s.size()) out += "...[+" + std::to_string(s.size() - kept) + " bytes]";
  return out;
}

int ParseClientId(const std::string& s, int limit) {
  if (s.empty() || s.size() > 9 || (s.size() > 1 && s[0] == '0') ||
      s.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  const int id = std::stoi(s);  // at most 9 digits: fits
  return id < limit ? id : -1;
}

std::string TextProblem(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t') || c == 0x7f) {
        return "control character at byte " + std::to_string(i) + ", expected printable text";
      }
      ++i;
      continue;
    }
    // Lead byte: sequence length and the smallest code point it may encode.
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xe0) == 0xc0) {
      n = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      n = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      n = 4, cp = c & 0x07, min = 0x10000;
    }
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xc0) == 0x80;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (!ok || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return "invalid UTF-8 at byte " + std::to_string(i) + ", expected UTF-8 text";
    }
    i += n;
  }
  return "";
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> items;
  for (std::string& item : Split(s, ',')) {
    if (!item.empty()) items.push_back(std::move(item));
  }
  return items;
}

namespace {
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}  // namespace

std::string EncodeFloats(const std::vector<float>& values) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  const size_t n = values.size() * sizeof(float);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t b0 = bytes[i], b1 = i + 1 < n ? bytes[i + 1] : 0, b2 = i + 2 < n ? bytes[i + 2] : 0;
    const uint32_t v = (b0 << 16) | (b1 << 8) | b2;
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += i + 1 < n ? kBase64[(v >> 6) & 63] : '=';
    out += i + 2 < n ? kBase64[v & 63] : '=';
  }
  return out;
}

std::vector<float> DecodeFloats(const std::string& text) {
  if (text.size() % 4 != 0) throw Error("base64 data: length " + std::to_string(text.size()) + " is not a multiple of 4");
  std::string bytes;
  bytes.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t j = 0; j < 4; ++j) {
      const char c = text[i + j];
      const char* at = std::strchr(kBase64, c);
      uint32_t digit = 0;
      if (c == '=' && i + 4 == text.size() && j >= 2) {
        ++pad;
      } else if (c != '\0' && at != nullptr) {
        digit = static_cast<uint32_t>(at - kBase64);
      } else {
        throw Error("base64 data: bad character at " + std::to_string(i + j));
      }
      v = (v << 6) | digit;
    }
    bytes += static_cast<char>((v >> 16) & 255);
    if (pad < 2) bytes += static_cast<char>((v >> 8) & 255);
    if (pad < 1) bytes += static_cast<char>(v & 255);
  }
  if (bytes.size() % sizeof(float) != 0) throw Error("base64 data: not a whole number of floats");
  std::vector<float> values(bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

std::string FormatDouble(double value, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value);
  return buf;
}

std::string FormatUtc(std::time_t t, const char* format) {
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[64];
  std::strftime(text, sizeof(text), format, &utc);
  return text;
}

}  // namespace fedprof
