// JSON values to and from Python objects (dict, list, str, float, int, bool,
// None), so that verdicts and reports reach Python as plain data.
#pragma once

#include <nanobind/nanobind.h>
#include <nlohmann/json.hpp>

namespace ax::py {

nanobind::object ToPython(const nlohmann::json& j);

}  // namespace ax::py
