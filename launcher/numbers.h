// Strict number parsing for arcrun's arguments: the whole text must be the number (no spaces,
// no trailing characters), so "4x" or "" never turns into 4 or 0.
#pragma once

#include <optional>
#include <string>

namespace arcreduce::launcher {

// A decimal integer, optionally signed; nullopt if it does not parse or overflows.
std::optional<long long> parse_integer(const std::string& text);

// A finite floating-point number (strtod syntax); nullopt otherwise.
std::optional<double> parse_number(const std::string& text);

}  // namespace arcreduce::launcher
