// The compressors' options (compressors/compressor_options.h) from the runtime's Config: the one
// place where the settings the compressors read cross from the runtime into compressors/.
#pragma once

#include "arcreduce/config.h"
#include "compressors/compressor_options.h"

namespace arcreduce {

// The options of `config`, which should be valid (Config::validate()).
CompressorOptions compressor_options(const Config& config);

}  // namespace arcreduce
