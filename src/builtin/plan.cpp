#include "builtin/plan.h"

namespace ax::builtin {

using json = nlohmann::json;

FusionOptions Plan::Fusion() const {
  FusionOptions o;
  o.singleton = singleton;
  o.cuts.insert(cuts.begin(), cuts.end());
  return o;
}

json Plan::ToJson() const {
  json s = json::array();
  for (const auto& k : sched) s.push_back({k.block, k.warps});
  json j = {{"v", 1}, {"singleton", singleton}, {"cuts", cuts}, {"sched", s}};
  if (library_reductions) j["libred"] = true;
  if (norm_epilogue) j["normepi"] = true;
  if (reduce_prologue) j["prologue"] = true;
  if (red_epilogue) j["redepi"] = true;
  if (siblings) j["siblings"] = true;
  if (algebra) j["algebra"] = true;
  if (cuda_graph) j["graph"] = true;
  if (gemm) {
    json gs = json::array();
    for (const auto& k : gsched) gs.push_back({k.bm, k.bn, k.bk, k.group_m, k.warps, k.stages});
    j["gemm"] = gs;
    if (conv) j["conv"] = true;
    if (conv && conv_native) j["conv_native"] = true;
    if (gemm_reduce) j["gemmred"] = true;
    if (conv && conv_stats) j["convstats"] = true;
  }
  if (attention) {
    json a = json::array();
    for (const auto& k : asched) a.push_back(k.ToJson());
    j["attention"] = a;
  }
  if (recurrent) {
    json r = json::array();
    for (const auto& k : rsched) r.push_back(k.ToJson());
    j["recurrent"] = r;
  }
  if (!nsched.empty()) {
    json r = json::array();
    for (const auto& k : nsched) r.push_back(k.ToJson());
    j["rownorm"] = r;
  }
  if (!red.empty()) {
    json r = json::array();
    for (const auto& k : red) {
      json e = {k.block_r, k.block_m, k.warps, k.split};
      if (k.coop != 0 || k.lag != 0) e.push_back(k.coop);
      if (k.lag != 0) e.push_back(k.lag);
      r.push_back(e);
    }
    j["red"] = r;
  }
  return j;
}

Status Plan::FromJson(const json& j, Plan* out) {
  try {
    Plan p;
    if (j.value("v", 0) != 1) return Status::Error("unknown plan version");
    p.singleton = j.value("singleton", false);
    p.cuts = j.value("cuts", std::vector<std::string>{});
    for (const auto& k : j.value("sched", json::array())) {
      KernelSchedule s;
      s.block = k.at(0).get<int>();
      s.warps = k.at(1).get<int>();
      if (s.block < 16 || (s.block & (s.block - 1)) || s.warps < 1 || s.warps > 32) {
        return Status::Error("plan has a bad schedule");
      }
      p.sched.push_back(s);
    }
    p.library_reductions = j.value("libred", false);
    p.norm_epilogue = j.value("normepi", false);
    p.reduce_prologue = j.value("prologue", false);
    p.red_epilogue = j.value("redepi", false);
    p.siblings = j.value("siblings", false);
    p.algebra = j.value("algebra", false);
    p.cuda_graph = j.value("graph", false);
    if (j.contains("gemm")) {
      p.gemm = true;
      for (const auto& k : j.at("gemm")) {
        GemmSchedule gs{k.at(0).get<int>(), k.at(1).get<int>(), k.at(2).get<int>(),
                        k.at(3).get<int>(), k.at(4).get<int>(), k.at(5).get<int>()};
        if (!gs.Valid()) return Status::Error("plan has a bad GEMM schedule");
        p.gsched.push_back(gs);
      }
      p.conv = j.value("conv", false);
      p.conv_native = p.conv && j.value("conv_native", false);
      p.gemm_reduce = j.value("gemmred", false);
      p.conv_stats = p.conv && j.value("convstats", false);
    }
    if (j.contains("attention")) {
      p.attention = true;
      if (!j.at("attention").is_array()) return Status::Error("plan has a malformed attention schedule");
      for (const auto& k : j.at("attention")) {
        AttentionSchedule a;
        if (Status s = AttentionSchedule::FromJson(k, &a); !s.ok()) return s;
        p.asched.push_back(a);
      }
    }
    if (j.contains("recurrent")) {
      p.recurrent = true;
      if (!j.at("recurrent").is_array()) return Status::Error("plan has a malformed recurrent schedule");
      for (const auto& k : j.at("recurrent")) {
        RnnSchedule r;
        if (Status s = RnnSchedule::FromJson(k, &r); !s.ok()) return s;
        p.rsched.push_back(r);
      }
    }
    for (const auto& k : j.value("rownorm", json::array())) {
      RowNormSchedule r;
      if (Status s = RowNormSchedule::FromJson(k, &r); !s.ok()) return s;
      p.nsched.push_back(r);
    }
    for (const auto& k : j.value("red", json::array())) {
      RedSchedule r{k.at(0).get<int>(), k.at(1).get<int>(), k.at(2).get<int>(), k.at(3).get<int>(),
                    k.size() > 4 ? k.at(4).get<int>() : 0, k.size() > 5 ? k.at(5).get<int>() : 0};
      auto pow2_or_auto = [](int v) { return v == 0 || (v > 0 && v <= 65536 && (v & (v - 1)) == 0); };
      if (!pow2_or_auto(r.block_r) || !pow2_or_auto(r.block_m) || r.warps < 0 || r.warps > 32 || r.split < 0 ||
          r.split > 4096 || r.coop < -1 || r.coop > 32 || r.lag < -1 || r.lag > 2) {
        return Status::Error("plan has a bad reduction schedule");
      }
      p.red.push_back(r);
    }
    *out = std::move(p);
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(std::string("malformed plan: ") + e.what());
  }
}

Status ParsePlanMarker(const std::string& source, Plan* out) {
  size_t pos = source.find(kPlanMarker);
  if (pos == std::string::npos) return Status::Error("no plan marker in the source");
  pos += std::string(kPlanMarker).size();
  size_t end = source.find('\n', pos);
  std::string text = source.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::Error("the plan marker is not JSON");
  return Plan::FromJson(j, out);
}

}  // namespace ax::builtin
