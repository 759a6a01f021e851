#include "compressors/arctopk.h"
#include "compressors/compressor.h"
#include "compressors/fp16.h"
#include "compressors/oktopk.h"
#include "compressors/powersgd.h"
#include "compressors/randk.h"
#include "compressors/topk.h"

namespace arcreduce {

std::unique_ptr<Compressor> make_compressor(const std::string& name) {
  if (name == "arctopk") return std::make_unique<ArcTopK>();
  if (name == "topk") return std::make_unique<TopK>();
  if (name == "randk") return std::make_unique<RandK>();
  if (name == "fp16") return std::make_unique<Fp16>();
  if (name == "oktopk") return std::make_unique<OkTopK>();
  if (name == "powersgd") return std::make_unique<PowerSgd>();
  return nullptr;
}

bool compressor_available(const std::string& name) {
  return name == "none" || name == "arctopk" || name == "topk" || name == "randk" ||
         name == "fp16" || name == "oktopk" || name == "powersgd";
}

bool keeps_own_residual(const std::string& name) {
  return name == "oktopk" || name == "powersgd";
}

}  // namespace arcreduce
