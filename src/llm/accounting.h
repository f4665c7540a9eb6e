// Accounting: tokens, latency and cost of every call, summed per task and per
// run, against the run's budgets. Prices come from a table the user supplies
// (prices change; none are compiled in). A spent budget refuses new calls, so
// a run stops cleanly instead of failing halfway through a reply.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"
#include "llm/client.h"

namespace ax::llm {

// US dollars per million tokens.
struct Price {
  double input = 0;
  double output = 0;
  double cached_input = -1;  // < 0: same as input
};

class PriceTable {
 public:
  // {"models": {"gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25},
  //             "claude-sonnet-4*": {...}}}. A key ending in '*' is a prefix.
  static Status Parse(const std::string& json_text, PriceTable* out);
  static Status Load(const std::string& path, PriceTable* out);
  void Set(const std::string& model, Price p) { prices_[model] = p; }
  // Exact name first, then the longest matching prefix entry.
  bool Lookup(const std::string& model, Price* out) const;
  bool empty() const { return prices_.empty(); }

 private:
  std::map<std::string, Price> prices_;
};

// Dollars for `u` at price `p`.
double CostOf(const Price& p, const Usage& u);

struct Budget {
  int64_t max_tokens = 0;  // input + output over the run; 0 = no limit
  double max_usd = 0;      // 0 = no limit
};

struct Totals {
  int64_t calls = 0;
  int64_t failed_calls = 0;
  int64_t input_tokens = 0, output_tokens = 0, reasoning_tokens = 0, cached_input_tokens = 0;
  double cost_usd = 0;
  double latency_s = 0;      // summed over calls
  int64_t unpriced_calls = 0;  // calls whose model has no price
};

class Accountant {
 public:
  Accountant(PriceTable prices, Budget budget) : prices_(std::move(prices)), budget_(budget) {}

  // Refuses a setup that could not be held to its dollar budget.
  Status CheckPriced(const std::string& model) const;
  // Ok while the budget has room for another call.
  Status CheckBudget() const;
  // Adds one finished call; returns its cost (0 if unpriced). `model` is
  // looked up first, then `reply_model` (what the server said answered).
  double Record(const std::string& task, const std::string& model,
                const std::string& reply_model, const Usage& usage, double latency_s, bool ok);

  Totals run() const;
  Totals task(const std::string& name) const;
  std::map<std::string, Totals> tasks() const;
  const Budget& budget() const { return budget_; }

 private:
  PriceTable prices_;
  Budget budget_;
  mutable std::mutex mu_;
  Totals run_;
  std::map<std::string, Totals> tasks_;
};

}  // namespace ax::llm
