// ebac/predictor/predictor_id.hpp - stage ids and the axis-pass description.
#pragma once

#include <ebac/config.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN

enum class predictor_id : std::uint8_t { none = 1, lorenzo = 2 };

/// One pass of a separable predictor over the tensor: `outer` independent
/// groups of `extent` lines, each line `inner` contiguous elements wide,
/// with prediction restarting every `tile` steps along the axis.
struct axis_pass {
  std::uint64_t outer = 1, extent = 1, inner = 1, tile = 1;
};

EBAC_NAMESPACE_END
