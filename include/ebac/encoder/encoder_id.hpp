// ebac/encoder/encoder_id.hpp - stage ids of the entropy/packing encoders.
#pragma once

#include <ebac/config.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN

enum class encoder_id : std::uint8_t { block_bitpack = 1, run_length = 2, huffman = 3, context_ans = 4, striped_huffman = 5 };

EBAC_NAMESPACE_END
