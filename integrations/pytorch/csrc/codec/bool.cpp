// The host codec for bool elements, compiled on its own so that the
// extension's units build in parallel; host_codec.cpp sees it declared
// extern (EBAC_HOST_CODEC_PREBUILT, ebac/host/codec_instances.hpp).
#include <ebac/host/codec_instances.hpp>

EBAC_HOST_CODEC_INSTANTIATE_COMPRESS(bool)
EBAC_HOST_CODEC_INSTANTIATE_DECOMPRESS(bool)
