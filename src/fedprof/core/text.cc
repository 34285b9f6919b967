#include "fedprof/core/text.h"

#include <cstdio>

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

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> items;
  for (std::string& item : Split(s, ',')) {
    if (!item.empty()) items.push_back(std::move(item));
  }
  return items;
}

std::string FormatDouble(double value, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value);
  return buf;
}

}  // namespace fedprof
