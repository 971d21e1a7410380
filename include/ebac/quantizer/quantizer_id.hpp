// ebac/quantizer/quantizer_id.hpp - stage ids of the quantizers (the format's byte 14).
#pragma once

#include <ebac/config.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN

/// linear and sign_preserving quantize floating-point elements under the
/// bound; the others are lossless: exact (integer elements as their own
/// codes), levels (a tensor of at most max_levels distinct values, as
/// indices into its palette) and pool_window (max-pool indices, as offsets
/// inside their pooling windows).
enum class quantizer_id : std::uint8_t { linear = 1, sign_preserving = 2, exact = 3, levels = 4, pool_window = 5 };

inline constexpr std::uint8_t quantizer_id_max = 5;

EBAC_NAMESPACE_END
