// The host codec's decompress() for every element type, defined once for the
// fuzz targets and the seed generator (tests/fuzz/CMakeLists.txt: ebac_fuzz_codec).
#include <ebac/host/codec_instances.hpp>

EBAC_HOST_CODEC_FOR_EACH_ELEMENT(EBAC_HOST_CODEC_INSTANTIATE_DECOMPRESS)
