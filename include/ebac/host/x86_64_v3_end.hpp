// ebac/host/x86_64_v3_end.hpp - closes the region x86_64_v3_begin.hpp opened:
// what follows is compiled with the unit's own flags again.
#if !defined(EBAC_ABI_TAG)
#error "ebac/host/x86_64_v3_end.hpp without ebac/host/x86_64_v3_begin.hpp"
#endif
#pragma GCC pop_options
#undef EBAC_X86_64_V3_REGION
