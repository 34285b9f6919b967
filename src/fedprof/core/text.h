#ifndef FEDPROF_CORE_TEXT_H_
#define FEDPROF_CORE_TEXT_H_

#include <ctime>
#include <string>
#include <vector>

namespace fedprof {

// `s` cut at every `sep`, empty pieces kept ("a,,b" -> "a", "", "b").
std::vector<std::string> Split(const std::string& s, char sep);

// A comma-separated list with empty items dropped ("a,,b," -> "a", "b").
std::vector<std::string> SplitList(const std::string& s);

// Float vectors as base64 text (their little-endian bytes), for state kept
// inside JSON. DecodeFloats throws fedprof::Error on malformed input.
std::string EncodeFloats(const std::vector<float>& values);
std::vector<float> DecodeFloats(const std::string& text);

// Bytes as lower-case hex digits, and back; HexDecode throws fedprof::Error
// on anything but an even number of lower-case hex digits.
std::string HexEncode(const std::string& bytes);
std::string HexDecode(const std::string& hex);

// The one sanitiser for text that someone else wrote (a client's strings, a
// config value) before it is logged, echoed or stored: every byte outside
// printable ASCII (control characters, DEL, and the bytes of multi-byte
// characters, which a terminal may take for control sequences) is written
// as \xNN, so the result is one line that cannot forge another, and text
// already made printable passes unchanged; at most `max_bytes` of `s` are
// kept, and a cut says how much was left out ("...[+4194244 bytes]").
std::string Printable(const std::string& s, size_t max_bytes = 80);

// What an error line may quote of a file's content (a CSV header, a cell):
// Printable(s, max_bytes), or "(withheld)" once WithholdFileText() was
// called. A process running another party's config calls it (fedprof
// server --foreign-config, as a federation starts its runs): that party
// reads its error lines, and may have named a file that is not its own.
std::string FileText(const std::string& s, size_t max_bytes = 80);
void WithholdFileText();

// "" if `s` is valid UTF-8 without control characters other than tab (text
// that TOML and JSON files can hold as written); else the problem and its
// byte offset.
std::string TextProblem(const std::string& s);

// `s` as a client id: canonical decimal (digits only, no sign, no leading
// zero but "0" itself) and below `limit`; -1 otherwise. "01", "1abc", "+1"
// and " 1" are no ids, so two spellings never name one client.
int ParseClientId(const std::string& s, int limit);

// `value` printed with a printf format for one double.
std::string FormatDouble(double value, const char* format = "%g");

// The time `t` in UTC, printed with a strftime format (by default ISO 8601,
// 2026-12-01T09:30:00Z).
std::string FormatUtc(std::time_t t, const char* format = "%Y-%m-%dT%H:%M:%SZ");

}  // namespace fedprof

#endif  // FEDPROF_CORE_TEXT_H_
