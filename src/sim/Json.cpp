#include "Json.h"

#include <cmath>
#include <cstdlib>

namespace heapkit::sim {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  JsonValue document() {
    JsonValue value = parseValue(0);
    skipSpace();
    if (at_ != text_.size()) fail("unexpected text after the JSON value");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void fail(const std::string& what) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < at_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw JsonError("line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
  }

  void skipSpace() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r'))
      ++at_;
  }

  bool consume(const char* word) {
    std::size_t n = std::char_traits<char>::length(word);
    if (text_.compare(at_, n, word) != 0) return false;
    at_ += n;
    return true;
  }

  JsonValue parseValue(int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    skipSpace();
    if (at_ >= text_.size()) fail("unexpected end of the document");
    JsonValue value;
    char c = text_[at_];
    if (c == '{') {
      value.kind = JsonValue::Kind::Object;
      ++at_;
      skipSpace();
      if (at_ < text_.size() && text_[at_] == '}') {
        ++at_;
        return value;
      }
      while (true) {
        skipSpace();
        if (at_ >= text_.size() || text_[at_] != '"') fail("expected a quoted member name");
        std::string key = parseString();
        if (value.find(key) != nullptr) fail("member \"" + key + "\" appears twice");
        skipSpace();
        if (at_ >= text_.size() || text_[at_] != ':') fail("expected ':' after a member name");
        ++at_;
        value.members.emplace_back(std::move(key), parseValue(depth + 1));
        skipSpace();
        if (at_ < text_.size() && text_[at_] == ',') {
          ++at_;
          continue;
        }
        if (at_ < text_.size() && text_[at_] == '}') {
          ++at_;
          return value;
        }
        fail("expected ',' or '}' in an object");
      }
    }
    if (c == '[') {
      value.kind = JsonValue::Kind::Array;
      ++at_;
      skipSpace();
      if (at_ < text_.size() && text_[at_] == ']') {
        ++at_;
        return value;
      }
      while (true) {
        value.items.push_back(parseValue(depth + 1));
        skipSpace();
        if (at_ < text_.size() && text_[at_] == ',') {
          ++at_;
          continue;
        }
        if (at_ < text_.size() && text_[at_] == ']') {
          ++at_;
          return value;
        }
        fail("expected ',' or ']' in an array");
      }
    }
    if (c == '"') {
      value.kind = JsonValue::Kind::String;
      value.text = parseString();
      return value;
    }
    if (consume("true")) {
      value.kind = JsonValue::Kind::Bool;
      value.boolean = true;
      return value;
    }
    if (consume("false")) {
      value.kind = JsonValue::Kind::Bool;
      return value;
    }
    if (consume("null")) return value;
    if (c == '-' || (c >= '0' && c <= '9')) return parseNumber();
    fail(std::string("unexpected character '") + c + "'");
  }

  std::string parseString() {
    ++at_;  // the opening quote
    std::string out;
    while (true) {
      if (at_ >= text_.size()) fail("unterminated string");
      char c = text_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) fail("unterminated string");
      char escape = text_[at_++];
      switch (escape) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (at_ + 4 > text_.size()) fail("short \\u escape");
          unsigned code = 0;
          for (int i = 0; i < 4; ++i) {
            char h = text_[at_++];
            code <<= 4;
            if (h >= '0' && h <= '9') code |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f') code |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') code |= static_cast<unsigned>(h - 'A' + 10);
            else fail("bad \\u escape");
          }
          // Names and descriptions only: code points of the Basic Multilingual Plane.
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default: fail("bad escape in a string");
      }
    }
  }

  JsonValue parseNumber() {
    JsonValue value;
    value.kind = JsonValue::Kind::Number;
    std::size_t start = at_;
    if (text_[at_] == '-') {
      value.negative = true;
      ++at_;
    }
    if (at_ >= text_.size() || text_[at_] < '0' || text_[at_] > '9') fail("bad number");
    bool digitsOnly = true;
    while (at_ < text_.size()) {
      char c = text_[at_];
      if (c >= '0' && c <= '9') {
        ++at_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || (c == '-' && at_ > start + 1)) {
        digitsOnly = false;
        ++at_;
      } else {
        break;
      }
    }
    std::string literal = text_.substr(start, at_ - start);
    char* end = nullptr;
    value.number = std::strtod(literal.c_str(), &end);
    if (end != literal.c_str() + literal.size() || !std::isfinite(value.number)) fail("bad number '" + literal + "'");
    if (digitsOnly && !value.negative && literal.size() <= 19) {
      value.integral = true;
      value.unsignedValue = std::strtoull(literal.c_str(), nullptr, 10);
    } else if (digitsOnly && value.negative) {
      value.integral = literal == "-0";
    }
    return value;
  }

  const std::string& text_;
  std::size_t at_ = 0;
};

}  // namespace

JsonValue parseJson(const std::string& text) { return Parser(text).document(); }

}  // namespace heapkit::sim
