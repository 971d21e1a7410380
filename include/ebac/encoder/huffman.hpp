// ebac/encoder/huffman.hpp - canonical Huffman over literals and zero runs.
//
// Alphabet: literal codes 0..literals-1, then one symbol per zero-run class k
// (a run of L >= 2 zeros with 2^k <= L < 2^(k+1), followed by k extra bits),
// then an escape followed by the 32 raw bits of a code too large for a literal.
// Whether runs are used is decided per stream from the histogram ("where it
// pays"): runs help on sparse post-ReLU streams and only cost elsewhere.
//
// Code lengths are limited to max_code_length so that any symbol plus its
// extra bits fits a 64-bit bit buffer; decoding uses a table for codes of up
// to table_bits bits and a canonical walk for longer ones. The codebook is
// built from a histogram and stored as (symbol, length) pairs in the stream;
// the encoder functor only points at the tables. Construction, tables and
// serialization are host-device functions over caller-provided arrays: the
// host backend runs them inline, the CUDA backend in one block on the device
// (cuda/kernels/huffman_codebook.cuh), so both pick the same codebook.
//
// The stage in parts: huffman_codebook.hpp (alphabet, codebook and its
// construction), huffman_encode.hpp (tokens), huffman_functor.hpp (the
// functor), huffman_decode.hpp (decode_range). huffman_image.hpp and
// huffman_lanes.hpp build on them for the CUDA backend; none of these
// includes those two.
#pragma once

#include <ebac/detail/bit_io.hpp>
#include <ebac/encoder/huffman_codebook.hpp>
#include <ebac/encoder/huffman_decode.hpp>
#include <ebac/encoder/huffman_encode.hpp>
#include <ebac/encoder/huffman_functor.hpp>
