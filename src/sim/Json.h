// A small JSON reader for DMM specs: the preload library reads its spec while the process
// starts, before any other library can be trusted to be initialised, so it cannot lean
// on one. Values keep object members in file order; errors say the line and column.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace heapkit::sim {

struct JsonError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class JsonValue {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  bool integral = false;        // written without fraction or exponent, and fits in uint64
  std::uint64_t unsignedValue = 0;
  bool negative = false;
  std::string text;
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;

  const JsonValue* find(const std::string& key) const {
    for (const auto& [name, value] : members)
      if (name == key) return &value;
    return nullptr;
  }
  static const char* kindName(Kind kind) {
    switch (kind) {
      case Kind::Null: return "null";
      case Kind::Bool: return "a boolean";
      case Kind::Number: return "a number";
      case Kind::String: return "a string";
      case Kind::Array: return "an array";
      case Kind::Object: return "an object";
    }
    return "?";
  }
};

// Parses one JSON document; throws JsonError("line L, column C: ...").
JsonValue parseJson(const std::string& text);

}  // namespace heapkit::sim
