#include "python/py_json.h"

namespace nb = nanobind;

namespace ax::py {

nb::object ToPython(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return nb::none();
    case nlohmann::json::value_t::boolean:
      return nb::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return nb::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return nb::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return nb::float_(j.get<double>());
    case nlohmann::json::value_t::string:
      return nb::str(j.get_ref<const std::string&>().c_str(), j.get_ref<const std::string&>().size());
    case nlohmann::json::value_t::array: {
      nb::list l;
      for (const auto& v : j) l.append(ToPython(v));
      return l;
    }
    case nlohmann::json::value_t::object: {
      nb::dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[nb::str(it.key().c_str(), it.key().size())] = ToPython(it.value());
      return d;
    }
    default:
      return nb::none();
  }
}

}  // namespace ax::py
