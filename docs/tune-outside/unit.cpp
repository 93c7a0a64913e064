// A moderately sized translation unit: standard containers, algorithms, regex, iostreams.
#include <algorithm>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

template <typename K, typename V>
std::map<V, std::vector<K>> invert(const std::unordered_map<K, V>& m) {
  std::map<V, std::vector<K>> out;
  for (const auto& [k, v] : m) out[v].push_back(k);
  for (auto& [v, ks] : out) std::sort(ks.begin(), ks.end());
  return out;
}

int main() {
  std::unordered_map<std::string, int> counts;
  std::regex word("[a-z]+");
  std::string text = "the quick brown fox jumps over the lazy dog the end";
  for (auto it = std::sregex_iterator(text.begin(), text.end(), word); it != std::sregex_iterator(); ++it)
    ++counts[it->str()];
  std::ostringstream os;
  for (const auto& [n, words] : invert(counts)) {
    os << n << ":";
    for (const auto& w : words) os << ' ' << w;
    os << '\n';
  }
  std::cout << os.str();
}
