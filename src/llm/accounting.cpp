#include "llm/accounting.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/util.h"

namespace ax::llm {

Status PriceTable::Parse(const std::string& text, PriceTable* out) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error("price table: not valid JSON");
  if (!j.is_object() || !j.contains("models") || !j["models"].is_object())
    return Status::Error("price table: expected {\"models\": {NAME: {\"input\": ..., \"output\": ...}}}");
  PriceTable t;
  for (auto& [name, v] : j["models"].items()) {
    if (!v.is_object()) return Status::Error("price table: entry '" + name + "' is not an object");
    Price p;
    bool have_in = false, have_out = false;
    for (auto& [k, x] : v.items()) {
      if (!x.is_number() || x.get<double>() < 0)
        return Status::Error("price table: '" + name + "." + k + "' must be a non-negative number");
      if (k == "input") p.input = x, have_in = true;
      else if (k == "output") p.output = x, have_out = true;
      else if (k == "cached_input") p.cached_input = x;
      else
        return Status::Error("price table: unknown field '" + k + "' in '" + name +
                             "' (known: input, output, cached_input; dollars per million tokens)");
    }
    if (!have_in || !have_out)
      return Status::Error("price table: '" + name + "' needs both \"input\" and \"output\"");
    t.prices_[name] = p;
  }
  *out = std::move(t);
  return Status::Ok();
}

Status PriceTable::Load(const std::string& path, PriceTable* out) {
  auto text = ReadFile(path);
  if (!text) return Status::Error("price table: cannot read " + path);
  Status s = Parse(*text, out);
  if (!s.ok()) return Status::Error(path + ": " + s.message());
  return s;
}

bool PriceTable::Lookup(const std::string& model, Price* out) const {
  if (model.empty()) return false;
  auto it = prices_.find(model);
  if (it != prices_.end()) {
    *out = it->second;
    return true;
  }
  size_t best = 0;
  const Price* found = nullptr;
  for (const auto& [k, p] : prices_) {
    if (k.empty() || k.back() != '*') continue;
    std::string prefix = k.substr(0, k.size() - 1);
    if (model.rfind(prefix, 0) == 0 && prefix.size() >= best) {
      best = prefix.size();
      found = &p;
    }
  }
  if (!found) return false;
  *out = *found;
  return true;
}

double CostOf(const Price& p, const Usage& u) {
  double cached_price = p.cached_input >= 0 ? p.cached_input : p.input;
  int64_t cached = std::min(u.cached_input_tokens, u.input_tokens);
  return (double(u.input_tokens - cached) * p.input + double(cached) * cached_price +
          double(u.output_tokens) * p.output) / 1e6;
}

Status Accountant::CheckPriced(const std::string& model) const {
  Price p;
  if (budget_.max_usd > 0 && !prices_.Lookup(model, &p))
    return Status::Error("a dollar budget is set but the price table has no entry for model '" + model +
                         "'; add it to the price table or use a token budget");
  return Status::Ok();
}

Status Accountant::CheckBudget() const {
  std::lock_guard<std::mutex> lock(mu_);
  char buf[200];
  if (budget_.max_tokens > 0 && run_.input_tokens + run_.output_tokens >= budget_.max_tokens) {
    std::snprintf(buf, sizeof buf, "token budget spent: %lld of %lld tokens used; no more LLM calls this run",
                  (long long)(run_.input_tokens + run_.output_tokens), (long long)budget_.max_tokens);
    return Status::Error(StatusCode::kCancelled, buf);
  }
  if (budget_.max_usd > 0 && run_.cost_usd >= budget_.max_usd) {
    std::snprintf(buf, sizeof buf, "dollar budget spent: $%.4f of $%.4f; no more LLM calls this run",
                  run_.cost_usd, budget_.max_usd);
    return Status::Error(StatusCode::kCancelled, buf);
  }
  return Status::Ok();
}

namespace {
void Add(Totals& t, const Usage& u, double cost, double latency, bool ok, bool priced) {
  t.calls++;
  if (!ok) t.failed_calls++;
  t.input_tokens += u.input_tokens;
  t.output_tokens += u.output_tokens;
  t.reasoning_tokens += u.reasoning_tokens;
  t.cached_input_tokens += u.cached_input_tokens;
  t.cost_usd += cost;
  t.latency_s += latency;
  if (!priced) t.unpriced_calls++;
}
}  // namespace

double Accountant::Record(const std::string& task, const std::string& model,
                          const std::string& reply_model, const Usage& usage, double latency_s,
                          bool ok) {
  Price p;
  bool priced = prices_.Lookup(model, &p) || prices_.Lookup(reply_model, &p);
  double cost = priced ? CostOf(p, usage) : 0.0;
  std::lock_guard<std::mutex> lock(mu_);
  Add(run_, usage, cost, latency_s, ok, priced);
  Add(tasks_[task], usage, cost, latency_s, ok, priced);
  return cost;
}

Totals Accountant::run() const {
  std::lock_guard<std::mutex> lock(mu_);
  return run_;
}

Totals Accountant::task(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(name);
  return it == tasks_.end() ? Totals{} : it->second;
}

std::map<std::string, Totals> Accountant::tasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_;
}

}  // namespace ax::llm
