// ebac/ebac.hpp - umbrella header: compressing and decompressing on the host.
//
// Opt-in and never included from here: the CUDA headers (ebac/cuda/...), so
// this header compiles with any C++20 compiler, and the gradient-error model
// and bound controller, which have umbrellas of their own
// (<ebac/error_model/error_model.hpp>, <ebac/adapt/adapt.hpp>;
// docs/error-model.md), so a trainer that only compresses does not pay for them.
#pragma once

#include <ebac/compress_options.hpp>
#include <ebac/concepts.hpp>
#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/dtype_dispatch.hpp>
#include <ebac/encoder/block_bitpack.hpp>
#include <ebac/encoder/huffman.hpp>
#include <ebac/encoder/registry.hpp>
#include <ebac/encoder/run_length.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/extents.hpp>
#include <ebac/format/max_compressed_bytes.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/host/codec.hpp>
#include <ebac/pipeline.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/no_prediction.hpp>
#include <ebac/quantizer/element_ops.hpp>
#include <ebac/quantizer/exact.hpp>
#include <ebac/quantizer/levels.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/quantizer/pool_window.hpp>
#include <ebac/quantizer/quantizer_bound.hpp>
#include <ebac/quantizer/quantizer_id.hpp>
#include <ebac/quantizer/stage_choice.hpp>
#include <ebac/status.hpp>
#include <ebac/version.hpp>
