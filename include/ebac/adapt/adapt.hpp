// ebac/adapt/adapt.hpp - the adaptive bound controller and the batch planner
// (docs/error-model.md, section 7).
#pragma once

#include <ebac/adapt/batch_planner.hpp>
#include <ebac/adapt/bound_update.hpp>
#include <ebac/adapt/controller.hpp>
