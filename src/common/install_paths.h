// Where the files that ship beside the engine live: the prompt templates and
// the judge worker's Python package. They are found relative to the code that
// runs (the installed binary or the Python extension), then in the source
// tree the engine was built from; environment variables override both.
//
// Layouts searched, for the folder D that holds the running binary or module:
//   D/../share/adaexplore/{prompts,python}   `cmake --install build --prefix P`
//   D/prompts and D/.. (adaexplore_worker)   the Python wheel (site-packages)
//   SOURCE/{prompts,python}                  the build tree
#pragma once

#include <string>
#include <vector>

namespace ax {

// The folder of the file (executable or shared object) holding this code;
// empty when it cannot be told.
std::string CodeDir();

// The source tree the engine was compiled from (its CMake source dir).
std::string SourceDir();

// The prompt templates' folder: ADAEXPLORE_PROMPTS_DIR, else the first
// layout above that holds prompts/system.txt, else SOURCE/prompts.
std::string PromptsDir();

// The folder to put on the worker's PYTHONPATH (it holds adaexplore_worker/):
// ADAEXPLORE_WORKER_DIR, else the first layout that holds the package, else
// SOURCE/python.
std::string WorkerDir();

// The candidate (prompts, worker) folder pairs, in search order, for CodeDir()
// == code_dir: exposed for tests.
struct ResourceLayout {
  std::string prompts;
  std::string worker;
};
std::vector<ResourceLayout> ResourceLayouts(const std::string& code_dir, const std::string& source_dir);

}  // namespace ax
