// ebac/version.hpp - library and stream-format versions.
#pragma once

#define EBAC_VERSION_MAJOR 0
#define EBAC_VERSION_MINOR 1
#define EBAC_VERSION_PATCH 0
#define EBAC_VERSION (EBAC_VERSION_MAJOR * 10000 + EBAC_VERSION_MINOR * 100 + EBAC_VERSION_PATCH)

// The stream format version is independent of the library version: it only
// changes when the bytes on the wire change meaning.
#define EBAC_FORMAT_VERSION 2
