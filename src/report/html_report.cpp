// The HTML report: one self-contained file (inline CSS, inline SVG, a little
// vanilla JS, the run's data as an inert JSON block). Opens offline.
//
// Text is escaped on the way in: HTML text and attributes through
// HtmlEscape; the data block through ScriptSafeJson (no '<' survives in it, so
// "</script>" inside a kernel cannot end the block); the JS only ever puts
// data into the page with textContent, never innerHTML.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "report/report.h"

namespace ax::report {

using nlohmann::json;
namespace fs = std::filesystem;

std::string HtmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 16);
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string ScriptSafeJson(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size() + 64);
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    // '<', '>' and '&' only occur inside JSON strings, where \u escapes mean
    // the same character.
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
             (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      out += static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

namespace {

constexpr size_t kMaxText = 120000;  // per embedded text field; longer ones are cut, with a note

std::string F(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Cap(const std::string& s) {
  if (s.size() <= kMaxText) return s;
  return s.substr(0, kMaxText) + "\n[... " + std::to_string(s.size() - kMaxText) + " more characters cut by the report]";
}

json Opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::string UrlPath(const std::string& p) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : p) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// ---------------------------------------------------------------- colours

struct StatusStyle {
  const char* fill;
  const char* text;
  const char* label;
};

StatusStyle StyleOf(const NodeInfo& n) {
  if (n.kind == "root") return {"#93c5fd", "#0b1f3a", "ref"};
  if (n.correct) {
    if (n.speedup_eager && *n.speedup_eager >= 1.0) return {"#15803d", "#ffffff", ""};
    return {"#86efac", "#052e16", ""};
  }
  const std::string& s = n.status;
  if (s == "compile_error") return {"#dc2626", "#ffffff", "CE"};
  if (s == "runtime_error") return {"#f97316", "#1c0a00", "RE"};
  if (s == "mismatch") return {"#facc15", "#1c1400", "MM"};
  if (s == "timeout") return {"#8b5cf6", "#ffffff", "TO"};
  if (s == "crashed") return {"#7f1d1d", "#ffffff", "CR"};
  if (s == "rejected") return {"#111827", "#ffffff", "RJ"};
  if (s == "duplicate") return {"#d1d5db", "#374151", "DUP"};
  if (s == "no_candidate") return {"#f3f4f6", "#6b7280", "NC"};
  return {"#e5e7eb", "#111827", "?"};
}

// ---------------------------------------------------------------- charts

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> points;
  bool step = false;   // draw as a step function
  bool dashed = false;
  bool markers = false;
};
struct HLine {
  double y;
  std::string label, color;
};

constexpr int kW = 460, kH = 280, kL = 52, kR = 16, kT = 30, kB = 44;

std::string Axes(const std::string& title, const std::string& xlabel, const std::string& ylabel, double x0, double x1,
                 double y0, double y1, const std::vector<double>& xticks, const std::vector<double>& yticks,
                 const std::function<std::string(double)>& xfmt, const std::function<std::string(double)>& yfmt) {
  std::ostringstream o;
  auto X = [&](double x) { return kL + (x - x0) / (x1 - x0) * (kW - kL - kR); };
  auto Y = [&](double y) { return kH - kB - (y - y0) / (y1 - y0) * (kH - kT - kB); };
  o << "<text x='" << kW / 2 << "' y='18' class='ct'>" << HtmlEscape(title) << "</text>";
  for (double t : yticks) {
    o << "<line x1='" << kL << "' x2='" << kW - kR << "' y1='" << Y(t) << "' y2='" << Y(t) << "' class='grid'/>";
    o << "<text x='" << kL - 6 << "' y='" << Y(t) + 4 << "' class='yt'>" << HtmlEscape(yfmt(t)) << "</text>";
  }
  for (double t : xticks) {
    o << "<line x1='" << X(t) << "' x2='" << X(t) << "' y1='" << kH - kB << "' y2='" << kH - kB + 4 << "' class='ax'/>";
    o << "<text x='" << X(t) << "' y='" << kH - kB + 16 << "' class='xt'>" << HtmlEscape(xfmt(t)) << "</text>";
  }
  o << "<line x1='" << kL << "' x2='" << kW - kR << "' y1='" << kH - kB << "' y2='" << kH - kB << "' class='ax'/>";
  o << "<line x1='" << kL << "' x2='" << kL << "' y1='" << kT << "' y2='" << kH - kB << "' class='ax'/>";
  o << "<text x='" << (kL + kW - kR) / 2 << "' y='" << kH - 8 << "' class='xl'>" << HtmlEscape(xlabel) << "</text>";
  o << "<text transform='translate(12," << (kT + kH - kB) / 2 << ") rotate(-90)' class='xl'>" << HtmlEscape(ylabel)
    << "</text>";
  return o.str();
}

std::vector<double> Ticks(double lo, double hi, int n) {
  double span = hi - lo;
  if (span <= 0) return {lo};
  double raw = span / n, mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> out;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + 1e-9; t += step) out.push_back(std::abs(t) < 1e-12 ? 0 : t);
  return out;
}

std::string LineChart(const std::string& id, const std::string& title, const std::string& xlabel,
                      const std::string& ylabel, double x0, double x1, double y0, double y1,
                      const std::vector<Series>& series, const std::vector<HLine>& hlines,
                      const std::function<std::string(double)>& xfmt, const std::function<std::string(double)>& yfmt,
                      bool integer_x = false, bool legend_right = false) {
  std::ostringstream o;
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  auto X = [&](double x) { return kL + (x - x0) / (x1 - x0) * (kW - kL - kR); };
  auto Y = [&](double y) { return kH - kB - (std::clamp(y, y0, y1) - y0) / (y1 - y0) * (kH - kT - kB); };
  std::vector<double> xt = Ticks(x0, x1, 6);
  if (integer_x) {
    std::vector<double> keep;
    for (double t : xt)
      if (std::abs(t - std::round(t)) < 1e-9) keep.push_back(t);
    xt = keep;
  }
  o << "<svg id='" << id << "' class='chart' viewBox='0 0 " << kW << " " << kH << "' width='" << kW << "' height='" << kH
    << "' role='img' aria-label='" << HtmlEscape(title) << "'>";
  o << Axes(title, xlabel, ylabel, x0, x1, y0, y1, xt, Ticks(y0, y1, 5), xfmt, yfmt);
  for (const auto& h : hlines) {
    o << "<line x1='" << kL << "' x2='" << kW - kR << "' y1='" << Y(h.y) << "' y2='" << Y(h.y) << "' stroke='" << h.color
      << "' stroke-dasharray='5 4' stroke-width='1.5'/>";
    o << "<text x='" << kW - kR - 4 << "' y='" << Y(h.y) - 4 << "' class='hl' fill='" << h.color << "'>"
      << HtmlEscape(h.label) << "</text>";
  }
  int li = 0;
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    std::ostringstream d;
    for (size_t i = 0; i < s.points.size(); ++i) {
      double x = X(s.points[i].first), y = Y(s.points[i].second);
      if (i == 0) {
        d << "M" << x << " " << y;
      } else if (s.step) {
        d << " H" << x << " V" << y;
      } else {
        d << " L" << x << " " << y;
      }
    }
    o << "<path d='" << d.str() << "' fill='none' stroke='" << s.color << "' stroke-width='2'"
      << (s.dashed ? " stroke-dasharray='6 3'" : "") << "/>";
    if (s.markers)
      for (const auto& [x, y] : s.points)
        o << "<circle cx='" << X(x) << "' cy='" << Y(y) << "' r='3' fill='" << s.color << "'><title>"
          << HtmlEscape(s.name + ": " + xfmt(x) + " -> " + yfmt(y)) << "</title></circle>";
    // legend
    const int lx = legend_right ? kW - kR - 150 : kL + 8;
    o << "<rect x='" << lx << "' y='" << kT + 4 + li * 16 << "' width='12' height='3' fill='" << s.color << "'/>";
    o << "<text x='" << lx + 16 << "' y='" << kT + 9 + li * 16 << "' class='lg'>" << HtmlEscape(s.name) << "</text>";
    ++li;
  }
  o << "</svg>";
  return o.str();
}

std::string Distribution(const RunData& run) {
  struct Bin {
    std::string label;
    double lo, hi;
  };
  const std::vector<Bin> bins = {{"<0.5", 0, 0.5},  {"0.5-0.8", 0.5, 0.8}, {"0.8-1", 0.8, 1},   {"1-1.5", 1, 1.5},
                                 {"1.5-2", 1.5, 2}, {"2-5", 2, 5},         {"5-10", 5, 10},     {">10", 10, 1e300}};
  bool any_compile = false;
  for (const auto& t : run.tasks) any_compile = any_compile || t.speedup_compile.has_value();
  // Column 0: no correct kernel (or untimed); then the bins.
  std::vector<int> eager(bins.size() + 1, 0), compile(bins.size() + 1, 0);
  auto put = [&](std::vector<int>& v, const std::optional<double>& s) {
    if (!s) {
      ++v[0];
      return;
    }
    for (size_t i = 0; i < bins.size(); ++i)
      if (*s >= bins[i].lo && *s < bins[i].hi) {
        ++v[i + 1];
        return;
      }
    ++v.back();
  };
  for (const auto& t : run.tasks) {
    put(eager, t.speedup_eager);
    put(compile, t.speedup_compile);
  }
  int maxc = 1;
  for (size_t i = 0; i <= bins.size(); ++i) maxc = std::max({maxc, eager[i], any_compile ? compile[i] : 0});
  std::ostringstream o;
  const double y0 = 0, y1 = maxc * 1.3;  // headroom for the legend and the counts
  auto Y = [&](double y) { return kH - kB - (y - y0) / (y1 - y0) * (kH - kT - kB); };
  const int ncol = static_cast<int>(bins.size()) + 1;
  const double colw = static_cast<double>(kW - kL - kR) / ncol;
  o << "<svg id='chart-dist' class='chart' viewBox='0 0 " << kW << " " << kH << "' width='" << kW << "' height='" << kH
    << "' role='img' aria-label='speedup distribution'>";
  std::vector<double> yt;
  for (double t : Ticks(0, maxc, std::min(maxc, 5)))
    if (std::abs(t - std::round(t)) < 1e-9) yt.push_back(t);
  o << Axes("Best speedup per task", "speedup of the task's best kernel", "tasks", 0, 1, y0, y1, {}, yt,
            [](double) { return std::string(); }, [](double v) { return F("%.0f", v); });
  for (int i = 0; i < ncol; ++i) {
    double x = kL + i * colw;
    std::string label = i == 0 ? "none" : bins[i - 1].label;
    o << "<text x='" << x + colw / 2 << "' y='" << kH - kB + 14 << "' class='xt'>" << HtmlEscape(label) << "</text>";
    const int n = any_compile ? 2 : 1;
    const double bw = (colw - 8) / n;
    for (int k = 0; k < n; ++k) {
      int c = k == 0 ? eager[i] : compile[i];
      const char* color = i == 0 ? (k == 0 ? "#9ca3af" : "#d1d5db") : (k == 0 ? "#2563eb" : "#f59e0b");
      double bx = x + 4 + k * bw;
      o << "<rect x='" << bx << "' y='" << Y(c) << "' width='" << bw - 2 << "' height='" << Y(0) - Y(c) << "' fill='"
        << color << "'><title>" << HtmlEscape(label + (k == 0 ? " vs eager: " : " vs torch.compile: ") +
                                              std::to_string(c) + " task" + (c == 1 ? "" : "s"))
        << "</title></rect>";
      if (c > 0)
        o << "<text x='" << bx + (bw - 2) / 2 << "' y='" << Y(c) - 3 << "' class='xt'>" << c << "</text>";
    }
  }
  o << "<rect x='" << kW - 150 << "' y='" << kT << "' width='10' height='10' fill='#2563eb'/><text x='" << kW - 136
    << "' y='" << kT + 9 << "' class='lg'>vs eager</text>";
  if (any_compile)
    o << "<rect x='" << kW - 150 << "' y='" << kT + 16 << "' width='10' height='10' fill='#f59e0b'/><text x='"
      << kW - 136 << "' y='" << kT + 25 << "' class='lg'>vs torch.compile</text>";
  o << "</svg>";
  return o.str();
}

std::string FastPChart(const RunData& run) {
  std::vector<std::optional<double>> e, c;
  double maxs = 0;
  bool any_compile = false;
  for (const auto& t : run.tasks) {
    bool ok = t.best_node >= 0;
    e.push_back(ok ? t.speedup_eager : std::nullopt);
    c.push_back(ok ? t.speedup_compile : std::nullopt);
    maxs = std::max({maxs, t.speedup_eager.value_or(0), t.speedup_compile.value_or(0)});
    any_compile = any_compile || t.speedup_compile.has_value();
  }
  double pmax = std::clamp(std::ceil(maxs * 1.15 * 2) / 2, 2.5, 10.0);
  auto curve = [&](const std::vector<std::optional<double>>& v) {
    // Exact step function: fast_p changes only at the speedups themselves.
    std::vector<double> cuts = {0};
    for (const auto& s : v)
      if (s && *s > 0 && *s < pmax) cuts.push_back(*s);
    cuts.push_back(pmax);
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::pair<double, double>> pts;
    for (double p : cuts) pts.push_back({p, FastP(v, p)});
    return pts;
  };
  std::vector<Series> s;
  s.push_back({"vs eager", "#2563eb", curve(e), true, false, false});
  if (any_compile) s.push_back({"vs torch.compile", "#f59e0b", curve(c), true, true, false});
  // Markers at the reported thresholds.
  Series me{"fast_p (reported p)", "#1e3a8a", {}, false, false, true};
  for (double p : FastPThresholds()) me.points.push_back({p, FastP(e, p)});
  std::string svg = LineChart("chart-fastp", "fast_p: share of tasks faster than p", "p (speedup threshold)",
                              "fraction of all tasks", 0, pmax, 0, 1.2, s, {},
                              [](double v) { return F("%g", v); }, [](double v) { return v > 1.0001 ? std::string() : F("%g", v); },
                              false, /*legend_right=*/true);
  // Add the markers (drawn by a second, transparent pass for simplicity).
  std::string markers;
  auto X = [&](double x) { return kL + x / pmax * (kW - kL - kR); };
  auto Y = [&](double y) { return kH - kB - y / 1.2 * (kH - kT - kB); };
  for (const auto& [p, f] : me.points)
    markers += "<circle cx='" + F("%.2f", X(p)) + "' cy='" + F("%.2f", Y(f)) + "' r='3.5' fill='#1e3a8a'><title>fast_" +
               F("%g", p) + " vs eager = " + F("%.3f", f) + "</title></circle>";
  svg.insert(svg.size() - 6, markers);
  return svg;
}

std::string ScalingChart(const RunData& run, const RunMetrics& m) {
  Series us{"user score vs eager (best so far)", "#2563eb", {}, false, false, true};
  double ymax = 1.5;
  for (const auto& p : m.scaling) {
    us.points.push_back({static_cast<double>(p.step), p.user_score});
    ymax = std::max(ymax, p.user_score * 1.15);
  }
  // torch.compile's own speedup over eager, geomean over tasks timing both.
  std::vector<double> ratio;
  for (const auto& t : run.tasks)
    if (t.baseline_eager_ms && t.baseline_compile_ms && *t.baseline_compile_ms > 0)
      ratio.push_back(*t.baseline_eager_ms / *t.baseline_compile_ms);
  std::vector<HLine> h = {{1.0, "eager PyTorch = 1.0", "#6b7280"}};
  if (!ratio.empty()) {
    double g = GeoMean(ratio);
    h.push_back({std::clamp(g, 1.0, 10.0), "torch.compile (" + F("%.2fx", g) + " vs eager, floored at 1)", "#f59e0b"});
    ymax = std::max(ymax, std::min(g, 10.0) * 1.15);
  }
  ymax = std::min(ymax, 10.5);
  double n = m.scaling.empty() ? 1 : m.scaling.size();
  return LineChart("chart-scaling", "Scaling: best so far vs step", "step", "user score (geomean, 1-10x)", 1,
                   std::max(2.0, n), 1.0, ymax, {us}, h, [](double v) { return F("%g", v); },
                   [](double v) { return F("%.2f", v); }, true);
}

std::string CorrectChart(const RunMetrics& m) {
  Series cf{"tasks with a correct kernel", "#16a34a", {}, true, false, true};
  for (const auto& p : m.scaling) cf.points.push_back({static_cast<double>(p.step), p.correct_fraction});
  double n = m.scaling.empty() ? 1 : m.scaling.size();
  return LineChart("chart-correct", "Correct kernels found vs step", "step", "fraction of all tasks", 1,
                   std::max(2.0, n), 0, 1.2, {cf}, {}, [](double v) { return F("%g", v); },
                   [](double v) { return v > 1.0001 ? std::string() : F("%g", v); }, true);
}

// ---------------------------------------------------------------- the tree

std::string TreeSvg(const TaskData& t, int ti) {
  if (t.nodes.empty()) return "<p class='muted'>No tree recorded.</p>";
  std::map<int, std::vector<int>> kids;
  std::map<int, const NodeInfo*> by;
  for (const auto& n : t.nodes) by[n.id] = &n;
  int root = t.nodes[0].id;
  for (const auto& n : t.nodes)
    if (n.id != root && by.count(n.parent)) kids[n.parent].push_back(n.id);
  std::map<int, double> xs;
  std::map<int, int> depth;
  double next = 0;
  int maxd = 0;
  std::function<void(int, int)> place = [&](int id, int d) {
    depth[id] = d;
    maxd = std::max(maxd, d);
    auto& ch = kids[id];
    std::sort(ch.begin(), ch.end());
    if (ch.empty()) {
      xs[id] = next++;
      return;
    }
    for (int c : ch) place(c, d + 1);
    xs[id] = (xs[ch.front()] + xs[ch.back()]) / 2;
  };
  place(root, 0);
  // Nodes whose parent is missing (a damaged tree) hang off the right.
  for (const auto& n : t.nodes)
    if (!xs.count(n.id)) {
      xs[n.id] = next++;
      depth[n.id] = 1;
      maxd = std::max(maxd, 1);
    }
  const double dx = 58, dy = 74, pad = 30;
  const double w = std::max(1.0, next) * dx + 2 * pad, h = (maxd + 1) * dy + 2 * pad - 20;
  auto X = [&](int id) { return pad + xs[id] * dx + dx / 2 - pad / 2; };
  auto Y = [&](int id) { return pad + depth[id] * dy; };
  std::ostringstream o;
  o << "<svg class='tree' width='" << w << "' height='" << h << "' viewBox='0 0 " << w << " " << h << "' data-task='" << ti
    << "'>";
  for (const auto& n : t.nodes) {
    if (n.id == root || !by.count(n.parent)) continue;
    o << "<line x1='" << X(n.parent) << "' y1='" << Y(n.parent) << "' x2='" << X(n.id) << "' y2='" << Y(n.id)
      << "' class='edge " << (n.kind == "small" ? "esmall" : "elarge") << "'/>";
  }
  for (const auto& n : t.nodes) {
    StatusStyle st = StyleOf(n);
    const bool best = n.id == t.best_node;
    std::string label = st.label;
    if (n.kind != "root" && n.correct) {
      label = "ok";
      if (n.speedup_eager) {
        double v = *n.speedup_eager;
        label = F(v >= 10 ? "%.0f" : v >= 0.1 ? "%.2f" : "%.3f", v);
      }
    }
    std::string tip = "node " + std::to_string(n.id) + " (" + n.kind + " step" + (n.warm_start ? ", warm start" : "") +
                      "): " + n.status;
    if (n.kind == "root") tip = "node 0: the PyTorch reference";
    if (n.correct) tip += ", " + FormatSpeedup(n.speedup_eager) + " vs eager";
    if (n.speedup_compile) tip += ", " + FormatSpeedup(n.speedup_compile) + " vs torch.compile";
    if (best) tip += " (best)";
    double x = X(n.id), y = Y(n.id);
    o << "<g class='node" << (best ? " best" : "") << "' data-task='" << ti << "' data-node='" << n.id
      << "' tabindex='0' role='button' aria-label='" << HtmlEscape(tip) << "'>";
    o << "<title>" << HtmlEscape(tip) << "</title>";
    const char* stroke = best ? "#b45309" : "#1f2937";
    const char* sw = best ? "4" : "1.2";
    if (n.kind == "root") {
      o << "<polygon points='" << x << "," << y - 20 << " " << x + 20 << "," << y << " " << x << "," << y + 20 << " "
        << x - 20 << "," << y << "' class='shape' fill='" << st.fill << "' stroke='" << stroke << "' stroke-width='" << sw << "'/>";
    } else if (n.kind == "small") {
      o << "<rect x='" << x - 17 << "' y='" << y - 14 << "' width='34' height='28' rx='5' class='shape' fill='" << st.fill
        << "' stroke='" << stroke << "' stroke-width='" << sw << "'/>";
    } else {
      o << "<circle cx='" << x << "' cy='" << y << "' r='18' class='shape' fill='" << st.fill << "' stroke='" << stroke
        << "' stroke-width='" << sw << "'/>";
    }
    o << "<text x='" << x << "' y='" << y + 4 << "' class='nl' fill='" << st.text << "'>" << HtmlEscape(label)
      << "</text>";
    o << "<text x='" << x << "' y='" << y + 32 << "' class='ni'>#" << n.id << "</text>";
    o << "</g>";
  }
  o << "</svg>";
  return o.str();
}

const char* kCss = R"CSS(
:root{--fg:#111827;--muted:#6b7280;--line:#e5e7eb;--bg:#f9fafb;--acc:#2563eb}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);margin:0;background:#fff}
header{padding:18px 28px;border-bottom:1px solid var(--line);background:var(--bg)}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 10px}h3{font-size:14px;margin:0}
main{padding:0 28px 40px;max-width:1500px}
.muted{color:var(--muted)}.small{font-size:12px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin-top:18px}
.card{border:1px solid var(--line);border-radius:8px;padding:10px 14px;min-width:150px;background:#fff}
.card .v{font-size:22px;font-weight:600}.card .k{font-size:12px;color:var(--muted)}
table{border-collapse:collapse;font-size:13px}
th,td{border-bottom:1px solid var(--line);padding:5px 9px;text-align:right;white-space:nowrap}
th{background:var(--bg);font-weight:600;position:sticky;top:0}
td.l,th.l{text-align:left}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th[aria-sort=ascending]::after{content:" \25B2";font-size:10px}
table.sortable th[aria-sort=descending]::after{content:" \25BC";font-size:10px}
tr.degenerate td{color:var(--muted)}
.tag{display:inline-block;border-radius:4px;padding:0 6px;font-size:12px}
.found{background:#dcfce7;color:#166534}.none{background:#fee2e2;color:#991b1b}.other{background:#fef3c7;color:#92400e}
.charts{display:flex;flex-wrap:wrap;gap:16px}
svg.chart{border:1px solid var(--line);border-radius:8px;background:#fff}
svg text{font-family:inherit}
.ct{font-size:13px;font-weight:600;text-anchor:middle}.xt{font-size:10px;text-anchor:middle;fill:#374151}
.yt{font-size:10px;text-anchor:end;fill:#374151}.xl{font-size:11px;text-anchor:middle;fill:#374151}
.lg{font-size:11px;fill:#374151}.hl{font-size:10px;text-anchor:end}
.grid{stroke:#f1f5f9}.ax{stroke:#9ca3af}
.task{border:1px solid var(--line);border-radius:8px;margin:10px 0;background:#fff}
.task>summary{padding:8px 12px;cursor:pointer;background:var(--bg);border-radius:8px}
.treewrap{overflow:auto;padding:6px 10px}
svg.tree .edge{stroke:#9ca3af;stroke-width:1.5}svg.tree .esmall{stroke-dasharray:4 3}
svg.tree .node{cursor:pointer;outline:none}
svg.tree .node:hover .shape,svg.tree .node:focus .shape{stroke:#2563eb;stroke-width:3}
svg.tree .node.sel .shape{stroke:#2563eb;stroke-width:4}
.nl{font-size:11px;font-weight:600;text-anchor:middle;pointer-events:none}.ni{font-size:10px;text-anchor:middle;fill:#6b7280;pointer-events:none}
.legend{display:flex;flex-wrap:wrap;gap:10px;font-size:12px;margin:6px 0}
.legend span{display:inline-flex;align-items:center;gap:4px}.sw{display:inline-block;width:12px;height:12px;border:1px solid #374151;border-radius:3px}
button.link{border:0;background:none;color:var(--acc);cursor:pointer;padding:0;font:inherit;text-decoration:underline}
a{color:var(--acc)}
#panel{position:fixed;inset:0;background:rgba(17,24,39,.45);display:none;z-index:10}
#panel.open{display:block}
#panel .box{position:absolute;top:4vh;bottom:4vh;left:8vw;right:8vw;background:#fff;border-radius:10px;display:flex;flex-direction:column;box-shadow:0 10px 40px rgba(0,0,0,.3)}
#panel .hd{padding:12px 16px;border-bottom:1px solid var(--line);display:flex;justify-content:space-between;gap:10px;align-items:center}
#panel .bd{padding:10px 16px;overflow:auto}
#panel pre{background:#f8fafc;border:1px solid var(--line);border-radius:6px;padding:10px;overflow:auto;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre;max-height:60vh}
#panel h4{margin:14px 0 6px;font-size:13px}
#panel details{margin:6px 0}
.close{font-size:20px;border:0;background:none;cursor:pointer}
)CSS";

const char* kJs = R"JS(
(function(){
'use strict';
var DATA = JSON.parse(document.getElementById('report-data').textContent);
function el(tag, attrs, text){var e=document.createElement(tag);if(attrs)for(var k in attrs)e.setAttribute(k,attrs[k]);if(text!=null)e.textContent=String(text);return e;}
function fmt(s){return (s===null||s===undefined)?'-':(Number(s).toFixed(3)+'x');}
function num(v){return (v===null||v===undefined)?'-':String(Number(Number(v).toPrecision(4)));}
// ---- sorting
function cellValue(td){var v=td.getAttribute('data-v');if(v===null)v=td.textContent;if(v==='')return {e:true};var n=parseFloat(v);return (!isNaN(n)&&isFinite(v))?{n:n}:{s:v.toLowerCase()};}
function sortTable(table, col){
  var th=table.tHead.rows[0].cells[col];var asc=th.getAttribute('aria-sort')!=='ascending';
  Array.prototype.forEach.call(table.tHead.rows[0].cells,function(c){c.removeAttribute('aria-sort');});
  th.setAttribute('aria-sort',asc?'ascending':'descending');
  var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
  rows.sort(function(a,b){var x=cellValue(a.cells[col]),y=cellValue(b.cells[col]);var r;
    if(x.e||y.e)return x.e&&y.e?0:x.e?1:-1;  // missing values last, both ways
    if(x.n!==undefined&&y.n!==undefined)r=x.n-y.n;else if(x.n!==undefined)r=-1;else if(y.n!==undefined)r=1;else r=x.s<y.s?-1:x.s>y.s?1:0;
    return asc?r:-r;});
  rows.forEach(function(r){body.appendChild(r);});
}
Array.prototype.forEach.call(document.querySelectorAll('table.sortable'),function(t){
  Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,i){th.addEventListener('click',function(){sortTable(t,i);});});
});
// ---- the panel
var panel=document.getElementById('panel'),ptitle=document.getElementById('panel-title'),pbody=document.getElementById('panel-body');
function closePanel(){panel.classList.remove('open');var s=document.querySelector('.node.sel');if(s)s.classList.remove('sel');}
document.getElementById('panel-close').addEventListener('click',closePanel);
panel.addEventListener('click',function(e){if(e.target===panel)closePanel();});
document.addEventListener('keydown',function(e){if(e.key==='Escape')closePanel();});
function pre(text,cls){var p=el('pre',cls?{'class':cls}:null);p.textContent=text;return p;}
function section(title,node,open){var d=el('details');if(open)d.open=true;d.appendChild(el('summary',null,title));d.appendChild(node);return d;}
function showKernel(ti){
  var t=DATA.tasks[ti];pbody.textContent='';
  ptitle.textContent=t.name+': best kernel (node '+t.best_node+')';
  if(t.best_file){var a=el('a',{href:t.best_href},t.best_file);var p=el('p',null,'File: ');p.appendChild(a);pbody.appendChild(p);}
  pbody.appendChild(pre(t.best_source||'(no kernel)','src'));
  panel.classList.add('open');
}
function showNode(ti,id){
  var t=DATA.tasks[ti];var n=null;for(var i=0;i<t.nodes.length;i++)if(t.nodes[i].id===id)n=t.nodes[i];
  if(!n)return;
  var prev=document.querySelector('.node.sel');if(prev)prev.classList.remove('sel');
  var g=document.querySelector('.node[data-task="'+ti+'"][data-node="'+id+'"]');if(g)g.classList.add('sel');
  pbody.textContent='';
  ptitle.textContent=t.name+' / node '+n.id+' ('+n.kind+(n.kind==='root'?'':' step')+(n.ws?', warm start':'')+'): '+n.status+(n.correct?' '+fmt(n.se)+' vs eager'+(n.sc!=null?', '+fmt(n.sc)+' vs torch.compile':''):'');
  var facts=el('p',{'class':'small muted'});
  facts.textContent=(n.parent>=0?'parent #'+n.parent+' \u00b7 ':'')+'visits '+n.visits+' \u00b7 reward '+Number(n.reward).toFixed(3)+(n.flags.length?' \u00b7 flags: '+n.flags.join(', '):'')+(n.id===t.best_node?' \u00b7 best kernel of the task':'');
  pbody.appendChild(facts);
  if(n.error){pbody.appendChild(el('h4',null,'Error'));pbody.appendChild(pre(n.error));}
  if(n.note){pbody.appendChild(el('h4',null,'Note (guidance, edit report)'));pbody.appendChild(pre(n.note));}
  pbody.appendChild(el('h4',null,n.kind==='root'?'Reference (the task)':'Candidate source'));
  pbody.appendChild(pre(n.src||'(no source)','src'));
  var prof=n.verdict&&n.verdict.profile;
  if(prof&&prof.kernels&&prof.kernels.length){
    pbody.appendChild(el('h4',null,'GPU profile'));
    var rl=prof.roofline;
    pbody.appendChild(el('p',{'class':'small'},prof.kernels.length+' kernel'+(prof.kernels.length>1?'s':'')+', '+num(prof.busy_ms)+' ms busy'+(rl?' \u00b7 '+rl.bound+'-bound: '+(100*rl.bandwidth_fraction).toFixed(0)+'% of copy bandwidth ('+num(rl.gbps)+' GB/s), '+(100*rl.flops_fraction).toFixed(0)+'% of fp32-accurate matmul FLOP/s ('+num(rl.tflops)+' TFLOP/s)':'')));
    var tb=el('table',{'class':'profile'});var hr=el('tr');['kernel','ms','share','launches'].forEach(function(h){hr.appendChild(el('th',null,h));});tb.appendChild(hr);
    prof.kernels.forEach(function(k){var r=el('tr');r.appendChild(el('td',{'class':'src'},k.name));r.appendChild(el('td',null,num(k.ms)));r.appendChild(el('td',null,(100*k.share).toFixed(1)+'%'));r.appendChild(el('td',null,String(k.launches)));tb.appendChild(r);});
    pbody.appendChild(tb);
  }
  pbody.appendChild(el('h4',null,'Verdict'));
  pbody.appendChild(n.verdict?section('judge verdict (JSON)',pre(JSON.stringify(n.verdict,null,2)),false):el('p',{'class':'muted'},n.kind==='root'?'The reference is not judged.':'No verdict recorded (nothing was judged for this step).'));
  pbody.appendChild(el('h4',null,'Prompts that made it'));
  if(!n.calls.length)pbody.appendChild(el('p',{'class':'muted'},n.kind==='root'?'The root is the task itself.':'No LLM call recorded for this step.'));
  n.calls.forEach(function(ci,k){var c=t.calls[ci];
    var box=el('div');
    var head='call '+c.seq+': '+c.purpose+(c.model?' ('+c.model+')':'')+' \u00b7 '+c.in+' in / '+c.out+' out tokens \u00b7 $'+Number(c.usd).toFixed(4)+' \u00b7 '+Number(c.lat).toFixed(1)+' s'+(c.ok?'':' \u00b7 FAILED: '+c.error);
    box.appendChild(el('p',{'class':'small'},head));
    if(c.sys>=0)box.appendChild(section('system prompt',pre(DATA.systems[c.sys]),false));
    box.appendChild(section('prompt',pre(c.prompt),k===n.calls.length-1));
    box.appendChild(section('reply',pre(c.reply),false));
    pbody.appendChild(box);});
  panel.classList.add('open');
}
Array.prototype.forEach.call(document.querySelectorAll('svg.tree .node'),function(g){
  var f=function(){showNode(+g.getAttribute('data-task'),+g.getAttribute('data-node'));};
  g.addEventListener('click',f);g.addEventListener('keydown',function(e){if(e.key==='Enter'||e.key===' '){e.preventDefault();f();}});
});
Array.prototype.forEach.call(document.querySelectorAll('button.kernel'),function(b){
  b.addEventListener('click',function(){showKernel(+b.getAttribute('data-task'));});
});
window.adaexploreReport={showNode:showNode,showKernel:showKernel,sortTable:sortTable,close:closePanel};
// ---- self-test (?selftest=1): exercise the page, write the results into it
var q=location.search;
if(/[?&]open=/.test(q)){var m=/[?&]open=(\d+):(\d+)/.exec(q);if(m){var d=document.querySelectorAll('details.task')[+m[1]];if(d)d.open=true;showNode(+m[1],+m[2]);}}
if(/[?&]selftest=1/.test(q)){
  var res={checks:{},errors:[]};
  try{
    var tbl=document.getElementById('tasks-table');
    var names=function(){return Array.prototype.map.call(tbl.tBodies[0].rows,function(r){return r.cells[0].getAttribute('data-v');});};
    var before=names();
    var col=-1;Array.prototype.forEach.call(tbl.tHead.rows[0].cells,function(c,i){if(c.getAttribute('data-key')==='eager')col=i;});
    tbl.tHead.rows[0].cells[col].click();var asc=names();
    tbl.tHead.rows[0].cells[col].click();var desc=names();
    res.checks.sort_changes_order=JSON.stringify(before)!==JSON.stringify(asc)||JSON.stringify(before)!==JSON.stringify(desc);
    var sp=Array.prototype.map.call(tbl.tBodies[0].rows,function(r){return r.cells[col].getAttribute('data-v');});
    var nums=sp.filter(function(v){return v!=='';}).map(Number),mono=true;
    for(var i=1;i<nums.length;i++)mono=mono&&nums[i-1]>=nums[i];
    res.checks.sort_descending=mono&&sp.indexOf('')<0||sp.slice(sp.indexOf('')).every(function(v){return v==='';});
    res.checks.sort_descending=res.checks.sort_descending&&mono;
    res.order_asc=asc;res.order_desc=desc;res.eager_desc=sp;
    var g=document.querySelector('svg.tree .node:not([data-node="0"])');
    res.checks.tree_nodes_present=!!g;
    if(g){
      g.dispatchEvent(new MouseEvent('click',{bubbles:true}));
      var ti=+g.getAttribute('data-task'),id=+g.getAttribute('data-node');
      var node=DATA.tasks[ti].nodes.filter(function(n){return n.id===id;})[0];
      var srcs=Array.prototype.map.call(pbody.querySelectorAll('pre.src'),function(p){return p.textContent;});
      res.checks.node_opens_panel=panel.classList.contains('open');
      res.checks.panel_shows_candidate=srcs.length===1&&srcs[0]===node.src&&node.src.length>0;
      res.checks.panel_shows_prompt=node.calls.length===0||pbody.textContent.indexOf(DATA.tasks[ti].calls[node.calls[0]].prompt.slice(0,40))>=0;
      res.opened={task:DATA.tasks[ti].name,node:id};
      closePanel();
      res.checks.panel_closes=!panel.classList.contains('open');
    }
    // A profiled node's panel shows its kernels' table.
    DATA.tasks.forEach(function(t,ti){t.nodes.forEach(function(n){
      var pf=n.verdict&&n.verdict.profile;if(!pf||res.profiled)return;
      res.profiled={task:t.name,node:n.id};showNode(ti,n.id);
      res.checks.panel_shows_profile=pbody.querySelectorAll('table.profile tr').length===pf.kernels.length+1&&pbody.textContent.indexOf(pf.kernels[0].name)>=0;
      closePanel();});});
    var kb=document.querySelector('button.kernel');
    if(kb){kb.click();res.checks.kernel_button_opens=panel.classList.contains('open')&&pbody.querySelector('pre.src').textContent.length>0;closePanel();}
    res.checks.charts=document.querySelectorAll('svg.chart').length>=3;
  }catch(e){res.errors.push('selftest: '+e.message);}
  res.errors=res.errors.concat(window.__reportErrors||[]);
  var ok=res.errors.length===0;for(var k in res.checks)ok=ok&&res.checks[k]===true;
  res.pass=ok;
  var out=el('pre',{id:'selftest-result','data-pass':ok?'1':'0'});out.textContent=JSON.stringify(res);
  out.style.display='none';document.body.appendChild(out);
}
})();
)JS";

std::string StatusTag(const std::string& s) {
  std::string cls = s == "found" ? "found" : s == "none" ? "none" : "other";
  return "<span class='tag " + cls + "'>" + HtmlEscape(s) + "</span>";
}

std::string Td(const std::string& text, const std::string& v, bool left = false) {
  return std::string("<td") + (left ? " class='l'" : "") + " data-v='" + HtmlEscape(v) + "'>" + text + "</td>";
}

std::string SpeedTd(const std::optional<double>& s) {
  return Td(HtmlEscape(FormatSpeedup(s)), s ? F("%.9g", *s) : "");
}

std::string FigureRows(const SetMetrics& m, const std::string& set) {
  std::ostringstream o;
  for (const SpeedupStats* s : {&m.eager, &m.compile}) {
    o << "<tr><td class='l'>" << HtmlEscape(set) << "</td><td class='l'>"
      << (s->baseline == "eager" ? "eager" : "torch.compile") << "</td><td>" << m.correct << "/" << m.tasks << " ("
      << F("%.1f%%", 100 * m.correctness) << ")</td>";
    if (s->timed == 0) {
      o << "<td colspan='" << 5 + s->fast_p.size() << "' class='l muted'>no correct kernel timed against this baseline"
        << "</td></tr>";
      continue;
    }
    o << "<td>" << F("%.3f", s->user_score) << "</td><td>" << s->timed << "</td>";
    auto pair = [&](double c, double u) {
      return F("%.3fx", c) + (std::abs(c - u) > 1e-12 ? " <span class='muted small'>(" + F("%.3fx", u) + ")</span>" : "");
    };
    o << "<td>" << pair(s->geomean, s->geomean_unclamped) << "</td><td>" << pair(s->median, s->median_unclamped)
      << "</td><td>" << pair(s->mean, s->mean_unclamped) << "</td>";
    for (const auto& [p, f] : s->fast_p) o << "<td>" << F("%.2f", f) << "</td>";
    o << "</tr>";
  }
  return o.str();
}

std::string CostSection(const Report& r) {
  std::ostringstream o;
  std::map<std::string, Cost> by;
  for (const auto& t : r.run.tasks)
    for (const auto& [k, c] : t.cost_by_purpose) by[k] += c;
  const Cost& c = r.metrics.cost;
  o << "<p>" << c.llm_calls << " LLM calls, " << c.input_tokens << " input + " << c.output_tokens
    << " output tokens, $" << F("%.4f", c.usd) << " (priced by the run's price table; $0 when none was given). "
    << "Search wall time " << F("%.1f", c.wall_s) << " s summed over tasks; judge time " << F("%.1f", c.judge_s)
    << " s over " << c.judged << " recorded verdicts (the final re-timing of the best candidates is not recorded and "
    << "not included).</p>";
  o << "<table><thead><tr><th class='l'>call purpose</th><th>calls</th><th>input tokens</th><th>output tokens</th>"
       "<th>dollars</th><th>LLM latency s</th><th>share of tokens</th></tr></thead><tbody>";
  double tot = static_cast<double>(c.input_tokens + c.output_tokens);
  for (const auto& [k, v] : by) {
    double share = tot > 0 ? (v.input_tokens + v.output_tokens) / tot : 0;
    o << "<tr><td class='l'>" << HtmlEscape(k) << "</td><td>" << v.llm_calls << "</td><td>" << v.input_tokens
      << "</td><td>" << v.output_tokens << "</td><td>" << F("%.4f", v.usd) << "</td><td>" << F("%.1f", v.llm_latency_s)
      << "</td><td style='text-align:left'><svg width='120' height='10'><rect width='120' height='10' fill='#eef2ff'/>"
      << "<rect width='" << F("%.1f", 120 * share) << "' height='10' fill='#6366f1'/></svg> " << F("%.0f%%", 100 * share)
      << "</td></tr>";
  }
  o << "</tbody></table>";
  return o.str();
}

std::string CompareSection(const Comparison& c) {
  std::ostringstream o;
  o << "<h2 id='compare'>A/B comparison</h2><p class='small'>A: <code>" << HtmlEscape(c.dir_a) << "</code> &middot; B: <code>"
    << HtmlEscape(c.dir_b) << "</code> &middot; " << c.common << " tasks in both, " << c.only_a << " only in A, "
    << c.only_b << " only in B. Aggregates over the tasks in both.</p>";
  o << "<table><thead><tr><th class='l'>figure</th><th>A</th><th>B</th><th>B - A</th></tr></thead><tbody>";
  auto row = [&](const std::string& name, double a, double b, const char* fmt) {
    o << "<tr><td class='l'>" << HtmlEscape(name) << "</td><td>" << F(fmt, a) << "</td><td>" << F(fmt, b) << "</td><td>"
      << (b - a >= 0 ? "+" : "") << F(fmt, b - a) << "</td></tr>";
  };
  row("correctness", c.a.all.correctness, c.b.all.correctness, "%.3f");
  row("user score vs eager", c.a.all.eager.user_score, c.b.all.eager.user_score, "%.3f");
  row("user score vs torch.compile", c.a.all.compile.user_score, c.b.all.compile.user_score, "%.3f");
  row("geomean vs eager (clamped)", c.a.all.eager.geomean, c.b.all.eager.geomean, "%.3f");
  for (size_t i = 0; i < c.a.all.eager.fast_p.size(); ++i)
    row("fast_" + F("%g", c.a.all.eager.fast_p[i].first) + " vs eager", c.a.all.eager.fast_p[i].second,
        c.b.all.eager.fast_p[i].second, "%.3f");
  row("user score vs eager, non-degenerate", c.a.non_degenerate.eager.user_score, c.b.non_degenerate.eager.user_score,
      "%.3f");
  row("tokens", static_cast<double>(c.a.cost.input_tokens + c.a.cost.output_tokens),
      static_cast<double>(c.b.cost.input_tokens + c.b.cost.output_tokens), "%.0f");
  row("dollars", c.a.cost.usd, c.b.cost.usd, "%.4f");
  o << "</tbody></table>";
  o << "<table class='sortable' id='compare-table' style='margin-top:10px'><thead><tr><th class='l'>task</th>"
       "<th>A vs eager</th><th>B vs eager</th><th>B/A</th><th>A vs compile</th><th>B vs compile</th><th>B/A</th>"
       "</tr></thead><tbody>";
  for (const auto& t : c.tasks) {
    auto ratio = [](const std::optional<double>& v) {
      return Td(v ? F("%.3f", *v) : "-", v ? F("%.9g", *v) : "");
    };
    o << "<tr>" << Td(HtmlEscape(t.name), t.name, true) << (t.in_a ? SpeedTd(t.eager_a) : Td("absent", ""))
      << (t.in_b ? SpeedTd(t.eager_b) : Td("absent", "")) << ratio(t.eager_ratio)
      << (t.in_a ? SpeedTd(t.compile_a) : Td("absent", "")) << (t.in_b ? SpeedTd(t.compile_b) : Td("absent", ""))
      << ratio(t.compile_ratio) << "</tr>";
  }
  o << "</tbody></table>";
  return o.str();
}

}  // namespace

std::string HtmlReport(const Report& r, const std::string& html_path, const Comparison* cmp) {
  const RunData& run = r.run;
  const RunMetrics& m = r.metrics;
  std::error_code ec;
  fs::path html_dir = fs::absolute(fs::path(html_path).parent_path().empty() ? fs::path(".") : fs::path(html_path).parent_path(), ec);

  // ---- the data block
  json data;
  data["run"] = run.dir;
  std::vector<std::string> systems;
  std::map<std::string, int> system_index;
  json tasks = json::array();
  for (const auto& t : run.tasks) {
    json jt;
    jt["name"] = t.name;
    jt["best_node"] = t.best_node;
    jt["best_source"] = Cap(t.best_source);
    jt["best_file"] = t.best_file;
    jt["best_href"] = "";
    if (!t.best_file.empty()) {
      fs::path rel = fs::absolute(t.best_file, ec).lexically_relative(html_dir);
      jt["best_href"] = UrlPath((rel.empty() ? fs::path(t.best_file) : rel).generic_string());
    }
    json nodes = json::array();
    for (const auto& n : t.nodes) {
      nodes.push_back({{"id", n.id},
                       {"parent", n.parent},
                       {"kind", n.kind},
                       {"ws", n.warm_start},
                       {"status", n.status},
                       {"correct", n.correct},
                       {"se", Opt(n.speedup_eager)},
                       {"sc", Opt(n.speedup_compile)},
                       {"error", Cap(n.error)},
                       {"note", Cap(n.note)},
                       {"src", Cap(n.source)},
                       {"flags", n.flags},
                       {"visits", n.visits},
                       {"reward", n.reward},
                       {"verdict", n.verdict},
                       {"calls", n.calls}});
    }
    jt["nodes"] = nodes;
    json calls = json::array();
    for (const auto& c : t.calls) {
      int sys = -1;
      if (!c.system.empty()) {
        auto it = system_index.find(c.system);
        if (it == system_index.end()) {
          sys = static_cast<int>(systems.size());
          system_index[c.system] = sys;
          systems.push_back(c.system);
        } else {
          sys = it->second;
        }
      }
      calls.push_back({{"seq", c.seq},
                       {"purpose", c.purpose},
                       {"model", c.model},
                       {"sys", sys},
                       {"prompt", Cap(c.prompt)},
                       {"reply", Cap(c.reply)},
                       {"in", c.input_tokens},
                       {"out", c.output_tokens},
                       {"usd", c.cost_usd},
                       {"lat", c.latency_s},
                       {"ok", c.ok},
                       {"error", c.error}});
    }
    jt["calls"] = calls;
    tasks.push_back(jt);
  }
  data["tasks"] = tasks;
  json sys = json::array();
  for (auto& s : systems) sys.push_back(Cap(s));
  data["systems"] = sys;

  // ---- the page
  std::ostringstream o;
  const json& c = run.config;
  auto cfg = [&](const char* k) -> std::string {
    if (!c.contains(k)) return "?";
    return c[k].is_string() ? c[k].get<std::string>() : c[k].dump();
  };
  char when[64];
  std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M", std::localtime(&now));
  std::string device;
  for (const auto& t : run.tasks)
    if (!t.device.empty()) device = t.device;
  o << "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
       "<meta name='viewport' content='width=device-width, initial-scale=1'>"
    << "<title>adaexplore report: " << HtmlEscape(run.dir) << "</title>"
    << "<script>window.__reportErrors=[];window.addEventListener('error',function(e){window.__reportErrors.push(String("
       "e.message||e));});</script>"
    << "<style>" << kCss << "</style></head><body>";
  o << "<header><h1>adaexplore report</h1><div class='muted'><code>" << HtmlEscape(run.dir) << "</code> &middot; "
    << run.tasks.size() << " task" << (run.tasks.size() == 1 ? "" : "s");
  if (!c.empty())
    o << " &middot; search " << HtmlEscape(cfg("search")) << ", " << HtmlEscape(cfg("steps")) << " steps &middot; proposer "
      << HtmlEscape(cfg("proposer")) << " &middot; tolerance " << HtmlEscape(cfg("tolerance"))
      << (c.contains("precision") && c["precision"] != "fp32" ? " &middot; precision " + HtmlEscape(cfg("precision")) : "")
      << (c.contains("timing") && c["timing"] != "host" ? " &middot; timing " + HtmlEscape(cfg("timing")) : "")
      << " &middot; device "
      << HtmlEscape(device.empty() ? cfg("device") : device);
  o << " &middot; generated " << when << "</div>";
  // headline cards
  auto card = [&](const std::string& v, const std::string& k) {
    o << "<div class='card'><div class='v'>" << HtmlEscape(v) << "</div><div class='k'>" << HtmlEscape(k) << "</div></div>";
  };
  o << "<div class='cards'>";
  card(std::to_string(m.all.correct) + "/" + std::to_string(m.all.tasks), "tasks with a correct kernel");
  card(F("%.3f", m.all.eager.user_score), "user score vs eager");
  card(m.all.compile.timed ? F("%.3f", m.all.compile.user_score) : "n/a", "user score vs torch.compile");
  card(m.all.eager.timed ? F("%.3fx", m.all.eager.geomean) : "n/a", "geomean speedup vs eager (correct, <=10x)");
  card(m.all.eager.fast_p.size() > 3 ? F("%.2f", m.all.eager.fast_p[3].second) : "-", "fast_1 vs eager");
  card(std::to_string(m.degenerate), "degenerate tasks");
  card("$" + F("%.4f", m.cost.usd), std::to_string(m.cost.input_tokens + m.cost.output_tokens) + " tokens");
  o << "</div></header><main>";

  // figures
  o << "<h2 id='figures'>Figures</h2><table><thead><tr><th class='l'>tasks</th><th class='l'>baseline</th>"
       "<th>correct</th><th>user score</th><th>timed</th><th>geomean</th><th>median</th><th>mean</th>";
  for (double p : FastPThresholds()) o << "<th>fast_" << F("%g", p) << "</th>";
  o << "</tr></thead><tbody>" << FigureRows(m.all, "all (" + std::to_string(m.all.tasks) + ")");
  if (m.degenerate > 0)
    o << FigureRows(m.non_degenerate, "non-degenerate (" + std::to_string(m.non_degenerate.tasks) + ")");
  o << "</tbody></table>";
  o << "<p class='small muted'>Speedup = baseline median time / kernel median time, of each task's best kernel "
       "(re-timed at the end of its search). Geomean, median and mean are over the tasks whose best kernel is correct "
       "and timed against that baseline, each speedup clamped at 10x; the unclamped figure is in brackets where the "
       "clamp changed it. User score = geometric mean over all tasks of min(max(speedup, 1), 10), a task without a "
       "correct kernel counting 1.0 (the user keeps PyTorch). fast_p = share of all tasks with a correct kernel "
       "strictly faster than p; tasks without one count as failures. ";
  if (m.degenerate > 0) {
    std::string names;
    for (const auto& n : m.degenerate_tasks) names += (names.empty() ? "" : ", ") + n;
    o << m.degenerate << " degenerate task" << (m.degenerate == 1 ? "" : "s") << " (" << HtmlEscape(names)
      << ") excluded in the second set.";
  } else {
    o << "No task was flagged degenerate.";
  }
  o << "</p>";
  if (cmp) o << CompareSection(*cmp);

  // tasks table
  o << "<h2 id='tasks'>Tasks</h2><p class='small muted'>Click a column to sort. &ldquo;view&rdquo; shows the best "
       "kernel (embedded in this page); the file link points at <code>best.py</code> in the run folder, relative to "
       "this page.</p>";
  o << "<table class='sortable' id='tasks-table'><thead><tr>"
       "<th class='l' data-key='task'>task</th><th class='l' data-key='status'>status</th>"
       "<th data-key='eager'>vs eager</th><th data-key='compile'>vs compile</th><th data-key='runtime'>best ms</th>"
       "<th data-key='eager_ms'>eager ms</th><th data-key='steps'>steps</th><th data-key='judged'>judged</th>"
       "<th data-key='calls'>LLM calls</th><th data-key='tokens'>tokens</th><th data-key='usd'>$</th>"
       "<th data-key='wall'>wall s</th><th class='l' data-key='kernel'>best kernel</th></tr></thead><tbody>";
  for (size_t i = 0; i < run.tasks.size(); ++i) {
    const TaskData& t = run.tasks[i];
    o << "<tr" << (t.degenerate ? " class='degenerate' title='degenerate task'" : "") << ">"
      << Td(HtmlEscape(t.name) + (t.degenerate ? " <span class='tag other'>degenerate</span>" : ""), t.name, true)
      << Td(StatusTag(t.status), t.status, true) << SpeedTd(t.speedup_eager) << SpeedTd(t.speedup_compile)
      << Td(t.runtime_ms ? F("%.4g", *t.runtime_ms) : "-", t.runtime_ms ? F("%.9g", *t.runtime_ms) : "")
      << Td(t.baseline_eager_ms ? F("%.4g", *t.baseline_eager_ms) : "-",
            t.baseline_eager_ms ? F("%.9g", *t.baseline_eager_ms) : "")
      << Td(std::to_string(t.steps), std::to_string(t.steps)) << Td(std::to_string(t.judged), std::to_string(t.judged))
      << Td(std::to_string(t.llm_calls), std::to_string(t.llm_calls))
      << Td(std::to_string(t.cost.input_tokens + t.cost.output_tokens),
            std::to_string(t.cost.input_tokens + t.cost.output_tokens))
      << Td(F("%.4f", t.cost.usd), F("%.9g", t.cost.usd)) << Td(F("%.1f", t.cost.wall_s), F("%.9g", t.cost.wall_s));
    std::string k;
    if (!t.best_source.empty()) {
      k = "<button class='link kernel' data-task='" + std::to_string(i) + "'>view</button>";
      if (!t.best_file.empty()) {
        fs::path rel = fs::absolute(t.best_file, ec).lexically_relative(html_dir);
        k += " &middot; <a href='" + HtmlEscape(UrlPath((rel.empty() ? fs::path(t.best_file) : rel).generic_string())) +
             "'>best.py</a>";
      }
    } else {
      k = "<span class='muted'>none</span>";
    }
    o << Td(k, t.best_source.empty() ? "0" : "1", true) << "</tr>";
  }
  o << "</tbody></table>";

  // charts
  o << "<h2 id='charts'>Plots</h2><div class='charts'>" << Distribution(run) << FastPChart(run) << ScalingChart(run, m)
    << CorrectChart(m)
    << "</div><p class='small muted'>The scaling curve uses the speedups vs eager measured during the search (before "
       "the final re-timing), best so far per task, tasks without a correct kernel yet counting 1.0; a task that "
       "stopped early keeps its final best. The torch.compile line is the geometric mean of torch.compile's own "
       "speedup over eager on these tasks.</p>";

  // cost
  o << "<h2 id='cost'>Cost</h2>" << CostSection(r);

  // trees
  o << "<h2 id='trees'>Search trees</h2><div class='legend'>";
  auto sw = [&](const char* fill, const std::string& label) {
    o << "<span><i class='sw' style='background:" << fill << "'></i>" << HtmlEscape(label) << "</span>";
  };
  sw("#15803d", "correct, faster than eager (label: speedup)");
  sw("#86efac", "correct, slower");
  sw("#facc15", "mismatch (MM)");
  sw("#dc2626", "compile error (CE)");
  sw("#f97316", "runtime error (RE)");
  sw("#8b5cf6", "timeout (TO)");
  sw("#7f1d1d", "crashed (CR)");
  sw("#111827", "rejected (RJ)");
  sw("#d1d5db", "duplicate (DUP)");
  sw("#f3f4f6", "no candidate (NC)");
  o << "</div><p class='small muted'>Circle: large step (new kernel); rounded square, dashed edge: small step (edits "
       "of the parent); diamond: the reference. Thick brown border: the task's best kernel. Click a node for its "
       "source, verdict and the prompts of its step (the task's LLM calls in store order, a new step at each "
       "&ldquo;propose&rdquo; or &ldquo;revise&rdquo; call, step k making node k).</p>";
  for (size_t i = 0; i < run.tasks.size(); ++i) {
    const TaskData& t = run.tasks[i];
    o << "<details class='task'" << (i < 3 ? " open" : "") << "><summary><h3 style='display:inline'>"
      << HtmlEscape(t.name) << "</h3> <span class='muted small'>" << HtmlEscape(t.status) << " &middot; "
      << HtmlEscape(FormatSpeedup(t.speedup_eager)) << " vs eager &middot; " << t.steps << " steps"
      << (t.warm_start_steps > 0 ? " (" + std::to_string(t.warm_start_steps) + " warm-start)" : std::string())
      << (t.warm_start_steps > 0 && !t.best_origin.empty()
              ? " &middot; best from " + HtmlEscape(t.best_origin) + (t.best_refines_warm_start ? " (refining warm start)" : "")
              : std::string())
      << "</span></summary>"
      << "<div class='treewrap'>" << TreeSvg(t, static_cast<int>(i)) << "</div></details>";
  }
  o << "</main>";
  o << "<div id='panel' role='dialog' aria-modal='true'><div class='box'><div class='hd'><strong id='panel-title'>"
       "</strong><button class='close' id='panel-close' aria-label='close'>&times;</button></div>"
       "<div class='bd' id='panel-body'></div></div></div>";
  o << "<script type='application/json' id='report-data'>" << ScriptSafeJson(data) << "</script>";
  o << "<script>" << kJs << "</script></body></html>\n";
  return o.str();
}

}  // namespace ax::report
