// ebac/error_model/error_model.hpp - everything of the gradient-error model
// (docs/error-model.md). Not part of <ebac/ebac.hpp>: a trainer that only
// compresses does not pay for it.
#pragma once

#include <ebac/error_model/batchnorm_model.hpp>
#include <ebac/error_model/batchnorm_propagation.hpp>
#include <ebac/error_model/channel_moments.hpp>
#include <ebac/error_model/constexpr_math.hpp>
#include <ebac/error_model/distinct_rows.hpp>
#include <ebac/error_model/elementwise_model.hpp>
#include <ebac/error_model/energy_pyramid.hpp>
#include <ebac/error_model/error_statistics.hpp>
#include <ebac/error_model/flat_mask.hpp>
#include <ebac/error_model/gradient_statistics.hpp>
#include <ebac/error_model/iid_model.hpp>
#include <ebac/error_model/inverse.hpp>
#include <ebac/error_model/layer_geometry.hpp>
#include <ebac/error_model/layernorm_model.hpp>
#include <ebac/error_model/matmul_model.hpp>
#include <ebac/error_model/quantizer_error.hpp>
#include <ebac/error_model/reference_gradient.hpp>
#include <ebac/error_model/sampling.hpp>
#include <ebac/error_model/weight_error_model.hpp>
