// PyWriter: writes Python (and Triton) source line by line at a managed
// indentation, so that a generator composes blocks by calls (Open returns a
// scope that closes the block) instead of pasting pre-indented text.
#pragma once

#include <string>

namespace ax::builtin {

class PyWriter {
 public:
  // A block opened by Open: what is written while it lives is indented one
  // level deeper; it closes when it goes out of scope.
  class Block {
   public:
    explicit Block(PyWriter* w) : w_(w) { ++w_->depth_; }
    // A block handed on (returned by a helper that wrote its header) closes once.
    Block(Block&& o) noexcept : w_(o.w_) { o.w_ = nullptr; }
    ~Block() {
      if (w_) --w_->depth_;
    }
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    Block& operator=(Block&&) = delete;

   private:
    PyWriter* w_;
  };

  explicit PyWriter(int depth = 0) : depth_(depth) {}

  // One line at the current indentation (an empty one stays empty).
  PyWriter& Line(const std::string& s = "") {
    if (!s.empty()) out_.append(static_cast<size_t>(depth_) * 4, ' ').append(s);
    out_ += '\n';
    return *this;
  }
  // Writes `header` (a statement ending in ':') and indents what follows
  // until the returned Block ends.
  [[nodiscard]] Block Open(const std::string& header) {
    Line(header);
    return Block(this);
  }
  // Lines of text written by an older generator at a fixed indentation:
  // each loses `strip` leading spaces (where it has them) and is written at
  // the current indentation, so its relative nesting is kept.
  PyWriter& Text(const std::string& text, size_t strip = 0) {
    size_t at = 0;
    while (at < text.size()) {
      size_t nl = text.find('\n', at);
      if (nl == std::string::npos) nl = text.size();
      std::string line = text.substr(at, nl - at);
      size_t lead = 0;
      while (lead < strip && lead < line.size() && line[lead] == ' ') ++lead;
      Line(line.substr(lead));
      at = nl + 1;
    }
    return *this;
  }
  const std::string& str() const { return out_; }

 private:
  int depth_;
  std::string out_;
};

}  // namespace ax::builtin
