// ebac/encoder/context_ans.hpp - context-modelled rANS over the codes.
//
// Why: Huffman spends at least one bit on every code outside a zero run and
// models each code alone. Saved activations are mostly zeros and small codes
// whose size follows their neighbours' (a code after and below zeros is
// almost surely zero): on training-size tensors (docs/entropy-contexts.md) a
// model conditioned on the left and upper neighbours reaches up to 2x what
// order-0 coding does at loose bounds, and an asymmetric numeral system
// codes a likely symbol in a small fraction of a bit.
//
// Model. A code v (zigzagged, as every encoder receives it) is a token and
// raw bits: v < 32 is token v; above, the token names v's bit width w and the
// bit below its leading one (32 + 2 (w - 6) + that bit), and the w - 2 bits
// under those two follow raw. A token is coded with the frequency table of
// its context: the magnitude classes min(k - 1, bit width) of the code to
// the left and of the code one row up (row = the tensor's last extent, kept
// in the codebook), 0 for a neighbour outside the chunk, and optionally
// (`diagonal`) whether the upper-left or upper-right code is non-zero. The
// tables are learned from the whole tensor (a codebook_encoder: the stream's
// codebook section), so their cost is paid once per stream; the writer takes
// the context set (k = 8, 4, 2 or 1 classes, with or without the diagonal
// bit) whose tables plus coded tokens are smallest: the richest on tensors
// of many MB, coarser ones where the tables would cost more than they save.
//
// Chunk layout: u32 rANS byte count R (bit 31: a zero-block bitmap
// follows); the bitmap, one bit per block of 1024 codes, set for a block
// whose codes are all zero, which takes no rANS step; R bytes of rANS (four
// interleaved 32-bit states, element i on state i % 4, byte-wise
// renormalisation, the four final states first); the raw bits, LSB first,
// in element order. The decoder ends with every state back at its initial
// value, every rANS byte and every raw bit read (trailing bits zero):
// anything else is a corrupt chunk, so the states double as a check of the
// chunk's integrity. docs/format.md has the exact steps.
//
// Why the bitmap: at loose bounds most blocks of a sparse map (an attention
// map's at rel 1e-1: 87% of them) are all zero, and a step per code was the
// largest part of coding them although each costs ~0.0001 bits.
//
// The stage in parts: context_ans_model.hpp (tokens and contexts),
// context_ans_codebook.hpp (the stored tables), context_ans_statistics.hpp
// (learning them), context_ans_functor.hpp (the functor),
// context_ans_encode.hpp and context_ans_decode.hpp; on the host with AVX2,
// context_ans_x8.hpp and context_ans_encode_x8.hpp, reached through
// context_ans_side_by_side.hpp.
#pragma once

#include <ebac/encoder/context_ans_codebook.hpp>
#include <ebac/encoder/context_ans_decode.hpp>
#include <ebac/encoder/context_ans_encode.hpp>
#include <ebac/encoder/context_ans_functor.hpp>
#include <ebac/encoder/context_ans_model.hpp>
#include <ebac/encoder/context_ans_statistics.hpp>
